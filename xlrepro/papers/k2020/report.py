"""What the K et al. (2020) chapters show: corpus card, overlap, the paper's tables, ours beside them when the cells
are trained, and the claims. The chapters never train at the lab profile; they read finished cells."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from xlrepro.config import choose
from xlrepro.paths import runs_dir
from xlrepro.reference import paper_numbers
from xlrepro.results import results_dir, write_csv
from xlrepro.runkeys import run_key

from . import data as D
from .bbert import GATE_MARGIN, RESULT_COLUMNS, Cell
from .config import PROFILES, experiments_of, load_plan
from .constants import PARTS  # noqa: F401 - the chapters read their parts here


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
        df = D.corpus(lang, half, seed=plan.half_seed, max_lines=p.max_lines, text=p.text)
        text = df["text"]
        size = int(text.str.encode("utf-8").str.len().sum() + len(text))
        rows.append({"language": lang, "side": "source (half 0)" if half == 0 else "target (half 1)",
                     "chapters": df.groupby(["book", "chapter"]).ngroups, "lines": len(df),
                     "words": int(text.str.split().str.len().sum()), "MB": round(size / 1e6, 2),
                     "share_of_1GB": size / PAPER_CORPUS_BYTES})
    return pd.DataFrame(rows)


def corpus_card_for_readers(card: pd.DataFrame) -> pd.DataFrame:
    """`corpus_card` as the chapter shows it: counts with thousands separators, MB with two decimals and the share
    of the paper's 1 GB per language in per cent (two significant digits), all as text."""
    return pd.DataFrame({
        "language": card["language"], "side": card["side"],
        "chapters": [f"{int(v):,}" for v in card["chapters"]], "lines": [f"{int(v):,}" for v in card["lines"]],
        "words": [f"{int(v):,}" for v in card["words"]], "MB": [f"{v:.2f}" for v in card["MB"]],
        "share of the paper's 1 GB": [f"{100 * v:.2g} %" for v in card["share_of_1GB"]]})


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


def pending_note(parts, experiments_missing, profile: str = "lab", at_recipes: dict | None = None) -> str:
    """The chapter's command for what is left at `profile`, and the GPU time of the missing experiments alone (the
    trained cells of the same parts are skipped by the command). `at_recipes` ({recipe label: its cells},
    `recipe_cells`) names the missing experiments a stronger recipe published, where their claims are read."""
    import dataclasses

    from .config import gpu_plan
    plan = load_plan()
    left = dataclasses.replace(plan, parts={**plan.parts, "_left": list(experiments_missing)})
    est = gpu_plan(left, ["_left"], profile=profile)["GPU-min"].sum()
    parts = [p for p in parts if p not in plan.profiles[profile].left_out]  # the parts the profile runs
    cmd = (f"xlrepro train k2020 --part {','.join(parts)}{'' if profile == 'lab' else f' --profile {profile}'} "
           f"--time-limit 480 --compile --workers-per-gpu 2 --eval-workers-per-gpu 4")
    elsewhere = {label: [e for e in experiments_missing if e in set(cells)]
                 for label, cells in (at_recipes or {}).items()}
    elsewhere = {label: names for label, names in elsewhere.items() if names}
    covered = {e for names in elsewhere.values() for e in names}
    recipes = "; ".join(f"{', '.join(names)} at \"{label}\"" for label, names in elsewhere.items())
    listed = f"{', '.join(experiments_missing[:6])}{' ...' if len(experiments_missing) > 6 else ''}"
    head = (f"**Not trained at this recipe.** {len(experiments_missing)} experiment(s) of this chapter have no "
            f"trained cells at `{profile}` ({listed}); a stronger recipe below has them all ({recipes}), and a claim "
            f"that reads only cells published there reads it. To train them here too"
            if elsewhere and covered == set(experiments_missing) else
            f"**Pending the GPU run.** {len(experiments_missing)} experiment(s) of this chapter have no trained "
            f"cells yet ({listed})" + (f"; a stronger recipe below has {recipes}, and claims that read only those "
                                       f"read it" if elsewhere else "") + ". Command")
    return (f"{head} (on a GPU machine, all its GPUs; resumable: repeat it, unchanged, until done; the parts make "
            f"one plan, so their cells of one shape share stacks; trained cells are skipped): `{cmd}`. Estimated GPU "
            f"time of the missing experiments: about {est:.0f} GPU-minutes on H100s (`gpu_plan`: FLOPs per step "
            f"against the project's measured stack speeds).")


def recipe_results(chapter: str, folder, profile: str | None = None):
    """(recipe, its frame of the chapter's results, the chapter's cells there) for each stronger recipe published
    beside the results in `folder` (`xlrepro.verdicts.read_recipes`; ``<recipe folder>/<chapter>.csv``), strongest
    first, leaving out the recipe named `profile` (a chapter rendered at that recipe) and recipes without the
    chapter's CSV."""
    from xlrepro.results import read_csv
    from xlrepro.verdicts import read_recipes

    choose("chapter", chapter, list(CHAPTER_TABLES))
    for r in read_recipes(folder):
        path = Path(folder) / r["folder"] / f"{chapter}.csv"
        if r["name"] == profile or not path.is_file():
            continue
        frame = read_csv(path)
        yield r, frame, [e for e in dict.fromkeys(frame["experiment"].astype(str)) if not e.startswith("majority/")]


def recipe_cells(chapter: str, folder, profile: str | None = None) -> dict[str, list[str]]:
    """{label: the chapter's cells} for each stronger recipe of `recipe_results`; empty where none is."""
    return {r["label"]: cells for r, _, cells in recipe_results(chapter, folder, profile)}


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
    count is shown (one seed: its value alone, as no spread exists); a majority baseline shows its number alone, in
    one "majority class" row when every cell's baseline is the same."""
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
    table = cell.unstack("language").fillna("")
    majority = table[table.index.str.startswith("majority/")]
    shown = majority.replace("", pd.NA)
    if len(majority) > 1 and (shown.nunique() <= 1).all():  # one baseline for every cell: one row, at the end
        table = pd.concat([table.drop(majority.index), shown.bfill().iloc[:1].fillna("").set_axis(["majority class"])])
        table.index.name = "experiment"
    return table


def with_failed_rows(table: pd.DataFrame, experiments, every: pd.DataFrame, shown: pd.DataFrame) -> pd.DataFrame:
    """`ours_table`'s `table` with a row for each of `experiments` that has runs in `every` (all results) but none in
    `shown` (the runs left after the failed ones were taken out): "every seed failed" across it, so that a reader
    finds the cell under the paper's row rather than a missing line."""
    have, kept = set(every["experiment"]), set(shown["experiment"])
    gone = [e for e in experiments if e in have and e not in kept]
    if not gone:
        return table
    n = {e: every[every["experiment"] == e]["seed"].nunique() for e in gone}
    columns = table.columns if len(table.columns) else pd.Index(["ru"], name="language")
    rows = pd.DataFrame([[f"all {n[e]} seeds failed"] + [""] * (len(columns) - 1) for e in gone],
                        index=pd.Index(gone, name="experiment"), columns=columns)
    out = pd.concat([table, rows]) if len(table) else rows
    order = [e for e in experiments if e in out.index] + [i for i in out.index if i not in experiments]
    return out.loc[order]


NER_OURS = ("entity F1 of the NER stand-in on the fine-tuning language, %, mean ± sd over seeds; the targets have no "
            "labels, so this is how well each B-BERT learns the source task, not transfer")


def ner_tables(table: str, results: pd.DataFrame, rows) -> list[tuple[str, object]]:
    """The paper's NER F1 of `table` and ours for `rows`, as (caption, frame) pairs to display in that order: the
    paper's where it reports NER, ours where our cells have NER results; empty where neither has any."""
    shown = []
    paper = paper_table(table, "f1")
    if not paper.empty:
        shown.append((f"**{table}, the paper, NER** (entity F1, %)", paper.style.format(precision=1, na_rep="")))
    ours = ours_table(results, rows, "f1")
    if not ours.empty:
        shown.append((f"**{table}, ours, NER** ({NER_OURS})", ours))
    return shown


def overlap_reading(results: pd.DataFrame, paper: pd.DataFrame, targets=("es", "hi", "ru"), suffix: str = "",
                    title: str = "Word-piece overlap in the trained cells") -> str:
    """Table 1's word-piece overlap in words, from the trained cells alone: for each target whose en-X and enfake-X
    both have results, their target accuracy (mean ± sd, seed count), the cost of removing overlap beside the
    paper's (`paper`: `paper_table("Table 1")`, percent) and the majority class. Empty when no pair is trained.
    `suffix` reads the cells of another size ("/L12H12/22.3%": en-es/L12H12/22.3% against enfake-es/L12H12/22.3%)."""
    acc = results[results["metric"] == "accuracy"] if len(results) else results
    planned = len(load_plan().seeds)

    def cell(name, lang):
        v = 100 * acc[(acc["experiment"] == name) & (acc["language"] == lang)]["value"]
        return v, seeds_text(v, planned) if len(v) else ""

    parts, missing = [], []
    for t in targets:
        (en, en_text), (fake, fake_text) = cell(f"en-{t}{suffix}", t), cell(f"enfake-{t}{suffix}", t)
        if not len(en) or not len(fake):
            missing.append(t)
            continue
        majority = 100 * acc[(acc["experiment"] == f"majority/en-{t}{suffix}") & (acc["language"] == t)]["value"].mean()
        theirs = paper.loc[f"en-{t}", t] - paper.loc[f"enfake-{t}", t]
        parts.append(f"{t}: en-{t} {en_text}, enfake-{t} {fake_text}, so removing the overlap costs "
                     f"{en.mean() - fake.mean():.1f} points (the paper: {theirs:.1f}); the majority class is "
                     f"{majority:.1f}.")
    if not parts:
        return ""
    lead = f"**{title}** (accuracy on the target, %). "
    if missing:
        lead += (f"The chapter's claims wait for {', '.join(missing)} as well, so this is no verdict; it is what the "
                 f"cells trained so far show. ")
    return lead + " ".join(parts)


def table_rows(table: str, paper_rows, names) -> list[str]:
    """The rows of our version of `table`: the paper's rows, each followed by our variants of it that the paper has
    no row for (experiments.yaml lists `table` for them and their name starts with the paper row's: Table 1's
    enfake-X/id, Fake-English by an id shift), except cells at another size (`layers` set: they get a table of
    their own). Variants not in `names` are left out."""
    plan = load_plan()
    paper_rows = list(paper_rows)
    extra = [n for n in names if n not in paper_rows and n in plan.experiments
             and table in plan.experiments[n].table and plan.experiments[n].layers is None]
    rows = []
    for r in paper_rows:
        rows += [r] + [n for n in extra if n.split("/")[0] == r]
    return rows


def id_shift_reading(results: pd.DataFrame, targets=("es", "hi", "ru")) -> str:
    """Table 1's two Fake-Englishes in words: for each target X whose en-X, enfake-X and enfake-X/id all have
    results, the accuracy on X of each (mean ± sd, seed count) and what each way of removing the overlap costs
    against en-X. The id shift keeps en-X's segmentation and removes only the sharing, so where it costs as much as
    the Unicode shift, the loss is the sharing's, not the new segmentation's. Empty when no target has all three."""
    acc = results[results["metric"] == "accuracy"] if len(results) else results
    planned = len(load_plan().seeds)
    parts = []
    for t in targets:
        v = {n: 100 * acc[(acc["experiment"] == n) & (acc["language"] == t)]["value"]
             for n in (f"en-{t}", f"enfake-{t}", f"enfake-{t}/id")}
        if not all(len(x) for x in v.values()):
            continue
        en, uni, idv = v.values()
        gap = idv.mean() - uni.mean()
        if len(uni) > 1 and len(idv) > 1:
            se2 = 2 * (uni.var() / len(uni) + idv.var() / len(idv)) ** 0.5
            noise = (f"The two Fake-Englishes differ by {gap:+.1f} points, "
                     f"{'within' if abs(gap) <= se2 else 'beyond'} 2 SE ({se2:.1f}).")
        else:
            noise = "One seed of the id shift so far: no spread to judge the difference by."
        parts.append(f"- {t}: en-{t} {seeds_text(en, planned)}. The id shift, enfake-{t}/id, "
                     f"{seeds_text(idv, planned)}: {en.mean() - idv.mean():.1f} points lower; the Unicode shift, "
                     f"enfake-{t}, {seeds_text(uni, planned)}: {en.mean() - uni.mean():.1f} points lower. {noise}")
    if not parts:
        return ""
    return ("**Sharing or segmentation?** (accuracy on the target, %; `enfake-X/id` keeps en-X's word pieces and "
            "only gives Fake-English its own copies of them, so it removes the sharing alone)\n\n" + "\n".join(parts))


def cell_values(results: pd.DataFrame, name: str, language: str, metric: str = "accuracy") -> pd.Series:
    """Cell `name`'s `metric` on `language`, in points (one value per seed)."""
    return 100 * results[(results["experiment"] == name) & (results["language"] == language)
                         & (results["metric"] == metric)]["value"].astype(float)


def mean_difference(x: pd.Series, y: pd.Series) -> tuple[float, float]:
    """(mean of y minus mean of x, 2 SE of that difference of means); the SE is NaN where one has a single value."""
    return y.mean() - x.mean(), 2 * (x.sem() ** 2 + y.sem() ** 2) ** 0.5


def four_settings(results: pd.DataFrame, name: str, target: str, metric: str) -> dict | None:
    """Cell `name`'s `metric` (points, one value per seed) on the test pairs in Table 11's four language settings:
    {target, enfake>target, target>enfake, enfake}; None where one of them has no result."""
    if "metric" not in results:
        return None
    v = {lang: cell_values(results, name, lang, metric)
         for lang in (target, f"enfake>{target}", f"{target}>enfake", "enfake")}
    return v if all(len(x) for x in v.values()) else None


def mixed_reading(results: pd.DataFrame, targets=("es", "hi", "ru")) -> str:
    """Table 11 in words: for each target X of an enfake-X cell with results, its accuracy on X pairs, on the two
    mixed orders and on Fake-English pairs (mean ± sd), and where the mixed pairs fall between the two monolingual
    ones (0: at the target's, 100: at Fake-English's). Empty when no enfake-X cell has all four."""
    planned = len(load_plan().seeds)
    parts = []
    for t in targets:
        v = four_settings(results, f"enfake-{t}", t, "accuracy")
        if v is None:
            continue
        low, high = v[t].mean(), v["enfake"].mean()
        where = [100 * (v[k].mean() - low) / (high - low) for k in (f"enfake>{t}", f"{t}>enfake")]
        parts.append(f"- {t}: {t} pairs {seeds_text(v[t], planned)}, enfake>{t} {seeds_text(v[f'enfake>{t}'], planned)}, "
                     f"{t}>enfake {seeds_text(v[f'{t}>enfake'], planned)}, Fake-English pairs "
                     f"{seeds_text(v['enfake'], planned)}: the mixed pairs lie {where[0]:.0f}% and {where[1]:.0f}% of "
                     f"the way from the target's pairs to Fake-English's.")
    if not parts:
        return ""
    return ("**Where the mixed pairs fall** (accuracy, %, of each enfake-X cell on the same test pairs in four "
            "language settings)\n\n" + "\n".join(parts))


def adjacency_margin(target: str) -> float:
    """The points above 50 % that the claims' precondition ``adjacency_transfers_<target>`` (claims.yaml) asks of the
    adjacency model's accuracy on the target's pairs."""
    from xlrepro.claims import load_claims_file
    return 100 * load_claims_file("k2020")["preconditions"][f"adjacency_transfers_{target}"]["test"]["margin"]


def adjacency_reading(results: pd.DataFrame, targets=("es", "hi", "ru")) -> str:
    """Table 11 on the adjacency task in words: for each enfake-X/adj cell with results, its adjacency accuracy on X
    pairs, on the two mixed orders (each with its difference from the X pairs, in points) and on Fake-English pairs;
    then in how many targets both mixed orders score above the X pairs beyond 2 SE of the difference (the SE of
    each mean over seeds, combined as `xlrepro.claims` does; the paper's mixed pairs score below), and the targets
    whose X pairs are less than `adjacency_margin` points above one verse's 50 % (the claims' precondition).
    Empty when no such cell has all four."""
    planned = len(load_plan().seeds)
    parts, above, weak = [], [], []
    for t in targets:
        v = four_settings(results, f"enfake-{t}/adj", t, "adjacency_accuracy")
        if v is None:
            continue
        diff, two_se = {}, {}
        for k in (f"enfake>{t}", f"{t}>enfake"):
            diff[k], two_se[k] = mean_difference(v[t], v[k])
        if all(d > two_se[k] for k, d in diff.items()):
            above.append(t)
        margin = adjacency_margin(t)
        if v[t].mean() - 50 < margin:  # one verse alone scores 50 %
            weak.append(f"{t} ({v[t].mean() - 50:+.1f} points above 50 %; its claim's precondition asks {margin:g})")
        parts.append(f"- {t}: {t} pairs {seeds_text(v[t], planned)}; "
                     + ", ".join(f"{k} {seeds_text(v[k], planned)} ({d:+.1f} points, 2 SE {two_se[k]:.1f})"
                                 for k, d in diff.items())
                     + f"; Fake-English pairs {seeds_text(v['enfake'], planned)}.")
    if not parts:
        return ""
    text = ("**Where the mixed pairs fall on the adjacency task** (accuracy, %; one verse alone scores 50 %; in "
            "brackets, each mixed order against the target's own pairs)\n\n" + "\n".join(parts)
            + f"\n\nIn {len(above)} of {len(parts)} targets ({', '.join(above) or 'none'}) both mixed orders score "
              "above the target's own pairs beyond 2 SE, where the paper's mixed pairs score below them.")
    if weak:
        text += (f" The adjacency model hardly transfers the task to {'; '.join(weak)}: "
                 f"{'its claim is' if len(weak) == 1 else 'their claims are'} inconclusive whatever the mixed pairs "
                 "show.")
    return text


def _model_seconds(published: set, profile: str) -> tuple[dict, set]:
    """Pre-training seconds of each published (experiment, seed) from the training records under
    `run_folder(profile)` (a stack's seconds shared equally among its members; an NSP model's own), one entry per
    record, and the devices that ran them."""
    per_model: dict[tuple[str, int], list[float]] = {}
    devices = set()
    for f in sorted(run_folder(profile).glob("stacks/*/timing.json")):
        t = json.loads(f.read_text())
        for m in t["members"]:
            name, seed = m.rsplit("/", 1)
            if (name, int(seed)) in published:
                per_model.setdefault((name, int(seed)), []).append(t["train_seconds"] / len(t["members"]))
                devices.add(t.get("device", "unknown"))
    for name in dict.fromkeys(e for e, _ in published):  # NSP models, one at a time, time themselves
        for f in sorted(Cell(None, profile, name).dir.glob("timing_*.json")):
            t = json.loads(f.read_text())
            for seed in t["seeds"]:
                if (name, int(seed)) in published:
                    per_model.setdefault((name, int(seed)), []).append(t["seconds"])
                    devices.add(t.get("device", "unknown"))
    return per_model, devices


def _published(results: pd.DataFrame, names) -> tuple[pd.DataFrame, set]:
    """The results of `names`' trained seeds (no majority baselines), and their (experiment, seed) pairs."""
    r = results[results["experiment"].isin(list(names)) & (results["seed"] >= 0)] if len(results) else results
    return r, ({(e, int(s)) for e, s in zip(r["experiment"], r["seed"])} if len(r) else set())


def compute_notes(results: pd.DataFrame, names, profile: str = "lab") -> dict[str, str]:
    """The run record's account of what this chapter's published models cost, from the training records under
    `run_folder(profile)`: pre-training (a stack's seconds shared equally among its members; an NSP model's own) and
    fine-tuning (`finetune_seconds` of the results, every task), in minutes of the workers that ran them, and the
    devices. Several workers shared each GPU, so these are not minutes of a GPU to oneself. A model trained twice (a
    first copy lost with its machine before evaluation) counts once, at the mean of its records."""
    r, published = _published(results, names)
    per_model, devices = _model_seconds(published, profile)
    fine = r[r["metric"] == "finetune_seconds"]["value"] if len(r) else pd.Series(dtype=float)
    twice = sum(len(v) > 1 for v in per_model.values())
    pretrain = sum(sum(v) / len(v) for v in per_model.values()) / 60
    which = (f"its {len(published)} published models" if len(per_model) == len(published) else
             f"the {len(per_model)} of its {len(published)} published models whose training record came back")
    return {
        "training devices": ", ".join(sorted(devices)) or "none recorded",
        "pre-training": (f"{pretrain:.0f} worker-minutes for {which}"
                         + (f" ({twice} trained twice, counted once)" if twice else "")
                         if per_model else "no training record"),
        "fine-tuning": (f"{fine.sum() / 60:.0f} worker-minutes for {len(fine)} fine-tunings (every task)"
                        if len(fine) else "no fine-tuning record"),
    }


def cost_by_table(results: pd.DataFrame, names, tables, profile: str = "lab") -> pd.DataFrame:
    """`compute_notes` split by the paper's table: each published model (and its fine-tunings) is counted once,
    under the first of `tables` its experiment serves (the base cells serve several), or, serving none of them (a
    cell the chapter borrows), under its own first table, in a row after them. Worker-minutes, as there."""
    r, published = _published(results, names)
    plan = load_plan()
    home = {n: next((t for t in tables if t in plan.experiments[n].table), plan.experiments[n].table[0])
            for n in names}
    per_model, _ = _model_seconds(published, profile)
    rows = []
    for table in dict.fromkeys([*tables, *home.values()]):
        models = {(e, s) for e, s in published if home.get(e) == table}
        if not models:
            continue
        trained = [sum(v) / len(v) for k, v in per_model.items() if k in models]
        fine = r[(r["metric"] == "finetune_seconds") & r["experiment"].map(home).eq(table)]["value"]
        rows.append({"table": table, "experiments": len({e for e, _ in models}), "models": len(models),
                     "pre-training worker-min": round(sum(trained) / 60, 1),
                     "models with a training record": len(trained), "fine-tunings": len(fine),
                     "fine-tuning worker-min": round(fine.sum() / 60, 1)})
    return pd.DataFrame(rows)


def seed_delta(acc: pd.DataFrame) -> pd.Series:
    """Δ per seed: a cell's Fake-English minus Russian accuracy (rows of its accuracies, long form), indexed by seed."""
    wide = acc.pivot_table(index="seed", columns="language", values="value")
    return wide[D.FAKE] - wide["ru"]


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
            delta = seed_delta(r).rename("value").reset_index().assign(language="ru", metric="delta")
            frames.append(pd.concat([r, delta]).assign(experiment=name, **{artifact: getattr(s, col)}))
        if frames:
            out[artifact] = pd.concat(frames, ignore_index=True)
    return out


SOURCE_OVER_MAJORITY = "source_over_majority"  # the health frame: source accuracy minus the majority class


def _source_accuracies(results: pd.DataFrame, metric: str = "accuracy", task: str = "sections"):
    """(experiment, seed, source language, source accuracy, majority) of every cell with a ``majority/<cell>`` row:
    the test accuracy (`metric` of `task`: the section task's by default) on the cell's own fine-tuning language and
    the majority class's share there."""
    plan = load_plan()
    acc = results[(results["metric"] == metric) & (results["task"] == task)]
    acc = acc.drop_duplicates(["experiment", "seed", "language"])
    for name in acc["experiment"].unique():
        if name.startswith("majority/") or name not in plan.experiments:
            continue
        src = plan.experiments[name].finetune
        major = acc[(acc["experiment"] == f"majority/{name}") & (acc["language"] == src)]["value"]
        if major.empty:
            continue
        mine = acc[(acc["experiment"] == name) & (acc["language"] == src)]
        for seed, v in zip(mine["seed"], mine["value"]):
            yield name, int(seed), src, float(v), float(major.iloc[0])


def source_over_majority(results: pd.DataFrame) -> pd.DataFrame:
    """Per (experiment, seed): the section-task test accuracy on the cell's own fine-tuning (source) language minus
    the majority class there (its ``majority/<cell>`` row: the source train majority class's share of the test
    pairs). A classifier that learnt its source task stands well above 0; one at 0 never left the majority class.
    Metric ``accuracy_over_majority``, language the source; cells without a majority row are left out. Cells
    evaluated on the adjacency task (Table 11's enfake-X/adj) add metric ``adjacency_over_majority``: the same on
    that task's source pairs, whose majority class is 50 %."""
    if results.empty:
        return pd.DataFrame(columns=RESULT_COLUMNS)
    rows = [{"experiment": name, "seed": seed, "language": src, "task": "sections",
             "metric": "accuracy_over_majority", "value": v - major}
            for name, seed, src, v, major in _source_accuracies(results)]
    rows += [{"experiment": name, "seed": seed, "language": src, "task": "adjacency",
              "metric": "adjacency_over_majority", "value": v - major}
             for name, seed, src, v, major in _source_accuracies(results, "adjacency_accuracy", "adjacency")]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def claims_frames(chapter: str, folder) -> dict[str, pd.DataFrame]:
    """The frames a chapter's claims read, from a results folder: `derived` of the chapter's published CSV
    (``<folder>/<chapter>.csv``, every cell with its ``majority/<cell>`` baselines), and the health frame
    ``source_over_majority`` of every chapter CSV the folder holds (the same in every chapter, so the health rule
    reads every run once). The chapter notebooks call this on the folder they have just written; ``xlrepro
    verdicts`` calls it on book/results/k2020."""
    from xlrepro.results import read_csv
    from .constants import CHAPTERS
    choose("chapter", chapter, CHAPTERS)
    folder = Path(folder)
    path = folder / f"{chapter}.csv"
    results = read_csv(path) if path.is_file() else pd.DataFrame(columns=RESULT_COLUMNS)
    out = derived(results)
    every = [read_csv(folder / f"{c}.csv") for c in CHAPTERS if (folder / f"{c}.csv").is_file()]
    if every:
        out[SOURCE_OVER_MAJORITY] = source_over_majority(pd.concat(every, ignore_index=True))
    return out


ADJACENCY_CAPTION = ("**Table 11 on the adjacency task, ours** (accuracy, %, mean ± sd over seeds: does the second "
                     "verse follow the first? Each verse is as often in a positive as in a negative, so one verse "
                     "alone scores exactly 50 %, the majority class; `premise>hypothesis` columns are the mixed "
                     "pairs)")


def adjacency_table(results: pd.DataFrame, names) -> pd.DataFrame:
    """`ours_table` of the adjacency task (metric ``adjacency_accuracy``) for the cells of `names` evaluated on it
    (Table 11's enfake-X/adj); empty where none is."""
    cells = [n for n in names if n in set(results.loc[results["metric"] == "adjacency_accuracy", "experiment"])]
    return ours_table(results, cells, "adjacency_accuracy") if cells else pd.DataFrame()


def adjacency_parts(results: pd.DataFrame, names, label: str | None = None) -> list:
    """Table 11 on the adjacency task for the cells of `names` evaluated on it: its caption (ours at recipe `label`,
    where given), `adjacency_table` and `adjacency_reading`, for `display`; empty where no cell is."""
    from IPython.display import Markdown

    table = adjacency_table(results, names)
    if table.empty:
        return []
    caption = ADJACENCY_CAPTION if label is None else ADJACENCY_CAPTION.replace("ours**", f"ours at {label}**")
    reading = adjacency_reading(results)
    return [Markdown(caption), table] + ([Markdown(reading)] if reading else [])


def recipe_tables(chapter: str, folder) -> list:
    """What a chapter shows of the stronger recipes published beside its results (`xlrepro.verdicts.recipe_frames`;
    ``<folder>/recipes.json``): a heading and a line on how the claims read them, then for each recipe and each of
    the chapter's tables with a cell retrained there that no earlier table showed, our numbers at that recipe
    (`ours_table`, every cell with its majority class, then the paper's rows: `with_paper_rows`). Empty where no
    recipe is published (an exploratory folder, the smoke run)."""
    from IPython.display import Markdown

    shown = []
    for r, frame, cells in recipe_results(chapter, folder):
        parts, seen = [], set()
        for table in CHAPTER_TABLES[chapter]:
            rows = [e for e in table_rows(table, paper_table(table).index, cells) if e in cells]
            if set(rows) <= seen:  # nothing new (Table 9's base row alone, shown under Table 8)
                continue
            seen |= set(rows)
            mine = ours_table(frame, rows, "accuracy")
            if not mine.empty:
                parts += [Markdown(f"**{table}, ours at {r['label']}** (section task accuracy, %, mean ± sd over "
                                   f"seeds; the paper's numbers for the same rows below ours, marked \"the paper\")"),
                          with_paper_rows(mine, table, rows)]
        parts += adjacency_parts(frame, cells, r["label"])
        if parts:
            shown += [Markdown(f"### At a stronger recipe: {r['label']}\n\nThe cells below were retrained with "
                               f"profile `{r['name']}` of experiments.yaml ({len(cells)} of this chapter's "
                               f"cells, each with all its seeds; a cell with a seed still to train is left "
                               f"out until it is complete), as declared there before they ran. Each claim "
                               f"below is read on the strongest published recipe that holds every model the claim "
                               f"reads, its evidence starting with the recipe's name (here \"At {r['label']}\"); the "
                               f"other claims read the tables above." + recipe_gate_line(folder, r, cells)
                               + recipe_commands(r))]
            shown += parts
            shown.append(Markdown(recipe_cost(Path(folder) / r["folder"], frame)))
    return shown


def with_paper_rows(mine: pd.DataFrame, table: str, rows) -> pd.DataFrame:
    """`mine` (an `ours_table`) with the paper's accuracy for those of `rows` it reports, one row "<row>, the paper"
    each under ours, in `mine`'s columns (the paper's same-language pairs "x>x" are our "x"), blank where the paper
    has no such number: so that a table at a stronger recipe shows the paper's numbers beside ours."""
    paper = paper_table(table, "accuracy")
    paper = paper.rename(columns=lambda c: c.split(">")[0] if len(set(c.split(">"))) == 1 else c)
    have = [r for r in rows if r in paper.index]
    if not have:
        return mine
    theirs = paper.loc[have].reindex(columns=mine.columns).map(lambda v: "" if pd.isna(v) else f"{v:.1f}")
    theirs.index = [f"{r}, the paper" for r in have]
    return pd.concat([mine, theirs]).rename_axis(mine.index.name)


def recipe_gate_line(folder, recipe: dict, cells: list[str]) -> str:
    """A sentence naming the base pair cells that fail the recipe's own transfer gate (gates.csv beside the results,
    row ``<recipe>_base_transfers``): a claim whose precondition needs one of them stays inconclusive there whatever
    an ablation shows; then which of their ablation cells (``<base>/<variant>`` among `cells`, the chapter's cells at
    the recipe) were retrained there anyway, and which of the failing cells pass at a stronger recipe
    (`gates.stronger_passes`). Empty where the gate passed or is not published."""
    from .gates import failing_cells, gate_spec, stronger_passes, stronger_sentence
    path = Path(folder) / "gates.csv"
    if not path.is_file():
        return ""
    gates = pd.read_csv(path)
    gate = f"{recipe['name']}_base_transfers"
    row = gates[gates["gate"] == gate]
    failing = failing_cells(row["detail"].iloc[0]) if len(row) else []
    if not failing:
        return ""
    later = stronger_passes(gates, gate)
    by_gate = {}
    for cell, (g, label) in later.items():
        by_gate.setdefault((g, label), []).append(cell)
    rules = {g: gate_spec(g).get("rule") for g, _ in by_gate}
    stronger = "".join(
        " " + stronger_sentence(cs, g, label) + (f"; by the rule declared with that gate, {rules[g]}" if rules[g]
                                                 else "") + "." for (g, label), cs in by_gate.items())
    plan = load_plan()
    theirs = [c for c in cells if c.split("/")[0] in failing and "/" in c]
    # the base retrained for the adjacency task: its claims have a transfer precondition of their own
    other_task = [c for c in theirs if c in plan.experiments and "adjacency" in plan.experiments[c].tasks]
    ablations = [c for c in theirs if c not in other_task]
    return (f" At this recipe the base B-BERTs {', '.join(failing)} still fail the transfer gate "
            f"(`{recipe['name']}_base_transfers` in gates.csv), so a claim whose precondition needs one of them "
            "stays inconclusive whatever an ablation shows. "
            + (f"Their ablation cells retrained here ({', '.join(ablations)}) are shown, their claims inconclusive."
               if ablations else "None of their ablation cells was retrained here.")
            + (f" {', '.join(other_task)} (the base retrained for the adjacency task) "
               f"{'is' if len(other_task) == 1 else 'are'} decided by {'its' if len(other_task) == 1 else 'their'} "
               "own transfer precondition instead." if other_task else "")
            + stronger)


def recipe_commands(recipe: dict) -> str:
    """The commands that carry on, retrain and publish a recipe's parts (recipes.json's ``parts``; empty where none
    is named), as a Markdown block to append to its heading: on a machine without the runs, `pilots.restore` first."""
    parts = ",".join(recipe.get("parts") or [])
    if not parts:
        return ""
    flags = " ".join(f"--part {p}" for p in recipe["parts"])
    return (f"\n\n```bash\npython -m xlrepro.papers.k2020.pilots {recipe['name']} --restore   # without the runs here: "
            f"the published cells are not trained again\n"
            f"xlrepro train k2020 --part {parts} --profile {recipe['name']} --compile --no-snapshots "
            f"--time-limit 540   # resumable: repeat it until nothing is left\n"
            f"python -m xlrepro.papers.k2020.pilots {recipe['name']} {flags}   # publish the complete cells\n"
            f"xlrepro verdicts k2020\n```")


def recipe_cost(folder: Path, frame: pd.DataFrame) -> str:
    """A line on what a recipe's published models cost: the minutes of its stacks' timing records (``stack_*.json``,
    those whose every model is published there) and the chapter's fine-tuning minutes (``finetune_seconds`` rows of
    `frame`)."""
    records = [json.loads(p.read_text()) for p in sorted(Path(folder).glob("stack_*.json"))]
    minutes = sum(r["train_seconds"] for r in records) / 60
    devices = ", ".join(sorted({r.get("device", "unknown") for r in records})) or "no record"
    tune = frame.loc[frame["metric"] == "finetune_seconds", "value"].astype(float).sum() / 60
    return (f"*Cost.* Pre-training of the models published at this recipe: {minutes:.0f} minutes of training time in "
            f"{len(records)} stacks (their timing records, beside the results; on {devices}; each GPU also ran "
            f"evaluations, so not minutes of a GPU to itself). Fine-tuning of this chapter's cells there: "
            f"{tune:.0f} worker-minutes.")


PENDING_RUN = "pending the GPU run"  # the verdict of every claim of a chapter none of whose claims can be read yet


def chapter_claims_table(chapter: str, folder, todo=(), not_run=None) -> pd.DataFrame:
    """The claims table a chapter shows: the verdicts (`xlrepro.claims.claims_table`) on the frames `claims_frames`
    reads from `folder` (the reading `xlrepro verdicts` makes too), rewriting the chapter's rows of
    ``<folder>/claims.csv``; the cells of `todo` (not trained yet) and their ``majority/<cell>`` baselines are
    pending. `not_run` (experiment -> why; `published.ChapterFrames.not_run`): cells the profile does not run, whose
    claims are inconclusive (``not_run``), as are their ``majority/<cell>`` baselines'. Where a claim's selector finds
    no trained cell at all (KeyError, ValueError), every claim of the chapter is shown with the verdict PENDING_RUN
    and an empty evidence, and claims.csv is left as it was."""
    from xlrepro.claims import claims_table, criterion, load_claims

    from .constants import CHAPTERS
    choose("chapter", chapter, CHAPTERS)
    todo = list(todo)
    frames = claims_frames(chapter, folder)
    try:
        skipped = {**(not_run or {}), **{f"majority/{e}": why for e, why in (not_run or {}).items()}}
        from xlrepro.papers import get_paper
        from xlrepro.verdicts import recipe_frames, recipe_health
        return claims_table(NAME, chapter, frames, out=folder, pending=todo + [f"majority/{e}" for e in todo],
                            not_run=skipped, recipes=recipe_frames(get_paper(NAME), chapter, Path(folder)),
                            recipe_health=recipe_health(NAME, Path(folder)))
    except (KeyError, ValueError):  # a selector finds no trained cell yet
        return pd.DataFrame([{"claim": c["claim"], "section": c["section"], "criterion": criterion(c),
                              "evidence": "", "verdict": PENDING_RUN}
                             for c in load_claims(NAME) if c["chapter"] == chapter])


def save(results: pd.DataFrame, folder: Path, name: str) -> Path | None:
    if results.empty:
        return None
    return write_csv(results[RESULT_COLUMNS], Path(folder) / f"{name}.csv")


# ----------------------------------------------------------------------------------------------- the architecture
LEARNED_MARGIN = 0.02  # a seed whose source accuracy is within this of the majority class learnt nothing
TABLES_4_6 = ("Table 4", "Table 5", "Table 6")
CHAPTER_TABLES = {"linguistic": ("Table 1", "Table 2", "Table 3"),
                  "architecture": ("Table 4", "Table 5", "Table 6", "Table 7"),
                  "input_objective": ("Table 8", "Table 9", "Table 10"), "mixed_pairs": ("Table 11",)}
COST_CAPTION = ("**What each table cost** (minutes of the workers that ran them: several shared each GPU, so these "
                "are not minutes of a GPU to oneself; a model serving several tables counts once, under the first)")


def failed_seeds(results: pd.DataFrame) -> pd.DataFrame:
    """(experiment, seed, source accuracy, majority) of every seed whose test accuracy on its own fine-tuning language
    is within LEARNED_MARGIN of the majority class: it learnt nothing of the source task, so its pre-training or
    its fine-tuning failed. The chapters leave them out of their tables and figures and the claims leave them out
    (the health rule never_left_majority of claims.yaml, on `source_over_majority`, names them in health.csv)."""
    rows = [{"experiment": name, "seed": seed, "source_accuracy": v, "majority": major}
            for name, seed, _, v, major in _source_accuracies(results) if v < major + LEARNED_MARGIN]
    return pd.DataFrame(rows, columns=["experiment", "seed", "source_accuracy", "majority"])


def size_frame(results: pd.DataFrame, experiments, target: str = "ru", profile: str = "lab") -> pd.DataFrame:
    """Per seed of the given experiments: target test accuracy with each cell's shape (layers, heads, hidden,
    share_of_base) and Tables 4-6 membership; the majority class of the target as column `majority`."""
    from .config import shape_table
    plan = load_plan()
    acc = results[(results["metric"] == "accuracy") & (results["task"] == "sections") & (results["language"] == target)]
    shapes = shape_table(plan, profile).set_index("experiment")
    rows = []
    for name in experiments:
        r = acc[acc["experiment"] == name]
        major = acc[acc["experiment"] == f"majority/{name}"]["value"]
        for seed, v in zip(r["seed"], r["value"]):
            rows.append({"experiment": name, "seed": int(seed), "accuracy": v, "majority": major.mean(),
                         "tables": ", ".join(t for t in plan.experiments[name].table if t in TABLES_4_6),
                         **shapes.loc[name].to_dict()})
    return pd.DataFrame(rows)


def architecture_reading(results: pd.DataFrame, experiments, profile: str = "lab") -> str:
    """Tables 4-6 in words, from the trained cells alone: the base's Russian accuracy against the majority class,
    the cells that clear it by the pilot gate's margin (with their shapes), and the seeds that learnt nothing."""
    frame = size_frame(results, experiments, profile=profile)
    if frame.empty or "enfake-ru" not in set(frame["experiment"]):
        return ""
    planned = len(load_plan().seeds)
    major = 100 * frame["majority"].iloc[0]
    cells = frame.groupby("experiment", sort=False).agg(
        mean=("accuracy", "mean"), layers=("layers", "first"), hidden=("hidden", "first"),
        share=("share_of_base", "first"))
    text = lambda n: seeds_text(100 * frame[frame["experiment"] == n]["accuracy"], planned)  # noqa: E731
    base = 100 * cells.loc["enfake-ru", "mean"]
    where = ("below it" if base < major else
             f"less than {100 * GATE_MARGIN:.0f} points above it" if base < major + 100 * GATE_MARGIN else
             f"{base - major:.1f} points above it")
    layers, hidden = (int(cells.loc["enfake-ru", k]) for k in ("layers", "hidden"))
    out = [f"**What the trained cells show** (Russian test accuracy, %; the majority class is {major:.1f}). The base, "
           f"enfake-ru ({layers} layers, width {hidden}), reaches {text('enfake-ru')}: {where}"
           + (", so without a shared word piece our base does not transfer."
              if base < major + 100 * GATE_MARGIN else ".")]
    good = cells[100 * cells["mean"] >= major + 100 * GATE_MARGIN].sort_values("mean", ascending=False)
    if len(good):
        listed = "; ".join(f"{n} {text(n)} ({int(r.layers)} layer{'s' if r.layers > 1 else ''}, width {int(r.hidden)}, "
                           f"{100 * r.share:.0f}% of the base's parameters)" for n, r in good.iterrows())
        smaller = bool(((good["share"] < 0.9) | (good["layers"] < 12)).all())
        out.append(f"Cells {100 * GATE_MARGIN:.0f} or more points above the majority class (the margin the pilot "
                   f"gate asks on dev): {listed}."
                   + (" Every one of them is smaller or shallower than the base." if smaller else ""))
    else:
        out.append(f"No cell is {100 * GATE_MARGIN:.0f} points above it.")
    failed = failed_seeds(results[results["experiment"].isin(list(experiments)
                                                             + [f"majority/{e}" for e in experiments])])
    if len(failed):
        names = "; ".join(f"{n} seed{'s' if len(g) > 1 else ''} {', '.join(map(str, g['seed']))}"
                          for n, g in failed.groupby("experiment", sort=False))
        out.append(f"{len(failed)} seed(s) score within {100 * LEARNED_MARGIN:.0f} points of the majority class on "
                   f"Fake-English, their own fine-tuning language ({names}): they learnt nothing of the task, so "
                   f"their pre-training or fine-tuning failed. The health rule never_left_majority names such seeds "
                   f"in health.csv, and the chapters and claims leave the seeds it names out.")
    return " ".join(out)


def four_language_reading(results: pd.DataFrame, base: str = "en-es-hi-ru", targets=("es", "hi", "ru")) -> str:
    """Table 7 in words: the four-language base on each target against the majority class, then each deep narrow
    cell's change from the base on each target (points, ours beside the paper's), and how many of those changes lie
    beyond 2 SE of the difference of two means. A target where the base itself is not above the majority class
    beyond 2 SE is flagged: a deep narrow model has no transfer there to keep. Empty until the base and one deep
    narrow cell are trained."""
    acc = results[results["metric"] == "accuracy"] if len(results) else results
    if acc.empty:
        return ""
    planned = len(load_plan().seeds)
    paper = paper_table("Table 7")

    def cell(name, lang):
        return cell_values(acc, name, lang)

    deep = [n for n in paper.index if n != base and all(len(cell(n, t)) for t in targets)]
    if not deep or not all(len(cell(base, t)) for t in targets):
        return ""
    lead, flat = [], []
    for t in targets:
        b, major = cell(base, t), cell(f"majority/{base}", t).mean()
        lead.append(f"{t} {seeds_text(b, planned)}")
        if not b.mean() - major > 2 * b.sem():
            flat.append(t)
    major = cell(f"majority/{base}", targets[0]).mean()
    out = [f"**Deep narrow models in the trained cells** (accuracy on the target, %). The four-language base reaches "
           f"{', '.join(lead)} (the majority class: {major:.1f})."]
    if flat:
        out.append(f"On {', '.join(flat)} the base is not above the majority class beyond 2 SE: there is no transfer "
                   f"for a smaller model to keep, so {'that gap says' if len(flat) == 1 else 'those gaps say'} "
                   f"little.")
    lines, beyond, below = [], 0, 0
    for n in deep:
        gaps = []
        for t in targets:
            gap, two_se = mean_difference(cell(base, t), cell(n, t))
            beyond += abs(gap) > two_se
            below += gap < -two_se
            gaps.append(f"{t} {gap:+.1f} ({paper.loc[n, t] - paper.loc[base, t]:+.1f})")
        lines.append(f"- {n}: " + ", ".join(gaps))
    out.append(f"Change from the base, ours (the paper's in brackets), points; {beyond} of {len(deep) * len(targets)} "
               f"changes lie beyond 2 SE of the difference, {below} of them below the base:")
    return " ".join(out) + "\n\n" + "\n".join(lines)


def architecture_figure(results: pd.DataFrame, experiments, profile: str = "lab"):
    """Tables 4-6 as a picture: Russian accuracy per seed (dots) and mean (line) against depth (Table 4, fixed
    parameters), heads (Table 5) and the share of the base's parameters (Table 6, one line per depth), the majority
    class dashed. None when nothing of Tables 4-6 is trained."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    frame = size_frame(results, experiments, profile=profile)
    if frame.empty:
        return None
    panels = (("Table 4", "layers", "depth at ~fixed parameters (layers)"),
              ("Table 5", "heads", "attention heads (12 layers)"),
              ("Table 6", "share_of_base", "share of the base's parameters"))
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), sharey=True)
    for ax, (table, col, label) in zip(axes, panels):
        d = frame[frame["tables"].str.contains(table) | (frame["experiment"] == "enfake-ru")].copy()
        d["accuracy"] *= 100
        if table == "Table 6":
            d["depth"] = d["layers"].astype(int).astype(str) + " layers"
            order = [f"{n} layers" for n in sorted(d["layers"].astype(int).unique())]
            sns.lineplot(data=d, x=col, y="accuracy", hue="depth", hue_order=order, marker="o", errorbar=None, ax=ax)
            sns.scatterplot(data=d, x=col, y="accuracy", hue="depth", hue_order=order, legend=False, alpha=0.4, s=18,
                            ax=ax)
            ax.set_xscale("log")
            ax.legend(fontsize=8, title=None)
        else:
            sns.lineplot(data=d, x=col, y="accuracy", marker="o", errorbar=None, color="C0", ax=ax)
            sns.scatterplot(data=d, x=col, y="accuracy", alpha=0.4, s=18, color="C0", ax=ax)
            ax.set_xscale("log", base=2)
        ax.axhline(100 * frame["majority"].iloc[0], color="grey", ls="--", lw=1)
        ax.set_title(table, fontsize=10)
        ax.set_xlabel(label)
    axes[0].set_ylabel("Russian accuracy (%), zero-shot")
    axes[0].annotate("majority class", (0.02, 100 * frame["majority"].iloc[0]), xycoords=("axes fraction", "data"),
                     xytext=(0, 3), textcoords="offset points", fontsize=8, color="grey")
    fig.tight_layout()
    return fig


def word_order_frame(results: pd.DataFrame) -> pd.DataFrame:
    """Table 2's cells per seed: the permuted share p, the target language and its test accuracy (section task), with
    the majority class (`majority`) of each; the paper's accuracy as rows with seed -1 and source "paper"."""
    plan = load_plan()
    names = [n for n, e in plan.experiments.items() if "Table 2" in e.table]
    acc = results[(results["metric"] == "accuracy") & (results["task"] == "sections")]
    paper = paper_numbers(NAME, "Table 2")
    paper = paper[paper["metric"] == "accuracy"].set_index("experiment")["mean"]
    rows = []
    for name in names:
        exp = plan.experiments[name]
        target = next(lang for lang in exp.test if lang != exp.finetune)
        mine = acc[(acc["experiment"] == name) & (acc["language"] == target)]
        major = acc[(acc["experiment"] == f"majority/{name}") & (acc["language"] == target)]["value"].mean()
        rows += [{"source": "ours", "experiment": name, "p": exp.permute, "language": target, "seed": int(seed),
                  "accuracy": 100 * v, "majority": 100 * major} for seed, v in zip(mine["seed"], mine["value"])]
        if name in paper.index:
            rows.append({"source": "paper", "experiment": name, "p": exp.permute, "language": target, "seed": -1,
                         "accuracy": float(paper[name]), "majority": float("nan")})
    return pd.DataFrame(rows)


def word_order_reading(results: pd.DataFrame) -> str:
    """Table 2 in words: for each target with results at p = 0 and p = 1, the mean ± sd at every share p trained, how
    far p = 0 stands above the majority class, and the fall from p = 0 to p = 1 against twice its standard error
    and the paper's fall. Where p = 0 itself is not above the majority class beyond 2 SE there is no transfer for
    the permutation to remove, and the reading says so. Empty until some target has both ends."""
    frame = word_order_frame(results)
    if frame.empty:
        return ""
    ours, paper = frame[frame["source"] == "ours"], frame[frame["source"] == "paper"]
    planned = len(load_plan().seeds)
    parts = []
    for lang, g in ours.groupby("language", sort=False):
        by_p = {p: x["accuracy"] for p, x in g.groupby("p")}
        if 0 not in by_p or 1 not in by_p:
            continue
        first, last, major = by_p[0], by_p[1], g["majority"].iloc[0]
        above, two_se_above = first.mean() - major, 2 * first.sem()
        fall, two_se_fall = mean_difference(last, first)
        steps = ", ".join(f"p = {p:g}: {seeds_text(x, planned)}" for p, x in sorted(by_p.items()))
        pp = paper[paper["language"] == lang].set_index("p")["accuracy"]
        theirs = f"; the paper's fall: {pp[0] - pp[1]:.1f}" if 0 in pp.index and 1 in pp.index else ""
        text = (f"- {lang}: {steps}. At p = 0 the model stands {abs(above):.1f} points "
                f"{'above' if above >= 0 else 'below'} the majority class ({major:.1f}; 2 SE {two_se_above:.1f}); "
                f"from p = 0 to p = 1 accuracy {'falls' if fall >= 0 else 'rises'} {abs(fall):.1f} points, "
                f"{'beyond' if fall > two_se_fall else 'within'} 2 SE ({two_se_fall:.1f}){theirs}.")
        if not above > two_se_above:
            text += " Without transfer at p = 0 there is none for the permutation to remove."
        parts.append(text)
    if not parts:
        return ""
    return "**Word order in the trained cells** (accuracy on the target, %, mean ± sd over seeds)\n\n" + "\n".join(parts)


def nsp_reading(results: pd.DataFrame, targets=("es", "hi", "ru")) -> str:
    """Table 8 in words: for each target X whose enfake-X and enfake-X/nsp both have results, what NSP changes (NSP
    minus no-NSP, points, beside 2 SE of that difference of means and the paper's change) in accuracy on X, in
    accuracy on Fake-English and in the Fake-English NER F1. Where the control enfake-X/single (no NSP, trained as
    the NSP cells are) has results, its accuracy on X splits that change: the NSP cell minus the control (the
    objective) and the control minus the base (the trainer). Empty until some target has both cells."""
    planned = len(load_plan().seeds)
    paper = paper_numbers(NAME, "Table 8").set_index(["experiment", "language", "metric"])["mean"]

    def cell(name, tested, metric):
        return cell_values(results, name, tested, metric)

    def difference(a, b, tested, metric="accuracy"):
        """(b minus a, 2 SE of that difference of means), points; the SE is NaN where a cell has one seed."""
        return mean_difference(cell(a, tested, metric), cell(b, tested, metric))

    def change(a, b, tested, metric="accuracy"):
        """b minus a, points, with its spread against 2 SE and the paper's b minus a where it has both."""
        d, two_se = difference(a, b, tested, metric)
        theirs = [paper.get((name, tested, metric)) for name in (b, a)]
        theirs = "" if None in theirs else f"; the paper {theirs[0] - theirs[1]:+.1f}"
        spread = "no SE from one seed" if two_se != two_se else \
            f"{'beyond' if abs(d) > two_se else 'within'} 2 SE, {two_se:.1f}"
        return f"{d:+.1f} ({spread}{theirs})"

    def split(base, nsp, control, t):
        """Which part of NSP's change on t the control puts beyond 2 SE: the objective (NSP minus the control), the
        trainer (the control minus the base), both or neither."""
        parts = (difference(control, nsp, t), difference(base, control, t))  # (the objective, the trainer)
        if any(two_se != two_se for _, two_se in parts):
            return "not told apart (a cell has one seed)"
        beyond = [abs(d) > two_se for d, two_se in parts]
        return {(True, False): "the objective (NSP minus the control beyond 2 SE, the control minus the base within)",
                (False, True): "the trainer (the control minus the base beyond 2 SE, NSP minus the control within)",
                (True, True): "both (each part beyond 2 SE)",
                (False, False): "neither part beyond 2 SE"}[tuple(beyond)]

    parts, splits = [], []
    for t in targets:
        base, nsp, control = f"enfake-{t}", f"enfake-{t}/nsp", f"enfake-{t}/single"
        if not len(cell(base, t, "accuracy")) or not len(cell(nsp, t, "accuracy")):
            continue
        said = [f"accuracy on {t} {seeds_text(cell(base, t, 'accuracy'), planned)} without NSP, "
                f"{seeds_text(cell(nsp, t, 'accuracy'), planned)} with: {change(base, nsp, t)}"]
        for tested, metric, what in (("enfake", "accuracy", "on Fake-English"), ("enfake", "f1", "Fake-English NER F1")):
            if len(cell(base, tested, metric)) and len(cell(nsp, tested, metric)):
                said.append(f"{what} {seeds_text(cell(base, tested, metric), planned)} without NSP, "
                            f"{seeds_text(cell(nsp, tested, metric), planned)} with: "
                            f"{change(base, nsp, tested, metric)}")
        if len(cell(control, t, "accuracy")):
            said.append(f"the control (no NSP, trained as the NSP cells are) "
                        f"{seeds_text(cell(control, t, 'accuracy'), planned)} on {t}: NSP minus the control "
                        f"{change(control, nsp, t)}, the control minus the base {change(base, control, t)}")
            splits.append(f"on {t}, {split(base, nsp, control, t)}")
        parts.append(f"- enfake-{t}: " + "; ".join(said) + ".")
    if not parts:
        return ""
    told = "" if not splits else ("\n\nBy the control, the change in target accuracy goes with: " + "; ".join(splits)
                                  + ".")
    return ("**What NSP changes in the trained cells** (NSP minus no-NSP, points; mean ± sd over seeds)\n\n"
            + "\n".join(parts) + told)


def word_order_figure(results: pd.DataFrame):
    """Table 2 as a picture: target accuracy against the share p of permuted word pieces, one line per target
    language; the paper's XNLI accuracy (left, 3 classes: chance 33.3 %) beside our section task (right: the mean
    over seeds as the line, each seed a dot, the majority class dashed). None until a cell with p > 0 is trained."""
    import matplotlib.pyplot as plt
    frame = word_order_frame(results)
    ours = frame[frame["source"] == "ours"] if len(frame) else frame
    if ours.empty or not (ours["p"] > 0).any():
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    colours = {lang: f"C{k}" for k, lang in enumerate(("es", "hi", "ru"))}
    for ax, source in ((left, "paper"), (right, "ours")):
        d = frame[frame["source"] == source]
        for lang, g in d.groupby("language", sort=False):
            mean = g.groupby("p")["accuracy"].mean()
            ax.plot(mean.index, mean.values, marker="o", color=colours[lang], label=lang)
            if source == "ours":
                ax.scatter(g["p"], g["accuracy"], color=colours[lang], alpha=0.4, s=18)
        chance = 100 / 3 if source == "paper" else ours["majority"].mean()
        ax.axhline(chance, color="grey", ls="--", lw=1)
        ax.annotate("chance" if source == "paper" else "majority class", (0.02, chance),
                    xycoords=("axes fraction", "data"), xytext=(0, 3), textcoords="offset points", fontsize=8,
                    color="grey")
        ax.set_xticks([0, 0.25, 0.5, 1])
        ax.set_xlabel("share p of word pieces permuted")
        ax.legend(fontsize=8, title="target")
    left.set_title("the paper: XNLI", fontsize=10)
    right.set_title("ours: section task, zero-shot", fontsize=10)
    left.set_ylabel("target accuracy (%)")
    fig.tight_layout()
    return fig


# The variants of Tables 7 and 8-10 that the chapters plot: (label, experiment; "{t}" is the target language)
FOUR_LANGUAGE_COLUMNS = [("base", "en-es-hi-ru")] + [
    (shape, f"en-es-hi-ru/{shape}") for shape in ("L16H1", "L16H3", "L24H1", "L24H3", "L36H1", "L36H3")]
INPUT_COLUMNS = [("base (WP)", "enfake-{t}"), ("NSP", "enfake-{t}/nsp"), ("lang-id", "enfake-{t}/langid"),
                 ("char", "enfake-{t}/char"), ("word", "enfake-{t}/word")]


def variants_figure(results: pd.DataFrame, columns, targets=("es", "hi", "ru")):
    """Accuracy on each target (one panel per target) of each variant in `columns` ((label, experiment), "{t}" in
    the experiment standing for the target): each seed a dot, the mean a bar across it, the majority class of the
    first column's experiment dashed. None when no variant has results."""
    import matplotlib.pyplot as plt
    acc = results[results["metric"] == "accuracy"] if len(results) else results
    if acc.empty:
        return None
    fig, axes = plt.subplots(1, len(targets), figsize=(3.6 * len(targets), 3.4), sharey=True, squeeze=False)
    plotted = False
    for ax, t in zip(axes[0], targets):
        for k, (label, pattern) in enumerate(columns):
            v = 100 * acc[(acc["experiment"] == pattern.format(t=t)) & (acc["language"] == t)]["value"].astype(float)
            if len(v):
                ax.scatter([k] * len(v), v, color=f"C{k}", alpha=0.5, s=18)
                ax.plot([k - 0.3, k + 0.3], [v.mean()] * 2, color=f"C{k}", lw=2)
                plotted = True
        major = acc[(acc["experiment"] == f"majority/{columns[0][1].format(t=t)}") & (acc["language"] == t)]["value"]
        if len(major):
            ax.axhline(100 * major.mean(), color="grey", ls="--", lw=1)
            ax.annotate("majority class", (0.02, 100 * major.mean()), xycoords=("axes fraction", "data"),
                        xytext=(0, 3), textcoords="offset points", fontsize=8, color="grey")
        ax.set_xticks(range(len(columns)), [label for label, _ in columns], rotation=30, fontsize=8)
        ax.set_title(f"target {t}", fontsize=10)
    axes[0][0].set_ylabel("accuracy on the target (%)")
    fig.tight_layout()
    if not plotted:
        plt.close(fig)
        return None
    return fig


def gate_table(results: pd.DataFrame) -> pd.DataFrame:
    """The pilot gate (`bbert.pilot_gate`: each pilot experiment's target dev accuracy, mean over its seeds, against
    the majority class; it passes at GATE_MARGIN) on the trained pilot cells, in %, with the seed count."""
    from .bbert import pilot_gate
    names = [n for n in experiments_of(load_plan(), "pilot") if n in set(results["experiment"])]
    if not names:
        return pd.DataFrame()
    keep = results["experiment"].isin(names + [f"majority/{n}" for n in names])
    gate = pilot_gate(results[keep])
    dev = results[keep & (results["metric"] == "dev_accuracy")]
    gate["seeds"] = [dev[(dev["experiment"] == e) & (dev["language"] == l)]["seed"].nunique()
                     for e, l in zip(gate["experiment"], gate["language"])]
    for col in ("dev_accuracy", "majority", "margin"):
        gate[col] = (100 * gate[col]).round(1)
    return gate


def gate_reading(gate: pd.DataFrame) -> str:
    """The gate's outcome in words: which pilot experiments pass and which fail."""
    if gate.empty:
        return ""
    fmt = lambda r: f"{r.experiment} ({r.margin:+.1f} points, {r.seeds} seeds)"  # noqa: E731
    passed = [fmt(r) for r in gate.itertuples() if r.passes]
    failed = [fmt(r) for r in gate.itertuples() if not r.passes]
    text = f"**The gate** ({100 * GATE_MARGIN:.0f} points above the majority class on the target's dev pairs). "
    if passed:
        text += f"Passes: {', '.join(passed)}. "
    if failed:
        text += f"Fails: {', '.join(failed)}" + (
            ": without a shared word piece, our base B-BERT does not transfer to that target."
            if all(r.startswith("enfake-") for r in failed) else ".")
    return text.strip()


def delta_table(results: pd.DataFrame, table: str) -> pd.DataFrame:
    """A table's Δ (Fake-English minus Russian accuracy, points; lower = more cross-lingual): the paper's beside ours
    (mean ± sd over seeds of each seed's difference; blank until a cell is trained)."""
    paper = paper_table(table, "delta")["ru"].rename("the paper")
    acc = results[(results["metric"] == "accuracy") & (results["task"] == "sections")] if len(results) else results
    planned = len(load_plan().seeds)
    ours = []
    for name in paper.index:
        rows = acc[acc["experiment"] == name]
        if {D.FAKE, "ru"} <= set(rows["language"]):
            ours.append(seeds_text(100 * seed_delta(rows), planned).replace(" ", "\u00a0"))
        else:
            ours.append("")
    return pd.DataFrame({"the paper": paper.map("{:.1f}".format), "ours": ours}, index=paper.index)
