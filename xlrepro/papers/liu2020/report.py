"""Chapter helpers for Liu et al. 2020: the chapters' common setup, where results go, the static runs, and
"pending" notes for GPU results."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from .run import TRAIN_COMMAND

PENDING = ("Pending the GPU run: the BERT models are not trained yet. Train them with `{cmd}` (resumable jobs of "
           "at most 9 minutes; about 30 GPU-minutes on one H100 for the four), then rerun this chapter.")


def results_folder(publish: bool, results=None, smoke: bool = False) -> Path:
    """`results` if given, book/results/liu2020 for the published run, else a folder under runs/ (never book/)."""
    from xlrepro.paths import runs_dir
    from xlrepro.results import results_dir

    if publish and smoke:
        raise ValueError("a smoke run (max_chapters set) never publishes into book/results")
    folder = Path(results) if results else results_dir("liu2020") if publish else \
        runs_dir() / "liu2020" / "lab" / ("results-smoke" if smoke else "results")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass
class ChapterSetup:
    """What every Liu et al. chapter starts from (`chapter_setup`): its languages, results folder, plan, mBERT
    tokenizer, the small corpus with its test dictionaries, and `static_mrr` for the static runs."""
    langs: tuple[str, ...] = field(metadata={"help": "the chapter's languages (the parameter, else all 11)"})
    smoke: bool = field(metadata={"help": "a smoke run: max_chapters, dim or epochs set (never published)"})
    out: Path = field(metadata={"help": "where the chapter writes its CSVs (`results_folder`)"})
    plan: object = field(metadata={"help": "the lab plan (`plan.load_plan`)"})
    tok: object = field(metadata={"help": "mBERT's tokenizer"})
    small: dict = field(metadata={"help": "the small corpus, tokenised: language -> token streams"})
    counts: dict = field(metadata={"help": "language -> Counter of the small corpus's tokens"})
    dictionaries: dict = field(metadata={"help": "language -> test dictionary pairs (every language but en)"})
    dict_table: pd.DataFrame = field(metadata={"help": "one row per language: pairs, or why it has none"})
    overrides: dict = field(metadata={"help": "the smoke parameters that `static_config` applies to each static run"})
    have_gpu: bool = field(metadata={"help": "the GPU run's files are there (`check_gpu_results`)"})
    static_mrr: Callable = field(metadata={"help": "static run of the plan -> its MRR frame, or None where it is "
                                                   "GloVe not trained yet (a GPU job)"})


def chapter_setup(profile: str = "lab", languages=None, max_chapters: int | None = None, dim: int | None = None,
                  epochs: int | None = None, results=None, gpu_results=None, publish: bool = False) -> ChapterSetup:
    """The setup cell of every Liu et al. chapter, from its parameters cell: checks the profile and languages,
    chooses the results folder, tokenises the small corpus with mBERT's tokenizer and builds (or reads from the
    cache) its test dictionaries; `static_mrr` trains (or reads) one static run of the plan and scores it.

    Only the lab profile runs here: "paper" (Wikipedia, MUSE, XNLI) needs the network, and raises ConfigError."""
    from xlrepro.config import ConfigError, check_profile
    from xlrepro.data.mbert_vocab import mbert_tokenizer

    from . import corpora
    from . import lab as L
    from .plan import load_plan, static_config
    from .static import run_dir, train_static

    check_profile(profile)
    if profile == "paper":
        raise ConfigError("the paper profile needs Wikipedia, MUSE and XNLI (network); use profile='lab'")
    langs = tuple(languages or corpora.LANGUAGES)
    corpora.check_languages(langs)
    smoke = max_chapters is not None or dim is not None or epochs is not None
    out = results_folder(publish, results, smoke=smoke)
    plan, tok = load_plan(), mbert_tokenizer()
    small = corpora.tokenized_corpus("small", langs, tokenizer=tok, max_chapters=max_chapters)
    counts = L.corpus_counts(small)
    dictionaries, dict_table = L.cached_dictionaries(plan, counts, tok, [l for l in langs if l != "en"])
    overrides = {k: v for k, v in {"dim": dim, "epochs": epochs, "max_chapters": max_chapters,
                                   "languages": langs if languages else None}.items() if v is not None}

    def static_mrr(run):
        """MRR of one static run of the plan, or None where it is GloVe not yet trained (a GPU job)."""
        cfg = static_config(run, **overrides)
        if cfg.model == "glove" and not (run_dir(cfg) / "training.json").exists() and not smoke:
            return None
        emb = train_static(cfg)
        return L.static_retrieval(L.static_name(run), emb, dictionaries, plan)

    have_gpu = check_gpu_results(gpu_results, publish)  # a published run never reads the smoke run's files
    return ChapterSetup(langs, smoke, out, plan, tok, small, counts, dictionaries, dict_table, overrides, have_gpu,
                        static_mrr)


def bert_pending(name: str = "") -> str:
    return PENDING.format(cmd=TRAIN_COMMAND + (f" --models {name}" if name else ""))


def bert_trained(name: str) -> bool:
    from .run import bert_configs
    return (bert_configs()[name].folder() / "training.json").exists()


def mrr_table(df: pd.DataFrame) -> pd.DataFrame:
    """experiment x language: 'MRR [low, high]'."""
    wide = df.pivot_table(index=["experiment", "language"], columns="metric", values="value", aggfunc="first")
    cell = wide.apply(lambda r: f"{r['mrr']:.3f} [{r['mrr_low']:.3f}, {r['mrr_high']:.3f}]", axis=1)
    return cell.unstack("language")


# ---- the GPU evaluation's files (`xlrepro train liu2020 --part evaluate`, written into gpu_results_dir()) -------------

GPU_COMMAND = ("xlrepro reproduce --only liu2020 (on a GPU machine: the BERTs' training, then their evaluation; "
               "resumable, run it again until every step is done)")


def gpu_results_dir(root=None) -> Path:
    """Where the chapters read the GPU evaluation: runs/liu2020/lab/gpu-results (or `root`)."""
    from xlrepro.paths import runs_dir
    return Path(root) if root else runs_dir() / "liu2020" / "lab" / "gpu-results"


def gpu_pending(what: str) -> str:
    return f"**{what}**: pending the GPU run (`{GPU_COMMAND}`)."


def bert_retrieval_results(names, root=None) -> pd.DataFrame | None:
    """MRR per layer of the BERTs `names` that the GPU run evaluated (None if none)."""
    folder = gpu_results_dir(root) / "retrieval"
    frames = [pd.read_csv(folder / f"{n}.csv") for n in names if (folder / f"{n}.csv").exists()]
    return pd.concat(frames, ignore_index=True) if frames else None


def transfer_results(root=None) -> pd.DataFrame | None:
    """Zero-shot accuracy, long: experiment (bert-<model> or <static run>), seed, metric accuracy, language."""
    import json
    folder = gpu_results_dir(root) / "transfer"
    rows = []
    for f in sorted(folder.glob("*.json")) if folder.exists() else []:
        r = json.loads(f.read_text())
        if r["mode"] not in ("all", "static"):
            continue
        exp = f"bert-{r['model']}" if r["mode"] == "all" else r["model"]
        rows += [{"experiment": exp, "seed": r["seed"], "metric": "accuracy", "value": v, "language": l}
                 for l, v in r["accuracy"].items()]
    return pd.DataFrame(rows) if rows else None


def choose_alpha(by_alpha: dict) -> str:
    """The alpha (key) with the best dev accuracy; ties go to the alpha nearest 0, then the smaller one."""
    return min(by_alpha, key=lambda a: (-by_alpha[a]["dev"], abs(float(a)), float(a)))


def table4(root=None, all_layers: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """L Table 4 per seed and language: finetune-all (the zero-shot run of big-w512), finetune-half (bottom half
    frozen, alpha 0) and finetune-half+MDS (alpha chosen on the target's dev split; its alpha in metric alpha)."""
    import json
    folder = gpu_results_dir(root) / "transfer"
    rows = []
    for f in sorted(folder.glob("*-half-s*.json")) if folder.exists() else []:
        r = json.loads(f.read_text())
        for lang, by_alpha in r["accuracy"].items():
            a = choose_alpha(by_alpha)
            base = {"seed": r["seed"], "language": lang}
            rows += [{**base, "experiment": "finetune-half", "metric": "accuracy", "value": by_alpha["0.0"]["test"]},
                     {**base, "experiment": "finetune-half+MDS", "metric": "accuracy", "value": by_alpha[a]["test"]},
                     {**base, "experiment": "finetune-half+MDS", "metric": "alpha", "value": float(a)}]
    if not rows:
        return None
    out = pd.DataFrame(rows)
    if all_layers is not None:
        big = all_layers[all_layers["experiment"] == "bert-big-w512"].assign(experiment="finetune-all")
        out = pd.concat([big, out], ignore_index=True)
    return out


# ---- tables beside the paper's (xlrepro.tables.show displays them) ----------------------------------------------

def stand_in_names(stand_ins: dict[str, str]):
    """A function: our direction or language -> the paper's ('en-ru' -> 'en-el' where ru stands in for el)."""
    def paper_name(x: str) -> str:
        return "-".join(stand_ins.get(p, p) for p in str(x).split("-"))
    return paper_name


def labelled(x: str, stand_ins: dict[str, str]) -> str:
    """'en-ru' -> 'en-ru (for en-el)' where a language stands in for one of the paper's."""
    paper = stand_in_names(stand_ins)(x)
    return x if paper == x else f"{x} (for {paper})"


def pos_table(pos: pd.DataFrame, paper: pd.DataFrame, model: str = "bert-big-w512") -> pd.DataFrame:
    """S Table 1: class x language, 'ours (paper's)' MRR with the word count; avg = mean over our languages (the
    paper's over de es ar fr ru tr)."""
    from xlrepro.tables import paper_number

    from .pos import CLASSES
    sub = pos[pos["experiment"].str.startswith(model + "/")].assign(cls=lambda d: d["experiment"].str.split("/").str[1])
    mrr = sub[sub["metric"] == "mrr"].set_index(["cls", "language"])["value"]
    words = sub[sub["metric"] == "words"].set_index(["cls", "language"])["value"]
    ref = paper.assign(cls=paper["experiment"].str.split("/").str[1]).set_index(["cls", "language"])["mean"]
    langs = [l for l in dict.fromkeys(sub["language"]) if l != "avg"] + ["avg"]
    out = {}
    for lang in langs:
        col = []
        for c in CLASSES:
            v, p = mrr.get((c, lang)), ref.get((c, lang))
            n = words.get((c, lang))
            cell = "–" if v is None or pd.isna(v) else f"{v:.3f}"
            cell += f" ({paper_number(p, 3)})" if p is not None and not pd.isna(p) else ""
            cell += f" n={int(n)}" if n is not None and not pd.isna(n) else ""
            col.append(cell)
        out[lang] = col
    return pd.DataFrame(out, index=pd.Index(CLASSES, name="class"))


def table2(grid: pd.DataFrame, paper: pd.DataFrame, stand_ins: dict[str, str]) -> pd.DataFrame:
    """L Table 2 per direction, ours (paper's): the best BLEU-1 over layers and alpha in {1, 2, 3} (the paper's
    search), its layer and alpha, the convert rate at layer 10 for alpha 1, 2, 3 and BLEU-1 at layer 11, alpha 3
    (layers "of 12", scaled to our depth as the claims do)."""
    from xlrepro.claims import resolve_layers
    from xlrepro.tables import paper_number

    g = grid.assign(alpha=grid["experiment"].astype(float))
    depth = int(g["layer"].max())
    l10, l11 = (int(resolve_layers(f"{k} of 12", g["layer"])[0]) for k in (10, 11))
    name = stand_in_names(stand_ins)
    ref = paper.set_index(["language", "metric"])["mean"]
    rows = []
    for d in dict.fromkeys(g["language"]):
        sub = g[g["language"] == d]
        bl = sub[(sub["metric"] == "bleu1") & sub["alpha"].isin([1.0, 2.0, 3.0])]
        best = bl.loc[bl["value"].idxmax()] if not bl.empty else None

        def at(metric, layer, alpha):
            v = sub[(sub["metric"] == metric) & (sub["layer"] == layer) & (sub["alpha"] == alpha)]["value"]
            return float(v.iloc[0]) if len(v) else None

        def cell(v, key, digits=2):
            p = ref.get((name(d), key))
            ours = "–" if v is None else f"{v:.{digits}f}"
            return ours if p is None or pd.isna(p) else f"{ours} ({paper_number(p, digits)})"

        rows.append({"direction": labelled(d, stand_ins),
                     "best BLEU-1": cell(None if best is None else best["value"], "best_bleu1"),
                     "best layer": cell(None if best is None else best["layer"], "best_layer", 0),
                     "best alpha": cell(None if best is None else best["alpha"], "best_alpha", 1),
                     f"BLEU-1, layer {l11}, α 3": cell(at("bleu1", l11, 3.0), "bleu1_l11_a3"),
                     **{f"convert rate, layer {l10}, α {a}": cell(at("convert_rate", l10, float(a)), f"cr_l10_a{a}", 3)
                        for a in (1, 2, 3)}})
    out = pd.DataFrame(rows).set_index("direction")
    out.attrs["depth"] = depth
    return out


def table3(vocab: pd.DataFrame, paper: pd.DataFrame, stand_ins: dict[str, str]) -> pd.DataFrame:
    """L Table 3: |V_lang| and |V_en ∩ V_lang| of our big corpus (the paper's m-BERT counts in parentheses)."""
    name = stand_in_names(stand_ins)
    ref = paper.set_index(["language", "metric"])["mean"]
    rows = []
    for _, r in vocab.iterrows():
        row = {"language": labelled(r["language"], stand_ins)}
        for m, label in (("tokens", "|V_lang|"), ("shared_with_en", "|V_en ∩ V_lang|")):
            p = ref.get((name(r["language"]), m))
            row[label] = f"{int(r[m])}" + ("" if p is None or pd.isna(p) else f" ({int(p)})")
        rows.append(row)
    return pd.DataFrame(rows).set_index("language")


TABLE4_ROWS = {"finetune-all": "finetune-all", "finetune-half": "finetune-last6", "finetune-half+MDS": "finetune-last6+MDS"}


def table4_view(t4: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """L Table 4: accuracy in percent, mean ± std over seeds (paper's in parentheses), per language and avg (the
    mean over our target languages, en left out as in the paper); the alpha chosen on dev as a last row."""
    from xlrepro.results import fmt
    from xlrepro.tables import paper_number
    ref = paper.set_index(["experiment", "language", "metric"])["mean"]
    langs = list(dict.fromkeys(t4["language"]))
    rows = {}
    for exp, theirs in TABLE4_ROWS.items():
        acc = t4[(t4["experiment"] == exp) & (t4["metric"] == "accuracy")]
        if acc.empty:
            continue
        per_seed = acc.pivot_table(index="seed", columns="language", values="value") * 100
        per_seed["avg"] = per_seed[[l for l in per_seed.columns if l != "en"]].mean(axis=1)
        row = {}
        for l in langs + ["avg"]:
            if l not in per_seed:
                row[l] = "–"
                continue
            s = per_seed[l].dropna()
            p = ref.get((f"mBERT/{theirs}", l, "accuracy"))
            ours = fmt(s.mean(), s.std() if len(s) > 1 else None, 1)
            row[l] = ours if p is None or pd.isna(p) else f"{ours} ({paper_number(p, 1)})"
        rows[f"{exp} (paper: {theirs})"] = row
    alpha = t4[(t4["experiment"] == "finetune-half+MDS") & (t4["metric"] == "alpha")]
    if not alpha.empty:
        a = alpha.groupby("language")["value"].agg(lambda s: "/".join(f"{v:g}" for v in s))
        rows["alpha chosen on dev (per seed)"] = {l: a.get(l, "–") for l in langs}
    return pd.DataFrame(rows).T


def samples_table(samples: dict, stand_ins: dict[str, str], per_direction: int = 1) -> pd.DataFrame:
    """L Table 1: source, MDS output and the parallel verse at each direction's best layer and alpha."""
    rows = []
    for d, s in samples.items():
        for x in s["samples"][:per_direction]:
            rows.append({"direction": labelled(d, stand_ins), "layer": str(s["layer"]), "alpha": f"{s['alpha']:g}",
                         "BLEU-1": f"{s['bleu1']:.2f}", "source": x["source"], "MDS output": x["output"],
                         "reference": x["reference"]})
    return pd.DataFrame(rows).set_index("direction") if rows else pd.DataFrame()


def static_retrieval_results(names, root=None) -> pd.DataFrame | None:
    """MRR of the static runs `names` that the GPU evaluation scored (GloVe: its vectors stay on the node)."""
    folder = gpu_results_dir(root) / "retrieval"
    frames = [pd.read_csv(folder / f"{n}.csv", dtype={"language": str}) for n in names if (folder / f"{n}.csv").exists()]
    return pd.concat(frames, ignore_index=True) if frames else None


def gpu_run_record(root=None) -> pd.DataFrame | None:
    """The GPU run as a table: one row per BERT (its shape, steps, tokens per step, first and last loss, seconds,
    device) and one per evaluation job (`xlrepro train liu2020 --part evaluate`: wall seconds, GPUs); None where there is
    nothing."""
    import json
    folder = gpu_results_dir(root)
    rows = []
    for f in sorted((folder / "training").glob("*/training.json")) if (folder / "training").exists() else []:
        t, c = json.loads(f.read_text()), json.loads((f.parent / "config.json").read_text())
        m = c["model"]
        losses = t.get("losses") or [[None, None]]
        rows.append({"what": f"BERT {f.parent.name}", "model": f"{m['layers']} × {m['hidden']} ({m['name']})",
                     "steps": str(t["steps"]), "tokens per step": str(t.get("tokens_per_step", "–")),
                     "MLM loss, first → last": f"{losses[0][1]:.2f} → {losses[-1][1]:.2f}" if losses[0][1] else "–",
                     "seconds": str(round(t["seconds"])), "device": t.get("device", "–")})
    for f in sorted((folder / "training" / "static").glob("*/training.json")) \
            if (folder / "training" / "static").exists() else []:
        t, c = json.loads(f.read_text()), json.loads((f.parent / "config.json").read_text())["config"]
        rows.append({"what": f"{c['model']} {c['size']}-w{c['window']}", "model": f"{c['dim']}-d, {c['epochs']} passes",
                     "seconds": str(round(t["seconds"])), "device": t.get("device", "–")})
    for f in wall_records(folder):
        w = json.loads(f.read_text())
        rows.append({"what": f"job: {w['phase']}" + (f" ({f.stem.rsplit('-', 1)[1]})" if f.stem.count("-") > 1 else ""),
                     "seconds": str(w["wall_seconds"]), "device": ", ".join(w["gpus"]) or "cpu",
                     "model": f"exit code {w['exit_code']}"})
    return pd.DataFrame(rows).set_index("what").fillna("–") if rows else None


def wall_records(folder: Path) -> list[Path]:
    """The evaluation jobs' records in the order they ran: wall-<phase>-<unix start>.json (one per
    call), or the older wall-<phase>.json (one per phase: the last call's)."""
    def order(f: Path) -> tuple[int, int]:
        tail = f.stem.rsplit("-", 1)[1]
        return (int(tail), 0) if tail.isdigit() else (0, 0 if f.stem == "wall-train" else 1)

    return sorted(folder.glob("wall-*.json"), key=order)


def training_devices(root=None) -> str:
    """The GPUs of the GPU run, for the chapter's run record: the machines of the calls' records (e.g.
    "2 x NVIDIA H200"), else the device names of the BERTs' training records; "none recorded" where there are none."""
    import json
    folder = gpu_results_dir(root)
    names = []
    for f in wall_records(folder):
        gpus = json.loads(f.read_text()).get("gpus") or []
        names.append(", ".join(f"{gpus.count(n)} x {n}" for n in dict.fromkeys(gpus)))
    if not any(names):
        for f in sorted((folder / "training").glob("*/training.json")) if (folder / "training").exists() else []:
            names.append(json.loads(f.read_text()).get("device", ""))
    names = [n for n in dict.fromkeys(names) if n]
    return "; ".join(names) or "none recorded"


def check_gpu_results(root=None, publish: bool = False) -> bool:
    """True where the GPU run's files are there. A published run refuses results of the smoke models (the tiny
    CPU BERTs of `xlrepro train liu2020 --part bert --smoke`): smoke numbers never go into book/."""
    import json
    folder = gpu_results_dir(root)
    smoke = [f.parent.name for f in (folder / "training").glob("*/config.json")
             if json.loads(f.read_text())["model"]["name"] == "smoke"] if (folder / "training").exists() else []
    if publish and smoke:
        raise ValueError(f"{folder} holds the smoke run's results (models {', '.join(sorted(smoke))}): a published "
                         "run reads the GPU run's, never the smoke's")
    return folder.exists() and any(folder.iterdir())


def accuracy_table(transfer: pd.DataFrame, experiments=None) -> pd.DataFrame:
    """experiment x language: zero-shot accuracy 'mean ± std' over seeds (and the seed count)."""
    from xlrepro.results import fmt
    df = transfer[transfer["metric"] == "accuracy"]
    if experiments is not None:
        df = df[df["experiment"].isin(experiments)]
    g = df.groupby(["experiment", "language"], sort=False)["value"]
    cell = g.agg(lambda s: fmt(s.mean(), s.std() if len(s) > 1 else None, 3))
    table = cell.unstack("language")
    table["seeds"] = df.groupby("experiment", sort=False)["seed"].nunique()
    return table


def paper_prose(tables) -> pd.DataFrame:
    """The paper's figures that survive as sentences (reference.csv rows of kind 'claim'): figure, version, words."""
    from xlrepro.reference import paper_numbers
    ref = paper_numbers("liu2020")
    ref = ref[ref["table"].isin(tables)]
    return ref.assign(version=ref["version"].map({"S": "short", "L": "long"}))[
        ["table", "version", "description", "note"]].rename(columns={"table": "figure", "description": "the paper says"}
                                                           ).set_index(["figure", "version"])


def pretraining_loss(root=None) -> pd.DataFrame | None:
    """Each BERT's MLM loss per language beside the language's unigram entropy (nats), long: experiment
    (bert-<model>), seed -1, metric (mlm_loss | unigram_entropy), language, value (`evaluate.run_loss`)."""
    folder = gpu_results_dir(root) / "loss"
    files = sorted(folder.glob("*.csv")) if folder.exists() else []
    if not files:
        return None
    df = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    return df.assign(seed=-1)[["experiment", "seed", "metric", "language", "value"]]


def loss_table(loss: pd.DataFrame) -> pd.DataFrame:
    """Language x (each BERT's MLM loss, the unigram entropy, the base model's distance below it), nats."""
    wide = loss[loss["metric"] == "mlm_loss"].pivot_table(index="language", columns="experiment", values="value")
    ent = loss[loss["metric"] == "unigram_entropy"]
    base = ent[ent["experiment"] == "bert-big-w512"]  # the big corpus's (the small one's differs a little)
    entropy = (base if len(base) else ent).groupby("language")["value"].first()
    wide = wide[[f"bert-{m}" for m in ("small-w512", "big-w512", "small-w20", "big-w20") if f"bert-{m}" in wide]]
    out = wide.rename(columns=lambda e: e.removeprefix("bert-")).assign(**{"unigram entropy": entropy})
    if "big-w512" in out:
        out["big-w512 below unigram"] = out["unigram entropy"] - out["big-w512"]
    return out.round(2)


def training_curves(root=None) -> pd.DataFrame | None:
    """Each BERT's training loss (its record's `losses`: [step, loss] pairs), long: experiment, step, value."""
    import json
    folder = gpu_results_dir(root) / "training"
    rows = []
    for f in sorted(folder.glob("*/training.json")) if folder.exists() else []:
        rows += [{"experiment": f"bert-{f.parent.name}", "step": int(s), "value": float(v)}
                 for s, v in json.loads(f.read_text()).get("losses", [])]
    return pd.DataFrame(rows) if rows else None


def pilot_curves(folder) -> pd.DataFrame | None:
    """The training loss of every pilot whose curve is in `folder` (book/results/liu2020/pilot*/curve.csv), long:
    pilot (its shape and peak learning rate), step, value."""
    import json
    rows = []
    for f in sorted(Path(folder).glob("pilot*/curve.csv")):
        info = json.loads((f.parent / "pilot.json").read_text()) if (f.parent / "pilot.json").exists() else None
        df = pd.read_csv(f)
        df = df[df["metric"] == "train_loss"]
        if info is not None:
            m = info["config"]["model"]
            label = f"{m['layers']} x {m['hidden']}, lr {m['lr']:g}"
        else:  # a curve without its record: read the shape from the experiment name
            label = df["experiment"].iloc[0]
        rows.append(pd.DataFrame({"pilot": label, "step": df["step"], "value": df["value"]}))
    return pd.concat(rows, ignore_index=True) if rows else None


@dataclass(frozen=True)
class Baselines:
    """Per-language baselines for the figures (`baselines.csv`): the exact chance MRR with identical spellings
    ranked first, and the majority class of the zero-shot test pairs; empty where the file is missing."""
    chance: dict = field(default_factory=dict, metadata={"help": "language -> chance MRR (chance-identical)"})
    majority: dict = field(default_factory=dict, metadata={"help": "language -> majority-class accuracy"})


def baselines(results=None) -> Baselines:
    from xlrepro.results import results_dir
    path = Path(results or results_dir("liu2020")) / "baselines.csv"
    if not path.exists():
        return Baselines()
    df = pd.read_csv(path)

    def level(exp, metric):
        return df[(df["experiment"] == exp) & (df["metric"] == metric)].set_index("language")["value"].to_dict()
    return Baselines(chance=level("chance-identical", "mrr"), majority=level("majority-test", "accuracy"))


def publish_gpu_records(root, out) -> list[Path]:
    """The GPU run's training records, one per BERT, into ``<out>/gpu_run/<model>-training.json`` (its
    training.json with its config.json under ``config``): what the engineering appendix's cost table reads, and the
    published trace of the run the chapters show. Returns the files written (none where the run is not there)."""
    import json

    from xlrepro import atomic
    folder = gpu_results_dir(root) / "training"
    written = []
    for rec in sorted(folder.glob("*/training.json")) if folder.exists() else []:
        config = rec.parent / "config.json"
        record = {"experiment": f"bert-{rec.parent.name}", **json.loads(rec.read_text()),
                  "config": json.loads(config.read_text()) if config.exists() else None}
        path = Path(out) / "gpu_run" / f"{rec.parent.name}-training.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_json(path, record)
        written.append(path)
    return written
