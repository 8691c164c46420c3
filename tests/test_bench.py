"""Benchmark arithmetic on hand-computed cases, and one tiny CPU run of both engines."""
import pytest
import torch

from xlrepro.bench import model_flops, run_bench, CASES
from xlrepro.config import ModelSize


def test_model_flops_by_hand():
    size = ModelSize("t", hidden=2, layers=1, heads=1, ffn=4, lr=1e-3)
    # per token and layer: 2*(4*2*2 + 2*2*4) = 64 dense + 2*2*L*h = 4*3*2 = 24 attention; head 2*(4 + 2*10) = 48
    tokens = 2 * 3
    expected = 3 * (tokens * 1 * (64 + 24) + 0.15 * tokens * 48)
    assert model_flops(size, vocab=10, batch=2, length=3) == pytest.approx(expected)


def test_tiny_bench_runs_on_cpu(monkeypatch):
    monkeypatch.setitem(CASES, "tiny", (ModelSize("t", 16, 2, 2, 32, 1e-3), 64, 4, 16))
    rows = run_bench(cases=("tiny",), device="cpu", steps=1, warmup=1)
    assert [r.engine for r in rows] == ["plain HF", "ours"]
    assert all(r.tokens_per_second > 0 and r.mfu is None for r in rows)
