"""K et al. (2020)'s B-BERTs trained many at once: every (cell, seed) of one shape shares a `ModelStack`.

Which cells can share a stack. The fused stack needs one architecture (hidden, layers, heads, FFN), one optimiser
recipe (learning rate, warm-up, steps, weight decay) and one word-embedding table size. Cells differ in corpora and
vocabularies (each trains its own joint word-piece vocabulary; the id-way Fake-English doubles it; the word level has
20k words; characters a few hundred), so the profile declares `embedding_rows` (lab: 20480): every model's table has
that many rows, the vocabulary's ids first and unused rows after them (as BERT's [unused] pieces; no input uses them,
and the random replacement of whole-word masking draws only the vocabulary's ids). The padding is part of every
cell's configuration, so a cell trains the same alone or stacked. NSP cells train apart, one seed at a time, or, at a
profile with `nsp_stack`, in stacks of NSP cells only (their loss adds the NSP head's).

What stays each model's own (`xlrepro/engine/noise.py`): initialisation (its seed), data order (`PairTable.draw`:
a hash of (seed, step) over its own corpus), whole-word masking (its own pair table's word starts and maskable
positions, prepared on the CPU; the draws keyed by (seed, step, row, position)) and dropout. The only thing shared
by a stack is the length quantile of a step (`shared_bin`, a function of the step alone), so that the models of a
stack pad to about the same width. `tests/test_k2020_stacks.py` trains a cell alone and inside a stack of three
cells with other vocabularies and checks the same masks at every step and the same results.

Layout: `runs/k2020/<profile>/stacks/<stack key>/` holds checkpoint.pt (while training) and timing.json; each
model lands in its cell's folder as model_<seed>.safetensors, where the cell's fine-tuning finds it.
A part's jobs (stacks first, the longest first, then NSP models, then the fine-tuning and evaluation of every
(cell, seed), each after the job that trains its model) go through the engine's work queue (`xlrepro.engine.queue`):
in this process on one device, or under torchrun one rank per slot (GPU x worker; `xlrepro train k2020` starts
torchrun itself), each taking the next job; ranks beyond `workers_per_gpu` per GPU take evaluations only. A stack
stopped by the time limit resumes from its checkpoint on the next call; finished jobs are skipped.

The pair tables, the grouping into stacks and `StackTrainer` are in `trainer` (which `bbert.Cell` pre-trains
through); this module runs a part: its cells and jobs, and what each job does (`job_runner`).
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd

from xlrepro.config import ConfigError, choose, plural
from xlrepro.engine.planner import take_slots
from xlrepro.engine.queue import Job, launched_at, local_slot, queue_world, run_queue
from xlrepro.engine.stacked import compile_mode

from .bbert import ADJACENCY_TASK, NER_TASK, RESULT_COLUMNS, TASK, Cell
from .config import (ADJACENCY_COST, EVAL_MARGIN, EVAL_SLACK, EVAL_TESTING_SECONDS, FINETUNE_FIXED_SHARE, GPUS,
                     NSP_STEP_MS, PADDED_WIDTH, STACK_OVERHEAD_SECONDS, step_ms)
from .trainer import (MAX_STACK, PairTable, StackTrainer,  # noqa: F401  (PairTable, shared_bin, stack_shape: read as
                      plan_stacks, shared_bin, stack_folder, stack_shape)  # stacks.<name>)


# ----------------------------------------------------------------------------------------------- a part
def part_cells(part: str, profile: str, seeds=None, cache_dir=None, root=None) -> list[Cell]:
    from .config import experiments_of, load_plan
    plan = load_plan()
    return [Cell(plan, profile, n, seeds, cache_dir=cache_dir, root=root)
            for n in experiments_of(plan, part, profile)]


def speed_folders(cell, runs_root: Path | None = None) -> list[Path]:
    """Where the measured speeds for `cell`'s plan come from: for a cell of the paper's run folders
    (`runs_root`, default runs/k2020/<profile>/), the stacks folders of every profile there, since a shape steps at
    the same speed whatever text its profile reads (the batch and the width are the shape's); for a cell kept
    anywhere else, its own folder's stacks only."""
    from xlrepro.paths import runs_dir
    own = cell.dir.parent
    runs_root = Path(runs_root) if runs_root is not None else runs_dir() / "k2020"
    if own.parent.resolve() != runs_root.resolve():
        return [own / "stacks"]
    return sorted(runs_root.glob("*/stacks"))


def speed_key(shape: str, tokenization: str = "wordpiece") -> str:
    """The name a measured speed is kept under: the shape (`ModelSize.name`), with the tokenization where it is not
    word pieces (its padded width sets the cost: `config.PADDED_WIDTH`)."""
    return shape if tokenization == "wordpiece" else f"{shape}/{tokenization}"


STACKED = "@"  # measured_step_ms's key of a shape's stacks of n models: "<speed_key>@<n>"


def measured_step_ms(folder, gpu: str | None = None, compiled: bool | None = None) -> dict[str, float]:
    """Median milliseconds per model-step of each shape (`speed_key`: `ModelSize.name`, with the tokenization where
    it is not word pieces; a record without one was timed on word pieces) over the finished stacks' timing.json
    files under `folder` (one folder or several); with `gpu` ("H100", "H200"), only those timed on such a GPU; with
    `compiled` (True, False), only stacks trained compiled (``--compile``) or not. The FLOP model (`config.step_ms`)
    misses what kernels and launch overheads make of a shape: measured stacks ran 0.5 to 2.8 times its estimate
    (L18H12 at width 156, head dim 13: 54 ms against 31). Where the records name their members, also the median over
    the shape's stacks of n models, under "<key>@<n>" (`STACKED`): a model-step costs less in a larger stack (the
    compiled L12H12d192 B-BERT on an H200: 10.8 ms in stacks of 2, 8.8 in stacks of 3), which `shape_step_ms`
    reads for a stack of known size."""
    if gpu is not None:
        choose("gpu", gpu, GPUS)
    times: dict[str, list[float]] = {}
    folders = [folder] if isinstance(folder, (str, Path)) else list(folder)
    for f in (f for d in folders for f in Path(d).glob("*/timing.json")):
        t = json.loads(f.read_text())
        if (gpu is None or gpu in t.get("device", "")) and (
                compiled is None or (t.get("compile", "none") != "none") == compiled):
            key = speed_key(t["shape"], t.get("tokenization", "wordpiece"))
            times.setdefault(key, []).append(t["ms_per_model_step"])
            if t.get("members"):
                times.setdefault(f"{key}{STACKED}{len(t['members'])}", []).append(t["ms_per_model_step"])
    return {shape: float(np.median(v)) for shape, v in times.items()}


def planning_step_ms(folder, gpu: str | None = None, compiled: bool | None = None) -> dict[str, float]:
    """The measured ms per model-step to plan with, shape by shape, the closest measurement first: on `gpu` and in
    the `compiled` mode, else in that mode on any card, else on that card in any mode, else any (`measured_step_ms`).
    A compiled stack of 192-wide B-BERTs steps about three times as fast as an eager one (8 against 23-28 ms per
    model-step on an H200), so pooling the two misplans a call."""
    return closest_first([measured_step_ms(folder), measured_step_ms(folder, gpu),
                          measured_step_ms(folder, None, compiled), measured_step_ms(folder, gpu, compiled)])


def closest_first(sources: list[dict[str, float]]) -> dict[str, float]:
    """`measured_step_ms` dicts merged, the last the closest measurement: each shape's speed, and its speeds by stack
    size ("<key>@<n>"), from the closest source that timed the shape at all, so that a stack size timed only in a
    farther source (another card, another compile mode) is not read beside the closest one's."""
    out = {}
    for key in {k for src in sources for k in src if STACKED not in k}:
        src = next(src for src in reversed(sources) if key in src)
        out[key] = src[key]
        out.update({k: v for k, v in src.items() if k.startswith(key + STACKED)})
    return out


SIMILAR_WIDTH = 0.25  # a measured shape of the same depth calibrates the FLOP model within this relative width


def stacked_step_ms(measured: dict[str, float], key: str, models: int) -> float | None:
    """The measured ms per model-step of shape `key` in a stack of `models` (`measured_step_ms`'s "<key>@<n>"): that
    of the largest measured stack size not above `models`, whose model-steps cost at least as much; where every
    measured size is larger, the smallest of them. None where no stack of the shape was measured by its size."""
    sizes = {int(k.rsplit(STACKED, 1)[1]): ms for k, ms in measured.items()
             if STACKED in k and k.rsplit(STACKED, 1)[0] == key}
    if not sizes:
        return None
    below = [n for n in sizes if n <= models]
    return sizes[max(below) if below else min(sizes)]


def shape_step_ms(c: Cell, measured: dict[str, float], gpu: str = "H200",
                  models: int | None = None) -> tuple[float, str]:
    """Milliseconds per model-step of cell `c`'s shape and where the number comes from: "measured" (its shape and
    tokenization, `speed_key`; with `models`, in a stack of that many, `stacked_step_ms`, where stacks of the shape
    were measured by their size); else "similar shape": the FLOP model calibrated on the measured word-piece shape of
    the same depth nearest in width (within SIMILAR_WIDTH; deep narrow shapes ran about twice the FLOP model's time,
    which the calibration carries over), at `c`'s padded width (so a char cell is calibrated on its word-piece
    twin: 1.7 times its time by the FLOP model, 1.8 measured on an H100); else "FLOP model" for `gpu`. Shape names
    are `config.model_size`'s L{layers}H{heads}d{hidden}."""
    key = speed_key(c.size.name, c.exp.tokenization)
    stacked = None if models is None else stacked_step_ms(measured, key, models)
    if stacked is not None:
        return stacked, "measured"
    if key in measured:
        return measured[key], "measured"
    flop = lambda hidden, layers, tok: step_ms(hidden, layers, PADDED_WIDTH[tok], c.planned_rows,  # noqa: E731
                                               c.profile.pretrain.batch_size, gpu=gpu)
    near = []
    for shape, ms in measured.items():
        m = re.fullmatch(r"L(\d+)H(\d+)d(\d+)", shape)
        if m and int(m[1]) == c.size.layers and abs(int(m[3]) / c.size.hidden - 1) <= SIMILAR_WIDTH:
            ratio = flop(c.size.hidden, c.size.layers, c.exp.tokenization) / flop(int(m[3]), int(m[1]), "wordpiece")
            near.append((abs(int(m[3]) - c.size.hidden), ms * ratio))
    if near:
        return min(near)[1], "similar shape"
    return flop(c.size.hidden, c.size.layers, c.exp.tokenization), "FLOP model"


def stack_seconds(stack, measured: dict[str, float], gpu: str = "H200") -> float:
    """Estimated training seconds of a stack of (cell, seed) members, all steps: the shape's milliseconds per
    model-step in a stack of this size (`shape_step_ms`: measured, else calibrated on a similar measured shape, else
    the FLOP model's for `gpu`), plus the start-up of a stack (`config.STACK_OVERHEAD_SECONDS`)."""
    c = stack[0][0]
    ms, _ = shape_step_ms(c, measured, gpu, models=len(stack))
    return len(stack) * c.profile.pretrain.steps * ms / 1000 + STACK_OVERHEAD_SECONDS


def measured_finetune_seconds(folder: Path, pattern: str = "*/results_*.csv") -> dict[str, float]:
    """Median `finetune_seconds` of each task (the section task, the NER stand-in) over the results files of the
    cells under `folder` (a profile's run folder; a cell's own folder with `pattern` "results_*.csv"): what one
    fine-tuning took, beside whatever shared its GPU."""
    times: dict[str, list[float]] = {}
    for f in Path(folder).glob(pattern):
        r = pd.read_csv(f)
        r = r[r["metric"] == "finetune_seconds"]
        for task, v in zip(r["task"], r["value"]):
            times.setdefault(task, []).append(float(v))
    return {task: float(np.median(v)) for task, v in times.items()}


def eval_seconds(cell: Cell) -> float:
    """Estimated wall seconds of one evaluation of `cell` (fine-tuning on each of its tasks, then testing; not
    resumable): each task's median fine-tuning over the cell's own evaluated seeds where it has any, else over every
    cell of its profile (`measured_finetune_seconds`) scaled to the cell's depth (`config.FINETUNE_FIXED_SHARE`);
    times EVAL_SLACK, plus EVAL_TESTING_SECONDS. The adjacency task, until measured, takes twice the section task's
    (twice its pairs). EVAL_MARGIN while a task has no measurement at all."""
    own = measured_finetune_seconds(cell.dir, "results_*.csv")
    everywhere = measured_finetune_seconds(cell.dir.parent)
    depth = FINETUNE_FIXED_SHARE + (1 - FINETUNE_FIXED_SHARE) * cell.size.layers / 12
    secs = 0.0
    tasks = [TASK] + ([NER_TASK] if "ner" in cell.exp.tasks else []) + (
        [ADJACENCY_TASK] if ADJACENCY_TASK in cell.exp.tasks else [])
    for task in tasks:
        if task in own:
            secs += own[task]
        elif task in everywhere:
            secs += everywhere[task] * depth
        elif task == ADJACENCY_TASK and TASK in own | everywhere:  # twice the section task's pairs
            secs += ADJACENCY_COST * (own[TASK] if TASK in own else everywhere[TASK] * depth)
        else:
            return float(EVAL_MARGIN)
    return secs * EVAL_SLACK + EVAL_TESTING_SECONDS


def stack_seconds_left(stack, measured: dict[str, float], gpu: str = "H200") -> float:
    """`stack_seconds` for what is left of a stack: the steps after its last checkpoint (progress.json), plus the
    start-up again."""
    total = stack_seconds(stack, measured, gpu)
    progress = stack_folder(stack) / "progress.json"
    if not progress.exists():
        return total
    done = json.loads(progress.read_text())
    share = max(0.0, 1 - done["step"] / done["steps"])
    return (total - STACK_OVERHEAD_SECONDS) * share + STACK_OVERHEAD_SECONDS


def dry_run(cells: list[Cell], slots: int, max_stack: int = MAX_STACK, gpu: str | None = None,
            compiled: bool | None = None, snapshots: bool = True, time_limit: float | None = None,
            time_total: float | None = None) -> str:
    """What a call would do, without training: every stack still to train (shape, models, estimated seconds, the
    slot it would take if each slot took the next job when free), the NSP models and evaluations left, and the
    busiest slot's training time (the call's lower bound before evaluations). A stack paused with a checkpoint is
    counted from its last checkpoint (`stack_seconds_left`). `gpu` ("H100", "H200") uses only the speeds measured on
    such a GPU and the FLOP model for it; None pools every measurement (the FLOP model then assumes an H200).
    `time_limit`, `time_total`: as `jobs_of` plans with them; the cells left for a later run are named."""
    by_name = {c.name: c for c in cells}
    folders = speed_folders(cells[0]) if cells else []
    # with `gpu`, that card's measurements alone (the `compiled` mode's first); without, `planning_step_ms`
    measured = (closest_first([measured_step_ms(folders, gpu), measured_step_ms(folders, gpu, compiled)])
                if gpu is not None else planning_step_ms(folders, None, compiled))
    jobs = jobs_of(cells, slots, max_stack, compiled, snapshots, time_limit, time_total)
    planned = {n for j in jobs for n, _ in j["members"]}
    waiting = [c.name for c in cells if c.name not in planned
               and any(not (c.dir / f"model_{s}.safetensors").exists() and not c.evaluated(s) for s in c.seeds)]
    later = (f"\nleft for a later run (they do not fit in {time_total:.0f} s): {', '.join(waiting)}"
             if waiting and time_total is not None else "")
    if time_total is not None or time_limit is not None:  # the run plans again once its data is ready (`run_part`)
        tables = len(tables_to_build(cells))
        later += ("\nthis plan counts the whole time from now; the run plans again after its start-up and data "
                  "preparation, with the seconds then left" + (f" ({plural(tables, 'pair table')} still to build)"
                                                               if tables else ""))
    stacks = [[(by_name[n], s) for n, s in j["members"]] for j in jobs if j["kind"] == "stack"]
    ests = [stack_seconds_left(stack, measured, gpu or "H200") for stack in stacks]
    taken, loads = take_slots(ests, slots)
    rows = []
    for stack, est, slot in zip(stacks, ests, taken):
        shape = stack[0][0].size.name
        rows.append({"slot": slot, "shape": shape, "models": len(stack), "estimated s": round(est),
                     "speed": shape_step_ms(stack[0][0], measured, gpu or "H200", models=len(stack))[1],
                     "cells": ", ".join(sorted({c.name for c, _ in stack}))})
    count = lambda kind: sum(j["kind"] == kind for j in jobs)  # noqa: E731
    evals = [by_name[j["members"][0][0]] for j in jobs if j["kind"] == "eval"]
    eval_line = ""
    if evals:
        med = measured_finetune_seconds(cells[0].dir.parent)
        if med:
            secs = sum(med.get(TASK, 0.0) + (med.get(NER_TASK, 0.0) if "ner" in c.exp.tasks else 0.0)
                       + (med.get(ADJACENCY_TASK, ADJACENCY_COST * med.get(TASK, 0.0))
                          if ADJACENCY_TASK in c.exp.tasks else 0.0)
                       for c in evals)
            eval_line = (f"\nevaluations: about {secs / 60:.0f} worker-minutes of fine-tuning for the {len(evals)} left "
                         f"(median measured fine-tuning: " + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(med.items()))
                         + "; data and testing on top), shared by the evaluation workers")
    snaps = f" (and {plural(count('snapshot'), 'snapshot')} of the learning curve)" if count("snapshot") else ""
    head = (f"{plural(count('stack'), 'stack')} ({plural(sum(r['models'] for r in rows), 'model')}), "
            f"{plural(count('nsp'), 'model')} one at a time (NSP, control) and "
            f"{plural(count('eval'), 'evaluation')}{snaps} left over {slots} slots"
            f"{'' if gpu is None else f' (speeds measured on {gpu}s only)'}")
    if not rows:
        return head + eval_line + later
    table = pd.DataFrame(rows).to_string(index=False, max_colwidth=70)
    return (f"{head}\n{table}\nbusiest slot: about {max(loads) / 60:.1f} minutes of training "
            f"(evaluations and NSP models come on top){eval_line}{later}")


def paused_stacks(left: list) -> list[list]:
    """The stacks of (cell, seed) members in `left` (the models still to train) that a call paused with a checkpoint:
    each ``stacks/<key>/progress.json`` whose recorded members are all in `left`, none in an earlier such stack, and
    whose folder is theirs (`stack_folder`) and holds ``checkpoint.pt``. Without a checkpoint nothing is lost by
    planning its members afresh."""
    if not left:
        return []
    by_label = {f"{c.name}/{s}": (c, s) for c, s in left}
    out, taken = [], set()
    for progress in sorted((left[0][0].dir.parent / "stacks").glob("*/progress.json")):
        names = json.loads(progress.read_text()).get("members") or []
        if (names and all(n in by_label and n not in taken for n in names)
                and (progress.parent / "checkpoint.pt").exists()
                and stack_folder([by_label[n] for n in names]) == progress.parent):
            out.append([by_label[n] for n in names])
            taken |= set(names)
    return out


def busiest_slot(stacks: list[list], slots: int, measured: dict[str, float], gpu: str = "H200",
                 after: list[float] = ()) -> float:
    """Seconds of training (`stack_seconds_left`) of the busiest of `slots` slots when the stacks are dealt as
    `jobs_of` hands them out, the longest first (`take_slots`), then the jobs of `after` seconds (the NSP models)."""
    ordered = sorted((st for st in stacks if st), key=lambda st: stack_seconds(st, measured), reverse=True)
    return max(take_slots([stack_seconds_left(st, measured, gpu) for st in ordered] + list(after), slots)[1])


def cells_that_fit(paused: list[list], fresh: list, slots: int, time_total: float, model_seconds,
                   measured: dict[str, float]) -> list[str]:
    """The names of the cells, in the part's order, whose models still to train (`fresh`: (cell, seed), not in a
    paused stack) fit into `time_total` seconds over `slots` slots beside what the `paused` stacks have left: a cell
    is kept while the work kept so far, shared evenly by the slots, and the cell's own models as one stack (a stack
    is not divided between slots) each stay within it, with the longest evaluation (`eval_seconds`, after the last
    stack; of the paused stacks' cells, the cells kept and the cell tried) on top; a cell counts one stack's start-up
    (STACK_OVERHEAD_SECONDS) beside its models' seconds. A cell that does not fit is passed over, its evaluation with
    it, and the next one tried. A model trained one at a time (`Cell.alone`) counts at NSP_STEP_MS a step. An
    estimate: `job_runner` still starts no stack that cannot finish."""
    work = sum(stack_seconds_left(st, measured) for st in paused)
    tail = max((eval_seconds(c) for st in paused for c, _ in st), default=0.0)  # the paused stacks' evaluations
    counts: dict[str, list] = {}
    for c, _ in fresh:
        counts.setdefault(c.name, [c, 0])[1] += 1
    kept, longest = [], 0.0  # longest: the largest one-stack cell kept so far
    for name, (c, n) in counts.items():
        add = n * (c.profile.pretrain.steps * NSP_STEP_MS / 1000 if c.alone else model_seconds(c)) + \
            STACK_OVERHEAD_SECONDS
        own_tail = max(tail, eval_seconds(c))  # a cell passed over adds no evaluation of its own
        # the cells kept before must still fit under the longer tail too
        if max((work + add) / slots, add, longest) + own_tail <= time_total:
            work, tail, longest = work + add, own_tail, max(longest, add)
            kept.append(name)
    return kept


def jobs_of(cells: list[Cell], slots: int, max_stack: int = MAX_STACK, compiled: bool | None = None,
            snapshots: bool = True, time_limit: float | None = None, time_total: float | None = None) -> list[dict]:
    """The part's jobs in the order they are handed out: stacks (the longest first, by the shapes' measured speeds
    where a finished stack has timed them, else by the FLOP model), NSP models, evaluations.
    A stack paused with a checkpoint is resumed with the members it has (`paused_stacks`); the other members that
    still need training (no model and no results: a cell evaluated elsewhere, whose weights stayed on another machine,
    is not trained again) are planned afresh (`plan_stacks`), so the models already trained leave no gap in the
    stacks. Its members get their models together, so a stack's checkpoint folder stays the same until it is done.
    With `time_limit` (this call's seconds), no fresh stack is planned longer than the call less a stack's start-up
    where one model fits in it. With `time_total` (the seconds left for the part, this call and the calls that
    resume it), only the cells that fit are planned (`cells_that_fit`), the last of them dropped while the plan dealt
    to the slots (the NSP models after the stacks) does not fit, then each cell passed over tried again in the part's
    order and kept where the plan still fits with it (a small cell fills a slot a dropped one left idle); the others
    wait for a later run."""
    members = [(c, s) for c in cells for s in c.seeds]
    needs = lambda c, s: not (c.dir / f"model_{s}.safetensors").exists() and not c.evaluated(s)  # noqa: E731
    left = [m for m in members if needs(*m)]
    paused = paused_stacks(left)
    taken = {(c.name, s) for st in paused for c, s in st}
    measured = planning_step_ms(speed_folders(cells[0]), None, compiled) if cells else {}
    # a model's seconds in a stack of k; at the largest stack the plan may make, how many models a stack of a call's
    # length may hold and which cells fit, before the plan's stacks are timed by their own size (`stack_seconds`)
    sized = lambda c, k: shape_step_ms(c, measured, models=k)[0] * c.profile.pretrain.steps / 1000  # noqa: E731
    model_seconds = lambda c: sized(c, max_stack)  # noqa: E731
    fresh = [(c, s) for c, s in left if (c.name, s) not in taken]
    if time_total is not None:
        kept = set(cells_that_fit(paused, fresh, slots, time_total, model_seconds, measured))
        fresh = [(c, s) for c, s in fresh if c.name in kept]
    longest = None if time_limit is None else time_limit - STACK_OVERHEAD_SECONDS
    plan = lambda fresh: paused + plan_stacks(  # noqa: E731
        fresh, slots, max_stack, seconds=model_seconds, max_seconds=longest if longest is not None and longest > 0
        else None, sized=sized)
    stacks = plan(fresh)
    if time_total is not None:  # the plan itself, dealt to the slots, must fit too: drop the last cells until it does
        tail = lambda fresh: max((eval_seconds(c) for c, _ in fresh + [m for st in paused for m in st]),  # noqa: E731
                                 default=0.0)
        alone = lambda fresh: [c.profile.pretrain.steps * NSP_STEP_MS / 1000 for c, _ in fresh if c.alone]  # noqa
        fits = lambda stacks, fresh: (busiest_slot(stacks, slots, measured, after=alone(fresh))  # noqa: E731
                                      + tail(fresh) <= time_total)
        while fresh and not fits(stacks, fresh):
            last = fresh[-1][0].name
            fresh = [(c, s) for c, s in fresh if c.name != last]
            stacks = plan(fresh)
        # then each cell passed over, in the part's order, is taken where the plan still fits with it: a small cell
        # fills a slot that a larger one, dropped, left idle
        chosen = {c.name for c, _ in fresh}
        for name in dict.fromkeys(c.name for c, s in left if (c.name, s) not in taken):
            if name in chosen:
                continue
            trial = fresh + [(c, s) for c, s in left if c.name == name and (c.name, s) not in taken]
            if fits(trial_stacks := plan(trial), trial):
                fresh, stacks = trial, trial_stacks
                chosen.add(name)
        planned = taken | {(c.name, s) for c, s in fresh}
        members = [(c, s) for c in cells for s in c.seeds if not needs(c, s) or (c.name, s) in planned]
    # the slowest stack starts first: it sets the end of the call
    jobs = [{"kind": "stack", "members": [[c.name, s] for c, s in st]}
            for st in sorted((st for st in stacks if st), key=lambda st: stack_seconds(st, measured), reverse=True)]
    jobs += [{"kind": "nsp", "members": [[c.name, s]]} for c, s in members if c.alone and needs(c, s)]
    # the zero-shot learning curve (the profile's `snapshots`), earliest step first, before the final evaluations:
    # under torchrun the evaluation ranks take them while the stacks train (`wait_for_snapshot`). A member trained
    # without snapshots gets none, nor does a model trained one at a time (`Cell.alone`: no snapshots there), nor any
    # member with `snapshots` off.
    jobs += [{"kind": "snapshot", "members": [[c.name, s]], "step": n}
             for n in (cells[0].profile.pretrain.snapshot_steps if cells and snapshots else ()) for c, s in members
             if not c.alone and not c.curve_done(s, n) and (c.snapshot_path(s, n).exists() or needs(c, s))]
    jobs += [{"kind": "eval", "members": [[c.name, s]]} for c, s in members
             if not c.evaluated(s)]
    return jobs


SNAPSHOT_POLL = 5.0  # seconds between two looks for a snapshot that a stack on another rank has yet to save


def wait_for_snapshot(cell: Cell, seed: int, step: int, left: float | None, waiting: bool,
                      poll: float = SNAPSHOT_POLL) -> bool:
    """Whether the snapshot of (cell, seed) after `step` steps is there to evaluate with enough of the `left` seconds
    remaining to evaluate it (`eval_seconds`; an evaluation is not resumable). With `waiting` (other ranks train the
    stacks: torchrun) it may appear in the meantime; never once the member's final model is saved without it."""
    path, final = cell.snapshot_path(seed, step), cell.dir / f"model_{seed}.safetensors"
    start = time.time()
    while left is None or left - (time.time() - start) >= eval_seconds(cell):
        if path.exists():
            return True
        if not waiting or final.exists():
            return False
        time.sleep(poll)
    return False


def do_job(job: dict, cells: dict[str, Cell], device, time_limit, progress=False, compile=None,
           graphs=True, snapshots: bool = True) -> bool | None:
    """Run one job; True done, False stopped by the time limit, None: an evaluation whose model is not there yet."""
    members = [(cells[n], s) for n, s in job["members"]]
    if job["kind"] == "stack":
        return StackTrainer(members, device, compile=compile, graphs=graphs, snapshots=snapshots).run(time_limit,
                                                                                                      progress)
    cell, seed = members[0]
    if job["kind"] == "nsp":
        return cell._pretrain_alone([seed], device, time_limit, progress)
    if job["kind"] == "snapshot":
        if not wait_for_snapshot(cell, seed, job["step"], time_limit, queue_world()[1] > 1):
            return None
        cell.evaluate_snapshot(seed, job["step"], device, progress)
        return True
    if not (cell.dir / f"model_{seed}.safetensors").exists():
        return None
    if time_limit is not None and time_limit < eval_seconds(cell):
        return False
    cell.evaluate_seed(seed, device, progress)
    return True


def queue_jobs(jobs: list[dict]) -> list[Job]:
    """The part's jobs (`jobs_of`) for the engine's queue: stacks and NSP models in the "train" lane, evaluations in
    the "eval" lane, each after the job (if any) that trains its model; the snapshots' evaluations in the "eval" lane
    with no such order (they wait for their weights themselves, `wait_for_snapshot`)."""
    trainer = {tuple(m): i for i, j in enumerate(jobs) if j["kind"] in ("stack", "nsp") for m in j["members"]}
    return [Job(j, "eval", tuple(i for m in j["members"] if (i := trainer.get(tuple(m))) is not None))
            if j["kind"] == "eval" else Job(j, "eval") if j["kind"] == "snapshot" else Job(j, "train") for j in jobs]


def job_done(spec: dict, cells: dict[str, Cell]) -> bool:
    """Whether a job's results exist: an evaluation's results, or a model (or results) for every model a training
    job trains; the queue then skips it."""
    members = [(cells[n], s) for n, s in spec["members"]]
    if spec["kind"] == "eval":
        return members[0][0].evaluated(members[0][1])
    if spec["kind"] == "snapshot":
        return members[0][0].curve_done(members[0][1], spec["step"])
    return all((c.dir / f"model_{s}.safetensors").exists() or c.evaluated(s) for c, s in members)


def describe_job(spec: dict) -> str:
    """A job in a line of the queue's log: "stack [['enfake-es', 0], ['enfake-hi', 0]]"."""
    step = f" step {spec['step']}" if "step" in spec else ""
    return f"{spec['kind']} {spec['members'][:3]}{' ...' if len(spec['members']) > 3 else ''}{step}"


def job_runner(cells: dict[str, Cell], device, progress: bool = False, compile=None, graphs: bool = True,
               last_call: bool = False, tag: str = "", snapshots: bool = True, later: float | None = None):
    """The function the queue calls for each job (`run_queue(run=...)`): (spec, seconds left) -> True done, False
    stopped by the time limit, None not started in this call. With `last_call` (no call follows on this machine, so
    a model not evaluated by the deadline is lost with it), a stack or NSP job that cannot finish with time left to
    evaluate (`too_long`) is not started; `later` (seconds the calls that resume this one have, beyond this call's
    time left) applies the same rule to this call's seconds left plus `later`: a stack may then pause and finish in
    a later call, but none starts that cannot finish at all. An evaluation that cannot finish in the time left
    (`eval_seconds`; it is not resumable) is not started either, so the rank takes a shorter one."""
    if last_call:
        later = 0.0
    speeds: list = []  # (card, measured ms per model-step), read once

    def leave(why: str) -> None:
        print(f"[{tag or device}] not started: {why}", flush=True)

    def run(spec: dict, left: float | None) -> bool | None:
        if later is not None and left is not None and spec["kind"] in ("stack", "nsp"):
            if not speeds:
                speeds.extend(card_speeds(speed_folders(next(iter(cells.values()))), device,
                                          compile_mode(compile, device) is not None))
            if too_long(spec, cells, left + later, speeds[1], speeds[0]):
                leave(f"{spec['kind']} {spec['members'][:3]} cannot finish and be evaluated in the "
                      f"{left + later:.0f} s left")
                return None
        held = False  # an evaluation held to `eval_seconds` here (do_job's own check could read newer results)
        if spec["kind"] == "eval" and left is not None:
            cell, seed = cells[spec["members"][0][0]], spec["members"][0][1]
            if (cell.dir / f"model_{seed}.safetensors").exists():
                if left < (need := eval_seconds(cell)):
                    leave(f"eval {spec['members']} needs about {need:.0f} s, {left:.0f} s left")
                    return None
                held = True
        return do_job(spec, cells, device, None if held else left, progress, compile, graphs, snapshots)
    return run


def check_time_total(time_limit: float | None, time_total: float | None,
                     last_call: bool = False) -> tuple[float | None, float | None]:
    """(time_limit, time_total) checked: `time_total` positive and at least `time_limit`; without a `time_limit`, the
    call may use all of `time_total`; `last_call` makes `time_total` the `time_limit` (the two together must agree)."""
    if time_total is not None and time_total <= 0:
        raise ConfigError(f"time_total must be a positive number of seconds; got {time_total}")
    if last_call:
        if time_total is not None and time_total != time_limit:
            raise ConfigError(f"a last call's time_total is its time_limit ({time_limit}); got {time_total}")
        return time_limit, time_limit
    if time_total is None:
        return time_limit, None
    if time_limit is None:
        return time_total, time_total
    if time_total < time_limit:
        raise ConfigError(f"time_total ({time_total:g} s) covers this call and later ones: it cannot be below the "
                          f"time_limit ({time_limit:g} s)")
    return time_limit, time_total


def seconds_after(time_limit: float | None, time_total: float | None,
                  spent: float) -> tuple[float | None, float | None]:
    """(time_limit, time_total) less the `spent` seconds since the call's start (torchrun's start-up, the data
    preparation), at least 0: the seconds the plan may fill. The runner counts its seconds left from the call's start
    too (`run_queue(started=...)`, `job_runner`), so a plan made with the whole call would hold stacks that the runner
    then refuses to start, and their slots would stay idle."""
    less = lambda s: None if s is None else max(0.0, s - spent)  # noqa: E731
    return less(time_limit), less(time_total)


def run_part(part: str, profile: str = "lab", seeds=None, device="cpu", time_limit: float | None = None,
             progress: bool = True, cache_dir=None, root=None, workers_per_gpu: int = 1,
             compile=None, graphs: bool = True, max_stack: int = MAX_STACK,
             eval_workers_per_gpu: int = 0, last_call: bool = False, snapshots: bool = True,
             time_total: float | None = None) -> pd.DataFrame:
    """Every cell of a part (resumable): data prepared once on the CPU, then stacks, NSP models and evaluations
    through the engine's queue: in this process on `device`, or as one rank of torchrun's (`xlrepro train k2020`
    starts `workers_per_gpu` + `eval_workers_per_gpu` ranks per GPU). The first `workers_per_gpu` ranks of a machine
    per GPU take every job, the others evaluations only (an evaluation keeps a GPU about a tenth busy, so several run
    side by side; they do not change the stack plan, which depends on the training ranks alone). `last_call`: see
    `job_runner` (needs a `time_limit`). `time_total`: the seconds left for the part, this call's and those of the
    calls that resume it (at least `time_limit`; without one, this call's limit too): only the cells that fit are
    planned and no stack starts that cannot finish and be evaluated within it (`jobs_of`, `job_runner`); `last_call`
    is `time_total` equal to `time_limit`. `snapshots` False: the profile's snapshots are neither saved nor evaluated
    (no learning curve; no number changes). Returns the part's finished results with their majority baselines, as
    one long frame."""
    if workers_per_gpu < 1 or eval_workers_per_gpu < 0:
        raise ConfigError(f"workers_per_gpu must be >= 1 and eval_workers_per_gpu >= 0; got {workers_per_gpu}, "
                          f"{eval_workers_per_gpu}")
    if last_call and time_limit is None:
        raise ConfigError("last_call decides what can still finish before the time limit: give a time_limit too")
    time_limit, time_total = check_time_total(time_limit, time_total, last_call)
    compile_mode(compile)
    t0 = launched_at()  # preparation counts against the time limit (and torchrun's start-up, where it launched)
    rank, world = queue_world()
    per_gpu = workers_per_gpu + eval_workers_per_gpu
    local, local_world = local_slot()
    lanes = ["eval"] if world > 1 and local >= local_world * workers_per_gpu // per_gpu else None
    cells = part_cells(part, profile, seeds, cache_dir, root)
    jobs = None
    if rank == 0:  # the plan: the other ranks wait for it in the queue's store
        prepare(cells, part, profile, seeds, cache_dir, root, progress)
        jobs = queue_jobs(jobs_of(cells, max(1, world * workers_per_gpu // per_gpu), max_stack,
                                  compile_mode(compile, device) is not None, snapshots,
                                  *seconds_after(time_limit, time_total, time.time() - t0)))
    tag = f"rank {rank}{' (evaluations)' if lanes else ''}"
    by_name = {c.name: c for c in cells}
    later = None if time_total is None else time_total - time_limit
    run_queue(jobs, job_runner(by_name, device, progress and world == 1, compile, graphs, False, tag, snapshots, later),
              done=lambda spec: job_done(spec, by_name), name=f"k2020-{part}", time_limit=time_limit, started=t0,
              lanes=lanes, describe=describe_job)
    return collect(cells)


def _prepare_one(args) -> str:
    part, profile, seeds, cache_dir, root, name = args
    cell = next(c for c in part_cells(part, profile, seeds, cache_dir, root) if c.name == name)
    cell.table()
    return name


def tables_to_build(cells: list[Cell]) -> list[Cell]:
    """The cells whose pair table `prepare` builds: those without one that have a seed still to train or evaluate. A
    cell evaluated for every seed (one restored from the book, `pilots --restore`) needs none; anything a later job
    reads is built on first use anyway (`Cell.table`, `Cell.tokenizer`)."""
    return [c for c in cells if not (c.dir / "pairs.npz").exists() and not all(c.evaluated(s) for s in c.seeds)]


def prepare(cells: list[Cell], part, profile, seeds, cache_dir, root, progress: bool = True) -> None:
    """Each cell's tokenizer and pair table (CPU, ~10 s a cell on one core; kept in the cell's folder, so a later call
    reuses them), for the cells with a seed still to train or evaluate, in parallel processes: one per cell, at most
    one per CPU core; and the NER stand-in's silver labels
    when a cell declares that task (spaCy on every English verse once, ~2 min; cached)."""
    from concurrent.futures import ProcessPoolExecutor

    from tqdm.auto import tqdm
    ner = [c for c in cells if "ner" in c.exp.tasks]
    if ner:
        from xlrepro.tasks.entities import prepare_entities
        f = ner[0].ner_recipe
        if f.max_train_pairs is None and f.max_test_pairs is None:
            prepare_entities(cache_dir, progress=progress)
        else:  # a small profile: only the verses it reads
            prepare_entities(cache_dir, ["train"], max_verses=f.max_train_pairs, progress=progress)
            prepare_entities(cache_dir, ["dev", "test"], max_verses=f.max_test_pairs, progress=progress)
    todo = [c.name for c in tables_to_build(cells)]
    processes = min(len(todo), os.cpu_count() or 1)
    if processes <= 1:
        for c in tqdm([c for c in cells if c.name in todo], desc="pair tables", disable=not progress):
            c.table()
        return
    with ProcessPoolExecutor(processes) as pool:
        jobs = [(part, profile, seeds, cache_dir, root, n) for n in todo]
        for _ in tqdm(pool.map(_prepare_one, jobs), total=len(jobs), desc="pair tables", disable=not progress):
            pass


def collect(cells: list[Cell]) -> pd.DataFrame:
    frames = []
    for c in cells:
        done = [s for s in c.seeds if c.evaluated(s)]
        if done:
            frames += [pd.concat([c.evaluate_seed(s) for s in done]), c.majority().assign(experiment=f"majority/{c.name}")]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=RESULT_COLUMNS)


def card_speeds(folder, device, compiled: bool | None = None) -> tuple[str, dict[str, float]]:
    """The card `device` is (one of GPUS; "H200" for anything else, the FLOP model's reference) and the measured
    ms per model-step to plan with (`planning_step_ms`: that card's and the `compiled` mode's where a shape was
    timed so)."""
    from xlrepro.engine.models import device_name
    gpu = next((g for g in GPUS if g in device_name(device)), "H200")
    return gpu, planning_step_ms(folder, gpu, compiled)


def too_long(spec: dict, cells: dict[str, Cell], left: float, measured: dict[str, float], gpu: str) -> bool:
    """Whether a stack or NSP job cannot finish and still leave time to evaluate its models (`eval_seconds`) in
    `left` seconds (by `stack_seconds_left`, or NSP_STEP_MS for an NSP model). Evaluations are never too long here
    (`work` holds them to `eval_seconds` itself)."""
    members = [(cells[n], s) for n, s in spec["members"]]
    if spec["kind"] == "stack":
        need = stack_seconds_left(members, measured, gpu)
    elif spec["kind"] == "nsp":
        need = members[0][0].profile.pretrain.steps * NSP_STEP_MS / 1000
    else:
        return False
    return need + eval_seconds(members[0][0]) > left
