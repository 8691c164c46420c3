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
