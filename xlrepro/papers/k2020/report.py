"""What the K et al. (2020) chapters show: corpus card, overlap, the paper's tables, ours beside them when the cells
are trained, and the claims. The chapters never train at the lab profile; they read finished cells."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from xlrepro.config import choose
from xlrepro.paths import runs_dir
from xlrepro.reference import paper_numbers
from xlrepro.results import results_dir, write_csv
from xlrepro.runkeys import run_key

from . import data as D
from .bbert import RESULT_COLUMNS, Cell
from .config import PROFILES, experiments_of, load_plan

NAME = "k2020"
PAPER_CORPUS_BYTES = 1e9  # "we subsample en, es, and ru Wikipedia to 1GB" (§3.1.3)


def chapter_folder(chapter: str, profile: str, results=None, publish: bool = False) -> Path:
    """Where a chapter writes: `results`, else book/results/k2020 for the published run, else an exploratory folder."""
    choose("profile", profile, PROFILES)
    folder = Path(results) if results else results_dir(NAME) if publish else \
        runs_dir() / NAME / "exploratory" / run_key({"chapter": chapter, "profile": profile})
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_folder(profile: str) -> Path:
    """Where the profile's cells are trained (their timing records name the training device)."""
    return runs_dir() / NAME / choose("profile", profile, PROFILES)


def corpus_card(profile: str = "lab", languages=("en", "es", "hi", "ru")) -> pd.DataFrame:
    """Lines, words and UTF-8 bytes of each pre-training side (source half for en, target half for the others)."""
    plan = load_plan()
    p = plan.profiles[profile].pretrain
    rows = []
    for lang in languages:
        half = 0 if lang == "en" else 1
        df = D.corpus(lang, half, seed=plan.half_seed, max_lines=p.max_lines)
        text = df["text"]
        size = int(text.str.encode("utf-8").str.len().sum() + len(text))
        rows.append({"language": lang, "side": "source (half 0)" if half == 0 else "target (half 1)",
                     "chapters": df.groupby(["book", "chapter"]).ngroups, "lines": len(df),
                     "words": int(text.str.split().str.len().sum()), "MB": round(size / 1e6, 2),
                     "share_of_1GB": size / PAPER_CORPUS_BYTES})
    return pd.DataFrame(rows)


def overlap_rows(experiments, profile: str = "lab") -> pd.DataFrame:
    """Word-piece overlap between the source and the target pre-training corpus of each experiment, under its own
    joint vocabulary (trained here if the cell has none yet): shared types, p_type, p_token (%), long format."""
    plan = load_plan()
    rows = []
    for name in experiments:
        cell = Cell(plan, profile, name)
        corpora = cell.corpora()
        cell._load()
        langs = list(corpora)
        enc = {l: cell.encode(l, corpora[l]["text"].tolist()).ids for l in langs[:2]}
        ov = D.piece_overlap([x.tolist() for x in enc[langs[0]]], [x.tolist() for x in enc[langs[1]]], cell.special)
        for metric in ("shared_types", "source_types", "target_types", "p_type", "p_token"):
            rows.append({"experiment": name, "seed": -1, "language": langs[1], "task": "corpus", "metric": metric,
                         "value": float(ov[metric])})
        if cell.exp.tokenization == "word":
            rows.append({"experiment": name, "seed": -1, "language": langs[1], "task": "corpus", "metric": "unk_rate",
                         "value": D.unk_rate(cell._tok, corpora[langs[1]]["text"].tolist())})
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def collect(experiments, profile: str = "lab", train: bool = False, seeds=None, device="cpu") -> pd.DataFrame:
    """Results of the finished cells (with their majority baselines); with `train` (smoke runs) the cells are
    trained first. Cells not trained are left out: `missing` says which."""
    plan = load_plan()
    frames = []
    for name in experiments:
        cell = Cell(plan, profile, name, seeds)
        if train:
            cell.run(device, progress=False)
        done = [s for s in cell.seeds if cell.evaluated(s)]
        if done:
            frames += [pd.concat([cell.evaluate_seed(s) for s in done]),
                       cell.majority().assign(experiment=f"majority/{name}")]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=RESULT_COLUMNS)


def missing(results: pd.DataFrame, experiments) -> list[str]:
    have = set(results["experiment"]) if len(results) else set()
    return [e for e in experiments if e not in have]


def pending_note(parts, experiments_missing) -> str:
    from .config import gpu_plan
    plan = load_plan()
    est = gpu_plan(plan, parts)["GPU-min"].sum()
    cmds = "; ".join(f"bash scripts/device_k2020.sh {p} 480" for p in parts)
    return (f"**Pending the GPU run.** {len(experiments_missing)} experiment(s) of this chapter have no trained "
            f"cells yet ({', '.join(experiments_missing[:6])}{' ...' if len(experiments_missing) > 6 else ''}). "
            f"Command (4 GPUs, resumable: repeat until done): `{cmds}`. Estimated GPU time of these parts: about "
            f"{est:.0f} GPU-minutes on H100s (`gpu_plan`: FLOPs per step against the project's measured stack speeds; "
            f"every cell counted once).")


def paper_table(table: str, metric: str = "accuracy") -> pd.DataFrame:
    """The paper's table as experiment x language (mean, as printed)."""
    t = paper_numbers(NAME, table)
    t = t[t["metric"] == metric]
    return t.pivot_table(index="experiment", columns="language", values="mean", sort=False)


def seeds_text(values: pd.Series, planned: int) -> str:
    """Mean ± sd of one cell's seeds, with the seed count where it is below the plan's (one seed: its value alone)."""
    if len(values) == 1:
        return f"{values.iloc[0]:.1f} (1 seed)"
    text = f"{values.mean():.1f} ± {values.std():.1f}"
    return text if len(values) >= planned else f"{text} ({len(values)} seeds)"


def ours_table(results: pd.DataFrame, experiments, metric: str = "accuracy") -> pd.DataFrame:
    """Our mean ± sd over seeds (percent), experiment x language, as text (no-break spaces, so a narrow column does
    not split a number; blank where a cell has no such language). Where a cell has fewer seeds than the plan, the
    count is shown (one seed: its value alone, as no spread exists); a majority baseline shows its number alone."""
    names = list(experiments) + [f"majority/{e}" for e in experiments]  # the baseline beside each cell
    r = results[results["experiment"].isin(names) & (results["metric"] == metric)]
    if r.empty:
        return pd.DataFrame()
    planned = len(load_plan().seeds)

    def show(key, values: list) -> str:
        v = 100 * pd.Series(values, dtype=float)
        return f"{v.mean():.1f}" if key[0].startswith("majority/") else seeds_text(v, planned)

    lists = r.groupby(["experiment", "language"], sort=False)["value"].agg(list)
    cell = pd.Series([show(k, v).replace(" ", "\u00a0") for k, v in lists.items()], index=lists.index)
    return cell.unstack("language").fillna("")


def overlap_reading(results: pd.DataFrame, paper: pd.DataFrame, targets=("es", "hi", "ru")) -> str:
    """Table 1's word-piece overlap in words, from the trained cells alone: for each target whose en-X and enfake-X
    both have results, their target accuracy (mean ± sd, seed count), the cost of removing overlap beside the
    paper's (`paper`: `paper_table("Table 1")`, percent) and the majority class. Empty when no pair is trained."""
    acc = results[results["metric"] == "accuracy"] if len(results) else results
    planned = len(load_plan().seeds)

    def cell(name, lang):
        v = 100 * acc[(acc["experiment"] == name) & (acc["language"] == lang)]["value"]
        return v, seeds_text(v, planned) if len(v) else ""

    parts, missing = [], []
    for t in targets:
        (en, en_text), (fake, fake_text) = cell(f"en-{t}", t), cell(f"enfake-{t}", t)
        if not len(en) or not len(fake):
            missing.append(t)
            continue
        majority = 100 * acc[(acc["experiment"] == f"majority/en-{t}") & (acc["language"] == t)]["value"].mean()
        theirs = paper.loc[f"en-{t}", t] - paper.loc[f"enfake-{t}", t]
        parts.append(f"{t}: en-{t} {en_text}, enfake-{t} {fake_text}, so removing the overlap costs "
                     f"{en.mean() - fake.mean():.1f} points (the paper: {theirs:.1f}); the majority class is "
                     f"{majority:.1f}.")
    if not parts:
        return ""
    lead = "**Word-piece overlap in the trained cells** (accuracy on the target, %). "
    if missing:
        lead += (f"The chapter's claims wait for {', '.join(missing)} as well, so this is no verdict; it is what the "
                 f"cells trained so far show. ")
    return lead + " ".join(parts)


def derived(results: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The claims' frames: transfer (all), permutation (column p), depth, heads (metric delta = enfake - ru).
    A trend's frame holds only complete series: a language's permutation rows when all four p are trained, depth
    and heads when every experiment of their part is; otherwise the artifact is absent, so its claims stay pending
    (a trend over the one point trained first is no evidence)."""
    plan = load_plan()
    out = {"transfer": results}
    if results.empty:
        return out
    acc = results[results["metric"] == "accuracy"]
    perm = []
    for t in ("es", "hi", "ru"):
        series = [(p, acc[(acc["experiment"] == name) & (acc["language"] == t)])
                  for p, name in ((0.0, f"enfake-{t}"), *((p, f"enfake-{t}/perm{p:g}") for p in (0.25, 0.5, 1.0)))]
        if all(len(r) for _, r in series):
            perm += [r.assign(experiment=f"enfake-{t}", p=p) for p, r in series]
    if perm:
        out["permutation"] = pd.concat(perm, ignore_index=True)
    prof = plan.profiles["lab"]
    from .config import model_size
    for artifact, part, col in (("depth", "t4", "layers"), ("heads", "t5", "heads")):
        frames = []
        for name in experiments_of(plan, part):
            s = model_size(prof, plan.experiments[name])
            r = acc[acc["experiment"] == name]
            if r.empty:
                frames = []
                break
            wide = r.pivot_table(index="seed", columns="language", values="value")
            delta = (wide[D.FAKE] - wide["ru"]).rename("value").reset_index().assign(language="ru", metric="delta")
            frames.append(pd.concat([r, delta]).assign(experiment=name, **{artifact: getattr(s, col)}))
        if frames:
            out[artifact] = pd.concat(frames, ignore_index=True)
    return out


def save(results: pd.DataFrame, folder: Path, name: str) -> Path | None:
    if results.empty:
        return None
    return write_csv(results[RESULT_COLUMNS], Path(folder) / f"{name}.csv")
