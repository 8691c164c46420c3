"""The Dufter & Schütze engine studies: data parallel scaling, engine probes and the equivalence of engines.

They read the run files copied to `book/results/bench/` (see the setup chapter).
"""
from __future__ import annotations

from pathlib import Path

from xlrepro.paths import repo_root
from xlrepro.results import results_dir

from .config import PAPER


# ------------------------------------------------------------------------------------------ data parallel
DDP_RUNS = {  # folder under book/results/bench/ddp -> (label, GPUs)
    "1gpu-graphs": ("1 GPU, CUDA graphs (the published model)", 1),
    "1gpu-eager": ("1 GPU, eager (XLREPRO_CUDA_GRAPHS=0)", 1),
    "2gpu-ddp-eager": ("2 GPUs, torchrun data parallel (eager)", 2),
}


def ddp_summary(folder: Path | None = None):
    """The 2-GPU scaling run of BERT-base (Dufter & Schütze model 15, seed 0, the same global batch of 256) against
    one GPU: (table of seconds, steps/s, speed-up and scaling efficiency against the eager 1-GPU run, final metrics;
    long frame of the Figure 6 checkpoints of each run). Reads the run files copied to book/results/bench/ddp."""
    import json

    import pandas as pd


    folder = Path(folder or repo_root() / "book" / "results" / "bench" / "ddp")
    rows, curves = [], []
    for name, (label, gpus) in DDP_RUNS.items():
        if not (folder / name / "timing.json").exists():
            continue
        timing = json.loads((folder / name / "timing.json").read_text())
        metrics = json.loads((folder / name / "metrics.json").read_text())["metrics"]
        rows.append({"run": label, "gpus": gpus, "device": timing["device"], "steps": timing["steps"],
                     "train_seconds": timing["train_seconds"], "steps_per_second": timing["steps_per_second"],
                     **{k: metrics[k] for k in ("ppl_train", "ppl_dev", "mu")}})
        for point in json.loads((folder / name / "curve.json").read_text()):
            curves += [{"run": label, "step": point["step"], "metric": k, "value": point[k]}
                       for k in ("ppl_train", "ppl_dev", "mu")]
    table = pd.DataFrame(rows)
    if len(table):
        eager = table.loc[table["run"] == DDP_RUNS["1gpu-eager"][0], "steps_per_second"]
        if len(eager):
            table["speed-up vs 1 GPU eager"] = table["steps_per_second"] / float(eager.iloc[0])
            table["scaling efficiency"] = table["speed-up vs 1 GPU eager"] / table["gpus"]
    return table, pd.DataFrame(curves)


# ------------------------------------------------------------------------------------------ fused, compiled stacks
VMAP = "vmap / HF forward, CUDA graphs"
ONE_GRAPH = "fused + torch.compile as one graph, SDPA, CUDA graphs"
REGIONAL_SDPA = "fused + regional compile, SDPA, CUDA graphs"
REGIONAL_MATH = "fused + regional compile, attention spelled out, CUDA graphs"
REGIONAL_AUTO = "fused + regional compile, attention spelled out (1 head) or SDPA, CUDA graphs"
# file under book/results/bench/engine -> (what the GPU run was, engine of each variant of the speed probe
# (`python -m xlrepro.papers.dufter2020.speed_probe`) as the code stood at that run: "bf16+compile" meant one graph with SDPA until regional compilation came)
ENGINE_PROBES = {
    "vmap_static_compile_h200.json": ("vmap + torch.compile, one compile per width (first try)",
                                      {"bf16": VMAP, "fp32": "same, float32",
                                       "bf16+compile": "vmap + torch.compile per width, CUDA graphs"}),
    "small_h200_first.json": ("fused + compile, first machine", {"bf16": VMAP, "bf16+compile": ONE_GRAPH}),
    "small_h200.json": ("fused + compile, cold compile cache", {"bf16": VMAP, "bf16+compile": ONE_GRAPH}),
    "base_h200.json": ("fused + compile, compile cache warm from an earlier run",
                       {"bf16": VMAP, "bf16+compile": ONE_GRAPH}),
    "regional_h200.json": ("regional compile, cold cache (H200 probe A)", {"bf16+compile": REGIONAL_SDPA}),
    "full_h200.json": ("one-graph compile, cold cache (same H200 as probe A)",
                       {"bf16+compile-full": ONE_GRAPH}),
    "attention_h200.json": ("attention spelled out vs SDPA, regional compile (H200 probe B)",
                            {"bf16+compile": REGIONAL_MATH, "bf16+compile+sdpa": REGIONAL_SDPA}),
    # H100 (80 GB): a stack of 50 small models ran out of memory (not a row); the default attention ("auto")
    "h100_small10.json": ("H100, regional compile, stack of 10", {"bf16+compile": REGIONAL_AUTO}),
    "h100.json": ("H100, regional compile, stack of 25", {"bf16+compile": REGIONAL_AUTO}),
}


def engine_summary(folder: Path | None = None):
    """Steady-state step times on the lab corpus (`python -m xlrepro.papers.dufter2020.speed_probe`): the vmap stacks against the fused,
    compiled ones, with the seconds spent on warm-up and compiling before the timed steps."""
    import json

    import pandas as pd


    folder = Path(folder or repo_root() / "book" / "results" / "bench" / "engine")
    rows = []
    for name, (note, engines) in ENGINE_PROBES.items():
        if (folder / name).exists():
            rows += [{**r, "probe": note, "engine": engines.get(r["variant"], r["variant"])}
                     for r in json.loads((folder / name).read_text())["rows"]]
    return pd.DataFrame(rows)


EQUIVALENCE_RUNS = {  # folder under book/results/bench/equivalence -> engine
    "vmap-grid": "vmap stacks of 10-20 (the grid published before the fused engine)",
    "alone": "one by one (a stack of one: HF's own forward)",
    "fused": "fused + compiled stack of 20",
    "fused-shared-gpu": "fused + compiled stack of 10 (GPU shared)",
}


PUBLISHED_ENGINE = "published: fused + regional compile, stacks of 5-25"
# The reference of the engine comparisons: every other equivalence run trained on the same corpus, for the same
# 7,000 updates, with PyTorch's generator for masks and dropout. The published grid came later (the corpus split at
# clauses, 9,100 updates, each model's own counter-based random streams), so it differs in more than the engine.
VMAP_ENGINE = EQUIVALENCE_RUNS["vmap-grid"]


def equivalence_checks(eq, metrics=("ppl_train", "ppl_dev", "mu"), reference: str = VMAP_ENGINE,
                       engines=None):
    """Each engine's seeds against the `reference` engine's seeds of the same model and metric: the difference of
    means, the reference's spread over seeds, whether the difference is within 2 of those std, and Welch's t-test
    p-value (`scipy.stats.ttest_ind`, unequal variances; NaN with fewer than 2 seeds on a side). engines: those to
    compare (default: every other engine but the published grid, which differs in more than the engine). With many
    comparisons, about 5% fall below p = 0.05 by chance alone."""
    import pandas as pd
    from scipy.stats import ttest_ind

    eq = eq[eq["metric"].isin(metrics)]
    ref = eq[eq["engine"] == reference]
    if engines is None:
        engines = [e for e in dict.fromkeys(eq["engine"]) if e not in (reference, PUBLISHED_ENGINE)]
    rows = []
    for (exp, engine, metric), g in eq[eq["engine"].isin(engines)].groupby(["experiment", "engine", "metric"]):
        p = ref.loc[(ref["experiment"] == exp) & (ref["metric"] == metric), "value"]
        if p.empty:
            continue
        diff, std = g["value"].mean() - p.mean(), p.std()
        welch = ttest_ind(g["value"], p, equal_var=False).pvalue if min(len(g), len(p)) >= 2 else float("nan")
        rows.append({"experiment": exp, "engine": engine, "metric": metric, "seeds": len(g), "difference": diff,
                     "reference seed std": std, "within 2 std": bool(abs(diff) <= 2 * std), "welch p": welch})
    return pd.DataFrame(rows, columns=["experiment", "engine", "metric", "seeds", "difference", "reference seed std",
                                       "within 2 std", "welch p"])


def equivalence_reading(checks) -> str:
    """The engine comparisons in words: how many means lie within 2 reference std, how many Welch tests fall below
    0.05 against the number chance gives, and which."""
    tested = checks["welch p"].notna()
    low = checks[checks["welch p"] < 0.05]
    text = (f"{int(checks['within 2 std'].sum())} of {len(checks)} engine means lie within 2 seed std of the "
            f"reference's; {len(low)} of {int(tested.sum())} Welch tests give p < 0.05, against about "
            f"{0.05 * tested.sum():.1f} by chance alone")
    if len(low):
        text += ": " + "; ".join(f"model {r['experiment']}, {r['metric']}, {r['engine']} ({r['difference']:+.3g}, "
                                 f"p = {r['welch p']:.3f})" for _, r in low.iterrows())
    return text + "."


def published_shift(eq, metrics=("ppl_train", "ppl_dev", "mu")) -> str:
    """What separates the published grid from the vmap grid, metric by metric over the models both trained: the
    range of the difference of means (published minus vmap) and on how many models it lies beyond 2 vmap seed std."""
    checks = equivalence_checks(eq, metrics, reference=VMAP_ENGINE, engines=[PUBLISHED_ENGINE])
    parts = []
    for metric in metrics:
        c = checks[checks["metric"] == metric]
        if len(c):
            parts.append(f"{metric} {c['difference'].min():+.3g} to {c['difference'].max():+.3g} "
                         f"(beyond 2 std on {int((~c['within 2 std']).sum())} of {len(c)} models)")
    return "; ".join(parts)


def equivalence_summary(published: Path | list[Path] | None = None, folder: Path | None = None):
    """Final metrics of the same (model, seed) trained by different engines, beside the published run's
    (`book/results/dufter2020/table1.csv`: BERT-small in fused, compiled stacks of 5-25 on two GPUs).
    Returns (per-model long frame, timings)."""
    import json

    import pandas as pd


    root = repo_root() / "book" / "results"
    folder = Path(folder or root / "bench" / "equivalence")
    rows, timings = [], []
    for name, engine in EQUIVALENCE_RUNS.items():
        for f in sorted((folder / name).glob("*/*/metrics.json")):
            m = json.loads(f.read_text())
            rows += [{"engine": engine, "experiment": m["experiment"], "seed": m["seed"], "metric": k, "value": v,
                      "steps": m.get("steps")} for k, v in m["metrics"].items()]
        for f in sorted((folder / name).glob("stacks/*/timing.json")):
            t = json.loads(f.read_text())
            timings.append({"engine": engine, "models": len(t["members"]), "members": " ".join(t["members"]),
                            "train_seconds": t["train_seconds"], "device": t["device"]})
    df = pd.DataFrame(rows)
    if published is None:  # Table 1 and Table 2 (the no-parallel models 21, 21b) of the published run
        published = [results_dir(PAPER) / "table1.csv", results_dir(PAPER) / "table2.csv"]
    paths = [Path(published)] if isinstance(published, (str, Path)) else [Path(p) for p in published]
    tables = pd.concat([pd.read_csv(p, dtype={"experiment": str}) for p in paths if p.exists()], ignore_index=True)
    tables = tables.drop_duplicates(["experiment", "seed", "metric"])  # model 0 is in both tables
    pub = tables[tables["experiment"].isin(set(df["experiment"])) & tables["metric"].isin(set(df["metric"]))]
    df = pd.concat([df, pub.assign(engine=PUBLISHED_ENGINE)], ignore_index=True)
    return df, pd.DataFrame(timings)


# ------------------------------------------------------------------------------------------ one model rerun alone
RERUN_METRICS = ("mu", "ppl_train", "ppl_dev", "retr_l8", "trans_l8", "align_l8")


RERUN_FOLDERS = ("rerun", "rerun_compiled")  # under book/results/bench: eager and compiled stacks of one model


def rerun_check(folders: list[Path] | None = None, published: Path | None = None, metrics=RERUN_METRICS):
    """Models retrained alone (`<folder>/<id>/<seed>/metrics.json`, their own run's files, in each of `folders`)
    beside the same (model, seed) of the published grid (`table1.csv`, long: experiment, seed, metric, value).

    Returns one row per (model, seed, metric, run): published, alone, difference (alone - published), and how each
    was trained (stack size, compiled or not), so a reader sees whether one model reruns to the book's number."""
    import json

    import pandas as pd

    bench = repo_root() / "book" / "results" / "bench"
    folders = [Path(f) for f in folders] if folders is not None else [bench / f for f in RERUN_FOLDERS]
    table = pd.read_csv(published or results_dir(PAPER) / "table1.csv", dtype={"experiment": str})
    book = table.set_index(["experiment", "seed", "metric"])["value"]
    rows = []
    for f in sorted(p for folder in folders for p in folder.glob("*/*/metrics.json")):
        m = json.loads(f.read_text())
        for metric in metrics:
            key = (str(m["experiment"]), int(m["seed"]), metric)
            if key not in book.index:
                raise KeyError(f"model {key[0]}, seed {key[1]}: no published {metric} in {published or 'table1.csv'}")
            alone = m["metrics"][metric]
            rows.append({"model": key[0], "seed": key[1], "metric": metric, "published": book[key],
                         "alone": alone, "difference": alone - book[key],
                         "alone_engine": _engine(m)})
    return pd.DataFrame(rows, columns=["model", "seed", "metric", "published", "alone", "difference",
                                       "alone_engine"])


# ------------------------------------------------------------------------------------------ the linear=mm check
LINEAR_RATIO_MAX = 1.5  # criterion 1 (written before the run; quoted in the engineering appendix)


def linear_check(metrics: Path | None = None, published: Path | None = None):
    """The training check of `--linear mm`: the same 25 models trained twice in one call (`--linear baddbmm`, as the
    grid trains, and `--linear mm`), against the published Table 1 (`table1.csv`).

    The criteria were written before the run; mm would become the compiled stacks' default only if both hold:
    1. per metric, the mean absolute difference from the published values over the models under mm is at most
       `LINEAR_RATIO_MAX` times the same under baddbmm;
    2. per (model ID, metric), the seed means of the two runs differ by less than the published seed std.
    Returns (per-metric table of criterion 1, per-(ID, metric) table of criterion 2, verdict dict)."""
    import pandas as pd

    bench = repo_root() / "book" / "results" / "bench" / "linear_check"
    runs = pd.read_csv(metrics or bench / "metrics.csv", dtype={"experiment": str})
    table = pd.read_csv(published or results_dir(PAPER) / "table1.csv", dtype={"experiment": str})
    both = runs.merge(table, on=["experiment", "seed", "metric"], suffixes=("", "_published"), validate="m:1")
    if len(both) != len(runs):
        raise KeyError("every model of the check needs its published row in table1.csv")
    both["abs_difference"] = (both["value"] - both["value_published"]).abs()
    one = both.pivot_table(index="metric", columns="linear", values="abs_difference", aggfunc="mean")
    one["ratio"] = one["mm"] / one["baddbmm"]
    one["holds"] = one["ratio"] <= LINEAR_RATIO_MAX
    means = runs.pivot_table(index=["experiment", "metric"], columns="linear", values="value", aggfunc="mean")
    ids = runs["experiment"].unique()
    two = pd.DataFrame({"baddbmm": means["baddbmm"], "mm": means["mm"],
                        "difference": (means["mm"] - means["baddbmm"]).abs(),
                        "published_std": table[table["experiment"].isin(ids)].groupby(["experiment", "metric"])[
                            "value"].std()})
    two["holds"] = two["difference"] < two["published_std"]
    verdict = {"criterion_1": bool(one["holds"].all()), "criterion_2": bool(two["holds"].all()),
               "failed_pairs": int((~two["holds"]).sum()), "pairs": len(two)}
    verdict["adopted"] = verdict["criterion_1"] and verdict["criterion_2"]
    return one, two, verdict


# The second training check of `--linear mm`, declared before any of its runs. The first check's criterion 2 (per
# model ID and metric, the two runs' five-seed means less than one published seed std apart) could not tell mm from a
# rerun of baddbmm: two runs of one engine fail it in about 11 % of pairs (the engineering appendix). So the null is
# measured instead of assumed: the same 25 models (Table 1's LINEAR2_IDS, five seeds each, 100 epochs, one compiled
# stack each) trained four times from empty run folders, twice per engine (LINEAR2_RUNS), e.g. on two GPUs of one
# machine, baddbmm-1 beside mm-1, then baddbmm-2 beside mm-2:
#   XLREPRO_RUNS=runs/linear2/<run> xlrepro train dufter2020 --ids 0 1 2 4 5 --compile --linear <engine>
# then `python -m xlrepro.papers.dufter2020.engines --linear2 runs/linear2 <metrics.csv> --commit <sha> --machine
# <where>` (the metrics, and their run record timing.json beside them). Criterion, per metric of
# Table 1: every model's difference between two runs, divided by the published seed std of its ID and metric; the
# median |difference| across engines (mm-k against baddbmm-k, k = 1, 2: 50 differences) at most LINEAR2_RATIO_MAX
# times the median |difference| within an engine (baddbmm-1 against -2, mm-1 against -2: 50). Medians, so that one
# diverged seed does not decide. mm becomes the compiled stacks' default only if every metric holds.
LINEAR2_IDS = ("0", "1", "2", "4", "5")
LINEAR2_RUNS = {"baddbmm-1": "baddbmm", "baddbmm-2": "baddbmm", "mm-1": "mm", "mm-2": "mm"}
LINEAR2_RATIO_MAX = 1.5
# one run of the check (XLREPRO_RUNS: the run's own folder under the check's)
LINEAR2_COMMAND = ("XLREPRO_RUNS=<folder>/<run> xlrepro train dufter2020 --ids " + " ".join(LINEAR2_IDS)
                   + " --compile --linear <engine>")


def collect_linear2(folder: Path) -> "pd.DataFrame":
    """The second mm check's runs (``<folder>/<run>/dufter2020/lab``, one per LINEAR2_RUNS) as one frame: run,
    linear, experiment, seed, metric, value (each model's final Table 1 metrics). A run whose models are not all
    trained is refused, naming it."""
    import pandas as pd

    from .config import load_chapter
    from .grid import grid_members, is_done
    from .report import load_results

    chapter = load_chapter()
    members = grid_members(chapter, list(LINEAR2_IDS), list(chapter.seeds))
    frames = []
    for run, linear in LINEAR2_RUNS.items():
        root = Path(folder) / run / PAPER / "lab"
        missing = [m.key for m in members if not is_done(root, m)]
        if missing:
            raise FileNotFoundError(f"{root}: {len(missing)} of {len(members)} models not trained "
                                    f"(e.g. {', '.join(missing[:3])})")
        frames.append(load_results(root, members).assign(run=run, linear=linear))
    out = pd.concat(frames, ignore_index=True)
    return out[["run", "linear", "experiment", "seed", "metric", "value"]]


def linear_check2(metrics: "pd.DataFrame", published: "pd.DataFrame", ratio_max: float = LINEAR2_RATIO_MAX):
    """The second training check of `--linear mm` (the declaration above) on `metrics` (`collect_linear2`'s frame)
    against the published Table 1 (its seed std per ID and metric): per metric, the median |difference| / std within
    an engine and across engines, their ratio and whether it is at most `ratio_max`; and the verdict (adopted when
    every metric holds)."""
    import pandas as pd

    runs = set(metrics["run"])
    if runs != set(LINEAR2_RUNS):
        raise ValueError(f"the check needs the runs {', '.join(LINEAR2_RUNS)}; got {', '.join(sorted(runs))}")
    std = published.groupby(["experiment", "metric"])["value"].std()
    wide = metrics.pivot_table(index=["experiment", "seed", "metric"], columns="run", values="value")
    scale = std.reindex(pd.MultiIndex.from_arrays([wide.index.get_level_values("experiment"),
                                                   wide.index.get_level_values("metric")])).to_numpy()
    if pd.isna(scale).any() or (scale <= 0).any():
        raise ValueError("every (model ID, metric) of the check needs a published seed std above 0")

    def z(a: str, b: str) -> pd.Series:
        return ((wide[a] - wide[b]) / scale).abs()
    within = pd.concat([z("baddbmm-1", "baddbmm-2"), z("mm-1", "mm-2")])
    across = pd.concat([z("mm-1", "baddbmm-1"), z("mm-2", "baddbmm-2")])
    table = pd.DataFrame({"within": within.groupby(level="metric").median(),
                          "across": across.groupby(level="metric").median()})
    table["ratio"] = table["across"] / table["within"]
    table["holds"] = table["ratio"] <= ratio_max
    return table, {"adopted": bool(table["holds"].all()), "failed_metrics": table.index[~table["holds"]].tolist()}


def linear2_record(folder: Path, commit: str, machine: str) -> dict:
    """The run record of the second mm check: `commit` and `machine` as given (the code the four runs trained with and
    where), the day the last stack finished training and each run's stack timing, both from
    ``<folder>/<run>/dufter2020/lab/stacks/*/timing.json`` (steps, training seconds, steps per second, device), and
    the torch version from the models' metrics.json (refused where the runs name more than one)."""
    import datetime
    import json

    stacks, versions, trained = [], set(), []
    for run, linear in LINEAR2_RUNS.items():
        root = Path(folder) / run / PAPER / "lab"
        for path in sorted(root.glob("stacks/*/timing.json")):
            t = json.loads(path.read_text())
            stacks.append({"run": run, "linear": linear, "models": len(t["members"]), "steps": t["steps"],
                           "train_seconds": round(t["train_seconds"], 1),
                           "steps_per_second": round(t["steps_per_second"], 2), "device": t.get("device")})
            trained += [t["timeline"]["trained"]] if "timeline" in t else []
        versions |= {json.loads(p.read_text()).get("torch") for p in root.glob("*/*/*/metrics.json")}
    if not stacks:
        raise FileNotFoundError(f"{folder}: no stack timing record under any of {', '.join(LINEAR2_RUNS)}")
    if len(versions - {None}) > 1:
        raise ValueError(f"{folder}: the runs trained with torch {', '.join(sorted(versions - {None}))}; the check "
                         "compares engines under one version")
    day = datetime.datetime.fromtimestamp(max(trained), datetime.timezone.utc).date() if trained else None
    return {"commit": commit, "date": day.isoformat() if day else "unknown", "machine": machine,
            "torch": next(iter(versions - {None}), None),
            "command": f"{LINEAR2_COMMAND} (from an empty runs folder)", "stacks": stacks}


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="Collect the second training check of --linear mm")
    p.add_argument("--linear2", nargs=2, metavar=("RUNS", "CSV"), required=True,
                   help="the folder holding the four runs (LINEAR2_RUNS), and the metrics CSV to write (its run "
                        "record, timing.json, beside it)")
    p.add_argument("--commit", required=True, help="the commit the four runs trained with")
    p.add_argument("--machine", required=True, help="where they trained, e.g. '2 x NVIDIA H200 of one host'")
    a = p.parse_args(argv)
    from xlrepro import atomic
    from xlrepro.results import write_csv
    runs, csv = Path(a.linear2[0]), Path(a.linear2[1])
    metrics = collect_linear2(runs)
    record = linear2_record(runs, a.commit, a.machine)
    write_csv(metrics, csv)
    atomic.write_json(csv.parent / "timing.json", record)
    return 0


def _engine(m: dict) -> str:
    """'eager, stack of 1' / 'compiled (regional), stack of 13' from a run's metrics.json."""
    mode = m.get("compile") or "none"
    return ("eager" if mode in ("none", False) else f"compiled ({mode})") + f", stack of {m.get('stack_size', 1)}"


# ------------------------------------------------------------------------------------------ the grid's arithmetic
GRID_TABLES = ("table1", "table2")
GRID_EXTRA = ("17-250",)  # Table 10's 250-epoch model (its other rows are models of Table 1)


def grid_compute_floor(lengths: list[int] | None = None, vocab: int | None = None, peak: float | None = None,
                       profile: str = "lab"):
    """The training arithmetic of the whole grid (every trained model of Tables 1, 2 and 10, each seed of the
    chapter), one row per experiment: models, updates, TFLOP per model-step (`xlrepro.bench.model_flops`: useful
    work, forward and backward, the output layer at the masked pieces) and the seconds the grid's FLOPs take at
    `peak` (default: the dense bf16 datasheet peak of an H100, `xlrepro.bench.PEAK_BF16`). A lower bound on any
    engine's time at 100% MFU, evaluation not counted.

    lengths: the pieces of every training sentence with its two special pieces, both languages (default: the lab
    corpus, English and Fake-English); vocab: the models' vocabulary (default: the lab corpus's)."""
    import pandas as pd

    from xlrepro.bench import PEAK_BF16, model_flops

    from .config import load_chapter

    ch = load_chapter()
    if lengths is None or vocab is None:
        from .lab import load_lab
        lab = load_lab(profile, prepare=False)
        lengths = lengths or [len(p) + 2 for p in lab.train_pieces] * 2
        vocab = vocab or lab.fe.vocab_size
    peak = peak or PEAK_BF16["H100"]
    batch = ch.training.batch_size
    rows = []
    for i in dict.fromkeys([*(i for t in GRID_TABLES for i in ch.tables[t]), *GRID_EXTRA]):
        exp = ch.experiment(i)
        if exp.untrained:
            continue
        size = ch.size(exp)
        per_piece_set = model_flops(size, vocab, 0, 0, ch.training.mlm_probability, lengths=lengths)
        per_step = per_piece_set / len(lengths) * batch  # a step of `batch` sentences of the corpus's mean cost
        # no-parallel models read half of each language's sentences per epoch, for twice the epochs
        steps = exp.epochs * ((len(lengths) // 2 if exp.no_parallel else len(lengths)) // batch)
        models = len(ch.seeds)
        rows.append({"experiment": i, "size": size.name, "models": models, "updates": steps,
                     "model_steps": models * steps, "tflop_per_model_step": per_step / 1e12,
                     "pflop": models * steps * per_step / 1e15, "seconds_at_peak": models * steps * per_step / peak})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    raise SystemExit(main())
