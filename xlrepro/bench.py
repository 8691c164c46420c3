"""MLM training throughput: the plain Hugging Face step against ours, in the same process.

Cases (issue "Training speed and scale"):
  small — BERT-small of Dufter & Schütze (hidden 64, 12 layers, vocab 4,096), batch 256 x 128
  base  — BERT-base with the same vocabulary, batch 256 x 128
  mbert — BERT-base with mBERT's 119,547-piece vocabulary, sequence length 512 (batch 32)
Plain HF: `BertForMaskedLM(labels=...)` in float32, SDPA attention, logits at every position, torch AdamW.
Ours: bf16 autocast, output layer only at the masked positions, fused AdamW, whole step in a CUDA graph; and for the
small model, 16 models stacked into one set of kernels (reported per model).
Model FLOPs count the useful work only (encoder at every position + output layer at the 15% masked positions), the
same for both, so MFU compares like with like. Full sequences (no padding), random word pieces.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .config import ModelSize
from .models import device_name, init_model
from .training.stacked import ModelStack, OptimConfig, masked_capacity, select_masked

CASES = {
    "small": (ModelSize("small", 64, 12, 1, 256, 2e-3), 4096, 256, 128),
    "base": (ModelSize("base", 768, 12, 12, 3072, 1e-4), 4096, 256, 128),
    "mbert": (ModelSize("base", 768, 12, 12, 3072, 1e-4), 119_547, 32, 512),
}
PEAK_BF16 = {"H100": 989e12, "H200": 989e12}  # dense bf16 tensor-core peak of the SXM parts (datasheet)


def model_flops(size: ModelSize, vocab: int, batch: int, length: int, mlm: float = 0.15) -> float:
    """Training FLOPs of one step (forward + backward = 3 x forward), useful work only."""
    tokens = batch * length
    h, f, layers = size.hidden, size.ffn, size.layers
    per_token_layer = 2 * (4 * h * h + 2 * h * f) + 2 * 2 * length * h  # dense matmuls + attention scores/values
    head = 2 * (h * h + h * vocab)  # MLM transform + decoder, at masked positions only
    return 3 * (tokens * layers * per_token_layer + mlm * tokens * head)


def peak_flops(device) -> float | None:
    name = device_name(device)
    return next((v for k, v in PEAK_BF16.items() if k in name), None)


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _time(fn, device, steps: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    _sync(device)
    t = time.perf_counter()
    for _ in range(steps):
        fn()
    _sync(device)
    return (time.perf_counter() - t) / steps


def plain_hf(size, vocab, batch, length, device, steps, warmup) -> float:
    model = init_model(size, vocab, 0, attn="sdpa", positions=max(256, length)).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=size.lr, eps=1e-6, weight_decay=0.01)
    ids = torch.randint(5, vocab, (batch, length), device=device)
    labels = torch.where(torch.rand(ids.shape, device=device) < 0.15, ids, torch.full_like(ids, -100))

    def step():
        loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return _time(step, device, steps, warmup)


def ours(size, vocab, batch, length, device, steps, warmup, models: int = 1, compile: bool = False) -> float:
    """Seconds per step of a stack of `models` (each step trains all of them); `compile`: the fused, compiled loss."""
    stack = ModelStack([init_model(size, vocab, s, attn="sdpa" if models == 1 else "eager", positions=max(256, length))
                        for s in range(models)],
                       OptimConfig(size.lr, 0.01, 1e-6, 50, 10**6, 1.0), device, compile=compile)
    ids = torch.randint(5, vocab, (models, batch, length), device=device)
    pos = torch.arange(length, device=device).expand_as(ids)
    zeros = torch.zeros_like(ids)
    attend = torch.ones(models, batch, 1, 1, length, dtype=torch.bool, device=device)
    mask = attend if models == 1 else torch.zeros(attend.shape, device=device)
    cap = masked_capacity(batch * length, 0.15)

    def make_inputs():
        labels = torch.where(torch.rand(ids.shape, device=device) < 0.15, ids, torch.full_like(ids, -100))
        sel, lab = select_masked(labels, cap)
        return ids, mask, pos, zeros, sel, lab

    return _time(lambda: stack.step(make_inputs, graph_key="bench"), device, steps, warmup)


@dataclass
class BenchRow:
    case: str
    engine: str
    models: int
    seconds_per_step: float
    tokens_per_second: float
    steps_per_second: float
    mfu: float | None
    device: str


def run_bench(cases=("small", "base", "mbert"), device: str | None = None, steps: int = 20, warmup: int = 5,
              small_stack: int = 16, compile_cases=("small",)) -> list[BenchRow]:
    """Plain HF and ours for each case; `compile_cases` also time ours with the fused, compiled loss (the compile
    itself, about a minute per case, is not in the per-step time)."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    name = device_name(device)
    peak = peak_flops(device)
    rows = []
    for case in cases:
        size, vocab, batch, length = CASES[case]
        flops = model_flops(size, vocab, batch, length)
        variants = [("plain HF", 1, lambda: plain_hf(size, vocab, batch, length, device, steps, warmup)),
                    ("ours", 1, lambda: ours(size, vocab, batch, length, device, steps, warmup))]
        if case == "small":
            variants.append((f"ours, {small_stack} stacked", small_stack,
                             lambda: ours(size, vocab, batch, length, device, steps, warmup, small_stack)))
        if case in compile_cases and torch.device(device).type == "cuda":
            n = small_stack if case == "small" else 1
            label = f"ours, {small_stack} stacked, compiled" if case == "small" else "ours, compiled"
            variants.append((label, n, lambda: ours(size, vocab, batch, length, device, steps, warmup, n, True)))
        for engine, n, fn in variants:
            sec = fn()
            per_model = sec / n
            rows.append(BenchRow(case, engine, n, per_model, batch * length / per_model, 1 / per_model,
                                 None if peak is None else flops / per_model / peak, name))
            if torch.device(device).type == "cuda":
                torch.cuda.empty_cache()
    return rows


def write_bench(cases=("small", "base", "mbert"), steps: int = 20, folder: Path | None = None,
                compile_cases=("small",)) -> Path:
    """Run the benchmark and write `book/results/bench/bench.csv` and `bench.png` (atomically)."""
    import dataclasses

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from .atomic import atomic_path
    from .paths import repo_root

    folder = Path(folder or repo_root() / "book" / "results" / "bench")
    df = pd.DataFrame([dataclasses.asdict(r) for r in run_bench(cases, steps=steps, compile_cases=compile_cases)])
    with atomic_path(folder / "bench.csv") as tmp:
        df.to_csv(tmp, index=False)
    fig = plot_bench(df)
    with atomic_path(folder / "bench.png") as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    return folder / "bench.csv"


def plot_bench(df):
    """Tokens per second per model, plain HF vs ours, one panel per case (log scale)."""
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(df["case"]))
    fig, axes = plt.subplots(1, len(cases), figsize=(4 * len(cases), 3.2), squeeze=False)
    for ax, case in zip(axes[0], cases):
        sub = df[df["case"] == case]
        bars = ax.bar(sub["engine"], sub["tokens_per_second"], color=["#999999"] + ["#1f77b4"] * (len(sub) - 1))
        for bar, mfu in zip(bars, sub["mfu"]):
            if mfu == mfu and mfu is not None:
                ax.annotate(f"MFU {mfu:.0%}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=8)
        ax.set_yscale("log")
        ax.set_title(case)
        ax.set_ylabel("tokens / s per model")
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    fig.suptitle(f"MLM training throughput on {df['device'].iloc[0]}")
    fig.tight_layout()
    return fig


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

    from .paths import repo_root

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
# file under book/results/bench/engine -> (what the device call was, engine of each variant of scripts/speed_probe.py
# as the code stood at that call: "bf16+compile" meant one graph with SDPA until regional compilation came)
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
    """Steady-state step times on the lab corpus (`scripts/speed_probe.py`): the vmap stacks against the fused,
    compiled ones, with the seconds spent on warm-up and compiling before the timed steps."""
    import json

    import pandas as pd

    from .paths import repo_root

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


def equivalence_checks(eq, metrics=("ppl_train", "ppl_dev", "mu")):
    """Each engine's seeds against the published seeds of the same model and metric: the difference of means, the
    published spread over seeds, whether the difference is within 2 of those std, and Welch's t-test p-value
    (`scipy.stats.ttest_ind`, unequal variances; NaN with fewer than 2 seeds on a side). With many comparisons,
    about 5% fall below p = 0.05 by chance alone."""
    import pandas as pd
    from scipy.stats import ttest_ind

    eq = eq[eq["metric"].isin(metrics)]
    published = eq[eq["engine"] == PUBLISHED_ENGINE]
    rows = []
    for (exp, engine, metric), g in eq[eq["engine"] != PUBLISHED_ENGINE].groupby(["experiment", "engine", "metric"]):
        p = published.loc[(published["experiment"] == exp) & (published["metric"] == metric), "value"]
        if p.empty:
            continue
        diff, std = g["value"].mean() - p.mean(), p.std()
        welch = ttest_ind(g["value"], p, equal_var=False).pvalue if min(len(g), len(p)) >= 2 else float("nan")
        rows.append({"experiment": exp, "engine": engine, "metric": metric, "seeds": len(g), "difference": diff,
                     "published seed std": std, "within 2 std": bool(abs(diff) <= 2 * std), "welch p": welch})
    return pd.DataFrame(rows)


def equivalence_summary(published: Path | list[Path] | None = None, folder: Path | None = None):
    """Final metrics of the same (model, seed) trained by different engines, beside the published run's
    (`book/results/dufter2020/table1.csv`: BERT-small in fused, compiled stacks of 5-25 on two GPUs).
    Returns (per-model long frame, timings)."""
    import json

    import pandas as pd

    from .paths import repo_root

    root = repo_root() / "book" / "results"
    folder = Path(folder or root / "bench" / "equivalence")
    rows, timings = [], []
    for name, engine in EQUIVALENCE_RUNS.items():
        for f in sorted((folder / name).glob("*/*/metrics.json")):
            m = json.loads(f.read_text())
            rows += [{"engine": engine, "experiment": m["experiment"], "seed": m["seed"], "metric": k, "value": v}
                     for k, v in m["metrics"].items()]
        for f in sorted((folder / name).glob("stacks/*/timing.json")):
            t = json.loads(f.read_text())
            timings.append({"engine": engine, "models": len(t["members"]), "members": " ".join(t["members"]),
                            "train_seconds": t["train_seconds"], "device": t["device"]})
    df = pd.DataFrame(rows)
    if published is None:  # Table 1 and Table 2 (the no-parallel models 21, 21b) of the published run
        published = [root / "dufter2020" / "table1.csv", root / "dufter2020" / "table2.csv"]
    paths = [Path(published)] if isinstance(published, (str, Path)) else [Path(p) for p in published]
    tables = pd.concat([pd.read_csv(p, dtype={"experiment": str}) for p in paths if p.exists()], ignore_index=True)
    tables = tables.drop_duplicates(["experiment", "seed", "metric"])  # model 0 is in both tables
    pub = tables[tables["experiment"].isin(set(df["experiment"])) & tables["metric"].isin(set(df["metric"]))]
    df = pd.concat([df, pub.assign(engine=PUBLISHED_ENGINE)], ignore_index=True)
    return df, pd.DataFrame(timings)
