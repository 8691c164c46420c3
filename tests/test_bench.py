"""Benchmark arithmetic on hand-computed cases, the rows' bookkeeping, and one tiny CPU run of every engine."""
import os

import pandas as pd
import pytest
import torch

from xlrepro import bench
from xlrepro.bench import CASES, Case, check_bench_args, engines_for, measure, model_flops, write_bench
from xlrepro.config import ConfigError, ModelSize

TINY = ModelSize("t", 16, 2, 2, 32, 1e-3)


def test_model_flops_by_hand():
    size = ModelSize("t", hidden=2, layers=1, heads=1, ffn=4, lr=1e-3)
    # per token and layer: 2*(4*2*2 + 2*2*4) = 64 dense + 2*2*L*h = 4*3*2 = 24 attention; head 2*(4 + 2*10) = 48
    tokens = 2 * 3
    expected = 3 * (tokens * 1 * (64 + 24) + 0.15 * tokens * 48)
    assert model_flops(size, vocab=10, batch=2, length=3) == pytest.approx(expected)


def test_model_flops_count_no_padding_and_attention_within_documents():
    size = ModelSize("t", hidden=2, layers=1, heads=1, ffn=4, lr=1e-3)
    # documents of 1 and 3 pieces in rows of 3: 4 real pieces x 64 dense; attention 2*2*2*(1 + 9) = 80; head 48
    expected = 3 * (4 * 64 + 80 + 0.15 * 4 * 48)
    assert model_flops(size, vocab=10, batch=2, length=3, lengths=[1, 3]) == pytest.approx(expected)


def test_ragged_lengths_are_fixed_and_bounded():
    case = Case(TINY, 64, 50, 16, ragged=True)
    lengths = case.lengths()
    assert lengths == case.lengths() and len(lengths) == 50 and min(lengths) >= 2 and max(lengths) <= 16
    assert len(set(lengths)) > 5 and Case(TINY, 64, 3, 16).lengths() == [16, 16, 16]


def test_each_case_gets_its_engines():
    assert engines_for("small") == ["hf-fp32", "hf-bf16", "hf-compile", "hf-best", "ours", "ours-nomask", "ours-qkv",
                                    "ours-nomask-qkv", "ours-mm", "ours-nomask-mm", "ours-fp8", "ours-nomask-mm-bf16",
                                    "ours-nomask-mm-tuned", "ours-stack", "ours-stack-tuned"]
    assert "ours-nomask-mm-padv" in engines_for("mbert") and "ours-nomask-mm-padv" not in engines_for("base")
    assert "ours-padv" in engines_for("mbert") and "ours-padv" not in engines_for("base")
    assert "ours-stack" not in engines_for("base") and "ours-packed" not in engines_for("mbert")
    assert all("hf-best" in engines_for(c) for c in ("small", "base", "mbert", "base-ragged"))
    assert bench.RUN_ORDER[:2] == ("hf-best", "ours")  # the headline's pair first: a time limit cuts it last
    ragged = engines_for("base-ragged")
    assert "ours-flex" in ragged and "ours-packed" in ragged and "ours-nomask" not in ragged
    assert "ours-fp8" in engines_for("base") and "ours-fp8" not in ragged  # packed rows: no multiple of 16


def test_the_data_parallel_case_gets_its_references_and_data_parallel_engines():
    assert engines_for("base-dp") == ["hf-compile", "ours", "hf-compile-ddp", "ours-ddp", "ours-ddp-graph"]
    assert not any(bench.ENGINES[k].ddp for c in ("small", "base", "mbert", "base-ragged") for k in engines_for(c))


def test_the_data_parallel_case_needs_torchrun_and_torchrun_only_it(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ConfigError, match="torchrun --nproc_per_node 2 -m xlrepro.cli bench --cases base-dp"):
        check_bench_args(["base-dp"])
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match=r"under torchrun only the data-parallel cases run \(base-dp\)"):
        check_bench_args(["base-dp", "small"])
    check_bench_args(["base-dp"])


def test_headline_and_scaling_efficiency_by_hand():
    """One GPU: HF compiled 60 ms, ours 50 ms (1.2x). Two GPUs, 256 rows each: HF DDP 75 ms (efficiency 60/75 =
    0.8), ours 62.5 ms (50/62.5 = 0.8; 75/62.5 = 1.2x against the HF row of the same GPU count), ours with the graph
    failed (no figures)."""
    def row(key, gpus, ms, status="ok"):
        e = bench.ENGINES[key]
        return {"engine_key": key, "engine": e.label, "family": e.family, "gpus": gpus, "status": status,
                "ms_per_step": ms, "ms_per_model_step": ms}
    rows = [row("hf-compile", 1, 60.0), row("ours", 1, 50.0), row("hf-compile-ddp", 2, 75.0),
            row("ours-ddp", 2, 62.5), row("ours-ddp-graph", 2, None, "failed: RuntimeError: capture")]
    bench._headline(rows)
    assert [r["speedup_vs_best_hf"] for r in rows] == pytest.approx([1.0, 1.2, 1.0, 1.2, None])
    assert [r["best_hf_engine"] for r in rows] == ["HF bf16 + torch.compile"] * 2 + ["HF bf16 + torch.compile, DDP"] * 3
    assert [r["scaling_efficiency"] for r in rows] == pytest.approx([None, None, 0.8, 0.8, None])


def test_the_headline_is_against_hf_best_where_timed_else_the_fastest_hf_row():
    """hf-best 40 ms, hf-compile 30 ms (faster, but not the reference), ours 20 ms: 2.0x against hf-best, hf-compile
    1.33x. hf-best failed: the fastest HF row (hf-compile, 30 ms) is the reference, ours 1.5x."""
    def row(key, ms, status="ok"):
        e = bench.ENGINES[key]
        return {"engine_key": key, "engine": e.label, "family": e.family, "gpus": 1, "status": status,
                "ms_per_step": ms, "ms_per_model_step": ms}
    rows = [row("hf-bf16", 50.0), row("hf-compile", 30.0), row("hf-best", 40.0), row("ours", 20.0)]
    bench._headline(rows)
    assert [r["speedup_vs_best_hf"] for r in rows] == pytest.approx([0.8, 4 / 3, 1.0, 2.0])
    assert {r["best_hf_engine"] for r in rows} == {bench.ENGINES["hf-best"].label}
    rows[2] = row("hf-best", None, "failed: RuntimeError: compile")
    bench._headline(rows)
    assert [r["speedup_vs_best_hf"] for r in rows] == pytest.approx([0.6, 1.0, None, 1.5])
    assert {r["best_hf_engine"] for r in rows} == {"HF bf16 + torch.compile"}


def test_hf_best_modes_follow_the_device_and_the_choice():
    assert bench.hf_best_modes(cuda=True, compile_on_cpu=False) == ["reduce-overhead", "max-autotune"]
    assert bench.hf_best_modes(cuda=True, compile_on_cpu=False, choice="max-autotune") == ["max-autotune"]
    assert bench.hf_best_modes(cuda=False, compile_on_cpu=False, choice="max-autotune") == [None]  # eager
    assert bench.hf_best_modes(cuda=False, compile_on_cpu=True, choice="reduce-overhead") == ["reduce-overhead"]
    with pytest.raises(ConfigError, match="valid modes are auto, reduce-overhead, max-autotune"):
        bench.hf_best_modes(True, False, "default")


def test_hf_best_keeps_the_faster_mode_and_notes_both(monkeypatch):
    """Two modes timed one after the other: 'b' at 2 ms beats 'a' at 3 ms; a mode that fails leaves the other."""
    pace = {"a": 3e-3, "b": 2e-3}
    monkeypatch.setattr(bench, "_hf_step", lambda case, inputs, device, engine, mode: mode)
    monkeypatch.setattr(bench, "measure", lambda step, device, steps, repeats, warmup: (1.0, [pace[step]] * repeats))
    warm, times, profiled, mode, note = bench._time_hf_best(None, None, "cpu", ["a", "b"], 1, 3, 0, False)
    assert mode == "b" and times == [2e-3] * 3 and profiled is None
    assert note == "the fastest of a 3.00 ms, b 2.00 ms"
    del pace["a"]
    assert bench._time_hf_best(None, None, "cpu", ["a", "b"], 1, 1, 0, False)[3:] == (
        "b", "the fastest of a failed: KeyError: 'a', b 2.00 ms")


def _hf_best_and_full_head(seed_batch: int = 3, ragged: bool = False):
    """hf-best's step (fp32, eager, CPU) and a copy of its model trained with HF's full-head loss on the same batch."""
    case = Case(TINY, 64, 4, 16, ragged=ragged)
    inputs = bench.make_inputs(case, "cpu")
    step = bench._hf_step(case, inputs, "cpu", "hf-best", mode=None, bf16=False)
    reference = bench._hf_step(case, inputs, "cpu", "hf-bf16", bf16=False)  # HF's BertForMaskedLM(labels=...)
    return case, inputs, step, reference


@pytest.mark.parametrize("ragged", [False, True])
def test_hf_best_loss_and_step_equal_hf_full_head(ragged):
    """The output layer at the labelled pieces only gives HF's full-head loss (labels -100 elsewhere), and one
    step of each (dropout drawn from the same seed) moves every weight the same."""
    case, inputs, step, reference = _hf_best_and_full_head(ragged=ragged)
    model, full = step.model, reference.model
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), full.parameters()))  # same initial weights
    mask = inputs.real.long() if ragged else None
    where, targets = bench.masked_positions(inputs.labels)
    assert len(where) == int((inputs.labels != -100).sum()) > 0 and (targets >= 5).all()
    model.eval(), full.eval()
    with torch.no_grad():
        ours = bench.masked_mlm_loss(model, inputs.ids, mask, where, targets)
        hf = full(input_ids=inputs.ids, attention_mask=mask, labels=inputs.labels).loss
    assert ours.item() == pytest.approx(hf.item(), rel=1e-5) and ours.item() > 3.0  # about ln 64 at the start
    model.train(), full.train()
    before = [p.detach().clone() for p in model.parameters()]
    torch.manual_seed(7)
    step()
    torch.manual_seed(7)
    reference()
    moved = 0
    for b, a, r in zip(before, model.parameters(), full.parameters()):
        torch.testing.assert_close(a, r, rtol=1e-4, atol=1e-6)
        moved += not torch.equal(a, b)
    assert moved == len(before)  # every tensor took the step (weight decay at least)


@pytest.mark.parametrize("kwargs, message", [
    ({"cases": ["huge"]}, "valid cases are small, base, mbert, base-ragged"),
    ({"cases": []}, "valid cases are small"),
    ({"cases": ["base"], "engines": ["deepspeed"]}, "valid engines are hf-fp32, hf-bf16, hf-compile, hf-best, ours"),
    ({"cases": ["base"], "steps": 0}, "--steps must be an integer >= 1; got 0"),
    ({"cases": ["base"], "repeats": -1}, "--repeats must be an integer >= 1"),
    ({"cases": ["base"], "warmup": 1.5}, "--warmup must be an integer >= 0"),
])
def test_bad_arguments_fail_before_anything_runs(kwargs, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        check_bench_args(**kwargs)


def test_measure_warms_up_then_times_each_repeat():
    calls = []
    warm, times = measure(lambda: calls.append(1), "cpu", steps=4, repeats=3, warmup=2)
    assert len(calls) == 2 + 4 * 3 and len(times) == 3 and warm >= 0 and all(t >= 0 for t in times)


def test_each_hf_step_sets_tf32_as_its_engine_allows_and_the_reset_clears_it():
    case = Case(TINY, 64, 2, 8)
    inputs = bench.make_inputs(case, "cpu")
    try:
        bench._hf_step(case, inputs, "cpu", "hf-bf16")
        assert torch.backends.cuda.matmul.allow_tf32 is True
        bench._hf_step(case, inputs, "cpu", "hf-fp32")
        assert torch.backends.cuda.matmul.allow_tf32 is False  # float32 proper
        bench._ours_step(case, inputs, "cpu", bench.ENGINES["ours"])
        assert torch.backends.cuda.matmul.allow_tf32 is True
        bench._free(False)
        assert torch.backends.cuda.matmul.allow_tf32 is False
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    assert [e for e in bench.ENGINES if not bench.allows_tf32(e)] == ["hf-fp32"]


@pytest.fixture
def tiny_cases(monkeypatch):
    monkeypatch.setitem(CASES, "small", Case(TINY, 64, 4, 16))
    monkeypatch.setitem(CASES, "base-ragged", Case(TINY, 64, 6, 16, ragged=True))
    monkeypatch.setattr(bench, "STACK", 3)
    monkeypatch.setitem(bench.ENGINES, "ours-stack", bench.Engine("ours, 3 stacked", "ours", "small", models=3))
    monkeypatch.setitem(bench.ENGINES, "ours-stack-tuned", bench.Engine("ours, 3 stacked + autotuned", "ours", "small",
                                                                        models=3, autotune=True))


def test_every_engine_runs_on_a_tiny_case_and_the_rows_add_up(tiny_cases, tmp_path):
    path = write_bench(["small", "base-ragged"], steps=1, repeats=3, warmup=1, folder=tmp_path, device="cpu",
                       commit="abc123")
    df = pd.read_csv(path)
    assert list(df.columns) == bench.COLUMNS and (tmp_path / "bench.png").exists()
    by = df.set_index(["case", "engine_key"])
    assert by.loc[("small", "hf-compile"), "status"] == "skipped: torch.compile is timed on a GPU only"
    assert by.loc[("base-ragged", "ours-flex"), "status"].startswith("skipped: FlexAttention trains on a GPU only")
    assert by.loc[("small", "ours-nomask-mm-bf16"), "status"] == ("skipped: the bf16 residual stream is timed under "
                                                                  "autocast on a GPU only")
    ok = df[df["status"] == "ok"]
    assert set(ok["engine_key"]) == set(engines_for("small") + engines_for("base-ragged")) - {
        "hf-compile", "ours-flex", "ours-nomask-mm-bf16"}
    best = by.loc[("small", "hf-best")]  # on the CPU without compile_on_cpu: eager, and it says so
    assert best["compile_mode"] == "none" and best["note"] == "eager: torch.compile is timed on a GPU only"
    assert by.loc[("small", "hf-bf16"), "compile_mode"] == "none"
    assert (ok["ms_per_step_min"] <= ok["ms_per_step"]).all() and (ok["ms_per_step"] <= ok["ms_per_step_max"]).all()
    stack = by.loc[("small", "ours-stack")]
    assert stack["models"] == 3 and stack["ms_per_model_step"] == pytest.approx(stack["ms_per_step"] / 3)
    assert stack["tokens_per_s_stack"] == pytest.approx(3 * stack["tokens_per_s_per_model"])
    assert stack["tokens_per_s_per_model"] == pytest.approx(4 * 16 / (stack["ms_per_step"] / 1e3))  # each model's pace
    for case, d in ok.groupby("case"):  # the headline: hf-best is 1.0x, every row against it
        best = d[d["engine_key"] == "hf-best"].iloc[0]
        assert (d["best_hf_engine"] == best["engine"]).all() and best["speedup_vs_best_hf"] == pytest.approx(1.0)
        assert d["speedup_vs_best_hf"].values == pytest.approx(best["ms_per_model_step"] / d["ms_per_model_step"].values)
    ragged = by.loc[("base-ragged", "ours-packed")]
    lengths = CASES["base-ragged"].lengths()
    assert ragged["tokens"] == sum(lengths) and ragged["rows"] < 6  # packed: fewer rows than documents
    assert ragged["padding_share"] == pytest.approx(1 - sum(lengths) / (6 * 16))
    assert (df["commit"] == "abc123").all() and (df["device"] == "cpu").all() and df["mfu"].isna().all()
    # TF32 for the float32 products left under bf16 autocast: every row but float32 proper; reset after the run
    assert by.loc[("small", "hf-fp32"), "tf32"] == False  # noqa: E712 - a value read back from the CSV
    assert ok[ok["engine_key"] != "hf-fp32"]["tf32"].eq(True).all()
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert df["torch"].iloc[0] == torch.__version__ and df["date"].str.match(r"\d{4}-\d\d-\d\dT").all()


def test_a_failing_engine_leaves_its_row_and_a_rerun_keeps_other_cases(tiny_cases, tmp_path, monkeypatch):
    pd.DataFrame({"case": ["small"], "engine": ["plain HF"]}).to_csv(tmp_path / "bench.csv", index=False)  # old layout
    write_bench(["base-ragged"], ["hf-bf16", "ours"], steps=1, repeats=1, warmup=0, folder=tmp_path, device="cpu")

    def broken(*args):
        raise RuntimeError("CUDA out of memory\nmore")

    monkeypatch.setattr(bench, "_hf_step", broken)
    df = pd.read_csv(write_bench(["small"], ["hf-bf16", "ours"], steps=1, repeats=1, warmup=0, folder=tmp_path,
                                 device="cpu"))
    assert df[["case", "engine_key"]].values.tolist() == [["small", "hf-bf16"], ["small", "ours"],
                                                          ["base-ragged", "hf-bf16"], ["base-ragged", "ours"]]
    assert df["status"].tolist() == ["failed: RuntimeError: CUDA out of memory", "ok", "ok", "ok"]
    assert df["speedup_vs_best_hf"].isna().tolist() == [True, True, False, False]  # no HF row, no headline


def test_tf32_round_trips_as_true_beside_older_rows_without_it(tiny_cases, tmp_path):
    """Rows kept from before the column (blank) and new rows that all had TF32: the CSV says True, not 1.0, and the
    appendix reads the new rows as timed with TF32 and the old ones as not."""
    from xlrepro.papers.appendix.engineering import had_tf32
    old = pd.DataFrame([{"case": "small", "engine": "ours", "engine_key": "ours", "status": "skipped: budget", "gpus": 1}])
    old.to_csv(tmp_path / "bench.csv", index=False)
    path = write_bench(["base-ragged"], ["ours"], steps=1, repeats=1, warmup=0, folder=tmp_path, device="cpu")
    text = pd.read_csv(path, dtype=str, keep_default_na=False).set_index("case")["tf32"]
    assert text.to_dict() == {"small": "", "base-ragged": "True"}
    assert had_tf32(pd.read_csv(path)).tolist() == [False, True]


def test_a_row_timed_after_a_compiled_step_failed_says_so(tiny_cases, tmp_path, monkeypatch):
    """A compiled step that fails runs on eagerly (`ModelStack._guarded_body`): its time is then not the engine's."""
    real = bench._ours_step

    def failing_once(*args):
        step, rows, stack = real(*args)

        def broken(*inputs):
            raise AssertionError("expected size 3==3, stride 1==2 at dim=0\nmore")

        stack.compiled, stack._losses = "regional", broken
        return step, rows, stack

    monkeypatch.setattr(bench, "_ours_step", failing_once)
    with pytest.warns(UserWarning, match="compiled step failed"):
        df = pd.read_csv(write_bench(["small"], ["hf-bf16", "ours"], steps=1, repeats=1, warmup=1, folder=tmp_path,
                                     device="cpu"))
    assert df["status"].tolist() == ["ok", "eager fallback: AssertionError: expected size 3==3, stride 1==2 at dim=0"]
    assert df["speedup_vs_best_hf"].isna().tolist() == [False, True]  # no headline for a fallen-back row


def test_mfu_is_useful_flops_per_model_step_over_the_peak(tiny_cases, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "peak_flops", lambda device: 1e9)
    df = pd.read_csv(write_bench(["base-ragged"], ["hf-bf16", "ours-packed"], steps=1, repeats=1, warmup=0,
                                 folder=tmp_path, device="cpu"))
    case = CASES["base-ragged"]
    flops = model_flops(case.size, case.vocab, case.batch, case.length, lengths=case.lengths())
    assert df["mfu"].values == pytest.approx(flops / (df["ms_per_model_step"].values / 1e3) / 1e9)
    assert (df["peak_tflops"] == 1e-3).all()


def test_quick_cli_run_writes_its_rows(tiny_cases, tmp_path):
    from xlrepro.cli import main

    assert main(["bench", "--cases", "small", "--engines", "hf-best", "ours", "--quick", "--out", str(tmp_path),
                 "--device", "cpu"]) == 0
    df = pd.read_csv(tmp_path / "bench.csv")
    assert df["engine_key"].tolist() == ["hf-best", "ours"] and (df["status"] == "ok").all()
    assert (df["best_hf_engine"] == bench.ENGINES["hf-best"].label).all()
    assert (df["steps"] == 3).all() and (df["repeats"] == 3).all()


def test_a_spent_budget_skips_the_remaining_engines_but_not_the_headline_s_pair(tiny_cases, tmp_path):
    df = pd.read_csv(write_bench(["small"], ["hf-bf16", "ours", "ours-mm"], steps=1, repeats=1, warmup=0,
                                 folder=tmp_path, device="cpu", budget_s=0)).set_index("engine_key")
    assert df.loc["ours", "status"] == "ok"
    assert df.loc[["hf-bf16", "ours-mm"], "status"].str.startswith("skipped: the case's time budget of 0 s").all()


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

    from xlrepro.papers.dufter2020.engines import PUBLISHED_ENGINE, VMAP_ENGINE, equivalence_checks

    ref = [10.0, 11.0, 12.0, 13.0, 14.0]  # mean 12, std 1.58
    rows = [(VMAP_ENGINE, v) for v in ref] + [("same", v + 0.5) for v in ref] + [("shifted", v + 5) for v in ref]
    rows += [("one seed", 12.0)] + [(PUBLISHED_ENGINE, v + 50) for v in ref]
    eq = pd.DataFrame([{"engine": e, "experiment": "5", "seed": i, "metric": "ppl_dev", "value": v}
                       for i, (e, v) in enumerate(rows)])
    checks = equivalence_checks(eq).set_index("engine")
    assert set(checks.index) == {"same", "shifted", "one seed"}  # the published grid is not an engine test
    assert checks.loc["same", "within 2 std"] and not checks.loc["shifted", "within 2 std"]
    assert checks.loc["shifted", "difference"] == 5.0 and checks.loc["shifted", "reference seed std"] == pytest.approx(
        2.5 ** 0.5)
    expected = ttest_ind([v + 5 for v in ref], ref, equal_var=False).pvalue  # t = 5 with 8 df
    assert checks.loc["shifted", "welch p"] == expected < 0.01
    assert checks.loc["same", "welch p"] > 0.5 and pd.isna(checks.loc["one seed", "welch p"])
    against_published = equivalence_checks(eq, reference=PUBLISHED_ENGINE, engines=["same"])
    assert against_published["difference"].tolist() == [-49.5]


def test_equivalence_reading_and_the_published_shift_by_hand():
    import pandas as pd

    from xlrepro.papers.dufter2020.engines import PUBLISHED_ENGINE, VMAP_ENGINE, equivalence_checks, \
        equivalence_reading, published_shift

    ref = [10.0, 11.0, 12.0, 13.0, 14.0]  # std 1.58: 2 std = 3.16
    rows = [(m, VMAP_ENGINE, v) for m in ("5", "6") for v in ref]
    rows += [("5", "same", v + 0.5) for v in ref] + [("6", "shifted", v + 5) for v in ref]
    rows += [("5", PUBLISHED_ENGINE, v + 2) for v in ref] + [("6", PUBLISHED_ENGINE, v + 40) for v in ref]
    eq = pd.DataFrame([{"engine": e, "experiment": m, "seed": i, "metric": "ppl_dev", "value": v}
                       for i, (m, e, v) in enumerate(rows)])
    text = equivalence_reading(equivalence_checks(eq, ["ppl_dev"]))
    assert text.startswith("1 of 2 engine means lie within 2 seed std of the reference's; 1 of 2 Welch tests give "
                           "p < 0.05, against about 0.1 by chance alone: model 6, ppl_dev, shifted (+5, p = 0.00")
    # published minus vmap: +2 on model 5 (within 3.16), +40 on model 6 (beyond)
    assert published_shift(eq, ["ppl_dev"]) == "ppl_dev +2 to +40 (beyond 2 std on 1 of 2 models)"


def _data_parallel_rank(rank, rendezvous, folder):
    import datetime

    import torch.distributed as dist
    torch.set_num_threads(1)
    os.environ["WORLD_SIZE"] = "2"
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=120))
    bench.CASES["base-dp"] = Case(TINY, 64, 4, 16, data_parallel=True)
    write_bench(["base-dp"], ["ours", "ours-ddp", "ours-ddp-graph"], steps=2, repeats=2, warmup=1, folder=folder,
                device="cpu", commit="abc123")
    dist.destroy_process_group()


def test_two_ranks_time_the_reference_alone_then_data_parallel(tmp_path):
    """Two CPU ranks (gloo): rank 0 times `ours` alone (an all-reduce there would wait for ever: the other rank is
    at the barrier), then both time `ours-ddp`; only rank 0 writes. The graph row needs a GPU."""
    import torch.multiprocessing as mp
    pd.DataFrame([{"case": "small", "engine": "HF fp32", "engine_key": "hf-fp32", "status": "skipped: budget"}]).to_csv(
        tmp_path / "bench.csv", index=False)  # a row from before the gpus column: kept, one GPU
    # forked ranks: spawned ones re-import torch and xlrepro.bench (most of the test's time)
    mp.start_processes(_data_parallel_rank, args=(str(tmp_path / "rendezvous"), tmp_path), nprocs=2,
                       start_method="fork")
    df = pd.read_csv(tmp_path / "bench.csv")
    assert df[["case", "engine_key", "gpus"]].values.tolist() == [
        ["small", "hf-fp32", 1], ["base-dp", "ours", 1], ["base-dp", "ours-ddp", 2], ["base-dp", "ours-ddp-graph", 2]]
    one, two = df.iloc[1], df.iloc[2]
    assert one["status"] == two["status"] == "ok" and df.iloc[3]["status"] == "skipped: CUDA graphs need a GPU"
    assert two["scaling_efficiency"] == pytest.approx(one["ms_per_step"] / two["ms_per_step"])
    assert two["tokens_per_s_all"] == pytest.approx(2 * 4 * 16 / (two["ms_per_step"] / 1e3))
    assert one["tokens_per_s_all"] == pytest.approx(one["tokens_per_s_per_model"])


@pytest.mark.parametrize("name, kind", [
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "matrix products"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT", "matrix products"),
    ("triton_tem_fused_mm_0", "matrix products"),
    ("aten::addmm", "matrix products"),
    ("pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>", "attention"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "attention"),
    ("void at::native::(anonymous namespace)::fused_adamw_kernel", "optimizer"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "communication"),
    ("triton_per_fused_native_layer_norm_add_3", "fused element-wise (Triton)"),
    ("triton_per_fused__to_copy_add_baddbmm_mul_native_dropout_native_layer_norm_3", "fused element-wise (Triton)"),
    ("triton_poi_fused__unsafe_view_bmm_clone_transpose_view_15", "fused element-wise (Triton)"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", "element-wise and reductions (ATen)"),
    ("Memcpy DtoD (Device -> Device)", "other"),
])
def test_kernels_are_sorted_into_kinds_by_name(name, kind):
    assert bench.kernel_kind(name) == kind


def test_a_profiled_run_writes_the_kinds_and_the_table(tiny_cases, tmp_path):
    (tmp_path / "profile-ops-small-hf-bf16.csv").write_text("op\n")  # an earlier run's: no graphs now, so removed
    write_bench(["small"], ["hf-bf16"], steps=1, repeats=1, warmup=1, folder=tmp_path, device="cpu", profile=True,
                commit="abcdef0123")
    kinds = pd.read_csv(tmp_path / "profile.csv")
    assert set(kinds["engine_key"]) == {"hf-bf16"} and (kinds["case"] == "small").all()
    assert not (tmp_path / "profile-ops-small-hf-bf16.csv").exists()
    # each row says where and when it was profiled
    assert set(kinds["commit"]) == {"abcdef0"} and set(kinds["torch"]) == {torch.__version__}
    assert kinds["date"].str.fullmatch(r"\d{4}-\d\d-\d\d").all() and kinds["device"].notna().all()
    assert kinds["share"].sum() == pytest.approx(1.0) and (kinds["ms_per_step"] >= 0).all()
    assert "matrix products" in set(kinds["kind"]) and kinds["kind"].is_unique
    text = (tmp_path / "profile-small-hf-bf16.txt").read_text()
    assert text.startswith("small, hf-bf16: GPU time by kind of kernel") and "Self CPU" in text
    # profiling the engine again replaces its rows, never adds to them
    write_bench(["small"], ["hf-bf16"], steps=1, repeats=1, warmup=0, folder=tmp_path, device="cpu", profile=True)
    again = pd.read_csv(tmp_path / "profile.csv")
    assert sorted(again["kind"]) == sorted(kinds["kind"])


def test_grid_compute_floor_by_hand():
    from xlrepro.bench import model_flops
    from xlrepro.papers.dufter2020.config import load_chapter
    from xlrepro.papers.dufter2020.engines import grid_compute_floor

    ch = load_chapter()
    lengths = [10] * 1024  # 4 steps of 256 sentences an epoch (2 for the no-parallel models)
    floor = grid_compute_floor(lengths=lengths, vocab=100, peak=1e12).set_index("experiment")
    assert "18" not in floor.index and "19" not in floor.index  # untrained: no training FLOPs
    assert {"0", "15", "21", "30", "17-250"} <= set(floor.index)
    assert floor.loc["0", "updates"] == 400 and floor.loc["21", "updates"] == 400  # 100 x 4 and 200 x 2
    assert floor.loc["17-250", "updates"] == 1000 and floor.loc["17-250", "size"] == "base"
    step = model_flops(ch.size(ch.experiment("15")), 100, 256, 10)  # one step: 256 sentences of 10 pieces
    assert floor.loc["15", "tflop_per_model_step"] == pytest.approx(step / 1e12)
    assert floor.loc["15", "seconds_at_peak"] == pytest.approx(5 * 400 * step / 1e12)  # five seeds at 1 TFLOP/s


def test_the_operators_of_a_stack_are_profiled_without_its_graphs_and_the_graphs_come_back(tiny_cases):
    case = CASES["small"]
    inputs = bench.make_inputs(case, "cpu")
    step, _, stack = bench._ours_step(case, inputs, "cpu", bench.ENGINES["ours-stack"])
    step()
    runner = object()  # stands for the CUDA-graph runner a GPU stack holds
    stack._graph_runner = runner
    seen = []
    real = stack.step
    stack.step = lambda *a, **k: seen.append(stack._graph_runner) or real(*a, **k)
    ops = bench.profile_ops(step, stack, "cpu", steps=2)
    assert seen and all(r is None for r in seen)  # every profiled step ran without the graphs
    assert stack._graph_runner is runner  # and they are back after it
    assert list(ops.columns) == ["op", "shapes", "ms_per_step", "calls_per_step"]
    assert ops["op"].str.startswith("aten::").all() and ops["ms_per_step"].is_monotonic_decreasing
    # the stack's 3 models multiply in one batched product per linear layer: the shapes name the stack
    products = ops[ops["op"].isin(["aten::baddbmm", "aten::bmm"])]
    assert len(products) and products["shapes"].str.startswith("[[3, ").any()
    # an exception inside the block still gives the graphs back
    stack._graph_runner = runner
    with pytest.raises(RuntimeError):
        with stack.eager_steps():
            raise RuntimeError("stopped")
    assert stack._graph_runner is runner


def test_speed_rows_are_the_engines_that_step_differently_from_the_chapters_training():
    from xlrepro.bench import speed_row
    assert not speed_row("ours") and not speed_row("ours-nomask") and not speed_row("ours-stack")
    assert not speed_row("hf-best")  # a Hugging Face row is never ours
    for key in ("ours-mm", "ours-nomask-mm", "ours-fp8", "ours-nomask-mm-bf16", "ours-padv", "ours-nomask-mm-padv",
                "ours-nomask-mm-tuned", "ours-stack-tuned", "ours-qkv", "ours-packed", "ours-flex"):
        assert speed_row(key), key
