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


def test_equivalence_summary_puts_each_engine_beside_the_published_seeds(tmp_path):
    import json

    from xlrepro.papers.dufter2020.engines import equivalence_summary

    for engine, seed, ppl in (("alone", 0, 10.0), ("fused", 0, 11.0), ("fused", 42, 13.0)):
        folder = tmp_path / engine / "5" / str(seed)
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps({"experiment": "5", "seed": seed, "metrics": {"ppl_dev": ppl}}))
    (tmp_path / "fused" / "stacks" / "k").mkdir(parents=True)
    (tmp_path / "fused" / "stacks" / "k" / "timing.json").write_text(json.dumps(
        {"members": ["5/0", "5/42"], "train_seconds": 12.5, "device": "cpu"}))
    published = tmp_path / "table1.csv"  # another experiment and another metric must be left out
    published.write_text("experiment,seed,metric,value\n5,0,ppl_dev,12.0\n5,42,ppl_dev,14.0\n5,0,mu,0.1\n6,0,ppl_dev,9.0\n")
    df, timing = equivalence_summary(published, tmp_path)
    means = df.groupby("engine")["value"].mean()
    assert means.to_dict() == {"fused + compiled stack of 20": 12.0, "one by one (a stack of one: HF's own forward)": 10.0,
                               "published: fused + regional compile, stacks of 5-25": 13.0}
    assert timing[["models", "train_seconds"]].values.tolist() == [[2, 12.5]]


def test_equivalence_checks_flag_a_shifted_engine_and_keep_a_matching_one():
    import pandas as pd
    from scipy.stats import ttest_ind

    from xlrepro.papers.dufter2020.engines import PUBLISHED_ENGINE, equivalence_checks

    pub = [10.0, 11.0, 12.0, 13.0, 14.0]  # mean 12, std 1.58
    rows = [(PUBLISHED_ENGINE, v) for v in pub] + [("same", v + 0.5) for v in pub] + [("shifted", v + 5) for v in pub]
    rows += [("one seed", 12.0)]
    eq = pd.DataFrame([{"engine": e, "experiment": "5", "seed": i, "metric": "ppl_dev", "value": v}
                       for i, (e, v) in enumerate(rows)])
    checks = equivalence_checks(eq).set_index("engine")
    assert checks.loc["same", "within 2 std"] and not checks.loc["shifted", "within 2 std"]
    assert checks.loc["shifted", "difference"] == 5.0
    expected = ttest_ind([v + 5 for v in pub], pub, equal_var=False).pvalue  # t = 5 with 8 df
    assert checks.loc["shifted", "welch p"] == expected < 0.01
    assert checks.loc["same", "welch p"] > 0.5 and pd.isna(checks.loc["one seed", "welch p"])
