"""What the appendix "How the runs were made" computes from the probes' records (``book/results/bench/``).

Each section of the notebook (``notebooks/dufter2020/engineering.ipynb``) reads one record and shows the tables,
lines and reading built here; the notebook holds the prose, the calls and the display. A function takes the
record's folder or frame (so that a test can hand it a made-up one) and returns a table, a list of lines to print,
or a reading in Markdown whose numbers come from the record. Nothing here trains or times anything: the probes ran
on GPUs (`xlrepro bench`, the probes in ``xlrepro/probes/``, ``xlrepro train``) and wrote the records.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from xlrepro.config import ConfigError
from xlrepro.paths import repo_root
from xlrepro.tables import fixed, readable


def bench_folder() -> Path:
    """book/results/bench: where the probes' records are copied."""
    return repo_root() / "book" / "results" / "bench"


def say(lines: list[str]) -> None:
    """Print `lines`, one a line; nothing where there are none."""
    if lines:
        print("\n".join(lines))


def _cells(values, pattern: str) -> list[str]:
    """`pattern`.format of each value; blank where missing."""
    return ["" if pd.isna(v) else pattern.format(v) for v in values]


# ------------------------------------------------------------------------------------------ step time (xlrepro bench)
BENCH_PENDING = ("Pending the GPU run: `xlrepro bench` on one GPU writes bench.csv with the rows above "
                 "(Hugging Face fp32, bf16, bf16 + torch.compile and ours, each case in one process). The earlier "
                 "benchmark compared against float32 only and is not shown.")


def read_bench(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the single-process rows of bench.csv, its data-parallel rows: case base-dp); empty frames without a file."""
    table = pd.read_csv(path) if path.exists() else pd.DataFrame()
    if "case" not in table.columns:
        return table, table
    return table[table["case"] != "base-dp"], table[table["case"] == "base-dp"]


def has_bench(table: pd.DataFrame) -> bool:
    """The benchmark against compiled Hugging Face was run (the rows `bench_view` shows)."""
    return "engine_key" in table.columns and bool((table["engine_key"] == "hf-compile").any())


def bench_view(table: pd.DataFrame) -> pd.DataFrame:
    """(case, engine) -> ms per model-step, the fastest-slowest repeat, pieces per second per model, MFU and the
    speed-up against the best Hugging Face row, as text."""
    t = table.reset_index(drop=True)
    return pd.DataFrame({
        "models": t["models"].astype(int).values,
        "ms per model-step": _cells(t["ms_per_model_step"], "{:.2f}"),
        "min-max": ["" if pd.isna(a) else f"{a / m:.2f}-{b / m:.2f}"
                    for a, b, m in zip(t["ms_per_step_min"], t["ms_per_step_max"], t["models"])],
        "k pieces/s per model": _cells(t["tokens_per_s_per_model"] / 1e3, "{:,.0f}"),
        "MFU": _cells(t["mfu"], "{:.1%}"),
        "vs the best HF row": _cells(t["speedup_vs_best_hf"], "{:.2f}x")},
        index=pd.MultiIndex.from_arrays([t["case"], t["engine"]], names=["case", "engine"]))


def bench_row_lines(table: pd.DataFrame) -> list[str]:
    """The rows that did not run ('case, engine: status'), then the step of each whole stack."""
    t = table.reset_index(drop=True)
    lines = [f"{r.case}, {r.engine}: {r.status}" for r in t[t["status"] != "ok"].itertuples()]
    return lines + [f"{r.case}, {r.engine}: {r.ms_per_step:.2f} ms per step of the whole stack of {r.models}"
                    for r in t[(t["models"] > 1) & (t["status"] == "ok")].itertuples()]


def bench_case_lines(table: pd.DataFrame) -> list[str]:
    """Per case: where and how it ran; the rows that fell back to eager; the fastest of ours against the best
    Hugging Face row; the engines of the case (`xlrepro.bench.engines_for`) that the run did not measure."""
    from xlrepro.bench import ENGINES, engines_for, speed_row

    lines = []
    for case, d in table.groupby("case", sort=False):  # each case ran in its own process, maybe on another day
        first = d.iloc[0]
        lines.append(f"{case}: {first['device']}, torch {first['torch']}, commit {str(first['commit'])[:10]}, "
                     f"{first['date']}; median of {first['repeats']} repeats of {first['steps']} steps; "
                     f"MFU against {first['peak_tflops']:.0f} TFLOP/s (dense bf16 datasheet peak)")
    for _, r in table[table["status"].str.startswith("eager fallback")].iterrows():
        lines.append(f"{r['case']}, '{r['engine']}': a compiled step failed and the row ran on the eager path "
                     f"({r['ms_per_model_step']:.2f} ms per model-step); it is not the engine's speed")
    ok = table[(table["status"] == "ok") & (table["family"] == "ours")]
    for case, d in ok.groupby("case", sort=False):
        best = d.loc[d["ms_per_model_step"].idxmin()]
        line = (f"{case}: fastest of ours is '{best['engine']}', {best['speedup_vs_best_hf']:.2f}x the best "
                f"Hugging Face row ('{best['best_hf_engine']}'), MFU {best['mfu']:.1%}")
        if best["engine_key"] in ENGINES and speed_row(best["engine_key"]):
            trained = d[[k in ENGINES and not speed_row(k) for k in d["engine_key"]]]
            line += "; a speed row, which no chapter trains with before a training check passes"
            if len(trained):
                t = trained.loc[trained["ms_per_model_step"].idxmin()]
                line += (f"; the fastest step the chapters train with is '{t['engine']}', "
                         f"{t['speedup_vs_best_hf']:.2f}x, MFU {t['mfu']:.1%}")
        lines.append(line)
    for case, d in table.groupby("case", sort=False):
        missing = [e for e in engines_for(case) if e not in set(d["engine_key"])]
        if missing:
            lines.append(f"{case}: not measured in this run: {', '.join(missing)}")
    return lines


# Where a case's speed-up comes from: consecutive rows of the bench (from, to, what changes between them, and whether
# it is algorithmic, so open to any user's code, or kernels and layout, our engine's own). The second step applies only
# where hf-best was not timed, so that the head and the kernels are not told apart there.
GAIN_STEPS = (
    ("hf-compile", "hf-best", "the output layer at the masked positions only, and CUDA graphs", "algorithmic: any user "
     "can write it"),
    ("hf-compile", "ours", "the output layer at the masked positions only, and our kernels", "both together: hf-best "
     "was not timed on this case"),
    ("hf-best", "ours", "our fused loss and regionally compiled step, the same algorithm", "kernels"),
    ("ours", "ours-nomask-mm", "no attention mask on full rows and the bias outside the product", "kernels: layout"),
    ("ours", "ours-stack", "several models stacked in one step", "algorithmic: batched products across models"),
    ("ours", "ours-padv", "the output layer's product over the vocabulary padded to a multiple of 64 (aligned "
     "kernels), on the chapters' step", "kernels: layout"),
    ("ours-nomask-mm", "ours-nomask-mm-padv", "the output layer's product over the vocabulary padded to a multiple "
     "of 64 (aligned kernels)", "kernels: layout"),
    ("ours-stack", "ours-stack-tuned", "the stack's batched products autotuned (Triton templates where they win, "
     "which add the bias in the product)", "kernels"),
)


def gain_lines(table: pd.DataFrame) -> list[str]:
    """Per case, the speed-up between consecutive rows of `GAIN_STEPS` that both ran (ms per model-step), each named
    algorithmic (the masked-only head, stacking) or kernels, so the reader sees which of our gains a user's code
    could have too."""
    lines = []
    ok = table[table["status"] == "ok"] if "status" in table.columns else table
    for case, d in ok.groupby("case", sort=False):
        ms = dict(zip(d["engine_key"], d["ms_per_model_step"]))
        parts = []
        for a, b, what, kind in GAIN_STEPS:
            if a in ms and b in ms and not (a == "hf-compile" and b == "ours" and "hf-best" in ms):
                parts.append(f"{what}: {ms[a] / ms[b]:.2f}x ({a} {ms[a]:.2f} to {b} {ms[b]:.2f} ms; {kind})")
        if parts:
            lines.append(f"{case}, where the speed comes from: " + "; ".join(parts))
    return lines


SWITCH_WORTH = 1.05  # a speed switch that changes numbers (FP8, a bf16 residual stream) is worth its training check
# only where it makes a step at least 5 % faster


def fp8_lines(table: pd.DataFrame) -> list[str]:
    """Per case timed with both: the FP8 linear layers (`ours-fp8`, their bias added after the product) against the
    same layout in bf16 (`ours-mm`; `ours` where that row is missing); then whether the switch is worth its training
    check (`xlrepro.papers.k2020.fp8_check`): at least SWITCH_WORTH faster in some case."""
    ok = table[table["status"] == "ok"]
    lines, gains = [], []
    for case, d in ok.groupby("case", sort=False):
        ms = d.set_index("engine_key")["ms_per_model_step"]
        ref = next((e for e in ("ours-mm", "ours") if e in ms.index), None)
        if ref is not None and "ours-fp8" in ms.index:
            gains.append(ms[ref] / ms["ours-fp8"])
            lines.append(f"{case}: FP8 linear layers {ms['ours-fp8']:.2f} ms per model-step against {ms[ref]:.2f} "
                         f"ms in bf16 ('{ref}', the same engine without FP8; {gains[-1]:.2f}x)")
    if gains and max(gains) < SWITCH_WORTH:
        lines.append(f"FP8 makes no step at least {SWITCH_WORTH - 1:.0%} faster, so no chapter trains with it and its "
                     "training check (`python -m xlrepro.papers.k2020.fp8_check`, its criterion written before any "
                     "run) is not run")
    elif gains:
        lines.append("FP8 is faster here: a chapter may train with it once its training check "
                     "(`python -m xlrepro.papers.k2020.fp8_check`) passes")
    return lines


FP32_CORE_KERNEL = ("f32f32", "ffma")  # a cuBLAS kernel of float32 operands on CUDA cores (no tensor cores): both parts


def had_tf32(rows: pd.DataFrame) -> pd.Series:
    """Per bench row: whether it was timed with TF32 allowed (bench.csv's ``tf32``, written True/False; read as text,
    bool or number alike); False where the row has none (rows from before the bench allowed TF32)."""
    if "tf32" not in rows:
        return pd.Series(False, index=rows.index)
    return rows["tf32"].map(lambda v: str(v).strip().lower() in ("true", "1", "1.0"))


def tf32_lines(table: pd.DataFrame, profiles: Path) -> list[str]:
    """Per case whose hf-best row was timed with TF32 off (`had_tf32`): the time hf-best's profiled step
    (``profile-<case>-hf-best.txt``, the profiler's top kernels, and its rows of ``profile.csv``) spent in float32
    matrix products on CUDA cores (`FP32_CORE_KERNEL`), for which TF32 lets cuBLAS use tensor cores, and what our
    rows' ratios to HF best (the fastest of ours, and ``ours``, the cost table's) would be were that time zero: an
    estimate of how far the ratios measured without TF32 overstate our lead (from the top kernels only, so kernels
    below them are missed). Then the cases whose hf-best row had TF32 off. Empty where every hf-best row had it."""
    from xlrepro.bench import HF_BEST
    ok = table[table["status"] == "ok"]
    prof_path = Path(profiles) / "profile.csv"
    prof = (pd.read_csv(prof_path) if prof_path.is_file()
            else pd.DataFrame(columns=["case", "engine_key", "ms_per_step"]))
    had = had_tf32(ok)
    lines = []
    for case, d in ok.groupby("case", sort=False):
        best = d[d["engine_key"] == HF_BEST]
        ours = d[d["family"] == "ours"].sort_values("ms_per_model_step")
        if best.empty or ours.empty or had[best.index].all():
            continue
        fp32 = _profiled_ms(prof, profiles, case, HF_BEST, lambda n: all(k in n for k in FP32_CORE_KERNEL))
        if fp32 is None or fp32 <= 0:
            continue
        hf = best["ms_per_model_step"].iloc[0]
        shown = ours[(ours.index == ours.index[0]) | (ours["engine_key"] == "ours")]  # the fastest, and `ours`
        ratios = "; ".join(f"'{r.engine}' ({r.ms_per_model_step:.1f} ms) "
                           f"{(hf - fp32) / r.ms_per_model_step:.2f}x it, not {hf / r.ms_per_model_step:.2f}x"
                           for r in shown.itertuples())
        lines.append(f"{case}: TF32 was off in this run; HF best's compiled step spent about {fp32:.1f} of its "
                     f"{hf:.1f} ms in float32 matrix products on CUDA cores (its top kernels named '*f32f32*ffma*'), "
                     "for which a careful user's `torch.set_float32_matmul_precision(\"high\")` lets cuBLAS use "
                     f"tensor cores. Were they free, HF best would take {hf - fp32:.1f} ms, and ours would be: "
                     f"{ratios}. "
                     "The bench now allows TF32 for every bf16 row (`xlrepro.bench.allows_tf32`); these ratios are to "
                     "be measured again with it")
    off = ok[(ok["engine_key"] == HF_BEST) & ~had]
    if len(off):
        lines.append(f"The ratios to HF best of these rows ({', '.join(off['case'])}) were timed with TF32 off; the "
                     "cost table below marks each ratio it uses that was")
    return lines


UNALIGNED_KERNEL = "align1"  # CUTLASS's kernels for operands whose leading dimension is not a multiple of 8
# Why a compiled HF step runs no unaligned product (read in torch 2.13's torch/_inductor/fx_passes/pad_mm.py):
# Inductor's shape padding pattern-matches mm, bmm and addmm only
WHY_HF_PADS = (" (Inductor pads the `mm`, `bmm` and `addmm` products of a compiled graph to aligned sizes where its "
               "timing favours it, `torch._inductor.fx_passes.pad_mm`: HF's output layer is an `addmm`, ours a "
               "`baddbmm`, which that pass leaves alone)")
PADDED_VOCAB_ENGINE = "ours-nomask-mm-padv"  # the fastest engine with the decoder's product padded (`Levers.pad_vocab`)


def _profiled_ms(prof: pd.DataFrame, profiles: Path, case: str, engine: str, match) -> float | None:
    """ms per step that `engine`'s profiled step of `case` spent in the kernels of its profiler table
    (``profile-<case>-<engine>.txt``) whose lower-cased name `match` accepts; None without that profile."""
    txt = Path(profiles) / f"profile-{case}-{engine}.txt"
    per_step = prof[(prof["case"] == case) & (prof["engine_key"] == engine)]["ms_per_step"].sum()
    if not txt.is_file() or per_step <= 0:
        return None
    kernels, total_ms = read_top_kernels(txt)
    steps = round(total_ms / per_step)  # the profiled steps: the table sums over them
    chosen = kernels["name"].str.lower().map(match)
    return kernels.loc[chosen, "self_cuda_ms"].sum() / steps if steps else 0.0


def unaligned_lines(table: pd.DataFrame, profiles: Path) -> list[str]:
    """Per case where our fastest profiled engine (of those without the padded vocabulary, whose products are all
    aligned) spends at least 1 ms a step in matrix products on unaligned
    operands (`UNALIGNED_KERNEL` in a kernel's name, in the profiler's top kernels): that time, hf-best's in the same
    kernels, the case's vocabulary, and the padded-vocabulary row (`PADDED_VOCAB_ENGINE`) where the bench timed it."""
    from xlrepro.bench import CASES, ENGINES, HF_BEST
    ok = table[table["status"] == "ok"]
    prof_path = Path(profiles) / "profile.csv"
    if not prof_path.is_file():
        return []
    prof = pd.read_csv(prof_path)
    lines = []
    for case, d in ok.groupby("case", sort=False):
        profiled = set(prof.loc[prof["case"] == case, "engine_key"])
        unpadded = d["engine_key"].map(lambda k: k in ENGINES and ENGINES[k].pad_vocab == 1)  # padded: aligned
        ours = d[(d["family"] == "ours") & d["engine_key"].isin(profiled) & unpadded].sort_values("ms_per_model_step")
        if ours.empty or case not in CASES:
            continue
        fastest = ours.iloc[0]
        unaligned = lambda name: UNALIGNED_KERNEL in name  # noqa: E731
        mine = _profiled_ms(prof, profiles, case, fastest["engine_key"], unaligned)
        if mine is None or mine < 1.0:
            continue
        theirs = _profiled_ms(prof, profiles, case, HF_BEST, unaligned)
        hf = ("" if theirs is None else
              f"; HF best's compiled step {f'runs none{WHY_HF_PADS}' if theirs < 0.05 else f'{theirs:.1f} ms'}")
        pad = ENGINES[PADDED_VOCAB_ENGINE].pad_vocab
        row = table[(table["case"] == case) & (table["engine_key"] == PADDED_VOCAB_ENGINE)]
        best = d[d["engine_key"] == HF_BEST]
        timed = bool(len(row)) and row["status"].iloc[0] == "ok" and bool(len(best))  # beside hf-best
        if timed:
            row = row.iloc[0]
            tf32 = "" if had_tf32(best).all() else ", HF best with TF32 off"
            after = (f". With the product padded to a multiple of {pad} rows ('{ENGINES[PADDED_VOCAB_ENGINE].label}'): "
                     f"{row['ms_per_model_step']:.1f} ms, "
                     f"{best['ms_per_model_step'].iloc[0] / row['ms_per_model_step']:.2f}x HF best{tf32}")
        elif len(row):
            after = f". The row with the product padded ('{PADDED_VOCAB_ENGINE}'): {row['status'].iloc[0]}"
        else:
            after = (f". `Levers(pad_vocab={pad})` pads the product (bench row '{PADDED_VOCAB_ENGINE}'), not timed "
                     f"in this run")
        vocab = CASES[case].vocab
        why = (f": here the output layer's {vocab:,} pieces" if vocab % 8 else "")
        lines.append(f"{case}: our fastest profiled step ('{fastest['engine']}', {fastest['ms_per_model_step']:.1f} ms) "
                     f"spends about {mine:.1f} ms in matrix products on unaligned operands (kernels named "
                     f"'*{UNALIGNED_KERNEL}*', which cuBLAS falls back to when a dimension is not a multiple of 8"
                     f"{why}){hf}{after}")
        if timed:
            from xlrepro.papers.liu2020 import padv_check as check
            lines.append(f"{case}: the padded product changes numbers by rounding alone (another kernel sums in "
                         "another order), but over many updates: it stays a speed row, and no chapter trains with it, "
                         "until its training check passes (`python -m xlrepro.papers.liu2020.padv_check`, its "
                         f"criterion written before any run: Liu et al.'s lab BERT for {check.STEPS:,} steps, seeds "
                         f"{', '.join(map(str, check.SEEDS))}, padded to {check.PADS[1]} and not; the seed means of "
                         f"the final MLM loss within {check.LOSS_TOLERANCE} nats of each other, and within 2 SE of "
                         f"the unpadded seeds' or {check.DIFFERENCE_FLOOR} nats)")
    return lines


RESIDUAL_ENGINES = ("ours-nomask-mm", "ours-nomask-mm-bf16")  # the float32 and the bf16 residual stream, one engine


def residual_lines(folder: Path) -> list[str]:
    """The bf16 residual stream (`Levers.residual`) against the same engine with the float32 stream, timed in one
    process per case (``<folder>/bench-<case>.csv``, `xlrepro bench --engines ours-nomask-mm ours-nomask-mm-bf16`,
    with hf-best where it was timed beside them): where it ran, then per case the two speeds, the gain and, where
    hf-best is in the same process, both against it (marked where hf-best's row had TF32 off, `had_tf32`); then
    whether the switch is worth a training check (at least SWITCH_WORTH faster in some case). Empty where nothing
    was published."""
    from xlrepro.bench import HF_BEST
    files = sorted(Path(folder).glob("bench-*.csv"))
    if not files:
        return []
    table = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    ok = table[table["status"] == "ok"]
    if ok.empty:
        return [f"The residual stream in bf16: no row ran ({'; '.join(dict.fromkeys(table['status'].astype(str)))})"]
    first = ok.iloc[0]
    lines = [f"The residual stream in bf16 ({first['device']}, torch {first['torch']}, commit {str(first['commit'])[:7]}, "
             f"{str(first['date'])[:10]}; one process per case)"]
    gains = []
    for case, d in table.groupby("case", sort=False):
        d = d.drop_duplicates("engine_key", keep="last")  # a case timed again: its last row
        status = d.set_index("engine_key")["status"]
        ms = d[d["status"] == "ok"].set_index("engine_key")["ms_per_model_step"]
        f32, b16 = (ms.get(e) for e in RESIDUAL_ENGINES)
        if f32 is None or b16 is None:
            states = "; ".join(f"{e} {status.get(e, 'not timed')}" for e in RESIDUAL_ENGINES)
            lines.append(f"{case}: no comparison ({states})")
            continue
        gains.append(f32 / b16)
        tf32 = "" if had_tf32(d[d["engine_key"] == HF_BEST]).all() else ", HF best with TF32 off"
        best = (f"; against HF best in the same process {ms[HF_BEST] / f32:.2f}x and {ms[HF_BEST] / b16:.2f}x{tf32}"
                if HF_BEST in ms.index else "")
        lines.append(f"{case}: {b16:.2f} ms per model-step with the bf16 stream against {f32:.2f} ms with the float32 "
                     f"one ({gains[-1]:.3f}x{best})")
    if gains and max(gains) < SWITCH_WORTH:
        lines.append(f"The bf16 stream makes no step at least {SWITCH_WORTH - 1:.0%} faster, so no chapter trains with "
                     "it and no training check is declared for it")
    elif gains:
        lines.append("The bf16 stream is faster here: a chapter may train with it once a training check, its criterion "
                     "written before the run, passes")
    return lines


def hf_best_view(hb: pd.DataFrame) -> pd.DataFrame:
    """The run against "HF best" (hf_best/bench.csv): (case, engine) -> ms per step, min-max, MFU, speed-up."""
    return pd.DataFrame({"ms per step": hb["ms_per_model_step"].map("{:.2f}".format).values,
                         "min-max": [f"{a:.2f}-{b:.2f}" for a, b in zip(hb["ms_per_step_min"], hb["ms_per_step_max"])],
                         "MFU": hb["mfu"].map("{:.1%}".format).values,
                         "vs HF best": hb["speedup_vs_best_hf"].map("{:.2f}x".format).values},
                        index=pd.MultiIndex.from_arrays([hb["case"], hb["engine"]], names=["case", "engine"]))


def hf_best_lines(hb: pd.DataFrame, earlier: pd.DataFrame | None = None) -> list[str]:
    """Where the run against "HF best" ran, then per case: ours against HF best; with `earlier` (an earlier run
    against HF best), what it measured for the same cases, so a reader sees how far one baseline moves between runs."""
    first = hb.iloc[0]
    lines = [f"{first['device']}, torch {first['torch']}, transformers {first['transformers']}, "
             f"commit {first['commit'][:7]}, {first['date']}"]
    for case, d in hb.groupby("case", sort=False):
        ours = d[d["engine_key"] == "ours"].iloc[0]
        lines.append(f"{case}: ours {ours['speedup_vs_best_hf']:.2f}x against HF best "
                     f"({ours['ms_per_model_step']:.1f} against "
                     f"{d[d['engine_key'] == 'hf-best']['ms_per_model_step'].iloc[0]:.1f} ms), MFU {ours['mfu']:.1%}")
        if earlier is not None:
            e = earlier[earlier["case"] == case]
            hb_ms, ours_ms = (e[e["engine_key"] == k]["ms_per_model_step"] for k in ("hf-best", "ours"))
            if len(hb_ms) and len(ours_ms):
                lines.append(f"  an earlier run ({e.iloc[0]['device']}, commit {str(e.iloc[0]['commit'])[:7]}): HF best "
                             f"{hb_ms.iloc[0]:.1f} ms, ours {ours_ms.iloc[0]:.1f} ms ({hb_ms.iloc[0] / ours_ms.iloc[0]:.2f}x)")
    return lines


# ------------------------------------------------------------------------------------------ where a BERT-base step goes
@dataclass
class StepProfile:
    """The kernel profile of the base and mBERT cases and the base case's bounds (`step_profile`)."""
    kernels: pd.DataFrame   # (case, kind of kernel) x engine: ms per step, as text
    kernels_run: str        # where the profile ran
    bounds: pd.DataFrame    # variant -> ms per step, fastest and slowest repeat, TFLOP/s, warm-up (base_probe.py)
    bounds_run: str         # where the bounds ran
    reading: str            # Markdown
    matmul_share: float     # the best share of the dense peak the step's matrix products reached


def _text(v) -> str:
    return "" if pd.isna(v) else f"{v:.2f}"


def kernel_table(prof: pd.DataFrame) -> pd.DataFrame:
    """profile.csv -> (case, kind of kernel, with an 'all kernels' row per case) x engine label: ms per step as
    text, blank where an engine ran no kernel of that kind."""
    from xlrepro.bench import ENGINES

    prof = prof.assign(engine=prof["engine_key"].map(lambda k: ENGINES[k].label))
    wide = prof.pivot_table(index=["case", "kind"], columns="engine", values="ms_per_step", sort=False)
    for case in dict.fromkeys(prof["case"]):
        wide.loc[(case, "all kernels"), :] = wide.loc[case].sum()
    return wide.sort_index(level=0, sort_remaining=False).map(_text)


STEP_PROFILE_CASES = ("base", "mbert")  # the cases of profile.csv that `step_profile` reads


def step_profile(folder: Path) -> StepProfile:
    """Reads the base and mBERT rows of ``<folder>/profile.csv`` (`xlrepro bench --profile`), ``base_probe.json``
    (`python -m xlrepro.probes.base`) and the autotuning runs ``../autotune/bench-*.csv``."""
    from xlrepro.bench import CASES, ENGINES, PEAK_BF16, model_flops

    prof = pd.read_csv(folder / "profile.csv")
    prof = prof[prof["case"].isin(STEP_PROFILE_CASES)]  # the stacked BERT-small rows: `small_stack_profile`
    first = prof.iloc[0]
    kernels_run = f"{first['device']}, torch {first['torch']}, commit {first['commit']}, {first['date']}"
    probe = json.loads((folder / "base_probe.json").read_text())
    rows = pd.DataFrame(probe["rows"]).set_index("variant")
    keep = [v for v in ("gemm", "nodrop", "autotune") if v in rows.index]
    labels = {"gemm": "matrix products alone", "nodrop": "ours, dropout 0 (diagnostic)",
              "autotune": "ours + Inductor's matmul autotuning"}
    bounds = rows.loc[keep, ["ms_per_step", "min", "max", "tflops", "warmup_s"]].rename(index=labels)
    bounds.columns = ["ms per step", "fastest repeat", "slowest repeat", "TFLOP/s", "warm-up and compile (s)"]
    bounds = bounds.map(_text).rename_axis("variant")
    bounds_run = f"{probe['device']}, torch {probe['torch']}, commit {probe['commit']}, {probe['date']}"
    case = CASES["base"]
    flops = model_flops(case.size, case.vocab, case.batch, case.length)
    peak = PEAK_BF16["H200"]
    gemm = rows.loc["gemm"]
    at_half = flops / (0.5 * peak) * 1e3
    best = prof[prof["case"] == "base"].groupby("engine_key")["ms_per_step"].sum()
    fastest = best.idxmin()
    mm = prof.query("case == 'base' and engine_key == @fastest and kind == 'matrix products'")["ms_per_step"].sum()
    non_gemm = best[fastest] - mm
    # autotuning again, with the bias outside the product (Triton templates may then fuse the bias and GELU)
    tuned_reading = ""
    tuned_files = sorted((folder.parent / "autotune").glob("bench-*.csv"))
    if tuned_files:
        tuned = pd.concat([pd.read_csv(f) for f in tuned_files]).set_index(["case", "engine_key"])["ms_per_step"]
        tuned_reading = ("With the bias outside the product, where Inductor's templates could take the bias and "
                         "GELU into the product's epilogue, autotuning still gave almost nothing (one process per "
                         "case, commit " + pd.read_csv(tuned_files[0])["commit"].iloc[0] + "): " + "; ".join(
            f"{ {'mbert': 'mBERT'}.get(case, case)} {tuned[(case, 'ours-nomask-mm-tuned')]:.1f} against "
            f"{tuned[(case, 'ours-nomask-mm')]:.1f} ms"
            for case in dict.fromkeys(tuned.index.get_level_values(0))) + ". ")
    # the best rate the step's matrix products reached: alone (torch.mm) or inside the fastest engine
    matmul_share = gemm["tflops"] * gemm["ms_per_step"] / min(gemm["ms_per_step"], mm) * 1e12 / peak
    reading = (
        f"**Reading it.** On their own, the step's matrix products take {gemm['ms_per_step']:.1f} ms "
        f"({gemm['tflops']:.0f} TFLOP/s, {gemm['tflops'] * 1e12 / peak:.0%} of the dense peak). Inside the fastest "
        f"profiled engine ('{ENGINES[fastest].label}') they take {mm:.1f} ms of kernel time "
        f"({matmul_share:.0%} of the peak): cuBLAS picked faster kernels there than for the plain loop, whose operands "
        f"are laid out differently, so the loop is no floor. At 50% MFU the whole step would take {at_half:.1f} ms, "
        f"which leaves "
        f"{at_half - mm:.1f} ms for everything else; in that engine everything else takes {non_gemm:.1f} ms: "
        f"LayerNorm, GELU, dropout and residuals fused by Inductor, attention, the optimizer and the clipping. "
        f"Switching dropout off saves about "
        f"{rows.loc['nomask-flash', 'ms_per_step'] - rows.loc['nodrop', 'ms_per_step']:.1f} ms "
        f"(ours with dropout 0 against ours + no mask in the same process, "
        f"{rows.loc['nomask-flash', 'ms_per_step']:.1f} "
        f"ms; the mask itself is worth about 0.3 ms in the bench). "
        f"Autotuning the matrix products gives no gain ({rows.loc['autotune', 'ms_per_step']:.1f} ms after "
        f"{rows.loc['autotune', 'warmup_s']:.0f} s of compiling): Triton won several products, but the layouts they "
        f"asked for added copies. {tuned_reading}The bias outside the batched product is what paid: the cuBLAS kernel "
        f"that "
        f"starts from a broadcast bias is slower, and ATen first copies the bias into the output. So 50% MFU needs "
        f"the work outside the matrix products to shrink {non_gemm / (at_half - mm):.1f}-fold; "
        f"none of the levers measured here comes near that.")
    return StepProfile(kernel_table(prof), kernels_run, bounds, bounds_run, reading, matmul_share)


# ----------------------------------------------------------------------------------- where a stacked BERT-small step goes
STACK_BENCH = "bench_small_stack.csv"  # the bench row of the profiled stack, beside profile.csv
KERNEL_ROLES = (  # (what a kernel computes, substrings all in its name), first match wins; Inductor names a Triton
    # kernel after the operators it fuses, in alphabetical order, and the profiler cuts long names at 87 characters
    ("MLM loss (log-softmax), backward", ("log_softmax_backward",)),
    ("MLM loss (log-softmax), forward", ("log_softmax",)),
    ("attention softmax + dropout, backward", ("softmax_backward",)),
    ("attention softmax + dropout, forward", ("softmax",)),
    ("GELU, backward", ("gelu_backward",)),
    ("GELU, forward", ("gelu",)),
    ("embeddings' gradient + LayerNorm backward", ("embedding", "backward")),
    ("LayerNorm + dropout + residual, backward", ("layer_n", "backward")),
    ("LayerNorm + dropout + residual, forward", ("layer_n",)),
)


def kernel_role(name: str) -> str:
    """What a kernel of the fused BERT step computes, by its name (`KERNEL_ROLES`); else its kind
    (`xlrepro.bench.kernel_kind`: a Triton kernel other than a matrix-product template is fused element-wise even
    where its name mentions a product, bmm or baddbmm, that it takes its operands from)."""
    from xlrepro.bench import kernel_kind

    low = name.lower()
    return next((role for role, keys in KERNEL_ROLES if all(k in low for k in keys)), kernel_kind(name))


def _ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st."""
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _duration_ms(text: str) -> float:
    """A duration as torch.profiler prints it ('42.527ms', '708.789us', '1.2s') in ms."""
    found = re.fullmatch(r"([\d.]+)(us|ms|s)", text.strip())
    if found is None:
        raise ValueError(f"not a duration: {text!r} (expected a number then us, ms or s)")
    return float(found[1]) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[found[2]]


def read_top_kernels(path: Path) -> tuple[pd.DataFrame, float]:
    """The profiler's table of top kernels in a profile-<case>-<engine>.txt (`xlrepro.bench.profile_step`, torch's
    `key_averages().table`): (one row per kernel: name, self_cuda_ms, calls, over all the profiled steps; the table's
    'Self CUDA time total' in ms). A row's name fills the width of the first rule of dashes (names may hold single
    spaces); its other cells hold none. Hand-written: torch.profiler prints this table as text only, and no library
    reads it back."""
    text = path.read_text()
    lines = text.splitlines()
    rules = [i for i, line in enumerate(lines) if "-" in line and set(line.strip()) <= {"-", " "}]
    total = re.search(r"Self CUDA time total:\s*(\S+)", text)
    if len(rules) < 3 or total is None:
        raise ValueError(f"{path.name}: no profiler table (three rules of dashes and 'Self CUDA time total') in it")
    name_end = re.match(r"\s*-+", lines[rules[0]]).end()
    header = re.split(r"\s{2,}", lines[rules[0] + 1].strip())  # the headers are longer than some columns are wide
    missing = [c for c in ("Name", "Self CUDA", "# of Calls") if c not in header]
    if missing:
        raise ValueError(f"{path.name}: the table has no column {', '.join(missing)}; its columns: {', '.join(header)}")
    rows = [dict(zip(header, [line[:name_end].strip(), *line[name_end:].split()]))
            for line in lines[rules[1] + 1:rules[2]] if line.strip()]
    table = pd.DataFrame({"name": [r["Name"] for r in rows],
                          "self_cuda_ms": [_duration_ms(r["Self CUDA"]) for r in rows],
                          "calls": [int(r["# of Calls"]) for r in rows]})
    return table, _duration_ms(total[1])


@dataclass
class StackProfile:
    """The kernel profile of a stack of BERT-small models (`small_stack_profile`)."""
    kinds: pd.DataFrame     # kind of kernel (and 'all kernels') -> ms per stack-step, ms per model-step, share: text
    kernels: pd.DataFrame   # the largest kernels: what each computes, its kind, ms per stack- and model-step, share,
    #                         calls per step (text)
    run: str                # where and how the profile ran
    reading: str            # Markdown


def bias_copies(ops: pd.DataFrame, models: int, source: str) -> str:
    """What `xlrepro.bench.profile_ops` finds behind a stack's ATen element-wise kernels: its ``aten::copy_`` into
    tensors of the shape of a ``baddbmm``'s first operand, the stack's `models` leading (the stack's activations),
    per shape, in words; empty where it has none. Each linear layer of the fused step (`fused_bert._project`,
    baddbmm) first writes its bias, broadcast to the output's shape, into the output, to which the product is then
    added."""
    first = ops["shapes"].map(lambda t: tuple((ast.literal_eval(t) or [()])[0]))
    # the outputs baddbmm adds its product to: its first operand's shapes, with the stack's models leading
    outputs = set(first[ops["op"] == "aten::baddbmm"])
    copies = ops[(ops["op"] == "aten::copy_") & first.isin(outputs) & first.map(lambda sh: sh[:1] == (models,))]
    if copies.empty:
        return ""
    by = copies.assign(first=first[copies.index]).groupby("first", sort=False)[["calls_per_step", "ms_per_step"]].sum()
    products = ops[ops["op"] == "aten::baddbmm"].assign(first=first).groupby("first")["calls_per_step"].sum()
    shapes = "; ".join(f"[{', '.join(map(str, sh))}] {r.calls_per_step:g} a step ({r.ms_per_step:.2f} ms)"
                       for sh, r in by.iterrows())
    calls, ms = by["calls_per_step"].sum(), by["ms_per_step"].sum()
    same = all(abs(r.calls_per_step - products[sh]) < 1e-9 for sh, r in by.iterrows())
    count = (f"{calls:g} copies a step, as many as the `baddbmm` calls of those shapes" if same else
             f"{calls:g} copies a step against {products[list(by.index)].sum():g} `baddbmm` calls of those shapes")
    return (f"**Behind the ATen element-wise kernels** (the operators of eager steps of the same compiled regions, "
            f"`{source}`): `aten::copy_` of the stack's activations, {shapes}; {ms:.2f} ms per stack-step in all, "
            f"{count}. Each linear layer's bias is broadcast into the output that `baddbmm` then adds the product to. "
            "`--linear mm` adds the bias in the element-wise kernel that follows the product instead, which removes "
            "these copies; neither of its two training checks (below) passed, so `baddbmm` stays the default.")


def small_stack_profile(folder: Path, target_ms: float = 1.0, top: int = 12) -> StackProfile:
    """Where the step of a stack of BERT-small models goes, from ``<folder>/bench_small_stack.csv`` (the bench row of
    the stack: its step and model count), its rows of ``profile.csv`` (GPU time by kind of kernel) and its
    ``profile-<case>-<engine>.txt`` (the profiler's top kernels): the kinds and the `top` largest kernels per
    stack-step and per model-step, and a reading that includes what a step of `target_ms` per model-step needs."""
    from xlrepro.bench import CASES, kernel_kind

    if not target_ms > 0:
        raise ConfigError(f"target_ms must be positive, got {target_ms}")
    if not (isinstance(top, int) and top > 0):
        raise ConfigError(f"top must be a positive whole number, got {top!r}")
    bench_path, prof_path = folder / STACK_BENCH, folder / "profile.csv"
    absent = [p.name for p in (bench_path, prof_path) if not p.exists()]
    if absent:
        raise FileNotFoundError(f"{folder}: no {', '.join(absent)}")
    bench = pd.read_csv(bench_path)
    if len(bench) != 1 or bench["status"].iloc[0] != "ok":
        raise ValueError(f"{STACK_BENCH}: expected one row with status ok, found {len(bench)} row(s), status "
                         f"{', '.join(map(str, bench['status']))}")
    b = bench.iloc[0]
    case, key, models = b["case"], b["engine_key"], int(b["models"])
    prof = pd.read_csv(prof_path)
    prof = prof[(prof["case"] == case) & (prof["engine_key"] == key)]
    if prof.empty:
        pairs = pd.read_csv(prof_path)[["case", "engine_key"]].drop_duplicates()
        raise ValueError(f"profile.csv has no rows for {case}, {key}; valid choices: "
                         + ", ".join(f"{c}, {e}" for c, e in pairs.itertuples(index=False)))
    txt = folder / f"profile-{case}-{key}.txt"
    if not txt.exists():
        raise FileNotFoundError(f"{folder}: no {txt.name}")
    top_kernels, total_ms = read_top_kernels(txt)
    gpu_ms = prof["ms_per_step"].sum()  # kernel time per stack-step
    steps = round(total_ms / gpu_ms)    # the profiled steps: the table sums them, profile.csv divides by them
    if steps < 1 or abs(total_ms / gpu_ms - steps) > 0.01 * steps:
        raise ValueError(f"{txt.name}: its total ({total_ms:.3f} ms) is not a whole number of profile.csv's steps "
                         f"({gpu_ms:.3f} ms each)")

    kinds = prof.set_index("kind")[["ms_per_step", "share"]]
    kinds.loc["all kernels"] = [gpu_ms, kinds["share"].sum()]
    kinds_view = pd.DataFrame({"ms per stack-step": kinds["ms_per_step"].map("{:.2f}".format),
                               "ms per model-step": (kinds["ms_per_step"] / models).map("{:.3f}".format),
                               "share": kinds["share"].map("{:.1%}".format)}).rename_axis("kind of kernel")

    k = top_kernels.assign(role=top_kernels["name"].map(kernel_role), kind=top_kernels["name"].map(kernel_kind),
                           ms=top_kernels["self_cuda_ms"] / steps, share=top_kernels["self_cuda_ms"] / total_ms,
                           per_step=top_kernels["calls"] / steps)
    shown = k.head(top)
    kernels_view = pd.DataFrame({
        "what it computes": shown["role"].values, "kind (as the benchmark files it)": shown["kind"].values,
        "ms per stack-step": shown["ms"].map("{:.2f}".format).values,
        "ms per model-step": (shown["ms"] / models).map("{:.3f}".format).values,
        "share": shown["share"].map("{:.1%}".format).values,
        "calls per step": shown["per_step"].map("{:g}".format).values},
        index=pd.Index(shown["name"].values, name="kernel (name as the profiler cut it)"))
    run = (f"{case}, {models} models stacked ({key}): {b['device']}, torch {b['torch']}, commit "
           f"{str(b['commit'])[:7]}, {str(b['date'])[:10]}; kernel profile of {steps} steps after the timed ones")

    ms = kinds["ms_per_step"].drop("all kernels").sort_values(ascending=False)
    share = kinds["share"]

    def role_ms(prefix: str) -> float:
        return k.loc[k["role"].str.startswith(prefix), "ms"].sum()
    fwd_role, bwd_role = "attention softmax + dropout, forward", "attention softmax + dropout, backward"
    fwd, bwd = role_ms(fwd_role), role_ms(bwd_role)

    def rank(role: str) -> int:  # 1 for the largest kernel of the table
        return int((k["role"] == role).to_numpy().argmax()) + 1
    gelu_f, gelu_b = role_ms("GELU, forward"), role_ms("GELU, backward")
    norms = k[k["role"].str.startswith("LayerNorm")]
    emb = k[k["role"].str.startswith("embeddings")]
    aten = k[k["kind"] == "element-wise and reductions (ATen)"]
    mm = kinds.loc["matrix products", "ms_per_step"] if "matrix products" in kinds.index else 0.0
    mm_high = mm / models  # every kernel profile.csv files as a product
    mm_low = k.loc[(k["kind"] == "matrix products") & ~k["name"].str.startswith("triton_"), "ms"].sum() / models
    size = CASES[case].size
    tflop = b["mfu"] * b["peak_tflops"] * b["ms_per_model_step"] / 1e3  # the useful TFLOP of one model-step
    at_target = tflop / (target_ms / 1e3)

    def of_kinds(names) -> str:
        return ", ".join(f"{n} {ms[n]:.2f} ms ({share[n]:.1%})" for n in names)
    parts = [
        f"**Reading it.** {models} BERT-small models stacked step at {b['ms_per_step']:.2f} ms per stack-step, "
        f"{b['ms_per_model_step']:.2f} ms per model-step ({b['mfu']:.1%} MFU). Their kernels add up to "
        f"{gpu_ms:.2f} ms per stack-step ({gpu_ms / b['ms_per_step']:.1%} of the step): the GPU is hardly ever "
        f"idle, and the time is the kernels' own. By kind, per stack-step: {of_kinds(ms.index[:2])}; then "
        f"{of_kinds(ms.index[2:])}."]
    if fwd or bwd:
        parts.append(
            f"Of the single kernels, the attention's softmax with its dropout comes {_ordinal(rank(fwd_role))} "
            f"(forward, {fwd:.2f} ms per stack-step) and {_ordinal(rank(bwd_role))} (backward, {bwd:.2f} ms), "
            f"together {(fwd + bwd) / gpu_ms:.1%} of the kernel time. The stack's attention is written as plain math "
            f"(scores, mask, float32 softmax, then dropout drawn from each model's own hash, which PyTorch's fused "
            f"attention, SDPA, cannot take), so every layer writes and reads "
            f"the {b['width']} x {b['width']} probabilities of each sentence and head: "
            f"{b['width'] * size.heads / size.hidden:g} times the size of its {b['width']} x {size.hidden} hidden "
            f"states.")
    others = []
    if len(aten):
        a = aten.iloc[0]
        others.append(f"the largest ATen element-wise kernel ({a['per_step']:g} calls a step, its name cut by the "
                      f"profiler) {a['ms']:.2f} ms")
    if gelu_f or gelu_b:
        others.append(f"GELU {gelu_f:.2f} ms forward and {gelu_b:.2f} ms backward")
    if len(norms):
        others.append(f"the kernels that fuse LayerNorm, dropout and the residual ({len(norms)} of them, forward "
                      f"and backward) {norms['ms'].sum():.2f} ms")
    if len(emb):
        calls = emb["per_step"].iloc[0]
        others.append(f"the embeddings' gradient with the first LayerNorm's backward "
                      f"({'once' if calls == 1 else f'{calls:g} times'} a step) {emb['ms'].sum():.2f} ms")
    if others:
        parts.append(f"Among the profiler's top {len(k)} kernels, per stack-step: " + "; ".join(others) + ".")
    ops_path = folder / f"profile-ops-{case}-{key}.csv"
    copies = bias_copies(pd.read_csv(ops_path), models, ops_path.name) if ops_path.exists() else ""
    if copies:
        parts.append(copies)
    target = (f"**A step of {target_ms:.1f} ms per model-step** would do a model-step's {tflop:.3f} TFLOP of useful "
              f"work at {at_target:.0f} TFLOP/s, {at_target / b['peak_tflops']:.1%} MFU. ")
    rest = (gpu_ms / models) - mm_high
    if mm_high >= target_ms:
        target += (f"The matrix products alone take {mm_low:.2f}-{mm_high:.2f} ms per model-step "
                   f"({tflop / mm_high * 1e3:.0f}-{tflop / mm_low * 1e3:.0f} TFLOP/s, "
                   f"{tflop / mm_low * 1e3 / b['peak_tflops']:.0%} of the dense peak at most, with a hidden size of "
                   f"{size.hidden}), more than the whole target: they would have to run "
                   f"{mm_high / target_ms:.2f}x faster with every other kernel, now {rest:.2f} ms per model-step, gone.")
    else:
        target += (f"The matrix products take {mm_low:.2f}-{mm_high:.2f} ms per model-step, so everything else "
                   f"would have to fit in {target_ms - mm_high:.2f} ms per model-step, against {rest:.2f} ms now "
                   f"({rest / (target_ms - mm_high):.1f}-fold less).")
    parts.append(target)
    return StackProfile(kinds_view, kernels_view, run, "\n\n".join(parts))


# ------------------------------------------------------------------------------------------ fused, compiled stacks
def engine_table(engine: pd.DataFrame) -> pd.DataFrame:
    """The engine probes (`engines.engine_summary`) for readers, by probe and case."""
    return readable(fixed(engine[["probe", "case", "engine", "ms_per_step", "ms_per_model_step",
                                  "warmup_and_compile_s", "peak_gb", "device"]], 2).set_index(["probe", "case"]))


def engine_speedup_lines(engine: pd.DataFrame) -> list[str]:
    """Per probe and case with both rows: the fused, compiled stack's speed-up per step over the vmap stack."""
    lines = []
    for probe, d in engine.groupby("probe", sort=False):
        for case, c in d.groupby("case", sort=False):
            base = c.loc[c["variant"] == "bf16", "ms_per_model_step"]
            fused = c[c["variant"] == "bf16+compile"]
            if len(base) and len(fused):
                lines.append(f"{case} ({probe}): {base.iloc[0] / fused['ms_per_model_step'].iloc[0]:.2f}x per step, "
                             f"{fused['engine'].iloc[0]} against the vmap stack")
    return lines


def compile_check(path: Path) -> tuple[pd.DataFrame, str]:
    """The Table 7 shapes trained compiled (compile_check/t7_stacks.json): (one row per shape: steps in the time
    given and failed compiled steps; the summary line)."""
    record = json.loads(path.read_text())
    stacks = pd.DataFrame(record["stacks"])
    stacks["compiled steps failed"] = stacks["fallbacks"].map(len)
    stacks = stacks.rename(columns={"step": f"steps in {record['seconds']} s"}).set_index("shape")
    line = (f"{len(stacks)} shapes, {int((stacks['compiled steps failed'] == 0).sum())} of them without a failed "
            f"compiled step\n{record['device']}, torch {record['torch']}, commit {record['commit']}, {record['date']}")
    return readable(stacks.drop(columns="fallbacks")), line


# ------------------------------------------------------------------------------------------ equivalence of the engines
EQUIVALENCE_METRICS = ["ppl_train", "ppl_dev", "mu"]


def equivalence_table(eq: pd.DataFrame, metrics=EQUIVALENCE_METRICS) -> pd.DataFrame:
    """(model ID, engine) x metric: 'mean ± std (n=seeds)' over seeds (a single seed's std reads 0)."""
    eqm = eq[eq["metric"].isin(metrics)]
    summary = eqm.groupby(["experiment", "engine", "metric"])["value"].agg(["mean", "std", "count"]).unstack("metric")
    cells = {readable(pd.DataFrame(columns=[m])).columns[0]: [f"{a:.3f} ± {s:.3f} (n={int(n)})" for a, s, n in
             zip(summary[('mean', m)], summary[('std', m)].fillna(0), summary[('count', m)])] for m in metrics}
    return readable(pd.DataFrame(cells, index=summary.index))


def equivalence_figure(eq: pd.DataFrame, metrics=EQUIVALENCE_METRICS):
    """Every seed's final value, one panel per metric, the engines side by side at each model ID."""
    import matplotlib.pyplot as plt

    eqm = eq[eq["metric"].isin(metrics)]
    fig, axes = plt.subplots(len(metrics), 1, figsize=(13, 8))
    engines = list(dict.fromkeys(eqm["engine"]))
    for ax, metric in zip(axes, metrics):
        d = eqm[eqm["metric"] == metric]
        exps = sorted(d["experiment"].unique(), key=lambda v: (len(v), v))
        for k, eng in enumerate(engines):
            e = d[d["engine"] == eng]
            x = [exps.index(v) + (k - len(engines) / 2) * 0.12 for v in e["experiment"]]
            ax.plot(x, e["value"], "o", ms=4, alpha=0.8, label=eng)
        ax.set_xticks(range(len(exps)), [f"ID {v}" for v in exps])
        ax.set_title(metric)
    axes[0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def equivalence_per_engine(checks: pd.DataFrame) -> pd.DataFrame:
    """Per engine (`engines.equivalence_checks`): comparisons, means within 2 std, Welch p below 0.05, smallest p."""
    per_engine = checks.groupby("engine").agg(comparisons=("metric", "size"), within_2_std=("within 2 std", "sum"),
                                              welch_p_below_05=("welch p", lambda p: int((p < 0.05).sum())),
                                              smallest_welch_p=("welch p", "min"))
    return readable(per_engine.round(3))


def equivalence_below_05(checks: pd.DataFrame) -> pd.DataFrame:
    """The comparisons whose Welch p is below 0.05."""
    return readable(checks[checks["welch p"] < 0.05].round(4), p_columns=["welch p"])


def equivalence_markdown(eq: pd.DataFrame, checks: pd.DataFrame, fig6: Path, metrics=EQUIVALENCE_METRICS) -> str:
    """The two lines under the equivalence tables: against the vmap grid, and the published grid's shift (its
    updates read from Figure 6's curve of model 0, `fig6`)."""
    from xlrepro.papers.dufter2020.engines import equivalence_reading, published_shift

    updates = pd.read_csv(fig6, dtype={"experiment": str}).query("experiment == '0'")["step"].max()
    return (f"**Against the vmap grid** (every run on one corpus, {int(eq['steps'].max()):,} updates): "
            f"{equivalence_reading(checks)}\n\n**The published grid** ({updates:,} updates on the corpus as "
            f"split now), published minus vmap, over the models both trained: {published_shift(eq, metrics)}.")


# ------------------------------------------------------------------------------------------ the grid end to end
def grid_wall(folder: Path) -> tuple[pd.DataFrame, str]:
    """An end-to-end grid run (``<folder>/wall.json`` and ``stacks/*/timing.json``): (one row per stack; the line
    with the wall time, the GPUs and the arguments)."""
    wall = json.loads((folder / "wall.json").read_text())
    stacks = pd.DataFrame([json.loads(p.read_text()) for p in sorted(folder.glob("stacks/*/timing.json"))])
    stacks["models"] = stacks["members"].str.len()
    stacks["experiments"] = stacks["members"].map(
        lambda ms: ",".join(sorted({m.split("/")[0] for m in ms}, key=lambda v: (len(v), v))))
    table = readable(fixed(stacks[["experiments", "models", "steps", "train_seconds", "wall_seconds_incl_eval",
                                   "device"]], 1))
    line = (f"grid wall time: {wall['wall_seconds']} s ({wall['wall_seconds'] / 60:.1f} min) on {len(wall['gpus'])} x "
            f"{wall['gpus'][0]}, exit code {wall['exit_code']}; arguments: {wall['arguments']}")
    return table, line


# ------------------------------------------------------------------------------------------ the grid's arithmetic
FIRST_GRID_PROBE = "669c8bd"  # the commit of grid_base_stack.json's first probe; its other rows are a later one's


@dataclass
class GridArithmetic:
    """The grid's arithmetic at the peak beside the measured stacks (`grid_arithmetic`)."""
    floor: pd.DataFrame        # size (and 'all') -> models, model-steps, TFLOP a model-step, PFLOP, s at the peak
    probe: pd.DataFrame        # (case, engine, commit) -> ms per model-step, warm-up and compile, peak GB
    probe_caption: str
    reading: str               # Markdown


def floor_by_size(floor: pd.DataFrame) -> pd.DataFrame:
    """`engines.grid_compute_floor`'s rows summed by model size, with an 'all' row (no TFLOP a model-step)."""
    by_size = floor.groupby("size", sort=False).agg(models=("models", "sum"), model_steps=("model_steps", "sum"),
                                                    tflop_per_model_step=("tflop_per_model_step", "first"),
                                                    pflop=("pflop", "sum"), seconds_at_peak=("seconds_at_peak", "sum"))
    by_size.loc["all"] = [by_size["models"].sum(), by_size["model_steps"].sum(), float("nan"),
                          by_size["pflop"].sum(), by_size["seconds_at_peak"].sum()]
    return by_size


def grid_arithmetic(floor: pd.DataFrame, folder: Path, matmul_share: float) -> GridArithmetic:
    """The grid's arithmetic (`floor`: `engines.grid_compute_floor`) beside the stacks measured on the lab corpus
    (``<folder>/grid_base_stack.json``, ``base_probe_grid_shape.json``); `matmul_share`: the best share of the
    peak BERT-base's matrix products reach (`step_profile`)."""
    from xlrepro.bench import PEAK_BF16

    by_size = floor_by_size(floor)
    shown = fixed(by_size.astype(float), {"models": 0, "model_steps": 0, "tflop_per_model_step": 3, "pflop": 1,
                                          "seconds_at_peak": 0})
    shown.columns = ["models", "model-steps", "TFLOP a model-step", "PFLOP", "s at the peak"]
    measured = json.loads((folder / "grid_base_stack.json").read_text())
    probe = pd.DataFrame(measured["rows"])
    probe["engine"] = probe["variant"].map(measured["variants"])

    def cell(v, digits, missing=""):
        return missing if pd.isna(v) else f"{v:.{digits}f}"
    table = pd.DataFrame({"case": probe["case"], "engine": probe["engine"], "commit": probe["commit"],
                          "ms per model-step": probe["ms_per_model_step"].map(
                              lambda v: cell(v, 2, "no step in its limit")),
                          "warm-up and compile (s)": probe["warmup_and_compile_s"].map(lambda v: cell(v, 1)),
                          "peak GB": probe["peak_gb"].map(lambda v: cell(v, 1))})
    caption = (f"stacks on the lab corpus, {probe['device'].iloc[0]}; rows of one commit ran in one process "
               "per case (two GPUs side by side); each row is one run of 60 steps after 60 of warm-up, no repeats")
    ms, later = {}, {}
    for r in measured["rows"]:  # the first probe's rows, and the later one's (same process within each)
        (ms if r["commit"] == FIRST_GRID_PROBE else later).setdefault((r["case"], r["variant"]), r["ms_per_model_step"])
    one_compile_s = probe.query("case == 'base x1' and variant == 'bf16+compile+force'")["warmup_and_compile_s"].iloc[0]
    compiled = ms[("base x5", "bf16+compile")]
    base = by_size.loc["base"]
    tflops = base["tflop_per_model_step"] / (compiled / 1e3)
    total = by_size.loc["all", "seconds_at_peak"]
    hours = base["model_steps"] * compiled / 3.6e6
    shape_rows = {r["variant"]: r for r in json.loads((folder / "base_probe_grid_shape.json").read_text())["rows"]}
    reading = (
        f"**Reading it.** At 100% of the peak the grid's arithmetic takes {total:.0f} s, "
        f"{base['seconds_at_peak'] / total:.0%} of it in the BERT-base models. Finishing in 900 s would need "
        f"{total / 900:.0%} MFU held over every update. That is above the "
        f"{matmul_share:.0%} of the peak that BERT-base's matrix products reach in the "
        f"benchmark's larger batches (previous section), so no engine on one H100 meets it. The compiled stack of "
        f"five BERT-base models, as the grid trains them, steps at {compiled:.1f} ms per model-step "
        f"({tflops:.0f} TFLOP/s, {tflops * 1e12 / PEAK_BF16['H200']:.1%} MFU), so the base models alone take "
        f"{hours:.1f} hours on one GPU. The same stack at 256 rows of 24 pieces with PyTorch's dropout "
        f"(`python -m xlrepro.probes.base --length 24`) steps at {shape_rows['stack5']['ms_per_model_step']:.1f} ms per "
        f"model-step: the grid's changing widths cost little. Once compiled, the models' own random draws cost "
        f"nothing measurable either: {ms[('base x5', 'bf16+compile+nonoise')]:.1f} ms with PyTorch's generator, "
        f"{ms[('base x5', 'bf16+compile+hash64')]:.1f} ms with the int64 hash; Inductor fuses the hash into the "
        f"dropout and softmax kernels. Without compiling they cost a quarter of the step: the eager stack of one "
        f"steps at {ms[('base x1', 'bf16')]:.1f} ms with the int32 hash against "
        f"{ms[('base x1', 'bf16+hash64')]:.1f} ms "
        f"with the int64 one ({ms[('base x1', 'bf16+hash64')] / ms[('base x1', 'bf16')]:.2f}x), and an eager stack of "
        f"five at {ms[('base x5', 'bf16')]:.1f} against {ms[('base x5', 'bf16+hash64')]:.1f} ms per model-step. "
        f"The int32 form computes the same bits with half the memory traffic and no 64-bit multiplies, which a GPU "
        f"runs as several 32-bit ones.\n\n"
        f"Compiled, a stack of one BERT-base model steps at {later[('base x1', 'bf16+compile+force')]:.1f} ms against "
        f"{ms[('base x1', 'bf16')]:.1f} ms eager "
        f"({ms[('base x1', 'bf16')] / later[('base x1', 'bf16+compile+force')]:.1f}x), after "
        f"{one_compile_s:.0f} "
        f"s of compiling, so `xlrepro train --compile` now compiles a stack of one BERT-base model too "
        f"(`grid.ONE_MODEL_COMPILES`). A compiled stack of one BERT-small model seemed to stall; the next section "
        f"shows why, and what changed. A compiled stack of three "
        f"BERT-base models steps at {later[('base x3', 'bf16+compile')]:.1f} ms per model-step. With the bias "
        f"outside the batched product, five compiled BERT-base models step at "
        f"{later[('base x5', 'bf16+compile+mm')]:.2f} against {later[('base x5', 'bf16+compile')]:.2f} ms per "
        f"model-step in one process (a difference of the size that single runs of one configuration differ by: "
        f"{ms[('base x5', 'bf16+compile')]:.2f} and {later[('base x5', 'bf16+compile')]:.2f} ms at two commits), and "
        f"fifty BERT-small models at {later[('small x50', 'bf16+compile+mm')]:.3f} "
        f"against {later[('small x50', 'bf16+compile')]:.3f} ms "
        f"({1 - later[('small x50', 'bf16+compile+mm')] / later[('small x50', 'bf16+compile')]:.0%} less). The "
        f"probe runs each row once, so only differences well above those few percent count. The change moves only "
        f"rounding; whether the grid may take it is the question of the training check further down.")
    return GridArithmetic(shown.rename_axis("size"), table.set_index(["case", "engine", "commit"]), caption, reading)


# ------------------------------------------------------------------------------------------ one BERT-small model
def one_small_model(path: Path) -> tuple[pd.DataFrame, str, str]:
    """The attempts at compiling a stack of one BERT-small model (small_one_model.json): (the table, its caption,
    the reading of the first commit's rows, in Markdown)."""
    one_small = json.loads(path.read_text())
    tries = pd.DataFrame(one_small["rows"])
    tries["engine"] = tries["variant"].map({"bf16": "eager, CUDA graphs", "bf16+compile": "compiled (the grid's path)",
                                            "bf16+compile+force": "compiled"})
    tries["ms per step"] = tries["ms_per_step"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}")
    tries["warm-up and compile (s)"] = tries["warmup_and_compile_s"].map(lambda v: "" if pd.isna(v) else f"{v:.1f}")
    table = tries[["commit", "engine", "inductor", "outcome", "ms per step", "warm-up and compile (s)"]].set_index(
        ["commit", "engine"])
    caption = f"one BERT-small model on the lab corpus, {tries['device'].iloc[0]}"
    now = tries[tries["commit"] == tries["commit"].iloc[0]].set_index("variant")
    eager_ms, compiled_ms = now.loc["bf16", "ms_per_step"], now.loc["bf16+compile", "ms_per_step"]
    reading = (
        f"**Reading it.** In one process, the compiled stack of one steps at {compiled_ms:.2f} ms against "
        f"{eager_ms:.2f} ms eager with CUDA graphs ({eager_ms / compiled_ms:.1f}x), after "
        f"{now.loc['bf16+compile', 'warmup_and_compile_s']:.0f} s of warm-up and compiling. Neither compiling in the "
        f"process itself nor turning split reductions off got past the slow kernel; only the persistent reductions "
        f"mattered. Model 0 retrained alone, compiled, is in the section \"One model retrained alone\" below.")
    return table, caption, reading


# ------------------------------------------------------------------------------------------ the grid over GPUs
SMALL = "0-9 (BERT-small)"  # the models of the earlier spread runs, which name none (Table 1's small models)


@dataclass
class Spread:
    """The grid spread over one and two GPUs (`grid_spread`)."""
    runs: pd.DataFrame         # one row per run, with its speed-up against the same run on one GPU
    runs_caption: str
    failed: list[str]          # the runs that exited with an error
    phases: pd.DataFrame       # where each stack's wall time went (runs with a timeline)
    reading: str               # Markdown


def spread_runs(spread: list[dict]) -> pd.DataFrame:
    """One row per spread run (spread-*.json, their defaults filled in), sorted, with its speed-up against the run
    of the same models, plan, evaluation and commit on one GPU."""
    for s in spread:  # the earlier runs name their evaluation in their stacks only; all were Table 1's small models
        s.setdefault("evaluation", s["stacks"][0].get("evaluation", "per-model"))
        s.setdefault("models", SMALL)
    runs = pd.DataFrame([{"models": s["models"], "epochs": s["epochs"], "plan": s["plan"],
                          "evaluation": s["evaluation"],
                          "commit": s["commit"], "GPUs": s["gpus"],
                          "wall time (s)": s["wall_seconds"], "stacks": len(s["stacks"]),
                          "each stack, training + evaluation (s)": ", ".join(
                              f"{t['wall_seconds_incl_eval']:.0f}" for t in s["stacks"]),
                          "evaluation, all stacks (s)": sum(t["eval_seconds_this_call"] for t in s["stacks"]),
                          "device": s["gpu_names"][0], "exit code": s["exit_code"]} for s in spread])
    runs = runs.sort_values(["models", "commit", "evaluation", "GPUs"], ascending=[False, True, True, True])
    one = runs[runs["GPUs"] == 1].set_index(["models", "plan", "evaluation", "commit"])["wall time (s)"]
    runs["speed-up vs 1 GPU"] = [one.get(k, float("nan")) / w for k, w in
                                 zip(zip(runs["models"], runs["plan"], runs["evaluation"], runs["commit"]),
                                     runs["wall time (s)"])]
    return runs


def spread_phases(spread: list[dict]) -> pd.DataFrame:
    """Seconds from the command's start, stack by stack, for the runs whose stacks recorded a timeline: start-up,
    set-up and compile, steps, final evaluation, and what came after the stack."""
    phases = []
    for s in spread:
        for t in s["stacks"]:
            tl = t.get("timeline")
            if tl:
                phases.append({"IDs": s["models"], "evaluation": s["evaluation"], "GPUs": s["gpus"],
                               "models": len(t["members"]),
                               "start-up: process, corpus, plan": tl["started"] - s["started"],
                               "set-up, compile, first capture": tl["first_step"] - tl["started"],
                               "steps, curve evaluations included": tl["trained"] - tl["first_step"],
                               "final evaluation and writing": tl["finished"] - tl["trained"],
                               "after the stack": s["wall_seconds"] - (tl["finished"] - s["started"])})
    return pd.DataFrame(phases)


def grid_spread(folder: Path) -> Spread | None:
    """The spread runs (``<folder>/spread-*.json``, ``metrics-1gpu-a5b1e66.csv``, ``../stack_eval.json``); None
    where there are none."""
    spread = [json.loads(p.read_text()) for p in sorted(folder.glob("spread-*.json"))]
    if not spread:
        return None
    runs = spread_runs(spread)
    shown = fixed(runs.drop(columns=["device", "exit code"]),
                  {"wall time (s)": 1, "evaluation, all stacks (s)": 1, "speed-up vs 1 GPU": 2})
    shown = shown.set_index(["models", "epochs", "plan", "evaluation", "commit", "GPUs"])
    caption = f"on {', '.join(sorted(set(runs['device'])))}"
    failed = [f"{r['plan']}, {r['GPUs']} GPU(s): exit code {r['exit code']}" for _, r in
              runs[runs["exit code"] != 0].iterrows()]
    by_run = {(s["plan"], s["evaluation"], s["commit"], s["gpus"]): s for s in spread}
    phases = spread_phases(spread)
    return Spread(shown, caption, failed, fixed(phases, 1).set_index(["IDs", "evaluation", "GPUs", "models"]),
                  _spread_reading(folder, by_run, phases))


def _spread_reading(folder: Path, by_run: dict, phases: pd.DataFrame) -> str:
    one, two = (by_run[("dealt in turn", "per-model", "1350daf", gpus)] for gpus in (1, 2))
    stack1 = max(t["wall_seconds_incl_eval"] for t in one["stacks"])
    stack2 = max(t["wall_seconds_incl_eval"] for t in two["stacks"])
    s1, s2 = by_run[("dealt in turn", "stacked", "a5b1e66", 1)], by_run[("dealt in turn", "stacked", "a5b1e66", 2)]
    small = phases[phases["IDs"] == SMALL]
    p1, p2 = small.query("evaluation == 'stacked' and GPUs == 1"), small.query("evaluation == 'stacked' and GPUs == 2")
    steps1, steps2 = p1["steps, curve evaluations included"].max(), p2["steps, curve evaluations included"].max()
    not_time = ["IDs", "evaluation", "GPUs", "models", "steps, curve evaluations included"]
    fixed1, fixed2 = (p.drop(columns=not_time).sum(axis=1).max() for p in (p1, p2))  # everything but the steps
    # the BERT-base pair: steps of each stack, and everything else (wall time less the steps on the busiest GPU)
    b1, b2 = by_run[("even stacks", "stacked", "88dd666", 1)], by_run[("even stacks", "stacked", "88dd666", 2)]

    def span(t):
        return t["timeline"]["trained"] - t["timeline"]["first_step"]

    def at(s, key):
        return min(t["timeline"][key] for t in s["stacks"]) - s["started"]
    bsteps1 = sum(span(t) for t in b1["stacks"])  # one after the other
    bsteps2 = max(span(t) for t in b2["stacks"])  # side by side
    bfixed1, bfixed2 = b1["wall_seconds"] - bsteps1, b2["wall_seconds"] - bsteps2
    second = b1["stacks"][1]["timeline"]
    k = 100 / b1["epochs"]  # Table 1's BERT-base models train 100 epochs
    small_k = 100 / s1["epochs"]
    pm = by_run[("dealt in turn", "per-model", "a5b1e66", 1)]
    ev = json.loads((folder.parent / "stack_eval.json").read_text())
    metrics = pd.read_csv(folder / "metrics-1gpu-a5b1e66.csv", dtype={"experiment": str})
    pair = metrics.pivot_table(index=["experiment", "seed"], columns="run", values="ppl_dev")
    rerun = (pair["1gpu-per-model"] - pair["1gpu-stacked"]).abs()
    seed_sd = metrics[metrics["run"] == "1gpu-per-model"].groupby("experiment")["ppl_dev"].std()
    contiguous = (by_run[('contiguous', 'per-model', 'e81e7f0', 1)]['wall_seconds']
                  / by_run[('contiguous', 'per-model', 'e81e7f0', 2)]['wall_seconds'])
    return (
        f"**Reading it.** With the models dealt in turn and each evaluated alone, two GPUs finished in "
        f"{two['wall_seconds']:.0f} s against {one['wall_seconds']:.0f} s on one: "
        f"{one['wall_seconds'] / two['wall_seconds']:.2f}x; the slower stack of 25 took {stack2:.0f} s against "
        f"{stack1:.0f} s for the stack of 50 ({stack1 / stack2:.2f}x). Cut in order, the stack holding all of "
        f"model 0's curve evaluations held the run back: "
        f"{contiguous:.2f}x.\n\n"
        f"Evaluating each stack in one batched forward shortened both runs, the one-GPU run more: "
        f"{s1['wall_seconds']:.0f} s against {s2['wall_seconds']:.0f} s on two GPUs, "
        f"{s1['wall_seconds'] / s2['wall_seconds']:.2f}x. The timeline shows why. The training steps "
        f"scale, {steps1:.0f} s on one GPU against {steps2:.0f} s for the slower stack on two "
        f"({steps1 / steps2:.2f}x, below 2 because a stack of 25 keeps the GPU less busy per model than one of 50). "
        f"The rest does not shrink: starting the processes, setting up the stack and compiling it (every worker "
        f"compiles for itself, from an empty cache), the last evaluation and the writing take {fixed1:.0f} s on one "
        f"GPU and {fixed2:.0f} s on two, {fixed2 / s2['wall_seconds']:.0%} of the two-GPU run at 20 epochs. The "
        f"longer the training, the nearer a run comes to the steps' ratio; on this benchmark two GPUs stay below "
        f"1.8x.\n\n"
        f"Batched evaluation is {ev['speedup']:.1f}x faster than one model at a time for {ev['models']} models "
        f"({ev['stacked_s']:.1f} s against {ev['per_model_s']:.1f} s on the {ev['device']}, the same weights), and "
        f"gives the same numbers to within {max(ev['max_abs_diff'].values()):.1g} (perplexity; bf16). In the grid "
        f"run, all evaluations of the stack took {s1['stacks'][0]['eval_seconds_this_call']:.0f} s against "
        f"{pm['stacks'][0]['eval_seconds_this_call']:.0f} s. The two one-GPU runs trained the same models with the "
        f"same seeds and draws, yet their weights differ: GPU kernels add in varying order, and the differences grow "
        f"over the updates. Their dev perplexities differ by {rerun.mean():.1f} on average (at most "
        f"{rerun.max():.1f}), while the spread over seeds is {seed_sd.mean():.1f} (mean std of a model ID) at these "
        f"20 epochs. The chapters therefore compare means over seeds, never single runs.\n\n"
        f"The BERT-base stacks do not disturb each other: on one GPU the two stacks of five stepped for "
        f"{span(b1['stacks'][0]):.1f} and {span(b1['stacks'][1]):.1f} s, on two GPUs side by side for "
        f"{span(b2['stacks'][0]):.1f} and {span(b2['stacks'][1]):.1f} s (steps {bsteps1 / bsteps2:.2f}x). The wall "
        f"times were {b1['wall_seconds']:.0f} and {b2['wall_seconds']:.0f} s, only "
        f"{b1['wall_seconds'] / b2['wall_seconds']:.2f}x at {b1['epochs']} epochs, because everything else took "
        f"{bfixed1:.0f} s on one GPU and {bfixed2:.0f} s on two. On one GPU the second stack, in the same process, "
        f"took its first step {second['first_step'] - second['started']:.0f} s after it started (its kernels were "
        f"compiled already); on two GPUs each worker compiled for itself "
        f"({min(t['timeline']['first_step'] - t['timeline']['started'] for t in b2['stacks']):.0f}-"
        f"{max(t['timeline']['first_step'] - t['timeline']['started'] for t in b2['stacks']):.0f} s), and the "
        f"workers' stacks started {at(b2, 'started'):.0f} s after the command against {at(b1, 'started'):.0f} s on "
        f"one GPU (a worker is a second process, which imports and loads the corpus again).\n\n"
        f"At the grid's length the steps dominate. Arithmetic, not a measurement: if the steps grew with the epochs "
        f"and everything else stayed as measured, models 16 and 17 at their 100 epochs would take "
        f"{bfixed1 + k * bsteps1:.0f} s on one GPU and {bfixed2 + k * bsteps2:.0f} s on two "
        f"({(bfixed1 + k * bsteps1) / (bfixed2 + k * bsteps2):.2f}x), and Table 1's small models "
        f"{fixed1 + small_k * steps1:.0f} and {fixed2 + small_k * steps2:.0f} s "
        f"({(fixed1 + small_k * steps1) / (fixed2 + small_k * steps2):.2f}x), where a stack of 25 keeps a GPU less "
        f"busy per model than one of 50. BERT-base is about nine tenths of the grid's time, so the whole grid would "
        f"spread between those two ratios, nearer the first; no run here has measured it.")


# ------------------------------------------------------------------------------------------ --linear mm, trained
def p_means_differ_by_one_std(seeds: int) -> float:
    """The probability that the means of two runs of `seeds` draws each, from one normal distribution, lie more than
    one standard deviation apart: their difference has std sqrt(2 / seeds) (in units of the distribution's std)."""
    from scipy.stats import norm

    if seeds < 1:
        raise ValueError(f"seeds must be 1 or more; got {seeds}")
    return 2 * norm.sf(1 / (2 / seeds) ** 0.5)


@dataclass
class LinearCheck:
    """The training check of `--linear mm` for readers (`linear_check_view`)."""
    criterion_1: pd.DataFrame  # per metric: mean |rerun - published| under each, their ratio
    failed: pd.DataFrame       # the (model ID, metric) pairs where criterion 2 fails
    pairs: int                 # the pairs criterion 2 compares
    reading: str               # Markdown


def linear_check_view(folder: Path, table1: Path) -> LinearCheck:
    """`engines.linear_check` on ``<folder>/metrics.csv`` against the published `table1`, with the timing of the two
    stacks (``<folder>/timing.json``) and the reading."""
    from xlrepro.papers.dufter2020.engines import linear_check

    one_crit, two_crit, verdict = linear_check(folder / "metrics.csv", table1)
    shown_one = fixed(one_crit[["baddbmm", "mm", "ratio"]], 3)
    shown_one.columns = ["baddbmm: mean |rerun - published|", "mm: the same", "ratio"]
    failed = two_crit[~two_crit["holds"]]
    shown_failed = fixed(failed[["baddbmm", "mm", "difference", "published_std"]], 3)
    shown_failed.columns = ["baddbmm: seed mean", "mm: seed mean", "difference", "published seed std"]
    check_timing = json.loads((folder / "timing.json").read_text())
    steps_s = {t["linear"]: t["timeline"]["trained"] - t["timeline"]["first_step"] for t in check_timing["stacks"]}
    seeds = pd.read_csv(folder / "metrics.csv", dtype={"experiment": str})["seed"].nunique()
    published_table = pd.read_csv(table1, dtype={"experiment": str})
    published_means = published_table[published_table["metric"] == "ppl_dev"].groupby("experiment")["value"].mean()
    p_same = p_means_differ_by_one_std(seeds)  # two means of `seeds` draws from one normal, more than one std apart
    reading = (
        f"**Reading it.** Criterion 1 holds: under mm the models lie {one_crit['ratio'].min():.2f}-"
        f"{one_crit['ratio'].max():.2f} times as far from the published values as under baddbmm. Criterion 2 fails for "
        f"{verdict['failed_pairs']} of {verdict['pairs']} pairs ("
        + ", ".join(f"model {e} {m}: {r.difference:.3g} against a seed std of {r.published_std:.3g}"
                    for (e, m), r in failed.iterrows())
        + f"). So `--linear mm` stays an option of `xlrepro train`, and the grid keeps the bias inside the product. "
        f"The second criterion was stricter than a rerun's noise allows: if a metric's seeds scatter normally with the "
        f"published std, the means of two runs of one engine over {seeds} seeds differ by more than one std with "
        f"probability {p_same:.0%}, about {p_same * verdict['pairs']:.0f} of {verdict['pairs']} pairs. The check "
        f"therefore cannot tell mm from a rerun; its verdict stands as written. The mm stack's steps took "
        f"{steps_s['mm']:.0f} s against {steps_s['baddbmm']:.0f} s (one run each, on two GPUs of one machine).\n\n"
        f"Both reruns also lie below the published dev perplexity for every model whose seeds all trained: "
        + ", ".join(f"model {e}: {two_crit.loc[(e, 'ppl_dev'), 'baddbmm']:.0f} and "
                    f"{two_crit.loc[(e, 'ppl_dev'), 'mm']:.0f}" for e in ("1", "2", "4", "5"))
        + " (baddbmm and mm, seed means) against "
        + ", ".join(f"{published_means[e]:.0f}" for e in ("1", "2", "4", "5"))
        + " in the published Table 1. "
        f"The published grid trained in stacks of 5-25 on other machines; this appendix does not settle where the "
        f"shift comes from.")
    return LinearCheck(shown_one, shown_failed, len(two_crit), reading)


def linear_check2_view(folder: Path, table1: Path) -> tuple[pd.DataFrame | None, str]:
    """The second training check of `--linear mm` (`engines.linear_check2`, declared before its runs): (its table per
    metric, the reading) from ``<folder>/metrics.csv``; before its run, (None, what it will test and how to run it)."""
    from xlrepro.papers.dufter2020.engines import LINEAR2_COMMAND, LINEAR2_RATIO_MAX, LINEAR2_RUNS, linear_check2

    declared = (f"**A second check, declared before its runs** (`engines.linear_check2`): it measures the rerun "
                f"noise instead of assuming it. The same 25 models trained four times from empty run folders, twice "
                f"per engine ({', '.join(LINEAR2_RUNS)}); per metric, every model's difference between two runs in "
                f"published seed stds, and the median across engines (mm against baddbmm) at most "
                f"{LINEAR2_RATIO_MAX:g} times the median within an engine (medians, so that one diverged seed does not "
                f"decide); mm becomes the default only if every metric holds. ")
    path = folder / "metrics.csv"
    if not path.exists():
        return None, declared + (f"Not yet run: `{LINEAR2_COMMAND.replace('<folder>', 'runs/linear2')}` for each "
                                 "run, then `python -m xlrepro.papers.dufter2020.engines --linear2 runs/linear2 "
                                 "book/results/bench/linear_check2/metrics.csv --commit <sha> --machine <where>`.")
    metrics = pd.read_csv(path, dtype={"experiment": str})
    table, verdict = linear_check2(metrics, pd.read_csv(table1, dtype={"experiment": str}))
    shown = fixed(table[["within", "across", "ratio"]], 2)
    shown.columns = ["within an engine: median |difference| / std", "across engines: the same", "ratio"]
    failed = table[~table["holds"]]
    outcome = ("**Result.** Every metric holds: `--linear mm` becomes the compiled stacks' default." if verdict["adopted"]
               else "**Result.** It fails for " + ", ".join(f"{m} (ratio {r:.2f})" for m, r in failed["ratio"].items())
               + ": `--linear mm` stays an option, and the grid keeps the bias inside the product.")
    record = folder / "timing.json"
    if record.is_file():
        r = json.loads(record.read_text())
        seconds = [st["train_seconds"] for st in r["stacks"]]
        models = sorted({st["models"] for st in r["stacks"]})
        outcome += (f" Trained at {r['commit']} with torch {r['torch']} on {r['date']}, on {r['machine']}: "
                    f"{len(r['stacks'])} stacks of {'/'.join(map(str, models))} models, "
                    f"{min(seconds):.0f}-{max(seconds):.0f} s of training each.")
    return shown, declared + outcome + "\n\n" + linear2_means_line(metrics)


def linear2_means_line(metrics: pd.DataFrame) -> str:
    """After the second mm check, not part of its criterion: each run's mean over its models per metric, as a
    Markdown table, and the metrics where both mm runs lie on the same side of both baddbmm runs (by chance alone,
    with four exchangeable runs, 2 of the 6 orderings of the engines: probability 1/3 per metric)."""
    from xlrepro.papers.dufter2020.engines import LINEAR2_RUNS
    runs = list(LINEAR2_RUNS)  # which linear_check2 requires
    means = metrics.pivot_table(index="metric", columns="run", values="value", aggfunc="mean")[runs]
    apart = [m for m, row in means.iterrows()
             if min(row["mm-1"], row["mm-2"]) > max(row["baddbmm-1"], row["baddbmm-2"])
             or max(row["mm-1"], row["mm-2"]) < min(row["baddbmm-1"], row["baddbmm-2"])]
    head = "| metric | " + " | ".join(runs) + " |\n|---|" + "---|" * len(runs) + "\n"
    body = "".join(f"| {m} | " + " | ".join(f"{v:.4g}" for v in row) + " |\n" for m, row in means.iterrows())
    models = len(metrics[["experiment", "seed"]].drop_duplicates())
    return (f"*After the run, not part of the criterion:* each run's mean over its {models} models (means, where the "
            f"criterion takes medians so that one diverged seed does not decide). In {len(apart)} "
            f"of {len(means)} metrics both mm runs lie on the same side of both baddbmm runs "
            f"({', '.join(apart) or 'none'}); were the engines alike, that would happen with probability 1/3 per "
            f"metric, but the metrics are read off the same models and move together, so the count is no test. It "
            f"says what to look at next: whether moving the bias out of the product shifts what the models learn.\n\n"
            + head + body)


# ------------------------------------------------------------------------------------------ data parallel
def ddp_figure(curves: pd.DataFrame):
    """Figure 6's checkpoints of each data-parallel run (`engines.ddp_summary`), one panel per metric."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3))
    for ax, metric in zip(axes, ["ppl_train", "ppl_dev", "mu"]):
        for run_label, d in curves[curves["metric"] == metric].groupby("run", sort=False):
            ax.plot(d["step"], d["value"], marker="o", ms=3, label=run_label)
        ax.set_title(metric)
        ax.set_xlabel("step")
        if metric.startswith("ppl"):
            ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def ddp_line(ddp: pd.DataFrame) -> str:
    """The two-GPU run against one eager GPU: speed-up, scaling efficiency, final dev perplexity."""
    two = ddp[ddp["gpus"] == 2].iloc[0]
    return (f"2 GPUs: speed-up {two['speed-up vs 1 GPU eager']:.2f}x over one eager GPU, scaling efficiency "
            f"{two['scaling efficiency']:.0%}; final dev perplexity {two['ppl_dev']:.1f} vs "
            f"{float(ddp.loc[ddp['gpus'] == 1, 'ppl_dev'].iloc[-1]):.1f} on one GPU")


def data_parallel_view(d: pd.DataFrame) -> pd.DataFrame:
    """The bench's data-parallel rows (case base-dp) for readers, by engine."""
    def pct(v):
        return "" if pd.isna(v) else f"{v:.0%}"
    return pd.DataFrame({"GPUs": d["gpus"].astype(int).values, "status": d["status"].values,
                         "ms per step (median)": d["ms_per_step"].map("{:.1f}".format).values,
                         "min-max": [f"{a:.1f}-{b:.1f}" for a, b in zip(d["ms_per_step_min"], d["ms_per_step_max"])],
                         "M pieces/s, all GPUs": (d["tokens_per_s_all"] / 1e6).map("{:.2f}".format).values,
                         "MFU per GPU": d["mfu"].map(pct).values,
                         "vs the HF row of its GPU count": d["speedup_vs_best_hf"].map("{:.2f}x".format).values,
                         "scaling efficiency": d["scaling_efficiency"].map(pct).values},
                        index=pd.Index(d["engine"], name="engine"))


def data_parallel_lines(d: pd.DataFrame) -> list[str]:
    """Where the data-parallel case ran, then each two-GPU row: its step against one GPU's, or its status."""
    first = d.iloc[0]
    lines = [f"{first['device']} x 2, torch {first['torch']}, commit {str(first['commit'])[:10]}, {first['date']};\n"
             f"median of {first['repeats']} repeats of {first['steps']} steps"]
    for _, r in d[d["gpus"] > 1].iterrows():
        if r["status"] == "ok":
            lines.append(f"{r['engine']}:\n  {r['ms_per_step']:.1f} ms per step on 2 GPUs against "
                         f"{r['ms_per_step'] * r['scaling_efficiency']:.1f} on one: scaling efficiency "
                         f"{r['scaling_efficiency']:.0%}, {r['tokens_per_s_all'] / 1e6:.2f}M pieces/s in all")
        else:
            lines.append(f"{r['engine']}: {r['status']}")
    return lines


# ------------------------------------------------------------------------------------------ one model retrained alone
def rerun_table(rerun: pd.DataFrame) -> pd.DataFrame:
    """(model, seed, engine alone) x (metric, published / alone / difference), from `engines.rerun_check`."""
    wide = rerun.pivot_table(index=["model", "seed", "alone_engine"], columns="metric",
                             values=["published", "alone", "difference"]).round(4)
    wide = wide.reorder_levels([1, 0], axis=1).sort_index(axis=1, level=0)
    return readable(fixed(wide, 3))


def rerun_reading(rerun: pd.DataFrame, folder: Path) -> str:
    """Per seed and engine: µ and train perplexity in the grid and alone; then the training times of the eager and
    compiled reruns (``<folder>/rerun*/stacks/*/timing.json``). Markdown."""
    mu = rerun[rerun["metric"] == "mu"].set_index(["seed", "alone_engine"])
    ppl = rerun[rerun["metric"] == "ppl_train"].set_index(["seed", "alone_engine"])
    lines = [f"- seed {s}, {engine}: µ {r.published:.3f} in the grid, {r.alone:.3f} alone (difference "
             f"{r.difference:+.3f}); train perplexity {ppl.loc[(s, engine), 'published']:.1f} and "
             f"{ppl.loc[(s, engine), 'alone']:.1f}" for (s, engine), r in mu.iterrows()]
    took = {name: sorted(json.loads(p.read_text())["train_seconds"]
                         for p in (folder / name).glob("stacks/*/timing.json"))
            for name in ("rerun", "rerun_compiled")}
    lines.append(f"\nTraining took {took['rerun'][0]:.0f} and {took['rerun'][1]:.0f} s eager, "
                 f"{took['rerun_compiled'][0]:.0f} and {took['rerun_compiled'][1]:.0f} s compiled, compiling included.")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ what the published runs cost
# The bench cases (xlrepro.bench.CASES) by (hidden, layers): a published model of that shape takes that case's ratio;
# a vocabulary of at least MBERT_VOCAB pieces (mBERT's is 119,547) makes a BERT-base the mbert case.
# The runs against hf-best (book/results/bench/hf_best), in the order their ratios are taken: a case takes the first
# run's that timed it. bench.csv: one H200; bench_h100.csv: one H100, the small and bbert cases.
HF_BEST_RUNS = ("bench.csv", "bench_h100.csv")
BENCH_SHAPES = {(64, 12): "small", (768, 12): "base", (192, 12): "bbert"}
MBERT_VOCAB = 100_000
_MINUTES = re.compile(r"(\d+(?:\.\d+)?) (GPU|worker)-minutes")


@dataclass(frozen=True)
class GpuWork:
    """One piece of GPU work of a published run, as its record gives it."""
    paper: str
    chapter: str
    what: str                 # what ran, and the record it is read from
    minutes: float
    unit: str                 # "GPU-minutes", or "worker-minutes" (several workers shared a GPU: not a GPU's minutes)
    card: str                 # the record's device(s)
    shape: tuple | None       # (hidden, layers, vocabulary or None) of the models; None where the record has none


def bench_case(shape: tuple | None) -> str | None:
    """The bench case of a model shape (hidden, layers, vocabulary): "small", "base", "mbert", "bbert", or None (no
    case of that shape, or no shape recorded)."""
    if shape is None:
        return None
    hidden, layers, vocab = shape
    case = BENCH_SHAPES.get((hidden, layers))
    return "mbert" if case == "base" and vocab is not None and vocab >= MBERT_VOCAB else case


def hf_best_ratios(*benches: pd.DataFrame) -> dict[str, tuple[float, str]]:
    """case -> (our engine's ``speedup_vs_best_hf`` (engine_key ``ours``), the card it was timed on, short, with
    ", TF32 off" where hf-best's row was timed without TF32, `tf32_lines`) in the bench files whose best Hugging Face
    row is ``hf-best`` for that case: how many times faster than hf-best our engine stepped on that shape. The first
    file that timed a case with TF32 gives its ratio; a case no file timed with TF32, the first file that has it."""
    found = {}  # case -> [(ratio, card, with TF32)] in the order of the files
    for bench in benches:
        if "engine_key" not in bench.columns:
            continue
        for case, rows in bench.groupby("case", sort=False):
            ours = rows[(rows["engine_key"] == "ours") & (rows["status"] == "ok")]
            if (rows["engine_key"] == "hf-best").any() and len(ours):
                tf32 = bool(had_tf32(rows[rows["engine_key"] == "hf-best"]).all())
                found.setdefault(case, []).append((float(ours["speedup_vs_best_hf"].iloc[0]),
                                                   _card(str(ours["device"].iloc[0])), tf32))
    out = {}
    for case, runs in found.items():
        ratio, card, tf32 = next((r for r in runs if r[2]), runs[0])
        out[case] = (ratio, card + ("" if tf32 else ", TF32 off"))
    return out


def _no_ratio(case: str | None, shape: tuple | None, bench: pd.DataFrame) -> str:
    """Why a row gets no hf-best ratio, in words."""
    if shape is None:
        return "none: the record does not give the models' shape"
    if case is None:
        vocab = f", {shape[2]:,} pieces" if shape[2] else ""
        return f"none: no bench case of this shape (hidden {shape[0]}, {shape[1]} layers{vocab})"
    timed = bench[bench["case"] == case] if "case" in bench.columns else bench.iloc[:0]
    if len(timed):
        ours = timed[timed["engine_key"] == "ours"]["speedup_vs_best_hf"]
        return (f"none: the {case} case was timed against {timed['best_hf_engine'].iloc[0]} only, not hf-best"
                + (f" (ours, one model: {ours.iloc[0]:.2f}x that)" if len(ours) else ""))
    return f"none: the {case} case was not timed against hf-best"


def gpu_cost_table(work: list[GpuWork], ratios: dict[str, tuple[float, str]], bench: pd.DataFrame) -> pd.DataFrame:
    """Per piece of work: what it measured, on which card, the bench case of its shape, the ratio used and the same
    work at hf-best's speed (minutes × ours' speed-up over hf-best on that case; "–" where no ratio applies, the
    ratio column saying why). `ratios`: `hf_best_ratios`; `bench`: bench.csv, to say which cases lack hf-best."""
    rows = []
    for w in work:
        case = bench_case(w.shape)
        ratio, card = ratios.get(case, (None, ""))
        rows.append({"paper": w.paper, "chapter": w.chapter, "work": w.what,
                     "measured": f"{w.minutes:,.0f} {w.unit}" if w.minutes >= 10 else f"{w.minutes:.1f} {w.unit}",
                     "card": w.card,
                     "ratio used": (f"{case}: ours {ratio:.2f}x hf-best ({card})" if ratio is not None
                                    else _no_ratio(case, w.shape, bench)),
                     "at hf-best's speed": f"{w.minutes * ratio:,.0f} {w.unit}" if ratio is not None else "–"})
    return pd.DataFrame(rows).set_index(["paper", "chapter"])


def grid_work(runtime: pd.DataFrame, chapters: dict[str, set[str]], shapes: dict[str, tuple], card: str,
              paper: str = "dufter2020") -> list[GpuWork]:
    """The grid's stacks (``runtime.csv``: per stack its experiments, comma-joined, and ``train_seconds``), each
    counted under the first of `chapters` (chapter -> the model IDs of its tables, in book order) that lists one of
    its models, grouped by shape, in the order of `chapters` (`shapes`: model ID -> (hidden, layers, vocabulary)). A stack of mixed shapes or of
    a model no chapter lists raises ValueError."""
    stacks = runtime.pivot_table(index=["stack", "experiment"], columns="metric", values="value").reset_index()
    groups: dict[tuple, list] = {}
    for s in stacks.itertuples(index=False):
        ids = str(s.experiment).split(",")
        home = next((ch for ch, listed in chapters.items() if set(ids) & set(listed)), None)
        if home is None:
            raise ValueError(f"stack {s.stack} ({s.experiment}) serves none of the chapters {', '.join(chapters)}")
        kinds = {shapes[i] for i in ids}
        if len(kinds) != 1:
            raise ValueError(f"stack {s.stack} ({s.experiment}) mixes shapes {sorted(kinds)}")
        groups.setdefault((home, kinds.pop()), []).append(s)
    return [GpuWork(paper, chapter, f"{len(g)} stacks, {int(sum(s.models for s in g))} models of hidden {shape[0]} "
                                    f"(runtime.csv)",
                    sum(s.train_seconds for s in g) / 60, "GPU-minutes", card, shape)
            for (chapter, shape), g in sorted(groups.items(), key=lambda kv: (list(chapters).index(kv[0][0]),
                                                                               kv[0][1]))]


def _card(name: str) -> str:
    """'NVIDIA H100 80GB HBM3, NVIDIA H200 (the published run)' -> 'H100, H200': the cards alone, each once, in
    their first order (a record's note in brackets dropped)."""
    cards = re.sub(r"NVIDIA\s+(\w+)(\s+\d+GB\s+\w+)?", r"\1", re.sub(r"\s*\([^)]*\)", "", name))
    return ", ".join(dict.fromkeys(c.strip() for c in cards.split(",") if c.strip()))


def record_work(folder: Path, paper: str) -> list[GpuWork]:
    """The training lines of a paper's run records (``run_record_<chapter>.json``: "N GPU-minutes ..." or "N
    worker-minutes ..."), one piece of work per line; the card is the record's ``training devices``."""
    out = []
    for path in sorted(folder.glob("run_record_*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        for key, value in record.items():
            m = _MINUTES.match(str(value))
            if m:
                out.append(GpuWork(paper, record.get("chapter", path.stem.removeprefix("run_record_")),
                                   f"{key} (run record)", float(m.group(1)), f"{m.group(2)}-minutes",
                                   _card(record.get("training devices", "")), None))
    return out


def pilot_stack_work(folder: Path, paper: str, chapter: str) -> list[GpuWork]:
    """The pre-training of each published pilot of stacks (``<folder>/pilot_<profile>/stack_*.json``: the engine's
    stack timing records, ``train_seconds``, ``members``, ``shape`` like ``L12H12d192``, ``device``), one piece of
    work per pilot, then of each stronger recipe published beside the results (``recipe_<profile>/stack_*.json``),
    a stack already counted under a pilot not counted again; the fine-tunings are not recorded there and are not
    counted."""
    out, seen = [], set()
    folders = sorted(p for p in folder.glob("pilot_*") if p.is_dir()) + \
        sorted(p for p in folder.glob("recipe_*") if p.is_dir())
    for pilot in folders:
        files = [f for f in sorted(pilot.glob("stack_*.json")) if f.name not in seen]
        seen |= {f.name for f in files}
        records = [json.loads(f.read_text(encoding="utf-8")) for f in files]
        records = [r for r in records if "train_seconds" in r]
        if not records:
            continue
        shapes = {r.get("shape") for r in records}
        m = re.fullmatch(r"L(\d+)H\d+d(\d+)", shapes.pop()) if len(shapes) == 1 and None not in shapes else None
        kind, name = pilot.name.split("_", 1)
        out.append(GpuWork(paper, chapter, f"{name} {'pilot' if kind == 'pilot' else 'recipe'}'s pre-training: "
                                           f"{len(records)} stacks, {sum(len(r['members']) for r in records)} models "
                                           f"({pilot.name}/stack_*.json)",
                           sum(float(r["train_seconds"]) for r in records) / 60, "GPU-minutes",
                           _card(", ".join(sorted({str(r.get("device", "")) for r in records}))),
                           (int(m.group(2)), int(m.group(1)), None) if m else None))
    return out


def training_work(path: Path, paper: str, chapter: str, what: str, shape: tuple | None = None) -> GpuWork:
    """One training record: ``*training.json`` (``seconds``, ``device``) or a pilot's ``pilot.json``
    (``train_seconds`` + ``eval_seconds``, ``device``, ``config.model``: its shape, the vocabulary not recorded)."""
    rec = json.loads(path.read_text(encoding="utf-8"))
    if "seconds" in rec:
        seconds = float(rec["seconds"])
    elif "train_seconds" in rec:
        seconds = float(rec["train_seconds"]) + float(rec.get("eval_seconds") or 0)
    else:
        raise ValueError(f"{path}: no 'seconds' nor 'train_seconds': not a training record")
    config = rec.get("config")
    if isinstance(config, str):
        import ast
        config = ast.literal_eval(config)
    if shape is None and isinstance(config, dict) and isinstance(config.get("model"), dict):
        shape = (int(config["model"]["hidden"]), int(config["model"]["layers"]), None)
    name = f"{what} {rec['experiment']}" if rec.get("experiment") else what
    return GpuWork(paper, chapter, f"{name} ({path.parent.name}/{path.name})", seconds / 60, "GPU-minutes",
                   _card(str(rec.get("device", ""))), shape)


def table3_work(path: Path, card: str, shape: tuple | None) -> list[GpuWork]:
    """Dufter & Schütze's Table 3 run (its ``table3.csv``): the pre-training's GPU-minutes (each member's share of its
    stack's GPU time, ``pretrain_gpu_seconds``, summed) and the fine-tunings' worker-minutes (``finetune_seconds``:
    every rate of every run, in processes that shared a GPU); nothing for a run that recorded neither. Its pilot's
    pre-training GPU-minutes first, where ``table3_pilot.csv`` beside it records them."""
    pilot = path.with_name("table3_pilot.csv")  # the declared pilot that chose the pretraining recipe
    pieces = ((pilot, "pretrain_gpu_seconds", "GPU-minutes", "Table 3's pilot: {n} models pre-trained"),
              (path, "pretrain_gpu_seconds", "GPU-minutes", "Table 3's pre-training: {n} models"),
              (path, "finetune_seconds", "worker-minutes", "Table 3's fine-tunings: {n} runs, every rate of each"))
    out = []
    for source, metric, unit, what in pieces:
        if not source.exists():
            continue
        frame = pd.read_csv(source, dtype={"experiment": str})
        seconds = frame[frame["metric"] == metric]["value"]
        if len(seconds):
            out.append(GpuWork("dufter2020", "knn_replace", f"{what.format(n=len(seconds))} ({source.name})",
                               float(seconds.sum()) / 60, unit, card, shape))
    return out


def published_gpu_work(results: Path, grid_chapters: dict[str, set[str]] | None = None,
                       grid_shapes: dict[str, tuple] | None = None, lab_shape: tuple | None = None) -> list[GpuWork]:
    """Every piece of GPU work the published results record, paper by paper: Dufter & Schütze's grid stacks
    (``dufter2020/runtime.csv``, by chapter and shape) and its Table 3 run (`table3_work`), the multilingual lab's
    mini-mBERT (``multilingual/mini_mbert_training.json``, which Wu & Dredze's chapters fine-tune), Liu et al.'s
    pilots (``liu2020/*/pilot.json``) and any training record under ``liu2020/``, K et al.'s run records' lines and
    its scaling pilots' stacks (`pilot_stack_work`). By default the grid's chapters and shapes come from Dufter &
    Schütze's experiments file and the lab's shape from the mini-mBERT defaults."""
    if grid_chapters is None or grid_shapes is None:
        from xlrepro.papers.dufter2020 import TRAINS
        from xlrepro.papers.dufter2020.config import load_chapter
        ch = load_chapter()
        # the tables each chapter shows, in book order; Table 10 is the knn_replace chapter's
        shows = {name: [table] + (["table10"] if name == "knn_replace" else []) for name, table in TRAINS.items()}
        if grid_chapters is None:
            grid_chapters = {name: {i for t in tables for i in ch.tables[t]} for name, tables in shows.items()}
        if grid_shapes is None:
            grid_shapes = {i: (ch.size(e).hidden, ch.size(e).layers, None) for i, e in ch.experiments.items()}
    if lab_shape is None:
        from xlrepro.training.mini_mbert import DEFAULT_SIZE
        lab_shape = (DEFAULT_SIZE.hidden, DEFAULT_SIZE.layers, None)
    work: list[GpuWork] = []
    runtime = results / "dufter2020" / "runtime.csv"
    if runtime.exists():
        cards = {json.loads(p.read_text(encoding="utf-8")).get("training devices", "")
                 for p in (results / "dufter2020").glob("run_record_*.json")} - {"", "none recorded"}
        work += grid_work(pd.read_csv(runtime, dtype={"experiment": str}), grid_chapters, grid_shapes,
                          _card(", ".join(sorted(cards))) or "unrecorded")
    table3 = results / "dufter2020" / "table3.csv"
    if table3.exists():
        from xlrepro.papers.dufter2020.real_languages import load_config
        from xlrepro.papers.dufter2020.report import PUBLISHED_DEVICE
        cfg = load_config()
        size = cfg.model_size()
        work += table3_work(table3, _card(PUBLISHED_DEVICE),
                            (size.hidden, size.layers, cfg.vocab_size * len(cfg.languages)))
    lab = results / "multilingual" / "mini_mbert_training.json"
    if lab.exists():
        vocab = json.loads(lab.read_text(encoding="utf-8")).get("vocab_size")
        work.append(training_work(lab, "wu2019", "multilingual lab", "mini-mBERT pre-training",
                                  (*lab_shape[:2], vocab)))
    liu = results / "liu2020"
    for path in sorted(liu.glob("**/pilot.json")) + sorted(liu.glob("**/*training.json")):
        what = "pilot" if path.name == "pilot.json" else "training"
        work.append(training_work(path, "liu2020", "pilot" if what == "pilot" else "GPU run", what))
    work += record_work(results / "k2020", "k2020")
    work += pilot_stack_work(results / "k2020", "k2020", "linguistic")  # the scaling pilots the linguistic chapter shows
    return work


def gpu_cost(results: Path, bench: Path) -> pd.DataFrame:
    """The cost table of the published runs (`gpu_cost_table`) from ``<results>`` (book/results) and the bench
    records in ``<bench>`` (bench.csv and the runs against hf-best, `HF_BEST_RUNS`: the ratios)."""
    timed = pd.read_csv(bench / "bench.csv") if (bench / "bench.csv").exists() else pd.DataFrame()
    best = [pd.read_csv(bench / "hf_best" / name) for name in HF_BEST_RUNS if (bench / "hf_best" / name).exists()]
    return gpu_cost_table(published_gpu_work(results), hf_best_ratios(*best, timed), timed)


# ------------------------------------------------------------------------------------------ the engine's own check
SAME_SPEED_TOLERANCE = 0.03  # ours may step at most 3 % slower or faster than before the engine moved


def same_speed(before: pd.DataFrame, after: pd.DataFrame, tolerance: float = SAME_SPEED_TOLERANCE) -> pd.DataFrame:
    """Our rows of two bench runs on one card (before and after a code change): ms per model-step of each (case,
    engine) both ran, the change in percent and whether it is within `tolerance`."""
    keys = ["case", "engine_key"]
    ours = lambda d: d[(d["family"] == "ours") & (d["status"] == "ok")][keys + ["engine", "ms_per_model_step"]]  # noqa: E731
    m = ours(before).merge(ours(after), on=keys, suffixes=(" before", " after"))
    change = m["ms_per_model_step after"] / m["ms_per_model_step before"] - 1
    return pd.DataFrame({"case": m["case"].values, "engine": m["engine before"].values,
                         "ms before": m["ms_per_model_step before"].map("{:.2f}".format).values,
                         "ms after": m["ms_per_model_step after"].map("{:.2f}".format).values,
                         "change": change.map("{:+.1%}".format).values,
                         "within 3 %": (change.abs() <= tolerance).map({True: "yes", False: "no"}).values})


def retrain_within(new: pd.Series, published: pd.Series) -> dict:
    """One quantity of a model retrained on the engine against the published runs of the same experiment: the new
    runs' mean, the published mean and sample std, and whether the new mean lies within 2 published std of the
    published mean (None where the published side has one run: no spread to compare with)."""
    new, published = new.dropna(), published.dropna()
    sd = published.std(ddof=1) if len(published) > 1 else float("nan")
    gap = new.mean() - published.mean()
    within = None if len(published) < 2 else bool(abs(gap) <= 2 * sd + 1e-12)
    return {"new runs": len(new), "new mean": new.mean(), "published runs": len(published),
            "published mean": published.mean(), "published std": sd, "within 2 std": within}


def retrain_check(folder: Path, results: Path) -> pd.DataFrame:
    """engine_check/: each paper's models retrained on the engine (K et al.: t11's cells, seed 0; Dufter & Schütze:
    model 0, five seeds; Liu et al.: big-w512) against the published results (`results`: book/results). Dufter's
    published seed 0 failed to train (health.csv) and is left out of its published side."""
    rows = []
    pub = pd.read_csv(results / "k2020" / "linguistic.csv")
    for f in sorted((folder / "k2020").glob("*.csv")):
        exp = f.name.split(".")[0]
        for _, r in pd.read_csv(f).iterrows():
            if r["metric"] not in ("accuracy", "f1"):
                continue
            p = pub[(pub["experiment"] == exp) & (pub["task"] == r["task"]) & (pub["language"] == r["language"])
                    & (pub["metric"] == r["metric"])]["value"]
            rows.append({"paper": "k2020", "model": exp, "quantity": f"{r['task']} {r['metric']} {r['language']}",
                         **retrain_within(pd.Series([r["value"]]), p)})
    t1 = pd.read_csv(results / "dufter2020" / "table1.csv")
    t1 = t1[(t1["experiment"].astype(str) == "0") & (t1["seed"] != 0)]
    metrics = [json.loads(f.read_text())["metrics"] for f in sorted((folder / "dufter2020").glob("0.seed*.json"))]
    for q in ("mu", "retr_l8", "trans_l8", "ppl_train"):
        rows.append({"paper": "dufter2020", "model": "0", "quantity": q,
                     **retrain_within(pd.Series([m[q] for m in metrics]), t1[t1["metric"] == q]["value"])})
    liu = folder / "liu_big-w512"
    loss_new = pd.read_csv(liu / "loss.csv")
    loss_pub = pd.read_csv(results / "liu2020" / "pretraining_loss.csv")
    loss_pub = loss_pub[loss_pub["experiment"] == "bert-big-w512"]
    for lang, v in loss_new[loss_new["metric"] == "mlm_loss"].set_index("language")["value"].items():
        p = loss_pub[(loss_pub["metric"] == "mlm_loss") & (loss_pub["language"] == lang)]["value"]
        rows.append({"paper": "liu2020", "model": "big-w512", "quantity": f"MLM loss, {lang}",
                     **retrain_within(pd.Series([v]), p)})
    mrr_new = pd.read_csv(liu / "retrieval.csv")
    mrr_pub = pd.read_csv(results / "liu2020" / "retrieval_bert.csv")
    mrr_pub = mrr_pub[(mrr_pub["experiment"] == "bert-big-w512") & (mrr_pub["metric"] == "mrr")]
    for layer, v in mrr_new[mrr_new["metric"] == "mrr"].groupby("layer")["value"].mean().items():
        p = mrr_pub[mrr_pub["layer"] == layer].groupby("seed")["value"].mean()
        rows.append({"paper": "liu2020", "model": "big-w512", "quantity": f"mean MRR, layer {layer}",
                     **retrain_within(pd.Series([v]), p)})
    return pd.DataFrame(rows)


def retrain_view(check: pd.DataFrame) -> pd.DataFrame:
    """`retrain_check` as a reader sees it: (paper, model, quantity) -> the retrained mean (runs), the published mean
    ± std (runs) and whether it is within 2 std ("–" against a single published run)."""
    def published(r):
        sd = "" if pd.isna(r["published std"]) else f" ± {r['published std']:.3f}"
        return f"{r['published mean']:.3f}{sd} ({r['published runs']})"
    within = check["within 2 std"].map(lambda w: "–" if w is None or pd.isna(w) else ("yes" if w else "no"))
    return pd.DataFrame({"retrained (runs)": [f"{m:.3f} ({n})" for m, n in zip(check["new mean"], check["new runs"])],
                         "published (runs)": check.apply(published, axis=1).values,
                         "within 2 std": within.values},
                        index=pd.MultiIndex.from_frame(check[["paper", "model", "quantity"]]))
