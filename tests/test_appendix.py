"""The engineering appendix's computations (`xlrepro.papers.appendix.engineering`) on hand-made records."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from xlrepro.config import ConfigError
from xlrepro.papers.appendix import engineering as E


def bench_row(case, engine_key, engine, **values):
    row = {"case": case, "engine_key": engine_key, "engine": engine, "family": "ours" if engine_key.startswith("ours")
           else "hf", "models": 1, "status": "ok", "ms_per_step": 10.0, "ms_per_model_step": 10.0,
           "ms_per_step_min": 9.0, "ms_per_step_max": 12.0, "tokens_per_s_per_model": 250_000.0, "mfu": 0.25,
           "speedup_vs_best_hf": 1.0, "best_hf_engine": "HF best", "device": "H200", "torch": "2.9", "commit":
           "0123456789abcdef", "date": "2026-01-02", "repeats": 3, "steps": 50, "peak_tflops": 989.0}
    return {**row, **values}


def test_read_bench_keeps_the_data_parallel_rows_apart(tmp_path):
    rows = [bench_row("base", "hf-compile", "HF compiled"), bench_row("base-dp", "ours-ddp", "ours DDP", gpus=2)]
    pd.DataFrame(rows).to_csv(tmp_path / "bench.csv", index=False)
    single, dp = E.read_bench(tmp_path / "bench.csv")
    assert single["case"].tolist() == ["base"] and dp["case"].tolist() == ["base-dp"]
    assert E.has_bench(single) and not E.has_bench(dp)
    empty, empty_dp = E.read_bench(tmp_path / "missing.csv")
    assert empty.empty and empty_dp.empty and not E.has_bench(empty)


def test_bench_view_writes_each_measure_per_model():
    table = pd.DataFrame([bench_row("small", "ours-stack", "ours, stack of 4", models=4, ms_per_step=8.0,
                                    ms_per_model_step=2.0, ms_per_step_min=6.0, ms_per_step_max=10.0,
                                    tokens_per_s_per_model=1_234_567.0, mfu=0.4567, speedup_vs_best_hf=2.5),
                          bench_row("small", "hf-fp32", "HF fp32", ms_per_model_step=float("nan"), mfu=float("nan"))])
    view = E.bench_view(table)
    assert view.index.tolist() == [("small", "ours, stack of 4"), ("small", "HF fp32")]
    assert view.iloc[0].tolist() == [4, "2.00", "1.50-2.50", "1,235", "45.7%", "2.50x"]
    assert view.iloc[1].tolist() == [1, "", "9.00-12.00", "250", "", "1.00x"]


def test_bench_lines_name_failed_rows_stacks_fallbacks_the_fastest_and_what_was_not_measured():
    table = pd.DataFrame([
        bench_row("small", "hf-best", "HF best", ms_per_model_step=5.0),
        bench_row("small", "ours", "ours", ms_per_model_step=4.0, speedup_vs_best_hf=1.25, mfu=0.3),
        bench_row("small", "ours-stack", "ours, stack of 4", models=4, ms_per_step=12.0, ms_per_model_step=3.0,
                  speedup_vs_best_hf=5 / 3, mfu=0.4),
        bench_row("small", "ours-qkv", "ours + qkv", status="eager fallback (compile failed)", ms_per_model_step=9.5),
        bench_row("small", "ours-mm", "ours + mm", status="out of memory")])
    assert E.bench_row_lines(table) == [
        "small, ours + qkv: eager fallback (compile failed)", "small, ours + mm: out of memory",
        "small, ours, stack of 4: 12.00 ms per step of the whole stack of 4"]
    lines = E.bench_case_lines(table)
    assert lines[:3] == [
        "small: H200, torch 2.9, commit 0123456789, 2026-01-02; median of 3 repeats of 50 steps; MFU against 989 "
        "TFLOP/s (dense bf16 datasheet peak)",
        "small, 'ours + qkv': a compiled step failed and the row ran on the eager path (9.50 ms per model-step); it "
        "is not the engine's speed",
        "small: fastest of ours is 'ours, stack of 4', 1.67x the best Hugging Face row ('HF best'), MFU 40.0%"]
    assert lines[3].startswith("small: not measured in this run: hf-fp32, hf-bf16, hf-compile, ours-nomask,")
    not_measured = lines[3].split(": ", 2)[-1].split(", ")
    assert "ours-stack" not in not_measured and "ours-stack-tuned" in not_measured and len(lines) == 4
    # the fastest row is a speed row (the padded vocabulary): the fastest step the chapters train with is named too
    mbert = pd.DataFrame([bench_row("mbert", "ours", "ours", ms_per_model_step=52.0, speedup_vs_best_hf=0.9, mfu=0.2),
                          bench_row("mbert", "ours-nomask-mm-padv", "padded", ms_per_model_step=37.0,
                                    speedup_vs_best_hf=1.28, mfu=0.29)])
    assert E.bench_case_lines(mbert)[1] == (
        "mbert: fastest of ours is 'padded', 1.28x the best Hugging Face row ('HF best'), MFU 29.0%; a speed row, "
        "which no chapter trains with before a training check passes; the fastest step the chapters train with is "
        "'ours', 0.90x, MFU 20.0%")


def test_fp8_lines_compare_with_the_bf16_engine_and_say_whether_the_check_is_worth_running():
    rows = [bench_row("base", "ours", "ours", ms_per_model_step=50.0),
            bench_row("base", "ours-mm", "ours + mm", ms_per_model_step=45.0),
            bench_row("base", "ours-fp8", "ours + FP8", ms_per_model_step=50.0),
            bench_row("mbert", "ours", "ours", ms_per_model_step=40.0),
            bench_row("mbert", "ours-fp8", "ours + FP8", ms_per_model_step=40.0),
            bench_row("small", "ours", "ours", ms_per_model_step=5.0)]  # no FP8 row: no line
    lines = E.fp8_lines(pd.DataFrame(rows))
    assert lines[0] == ("base: FP8 linear layers 50.00 ms per model-step against 45.00 ms in bf16 ('ours-mm', the "
                        "same engine without FP8; 0.90x)")
    assert lines[1].startswith("mbert: FP8 linear layers 40.00 ms per model-step against 40.00 ms in bf16 ('ours',")
    assert len(lines) == 3 and lines[2].startswith("FP8 makes no step at least 5% faster")
    rows[2] = bench_row("base", "ours-fp8", "ours + FP8", ms_per_model_step=40.0)  # 1.125x of ours-mm
    assert E.fp8_lines(pd.DataFrame(rows))[2].startswith("FP8 is faster here")
    assert E.fp8_lines(pd.DataFrame(rows[5:])) == []


def test_residual_lines_compare_the_two_streams_in_one_process(tmp_path):
    assert E.residual_lines(tmp_path) == []  # nothing published
    base = [bench_row("base", "hf-best", "HF best", ms_per_model_step=60.0, tf32=True),
            bench_row("base", "ours-nomask-mm", "f32", ms_per_model_step=50.0, tf32=True),
            bench_row("base", "ours-nomask-mm-bf16", "bf16", ms_per_model_step=48.0, tf32=True)]
    pd.DataFrame(base).to_csv(tmp_path / "bench-base.csv", index=False)
    pd.DataFrame([bench_row("mbert", "ours-nomask-mm", "f32", ms_per_model_step=40.0),
                  bench_row("mbert", "ours-nomask-mm-bf16", "bf16", ms_per_model_step=39.0,
                            status="failed: out of memory")]).to_csv(tmp_path / "bench-mbert.csv", index=False)
    lines = E.residual_lines(tmp_path)
    assert lines == [
        "The residual stream in bf16 (H200, torch 2.9, commit 0123456, 2026-01-02; one process per case)",
        "base: 48.00 ms per model-step with the bf16 stream against 50.00 ms with the float32 one (1.042x; against HF "
        "best in the same process 1.20x and 1.25x)",
        "mbert: no comparison (ours-nomask-mm ok; ours-nomask-mm-bf16 failed: out of memory)",
        "The bf16 stream makes no step at least 5% faster, so no chapter trains with it and no training check is "
        "declared for it"]
    pd.DataFrame([{**r, "tf32": False} for r in base]).to_csv(tmp_path / "bench-base.csv", index=False)
    assert E.residual_lines(tmp_path)[1].endswith("1.20x and 1.25x, HF best with TF32 off)")
    pd.DataFrame([bench_row("base", "ours-nomask-mm", "f32", ms_per_model_step=50.0),
                  bench_row("base", "ours-nomask-mm-bf16", "bf16", ms_per_model_step=45.0)]
                 ).to_csv(tmp_path / "bench-base.csv", index=False)  # 1.11x
    assert E.residual_lines(tmp_path)[-1].startswith("The bf16 stream is faster here: a chapter may train with it once")
    pd.DataFrame([bench_row("base", "ours-nomask-mm-bf16", "bf16", status="failed: out of memory")]
                 ).to_csv(tmp_path / "bench-base.csv", index=False)
    pd.DataFrame([bench_row("mbert", "ours-nomask-mm", "f32", status="skipped: budget")]
                 ).to_csv(tmp_path / "bench-mbert.csv", index=False)
    assert E.residual_lines(tmp_path) == ["The residual stream in bf16: no row ran (failed: out of memory; skipped: "
                                          "budget)"]


def test_hf_best_lines_put_ours_against_hf_best():
    hb = pd.DataFrame([bench_row("base", "hf-best", "HF best", ms_per_model_step=30.0, transformers="5.0"),
                       bench_row("base", "ours", "ours", ms_per_model_step=20.0, speedup_vs_best_hf=1.5, mfu=0.35,
                                 transformers="5.0")])
    assert E.hf_best_lines(hb) == ["H200, torch 2.9, transformers 5.0, commit 0123456, 2026-01-02",
                                   "base: ours 1.50x against HF best (20.0 against 30.0 ms), MFU 35.0%"]
    assert E.hf_best_view(hb).loc[("base", "ours")].tolist() == ["20.00", "9.00-12.00", "35.0%", "1.50x"]


def test_kernel_table_adds_all_kernels_per_case():
    prof = pd.DataFrame({"case": ["base"] * 3, "kind": ["matrix products", "attention", "matrix products"],
                         "engine_key": ["ours", "ours", "hf-fp32"], "ms_per_step": [3.0, 1.25, 7.5]})
    table = E.kernel_table(prof)
    assert table.columns.tolist() == ["ours (fused, compiled, CUDA graph)", "HF fp32"]  # in the order profiled
    assert table.loc[("base", "matrix products")].tolist() == ["3.00", "7.50"]
    assert table.loc[("base", "attention")].tolist() == ["1.25", ""]  # HF ran no attention kernel in that profile
    assert table.loc[("base", "all kernels")].tolist() == ["4.25", "7.50"]


def profiler_table(rows: list[tuple[str, str, int]], total: str) -> str:
    """A top-kernels table laid out as torch.profiler prints it (name right-aligned in 90 characters, ten columns
    of 12, two spaces between): rows of (name, self CUDA time, calls)."""
    columns = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self CUDA", "Self CUDA %",
               "CUDA total", "CUDA time avg", "# of Calls"]
    rule = "-" * 90 + "  " + "  ".join(["-" * 12] * 10) + "  "
    line = lambda name, cells: f"{name:>90}  " + "  ".join(f"{c:>12}" for c in cells) + "  "
    body = [line(name, ["0.00%", "0.000us", "0.00%", "0.000us", "0.000us", cuda, "1.00%", cuda, "1.000us", calls])
            for name, cuda, calls in rows]
    return "\n".join(["small, ours-stack: GPU time by kind of kernel (ms per step, share)",
                      "  matrix products                            6.00 ms   30.0%", "", rule,
                      line("Name", columns), rule, *body, rule, "Self CPU time total: 1.000ms",
                      f"Self CUDA time total: {total}", ""])


def stack_folder(tmp_path):
    """A stack of 4 models: 20 ms a stack-step (5 a model-step, MFU 5% of 1,000 TFLOP/s: 0.25 TFLOP a model-step),
    kernels of 20 ms a step (Triton 10, products 6, ATen 4), profiled for 5 steps (100 ms in the table)."""
    pd.DataFrame([bench_row("small", "ours-stack", "ours, 4 stacked", models=4, ms_per_step=20.0, ms_per_model_step=5.0,
                            mfu=0.05, peak_tflops=1000.0, width=8, date="2026-01-02T03:04:05+00:00")]).to_csv(
        tmp_path / "bench_small_stack.csv", index=False)
    pd.DataFrame({"case": ["base", "small", "small", "small"], "engine_key": ["ours"] + ["ours-stack"] * 3,
                  "kind": ["matrix products", "fused element-wise (Triton)", "matrix products",
                           "element-wise and reductions (ATen)"],
                  "ms_per_step": [50.0, 10.0, 6.0, 4.0], "share": [1.0, 0.5, 0.3, 0.2]}).to_csv(
        tmp_path / "profile.csv", index=False)
    (tmp_path / "profile-small-ours-stack.txt").write_text(profiler_table([
        ("triton_red_fused__softmax__to_copy_masked_fill_native_dropout_0", "30.000ms", 10),
        ("triton_poi_fused_gelu_gelu_backward_1", "10.000ms", 10),
        ("nvjet_sm90_tst_64x64_64x13_1x2_h_bz_NNT", "8.000ms", 50),
        ("triton_per_fused__to_copy_add_baddbmm_mul_native_dropout_native_layer_norm_2", "5.000ms", 10),
        ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::nati...", "4000.000us",
         35),
    ], "100.000ms"))
    return tmp_path


def test_read_top_kernels_reads_names_with_spaces_and_every_unit(tmp_path):
    table, total = E.read_top_kernels(stack_folder(tmp_path) / "profile-small-ours-stack.txt")
    assert total == 100.0 and table["calls"].tolist() == [10, 10, 50, 10, 35]
    assert table["name"].iloc[4] == ("void at::native::elementwise_kernel<128, 4, "
                                     "at::native::gpu_kernel_impl_nocast<at::nati...")
    assert table["self_cuda_ms"].tolist() == pytest.approx([30.0, 10.0, 8.0, 5.0, 4.0])
    (tmp_path / "bad.txt").write_text("no table here\n")
    with pytest.raises(ValueError, match="no profiler table"):
        E.read_top_kernels(tmp_path / "bad.txt")


def test_kernel_role_names_the_fused_kernels_of_a_bert_step():
    assert E.kernel_role("triton_red_fused__softmax__softmax_backward_data__to_copy_n...") == \
        "attention softmax + dropout, backward"
    assert E.kernel_role("triton_red_fused__log_softmax__to_copy_prepare_softmax_online_view_5") == \
        "MLM loss (log-softmax), forward"
    assert E.kernel_role("triton_poi_fused_gelu_7") == "GELU, forward"
    assert E.kernel_role("triton_per_fused__to_copy_add_mul_native_dropout_native_dropout_backward_native_layer_n...") \
        == "LayerNorm + dropout + residual, backward"
    # a Triton kernel named after the product it reads from is element-wise; cuBLAS's kernels are products
    assert E.kernel_role("triton_poi_fused__unsafe_view_bmm_clone_transpose_view_15") == "fused element-wise (Triton)"
    assert E.kernel_role("nvjet_sm90_tst_64x512_64x2_1x2_h_badd_coopB_TNT") == "matrix products"


def test_small_stack_profile_per_stack_and_per_model_step(tmp_path):
    prof = E.small_stack_profile(stack_folder(tmp_path))
    assert prof.kinds.index.tolist() == ["fused element-wise (Triton)", "matrix products",
                                         "element-wise and reductions (ATen)", "all kernels"]
    assert prof.kinds.loc["fused element-wise (Triton)"].tolist() == ["10.00", "2.500", "50.0%"]
    assert prof.kinds.loc["all kernels"].tolist() == ["20.00", "5.000", "100.0%"]
    first = prof.kernels.iloc[0]  # 30 ms over 5 steps, 10 calls over 5 steps, 30 of the table's 100 ms
    assert first.tolist() == ["attention softmax + dropout, forward", "fused element-wise (Triton)", "6.00", "1.500",
                              "30.0%", "2"]
    norm = prof.kernels.iloc[3]  # fused element-wise, though its name holds the baddbmm it was fused around
    assert norm.tolist()[:3] == ["LayerNorm + dropout + residual, forward", "fused element-wise (Triton)", "1.00"]
    assert prof.run == ("small, 4 models stacked (ours-stack): H200, torch 2.9, commit 0123456, 2026-01-02; kernel "
                        "profile of 5 steps after the timed ones")
    r = prof.reading
    assert "step at 20.00 ms per stack-step, 5.00 ms per model-step (5.0% MFU)" in r
    assert "fused element-wise (Triton) 10.00 ms (50.0%), matrix products 6.00 ms (30.0%)" in r
    assert "comes 1st (forward, 6.00 ms per stack-step)" in r and "GELU 0.00 ms forward and 2.00 ms backward" in r
    assert "the kernels that fuse LayerNorm, dropout and the residual (1 of them, forward and backward) 1.00 ms" in r
    assert "the largest ATen element-wise kernel (7 calls a step, its name cut by the profiler) 0.80 ms" in r
    # products: profile.csv's 6.00 ms at most (1.50 a model-step); cuBLAS's among the top kernels 1.60 (0.40)
    # 1 ms a model-step: 0.25 TFLOP in 1 ms = 250 TFLOP/s, 25% of 1,000; the products alone need 1.50 ms
    assert "0.250 TFLOP of useful work at 250 TFLOP/s, 25.0% MFU" in r
    assert "take 0.40-1.50 ms per model-step" in r and "run 1.50x faster with every other kernel, now 3.50 ms" in r
    # 2 ms a model-step: everything else has 2 - 1.5 = 0.5 ms against 5 - 1.5 = 3.5 now, 7-fold less
    assert "fit in 0.50 ms per model-step, against 3.50 ms now (7.0-fold less)" in \
        E.small_stack_profile(tmp_path, target_ms=2.0).reading


def test_small_stack_profile_names_the_copies_behind_the_aten_kernels_when_the_operators_were_profiled(tmp_path):
    folder = stack_folder(tmp_path)
    assert "Behind the ATen" not in E.small_stack_profile(folder).reading
    rows = [("aten::copy_", "[[4, 100, 64], [4, 100, 64], []]", 0.5, 60.0),
            ("aten::copy_", "[[4, 100, 256], [4, 100, 256], []]", 0.3, 12.0),
            ("aten::copy_", "[[8, 3], [8, 3], []]", 0.2, 1.0),  # not the stack's: left out
            ("aten::copy_", "[[4, 64, 64], [4, 64, 64], []]", 0.1, 49.0),  # a weight's cast, not an output: left out
            ("aten::baddbmm", "[[4, 100, 64], [4, 100, 64], [4, 64, 64], [], [], [4, 100, 64]]", 2.0, 48.0),
            ("aten::baddbmm", "[[4, 100, 256], [4, 100, 64], [4, 64, 256], [], [], [4, 100, 256]]", 1.0, 12.0),
            ("aten::baddbmm", "[[4, 100, 64], [4, 100, 256], [4, 256, 64], [], [], [4, 100, 64]]", 1.0, 12.0),
            ("aten::bmm", "[[4, 100, 64], [4, 64, 64]]", 2.0, 24.0),
            ("aten::fill_", "[]", 0.01, 1.0)]
    pd.DataFrame(rows, columns=["op", "shapes", "ms_per_step", "calls_per_step"]).to_csv(
        folder / "profile-ops-small-ours-stack.csv", index=False)
    r = E.small_stack_profile(folder).reading
    assert ("`profile-ops-small-ours-stack.csv`): `aten::copy_` of the stack's activations, [4, 100, 64] 60 a step "
            "(0.50 ms); [4, 100, 256] 12 a step (0.30 ms); 0.80 ms per stack-step in all, 72 copies a step, as many as "
            "the `baddbmm` calls of those shapes.") in r
    assert "\n\n\n" not in r
    ops = pd.read_csv(folder / "profile-ops-small-ours-stack.csv")
    assert E.bias_copies(ops.drop(index=[0, 1]), 4, "x") == ""  # no copy into a product's output
    assert E.bias_copies(ops[ops.op != "aten::baddbmm"], 4, "x") == ""  # no baddbmm: nothing to say
    # fewer products than copies of a shape: the counts are given, not matched
    fewer = ops.assign(calls_per_step=ops.calls_per_step.where(ops.op != "aten::baddbmm", 6.0))
    assert "72 copies a step against 18 `baddbmm` calls of those shapes" in E.bias_copies(fewer, 4, "x")


def test_small_stack_profile_checks_its_arguments(tmp_path):
    folder = stack_folder(tmp_path)
    with pytest.raises(ConfigError, match="target_ms must be positive"):
        E.small_stack_profile(folder, target_ms=0)
    with pytest.raises(ConfigError, match="top must be a positive whole number"):
        E.small_stack_profile(folder, top=0)
    pd.DataFrame({"case": ["base"], "engine_key": ["ours"], "kind": ["other"], "ms_per_step": [1.0],
                  "share": [1.0]}).to_csv(folder / "profile.csv", index=False)
    with pytest.raises(ValueError, match="no rows for small, ours-stack; valid choices: base, ours"):
        E.small_stack_profile(folder)
    with pytest.raises(FileNotFoundError, match="bench_small_stack.csv"):
        E.small_stack_profile(tmp_path / "missing")


def test_step_profile_reads_the_base_and_mbert_rows_only(tmp_path):
    extra = {"device": "H200", "torch": "2.9", "commit": "abc1234", "date": "2026-01-02"}
    pd.DataFrame([{"case": "base", "engine_key": "ours", "kind": "matrix products", "ms_per_step": 30.0, **extra},
                  {"case": "base", "engine_key": "ours", "kind": "other", "ms_per_step": 10.0, **extra},
                  {"case": "small", "engine_key": "ours-stack", "kind": "other", "ms_per_step": 70.0,
                   **{**extra, "commit": "def5678"}}]).to_csv(tmp_path / "profile.csv", index=False)
    row = {"ms_per_step": 20.0, "min": 19.0, "max": 21.0, "tflops": 500.0, "warmup_s": 1.0}
    (tmp_path / "base_probe.json").write_text(json.dumps({**extra, "rows": [
        {"variant": v, **row} for v in ("gemm", "nodrop", "nomask-flash", "autotune")]}))
    step = E.step_profile(tmp_path)
    assert step.kernels.index.get_level_values(0).unique().tolist() == ["base"]
    assert step.kernels.loc[("base", "all kernels")].tolist() == ["40.00"]
    assert step.kernels_run == "H200, torch 2.9, commit abc1234, 2026-01-02"


def test_compile_check_counts_the_shapes_without_a_failed_step(tmp_path):
    record = {"seconds": 300, "device": "H100", "torch": "2.9", "commit": "abc1234", "date": "2026-01-02",
              "stacks": [{"shape": "16 x 1 head", "step": 900, "fallbacks": []},
                         {"shape": "24 x 1 head", "step": 700, "fallbacks": [12, 40]}]}
    (tmp_path / "t7.json").write_text(json.dumps(record))
    table, line = E.compile_check(tmp_path / "t7.json")
    assert table["compiled steps failed"].tolist() == [0, 2]
    assert table["steps in 300 s"].tolist() == [900, 700] and table.index.tolist() == ["16 x 1 head", "24 x 1 head"]
    assert line == "2 shapes, 1 of them without a failed compiled step\nH100, torch 2.9, commit abc1234, 2026-01-02"


def test_grid_wall_lists_each_stacks_models(tmp_path):
    (tmp_path / "wall.json").write_text(json.dumps({"wall_seconds": 396, "gpus": ["H200", "H200"], "exit_code": 0,
                                                    "arguments": "--compile"}))
    for k, members in enumerate([["10/0", "2/0", "2/42"], ["1/0"]]):
        (tmp_path / "stacks" / str(k)).mkdir(parents=True)
        (tmp_path / "stacks" / str(k) / "timing.json").write_text(json.dumps(
            {"members": members, "steps": 100, "train_seconds": 50.25, "wall_seconds_incl_eval": 60.0,
             "device": "H200"}))
    table, line = E.grid_wall(tmp_path)
    assert table["model IDs"].tolist() == ["2,10", "1"] and table["models"].tolist() == [3, 1]
    assert table["training time (s)"].tolist() == ["50.2", "50.2"]  # 50.25 to one decimal, half to even
    assert line == "grid wall time: 396 s (6.6 min) on 2 x H200, exit code 0; arguments: --compile"


def test_floor_by_size_sums_each_size_and_all():
    floor = pd.DataFrame({"size": ["small", "small", "base"], "models": [5, 5, 5], "model_steps": [100, 200, 50],
                          "tflop_per_model_step": [0.5, 0.5, 4.0], "pflop": [0.05, 0.1, 0.2],
                          "seconds_at_peak": [50.0, 100.0, 200.0]})
    by_size = E.floor_by_size(floor)
    assert by_size.index.tolist() == ["small", "base", "all"]
    assert by_size.loc["small"].tolist() == [10, 300, 0.5, pytest.approx(0.15), 150.0]
    assert by_size.loc["all", "seconds_at_peak"] == 350.0 and by_size.loc["all", "models"] == 15
    assert math.isnan(by_size.loc["all", "tflop_per_model_step"])


def test_spread_runs_fill_the_early_runs_defaults_and_divide_by_the_one_gpu_run():
    def run(gpus, wall, **extra):
        return {"epochs": 20, "plan": "dealt in turn", "commit": "abc", "gpus": gpus, "wall_seconds": wall,
                "gpu_names": ["H200"], "exit_code": 0, "stacks": [{"wall_seconds_incl_eval": wall - 10,
                                                                  "eval_seconds_this_call": 4.0}], **extra}
    spread = [run(2, 60.0), run(1, 100.0), run(1, 80.0, evaluation="stacked", models="16-17 (BERT-base)")]
    runs = E.spread_runs(spread)
    assert spread[0]["models"] == E.SMALL and spread[0]["evaluation"] == "per-model"  # filled in
    assert runs[["models", "GPUs", "evaluation"]].values.tolist() == [  # models in descending order, then GPUs
        ["16-17 (BERT-base)", 1, "stacked"], [E.SMALL, 1, "per-model"], [E.SMALL, 2, "per-model"]]
    assert runs["speed-up vs 1 GPU"].tolist() == pytest.approx([1.0, 1.0, 100 / 60])
    assert runs["each stack, training + evaluation (s)"].tolist() == ["70", "90", "50"]


def test_p_means_differ_by_one_std_known_answers():
    assert E.p_means_differ_by_one_std(2) == pytest.approx(0.3173, abs=1e-4)  # the difference has std 1: 2 P(Z > 1)
    assert E.p_means_differ_by_one_std(5) == pytest.approx(0.1138, abs=1e-4)  # std sqrt(0.4): 2 P(Z > 1.581)
    with pytest.raises(ValueError, match="seeds must be 1 or more; got 0"):
        E.p_means_differ_by_one_std(0)


def test_data_parallel_lines_give_the_one_gpu_step_from_the_scaling_efficiency():
    d = pd.DataFrame([bench_row("base-dp", "ours-ddp", "ours DDP", gpus=2, ms_per_step=100.0, scaling_efficiency=0.8,
                                tokens_per_s_all=2_500_000.0),
                      bench_row("base-dp", "hf-compile-ddp", "HF DDP", gpus=2, status="timeout",
                                scaling_efficiency=float("nan"), tokens_per_s_all=float("nan"))])
    assert E.data_parallel_lines(d) == [
        "H200 x 2, torch 2.9, commit 0123456789, 2026-01-02;\nmedian of 3 repeats of 50 steps",
        "ours DDP:\n  100.0 ms per step on 2 GPUs against 80.0 on one: scaling efficiency 80%, 2.50M pieces/s in all",
        "HF DDP: timeout"]
    assert E.data_parallel_view(d)["scaling efficiency"].tolist() == ["80%", ""]


def test_equivalence_table_gives_mean_std_and_seeds():
    eq = pd.DataFrame({"experiment": ["0"] * 3, "engine": ["vmap", "vmap", "fused"], "metric": ["mu"] * 3,
                       "value": [0.5, 0.7, 0.9]})
    table = E.equivalence_table(eq, metrics=["mu"])
    assert table["µ"].tolist() == ["0.900 ± 0.000 (n=1)", "0.600 ± 0.141 (n=2)"]
    assert table.index.tolist() == [("0", "fused"), ("0", "vmap")]


def test_rerun_reading_names_each_seed_and_the_training_times(tmp_path):
    rerun = pd.DataFrame([
        {"model": "0", "seed": 42, "alone_engine": "eager", "metric": "mu", "published": 0.8, "alone": 0.79,
         "difference": -0.01},
        {"model": "0", "seed": 42, "alone_engine": "eager", "metric": "ppl_train", "published": 20.04,
         "alone": 21.0, "difference": 0.96}])
    for folder, seconds in (("rerun", (30.4, 10.0)), ("rerun_compiled", (8.0, 9.6))):
        for k, s in enumerate(seconds):
            (tmp_path / folder / "stacks" / str(k)).mkdir(parents=True)
            (tmp_path / folder / "stacks" / str(k) / "timing.json").write_text(json.dumps({"train_seconds": s}))
    assert E.rerun_reading(rerun, tmp_path) == (
        "- seed 42, eager: µ 0.800 in the grid, 0.790 alone (difference -0.010); train perplexity 20.0 and 21.0\n"
        "\nTraining took 10 and 30 s eager, 8 and 10 s compiled, compiling included.")


def _write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)


def test_hf_best_ratios_take_each_case_from_the_first_run_that_timed_it_with_tf32_else_the_first_with_its_card():
    h200 = pd.DataFrame([bench_row("base", "hf-best", "HF best"), bench_row("base", "ours", "ours", speedup_vs_best_hf=1.5)])
    h100 = pd.DataFrame([bench_row("base", "hf-best", "HF best", device="NVIDIA H100 80GB HBM3"),
                         bench_row("base", "ours", "ours", speedup_vs_best_hf=9.0, device="NVIDIA H100 80GB HBM3"),
                         bench_row("bbert", "hf-best", "HF best", device="NVIDIA H100 80GB HBM3"),
                         bench_row("bbert", "ours", "ours", speedup_vs_best_hf=1.25, device="NVIDIA H100 80GB HBM3"),
                         bench_row("small", "hf-best", "HF best", device="NVIDIA H100 80GB HBM3"),
                         bench_row("small", "ours", "ours", status="skipped: budget", speedup_vs_best_hf=None)])
    assert E.hf_best_ratios(h200, h100) == {"base": (1.5, "H200, TF32 off"), "bbert": (1.25, "H100, TF32 off")}
    with_tf32 = h200.assign(tf32=[True, True])  # hf-best timed with TF32: nothing to mark
    assert E.hf_best_ratios(with_tf32, h100)["base"] == (1.5, "H200")
    later = h100.assign(tf32=True)  # a later run with TF32 outranks an earlier one without it
    assert E.hf_best_ratios(h200, later) == {"base": (9.0, "H100"), "bbert": (1.25, "H100")}


def test_gpu_cost_table_from_hand_made_records(tmp_path):
    # the grid: stack 1 (small models a, b: 600 s) and stack 2 (b: 300 s) serve chapter one; stack 3 (a base model
    # c: 1,200 s) only chapter two's tables list
    _write(tmp_path / "dufter2020" / "runtime.csv", "experiment,seed,stack,metric,value\n"
           "\"a,b\",-1,1,models,4\n\"a,b\",-1,1,train_seconds,600\nb,-1,2,models,2\nb,-1,2,train_seconds,300\n"
           "c,-1,3,models,1\nc,-1,3,train_seconds,1200\n")
    _write(tmp_path / "dufter2020" / "run_record_one.json", {"chapter": "one", "training devices": "NVIDIA H200"})
    _write(tmp_path / "multilingual" / "mini_mbert_training.json", {"seconds": 300, "device": "NVIDIA H200",
                                                                    "vocab_size": 32000})
    _write(tmp_path / "liu2020" / "pilot" / "pilot.json", {"experiment": "p", "train_seconds": "540",
                                                           "eval_seconds": "60", "device": "NVIDIA H200",
                                                           "config": str({"model": {"hidden": 768, "layers": 12}})})
    _write(tmp_path / "k2020" / "run_record_arch.json", {
        "chapter": "arch", "training devices": "NVIDIA H100 80GB HBM3, NVIDIA H200",
        "pre-training": "90 worker-minutes for its 9 published models", "date": "2026-01-02 10:00 UTC"})
    work = E.published_gpu_work(tmp_path, grid_chapters={"one": {"a", "b"}, "two": {"a", "c"}},
                                grid_shapes={"a": (64, 12, None), "b": (64, 12, None), "c": (768, 12, None)},
                                lab_shape=(256, 4, None))
    # the bench: hf-best timed for base (ours 1.5x) and mbert (ours 2x); small only against HF compile (ours 4x)
    hb = pd.DataFrame([bench_row("base", "hf-best", "HF best"), bench_row("base", "ours", "ours", speedup_vs_best_hf=1.5),
                       bench_row("mbert", "hf-best", "HF best"), bench_row("mbert", "ours", "ours", speedup_vs_best_hf=2.0)]
                      ).assign(tf32=True)
    bench = pd.DataFrame([bench_row("small", "hf-compile", "HF compiled", best_hf_engine="HF compiled"),
                          bench_row("small", "ours", "ours", speedup_vs_best_hf=4.0, best_hf_engine="HF compiled")])
    ratios = E.hf_best_ratios(hb, bench)
    assert ratios == {"base": (1.5, "H200"), "mbert": (2.0, "H200")}
    table = E.gpu_cost_table(work, ratios, bench).reset_index()
    assert table["chapter"].tolist() == ["one", "two", "multilingual lab", "pilot", "arch"]
    assert table["measured"].tolist() == ["15 GPU-minutes", "20 GPU-minutes", "5.0 GPU-minutes", "10 GPU-minutes",
                                          "90 worker-minutes"]
    assert table["card"].tolist() == ["H200", "H200", "H200", "H200", "H100, H200"]
    assert table.loc[0, "work"] == "2 stacks, 6 models of hidden 64 (runtime.csv)"
    assert table["at hf-best's speed"].tolist() == ["–", "30 GPU-minutes", "–", "15 GPU-minutes", "–"]
    assert table["ratio used"].tolist() == [
        "none: the small case was timed against HF compiled only, not hf-best (ours, one model: 4.00x that)",
        "base: ours 1.50x hf-best (H200)",
        "none: no bench case of this shape (hidden 256, 4 layers, 32,000 pieces)",
        "base: ours 1.50x hf-best (H200)",
        "none: the record does not give the models' shape"]
    assert E.bench_case((768, 12, 119_547)) == "mbert" and E.bench_case((768, 12, 4096)) == "base"
    assert E.bench_case((192, 12, 20_480)) == "bbert" and E.bench_case((192, 6, 20_480)) is None
    with pytest.raises(ValueError, match="serves none of the chapters one"):
        E.grid_work(pd.read_csv(tmp_path / "dufter2020" / "runtime.csv", dtype={"experiment": str}), {"one": {"a"}},
                    {"a": (64, 12, None), "b": (64, 12, None), "c": (768, 12, None)}, "H200")


def test_card_names_keep_the_cards_alone_each_once():
    assert E._card("NVIDIA H100 80GB HBM3, NVIDIA H200") == "H100, H200"
    assert E._card("NVIDIA H200 (the published run), NVIDIA H200 (the published runs)") == "H200"
    assert E._card("") == ""


def test_table3_work_sums_the_pretraining_gpu_share_and_the_fine_tunings_worker_time(tmp_path):
    rows = [("0", 0, "pretrain_gpu_seconds", "all", 90.0), ("0", 42, "pretrain_gpu_seconds", "all", 30.0),
            ("0", 0, "finetune_seconds", "en", 600.0), ("0", 42, "finetune_seconds", "en", 300.0),
            ("0", 0, "accuracy", "en", 0.5)]
    path = tmp_path / "table3.csv"
    pd.DataFrame(rows, columns=["experiment", "seed", "metric", "language", "value"]).to_csv(path, index=False)
    pre, fine = E.table3_work(path, "H200", (384, 12, 18000))
    assert (pre.minutes, pre.unit, pre.chapter, pre.shape) == (2.0, "GPU-minutes", "knn_replace", (384, 12, 18000))
    assert pre.what == "Table 3's pre-training: 2 models (table3.csv)"
    assert (fine.minutes, fine.unit) == (15.0, "worker-minutes")
    assert fine.what == "Table 3's fine-tunings: 2 runs, every rate of each (table3.csv)"
    # a run that recorded neither (before these rows existed): no work
    pd.DataFrame(rows[-1:], columns=["experiment", "seed", "metric", "language", "value"]).to_csv(path, index=False)
    assert E.table3_work(path, "H200", None) == []
    # the pilot beside it: its pretraining GPU-minutes first
    pilot = [("0@a", 0, "pretrain_gpu_seconds", "all", 40.0), ("30@a", 0, "pretrain_gpu_seconds", "all", 40.0),
             ("0@b", 0, "pretrain_gpu_seconds", "all", 50.0), ("0@b", 0, "pretrain_loss", "all", 3.0)]
    pd.DataFrame(pilot, columns=["experiment", "seed", "metric", "language", "value"]).to_csv(
        tmp_path / "table3_pilot.csv", index=False)
    (tried,) = E.table3_work(path, "H200", None)
    assert (tried.minutes, tried.unit, tried.what) == (pytest.approx(130 / 60), "GPU-minutes",
                                                       "Table 3's pilot: 3 models pre-trained (table3_pilot.csv)")


def test_pilot_stack_work_sums_each_pilots_stacks(tmp_path):
    for name, rec in {"stack_a.json": {"members": ["en-es/0", "en-es/1"], "shape": "L12H12d192", "train_seconds": 90,
                                       "device": "NVIDIA H200"},
                      "stack_b.json": {"members": ["en-ru/0"], "shape": "L12H12d192", "train_seconds": 30,
                                       "device": "NVIDIA H100 80GB HBM3"}}.items():
        _write(tmp_path / "pilot_alltext" / name, rec)
    _write(tmp_path / "pilot_empty" / "config_x.json", {})  # no stack record: no work
    _write(tmp_path / "pilot_alltext.csv", "not a folder")
    work = E.pilot_stack_work(tmp_path, "k2020", "linguistic")
    assert len(work) == 1
    w = work[0]
    assert (w.minutes, w.unit, w.card, w.shape) == (2.0, "GPU-minutes", "H100, H200", (192, 12, None))
    assert w.what == "alltext pilot's pre-training: 2 stacks, 3 models (pilot_alltext/stack_*.json)"
    # a recipe's stacks are counted too, except one a pilot already counted
    _write(tmp_path / "recipe_alltext" / "stack_a.json", {"members": ["en-es/0", "en-es/1"], "shape": "L12H12d192",
                                                          "train_seconds": 90, "device": "NVIDIA H200"})
    _write(tmp_path / "recipe_alltext" / "stack_c.json", {"members": ["enfake-es/id/0"], "shape": "L12H12d192",
                                                          "train_seconds": 60, "device": "NVIDIA H200"})
    pilot, recipe = E.pilot_stack_work(tmp_path, "k2020", "linguistic")
    assert (recipe.minutes, recipe.card) == (1.0, "H200")
    assert recipe.what == "alltext recipe's pre-training: 1 stacks, 1 models (recipe_alltext/stack_*.json)"


def test_gain_lines_split_each_case_s_speed_up_into_algorithmic_and_kernel_steps():
    rows = [("base", "hf-compile", 60.0), ("base", "hf-best", 50.0), ("base", "ours", 40.0),
            ("base", "ours-nomask-mm", 32.0), ("small", "hf-compile", 24.0), ("small", "ours", 6.0),
            ("small", "ours-stack", 4.0), ("small", "ours-nomask-mm", 5.0), ("small", "ours-stack-tuned", 3.2),
            ("mbert", "ours-nomask-mm", 48.0), ("mbert", "ours-nomask-mm-padv", 36.0)]
    table = pd.DataFrame(rows, columns=["case", "engine_key", "ms_per_model_step"]).assign(status="ok")
    table.loc[len(table)] = ["small", "hf-best", 1.0, "skipped: budget"]  # not timed: the head is not told apart
    base, small, mbert = E.gain_lines(table)
    assert mbert == ("mbert, where the speed comes from: the output layer's product over the vocabulary padded to a "
                     "multiple of 64 (aligned kernels): 1.33x (ours-nomask-mm 48.00 to ours-nomask-mm-padv 36.00 ms; "
                     "kernels: layout)")
    assert base == ("base, where the speed comes from: the output layer at the masked positions only, and CUDA graphs: "
                    "1.20x (hf-compile 60.00 to hf-best 50.00 ms; algorithmic: any user can write it); our fused loss "
                    "and regionally compiled step, the same algorithm: 1.25x (hf-best 50.00 to ours 40.00 ms; kernels); "
                    "no attention mask on full rows and the bias outside the product: 1.25x (ours 40.00 to "
                    "ours-nomask-mm 32.00 ms; kernels: layout)")
    assert "and our kernels: 4.00x (hf-compile 24.00 to ours 6.00 ms; both together: hf-best was not timed" in small
    assert "several models stacked in one step: 1.50x (ours 6.00 to ours-stack 4.00 ms; algorithmic" in small
    assert "1.20x (ours 6.00 to ours-nomask-mm 5.00 ms" in small
    assert small.endswith("the stack's batched products autotuned (Triton templates where they win, which add the bias in the "
                          "product): "
                          "1.25x (ours-stack 4.00 to ours-stack-tuned 3.20 ms; kernels)")


def test_the_second_linear_check_is_shown_as_declared_until_its_run_then_with_its_outcome(tmp_path):
    table1 = tmp_path / "table1.csv"
    pd.DataFrame([{"experiment": e, "seed": s, "metric": "mu", "value": v}
                  for e in ("0", "1") for s, v in ((0, 0.0), (1, 2 ** 0.5))]).to_csv(table1, index=False)
    table, text = E.linear_check2_view(tmp_path / "linear_check2", table1)
    assert table is None and text.startswith("**A second check, declared before its runs**")
    assert "at most 1.5 times the median within an engine" in text and "Not yet run:" in text
    (tmp_path / "linear_check2").mkdir()
    runs = {"baddbmm-1": ("baddbmm", 0.0), "baddbmm-2": ("baddbmm", 1.0), "mm-1": ("mm", 3.0), "mm-2": ("mm", 4.0)}
    pd.DataFrame([{"run": r, "linear": lin, "experiment": e, "seed": s, "metric": "mu", "value": v}
                  for r, (lin, v) in runs.items() for e in ("0", "1") for s in (0, 1)]).to_csv(
        tmp_path / "linear_check2" / "metrics.csv", index=False)
    table, text = E.linear_check2_view(tmp_path / "linear_check2", table1)
    # within: 1 std; across: 3 std; ratio 3 > 1.5
    assert table.loc["mu"].tolist() == ["1.00", "3.00", "3.00"]
    assert "**Result.** It fails for mu (ratio 3.00): `--linear mm` stays an option, and the grid keeps the bias " \
           "inside the product.\n\n" in text and "Trained at" not in text  # no run record
    # the means after the run: both mm runs (3, 4) above both baddbmm runs (0, 1) in mu; 4 models
    assert "each run's mean over its 4 models (means, where the criterion takes medians so that one diverged seed " \
           "does not decide). In 1 of 1 metrics both mm runs lie on the same side of both baddbmm runs (mu)" in text
    assert text.endswith("| metric | baddbmm-1 | baddbmm-2 | mm-1 | mm-2 |\n|---|---|---|---|---|\n| mu | 0 | 1 | 3 | 4 |\n")
    (tmp_path / "linear_check2" / "timing.json").write_text(json.dumps(
        {"commit": "abc1234", "date": "2026-01-02", "machine": "2 x H200", "torch": "2.11",
         "stacks": [{"models": 4, "train_seconds": s} for s in (250.4, 283.7, 260.0, 233.2)]}))
    assert "Trained at abc1234 with torch 2.11 on 2026-01-02, on 2 x H200: 4 stacks of 4 models, 233-284 s of " \
           "training each." in E.linear_check2_view(tmp_path / "linear_check2", table1)[1]
    # interleaved runs: no metric apart
    mixed = {"baddbmm-1": ("baddbmm", 0.0), "baddbmm-2": ("baddbmm", 3.0), "mm-1": ("mm", 1.0), "mm-2": ("mm", 4.0)}
    pd.DataFrame([{"run": r, "linear": lin, "experiment": e, "seed": s, "metric": "mu", "value": v}
                  for r, (lin, v) in mixed.items() for e in ("0", "1") for s in (0, 1)]).to_csv(
        tmp_path / "linear_check2" / "metrics.csv", index=False)
    assert "In 0 of 1 metrics both mm runs lie on the same side of both baddbmm runs (none)" in \
        E.linear_check2_view(tmp_path / "linear_check2", table1)[1]


def test_unaligned_lines_name_the_time_our_step_spends_in_unaligned_products(tmp_path):
    """mbert, profiled for 5 steps: our fastest profiled row (ours-nomask-mm, 48 ms) runs two align1 kernels of 40 and
    20 ms over those steps (12 ms a step) beside an aligned one; HF best (46 ms) runs none. Listed with the vocabulary
    of the case, and with the padded row once the bench has it (40 ms: 1.15x HF best). The base case, whose step runs
    no such kernel, gets no line; nor does a case without profiles."""
    table = pd.DataFrame([bench_row("mbert", "hf-best", "HF best", ms_per_model_step=46.0),
                          bench_row("mbert", "ours", "ours", ms_per_model_step=52.0),
                          bench_row("mbert", "ours-nomask-mm", "ours fastest", ms_per_model_step=48.0),
                          bench_row("base", "hf-best", "HF best", ms_per_model_step=56.0),
                          bench_row("base", "ours-nomask-mm", "ours fastest", ms_per_model_step=48.0)])
    pd.DataFrame({"case": ["mbert"] * 3 + ["base"] * 2,
                  "engine_key": ["hf-best", "ours", "ours-nomask-mm", "hf-best", "ours-nomask-mm"],
                  "kind": ["matrix products"] * 5, "ms_per_step": [46.0, 52.0, 48.0, 56.0, 48.0]}).to_csv(
        tmp_path / "profile.csv", index=False)
    ours_kernels = [("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1>(cutlas...",
                     "40.000ms", 5),
                    ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_nn_align1>(cutlas...",
                     "20000.000us", 5),
                    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "180.000ms", 300)]
    (tmp_path / "profile-mbert-ours-nomask-mm.txt").write_text(profiler_table(ours_kernels, "240.000ms"))
    (tmp_path / "profile-mbert-hf-best.txt").write_text(profiler_table(ours_kernels[2:], "230.000ms"))
    (tmp_path / "profile-base-ours-nomask-mm.txt").write_text(profiler_table(ours_kernels[2:], "240.000ms"))
    lines = E.unaligned_lines(table, tmp_path)
    assert lines == ["mbert: our fastest profiled step ('ours fastest', 48.0 ms) spends about 12.0 ms in matrix "
                     "products on unaligned operands (kernels named '*align1*', which cuBLAS falls back to when a "
                     "dimension is not a multiple of 8: here the output layer's 119,547 pieces); HF best's compiled "
                     "step runs none (Inductor pads the `mm`, `bmm` and `addmm` products of a compiled graph to "
                     "aligned sizes where its timing favours it, `torch._inductor.fx_passes.pad_mm`: HF's output layer "
                     "is an `addmm`, ours a `baddbmm`, which that pass leaves alone). `Levers(pad_vocab=64)` pads the "
                     "product (bench row 'ours-nomask-mm-padv'), not "
                     "timed in this run"]
    padded = pd.concat([table, pd.DataFrame([bench_row("mbert", "ours-nomask-mm-padv", "padded",
                                                       ms_per_model_step=40.0)])], ignore_index=True)
    assert E.unaligned_lines(padded, tmp_path)[0].endswith(
        "leaves alone). With the product padded to a multiple of 64 rows ('ours + no mask + bias outside the product + "
        "vocabulary padded to 64'): 40.0 ms, 1.15x HF best, HF best with TF32 off")
    assert E.unaligned_lines(padded.assign(tf32=True), tmp_path)[0].endswith("40.0 ms, 1.15x HF best")
    assert E.unaligned_lines(padded, tmp_path)[1].startswith("mbert: the padded product changes numbers by rounding "
                                                            "alone")
    assert len(E.unaligned_lines(table, tmp_path)) == 1  # no speed row to speak of before it is timed
    # the padded row profiled too (no unaligned kernel, and faster): the line still reads the unpadded engine
    prof = pd.read_csv(tmp_path / "profile.csv")
    pd.concat([prof, pd.DataFrame([{"case": "mbert", "engine_key": "ours-nomask-mm-padv", "kind": "matrix products",
                                    "ms_per_step": 40.0}])]).to_csv(tmp_path / "profile.csv", index=False)
    (tmp_path / "profile-mbert-ours-nomask-mm-padv.txt").write_text(profiler_table(ours_kernels[2:], "200.000ms"))
    assert E.unaligned_lines(padded.assign(tf32=True), tmp_path)[0] == lines[0].replace(
        "`Levers(pad_vocab=64)` pads the product (bench row 'ours-nomask-mm-padv'), not timed in this run",
        "With the product padded to a multiple of 64 rows ('ours + no mask + bias outside the product + vocabulary "
        "padded to 64'): 40.0 ms, 1.15x HF best")
    failed = padded.assign(status=["ok"] * 5 + ["failed: out of memory"])
    assert E.unaligned_lines(failed, tmp_path)[0].endswith(
        "leaves alone). The row with the product padded ('ours-nomask-mm-padv'): failed: out of memory")
    assert len(E.unaligned_lines(failed, tmp_path)) == 1
    assert E.unaligned_lines(table, tmp_path / "none") == []


def test_tf32_lines_bound_the_ratio_by_hf_best_s_float32_products_on_cuda_cores(tmp_path):
    """hf-best: 60 ms a step, profiled for 5 steps (kernels summing 300 ms); two float32 CUDA-core products of 10 and
    15 ms over those steps (5 ms a step); a tensor-core product and a TF32 one (f32f32 without ffma) do not count.
    Were those 5 ms free, HF best would take 55 ms: our fastest row (50 ms) would be 1.10x it, not 1.20x, and `ours`
    (55 ms, the cost table's) 1.00x, not 1.09x."""
    table = pd.DataFrame([bench_row("base", "hf-best", "HF best", ms_per_model_step=60.0),
                          bench_row("base", "ours", "ours", ms_per_model_step=55.0),
                          bench_row("base", "ours-nomask-mm", "ours fastest", ms_per_model_step=50.0)])
    pd.DataFrame({"case": ["base", "base"], "engine_key": ["hf-best", "hf-best"],
                  "kind": ["matrix products", "fused element-wise (Triton)"], "ms_per_step": [40.0, 20.0]}).to_csv(
        tmp_path / "profile.csv", index=False)
    (tmp_path / "profile-base-hf-best.txt").write_text(profiler_table([
        ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4...", "10.000ms", 60),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma_aligna...", "15000.000us", 60),
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "100.000ms", 300),
        ("sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n_tilesize128x128x16", "20.000ms", 60),
        ("triton_per_fused_gelu_0", "155.000ms", 60)], "300.000ms"))
    lines = E.tf32_lines(table, tmp_path)
    assert len(lines) == 2 and lines[0].startswith(
        "base: TF32 was off in this run; HF best's compiled step spent about 5.0 of its 60.0 ms in float32 matrix "
        "products on CUDA cores")
    assert ("HF best would take 55.0 ms, and ours would be: 'ours fastest' (50.0 ms) 1.10x it, not 1.20x; 'ours' "
            "(55.0 ms) 1.00x it, not 1.09x.") in lines[0]
    assert lines[1] == ("The ratios to HF best of these rows (base) were timed with TF32 off; the cost table below "
                        "marks each ratio it uses that was")
    assert E.tf32_lines(table.assign(tf32=True), tmp_path) == []  # measured with TF32: nothing to bound
    assert E.tf32_lines(table.assign(tf32=["True", "1.0", "1"]), tmp_path) == []  # as a CSV may hand it back
    assert E.tf32_lines(table.assign(tf32=[False, True, True]), tmp_path) == lines
    assert E.tf32_lines(table, tmp_path / "none") == [lines[1]]  # no profile kept: no bound, the rows still said
