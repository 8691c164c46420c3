"""K et al. (2020)'s B-BERTs trained many at once: every (cell, seed) of one shape shares a `ModelStack`.

Which cells can share a stack. The fused stack needs one architecture (hidden, layers, heads, FFN), one optimiser
recipe (learning rate, warm-up, steps, weight decay) and one word-embedding table size. Cells differ in corpora and
vocabularies (each trains its own joint word-piece vocabulary; the id-way Fake-English doubles it; the word level has
20k words; characters a few hundred), so the profile declares `embedding_rows` (lab: 20480): every model's table has
that many rows, the vocabulary's ids first and unused rows after them (as BERT's [unused] pieces; no input uses them,
and the random replacement of whole-word masking draws only the vocabulary's ids). The padding is part of every
cell's configuration, so a cell trains the same alone or stacked. NSP cells have a second head and train apart.

What stays each model's own (`xlrepro/engine/noise.py`): initialisation (its seed), data order (`PairTable.draw`:
a hash of (seed, step) over its own corpus), whole-word masking (its own pair table's word starts and maskable
positions, prepared on the CPU; the draws keyed by (seed, step, row, position)) and dropout. The only thing shared
by a stack is the length quantile of a step (`shared_bin`, a function of the step alone), so that the models of a
stack pad to about the same width. `tests/test_k2020_stacks.py` trains a cell alone and inside a stack of three
cells with other vocabularies and checks the same masks at every step and the same results.

Layout: `runs/k2020/<profile>/stacks/<stack key>/` holds checkpoint.pt (while training) and timing.json; each
model lands in its cell's folder as model_<seed>.safetensors, where the cell's fine-tuning finds it.
With several GPUs (or several workers per GPU), `run_part` writes jobs into a queue folder (stacks first, largest
first, then NSP models, then fine-tuning and evaluation of every (cell, seed)) and starts one `worker` process per
slot; a worker claims a job by renaming its file, so no two train the same stack, and a job stopped by the time limit
goes back to the queue and resumes from its checkpoint on the next call.

The pair tables, the grouping into stacks and `StackTrainer` are in `trainer` (which `bbert.Cell` pre-trains
through); this module runs a part: its cells, jobs, queue and workers.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from xlrepro import atomic
from xlrepro.config import ConfigError, choose, plural
from xlrepro.engine.stacked import compile_mode

from .bbert import NER_TASK, RESULT_COLUMNS, TASK, Cell
from .config import (EVAL_MARGIN, EVAL_SLACK, EVAL_TESTING_SECONDS, FINETUNE_FIXED_SHARE, GPUS, PADDED_WIDTH,
                     STACK_OVERHEAD_SECONDS, step_ms)
from .trainer import (MAX_STACK, PairTable, StackTrainer,  # noqa: F401  (PairTable, shared_bin, stack_shape: read as
                      plan_stacks, shared_bin, stack_folder, stack_shape)  # stacks.<name>)


# ----------------------------------------------------------------------------------------------- a part
def part_cells(part: str, profile: str, seeds=None, cache_dir=None, root=None) -> list[Cell]:
    from .config import experiments_of, load_plan
    plan = load_plan()
    return [Cell(plan, profile, n, seeds, cache_dir=cache_dir, root=root) for n in experiments_of(plan, part)]


def measured_step_ms(folder: Path, gpu: str | None = None) -> dict[str, float]:
    """Median milliseconds per model-step of each shape (`ModelSize.name`) over the finished stacks' timing.json
    files under `folder`; with `gpu` ("H100", "H200"), only those timed on such a GPU. The FLOP model
    (`config.step_ms`) misses what kernels and launch overheads make of a shape: measured stacks ran 0.5 to 2.8 times
    its estimate (L18H12 at width 156, head dim 13: 54 ms against 31)."""
    if gpu is not None:
        choose("gpu", gpu, GPUS)
    times: dict[str, list[float]] = {}
    for f in Path(folder).glob("*/timing.json"):
        t = json.loads(f.read_text())
        if gpu is None or gpu in t.get("device", ""):
            times.setdefault(t["shape"], []).append(t["ms_per_model_step"])
    return {shape: float(np.median(v)) for shape, v in times.items()}


SIMILAR_WIDTH = 0.25  # a measured shape of the same depth calibrates the FLOP model within this relative width


def shape_step_ms(c: Cell, measured: dict[str, float], gpu: str = "H200") -> tuple[float, str]:
    """Milliseconds per model-step of cell `c`'s shape and where the number comes from: "measured"; else "similar
    shape": the FLOP model calibrated on the measured shape of the same depth nearest in width (within SIMILAR_WIDTH;
    deep narrow shapes ran about twice the FLOP model's time, which the calibration carries over); else "FLOP model"
    for `gpu`. Shape names are `config.model_size`'s L{layers}H{heads}d{hidden}."""
    if c.size.name in measured:
        return measured[c.size.name], "measured"
    flop = lambda hidden, layers: step_ms(hidden, layers, PADDED_WIDTH[c.exp.tokenization], c.vocab_rows,  # noqa: E731
                                          c.profile.pretrain.batch_size, gpu=gpu)
    near = []
    for shape, ms in measured.items():
        m = re.fullmatch(r"L(\d+)H(\d+)d(\d+)", shape)
        if m and int(m[1]) == c.size.layers and abs(int(m[3]) / c.size.hidden - 1) <= SIMILAR_WIDTH:
            ratio = flop(c.size.hidden, c.size.layers) / flop(int(m[3]), int(m[1]))
            near.append((abs(int(m[3]) - c.size.hidden), ms * ratio))
    if near:
        return min(near)[1], "similar shape"
    return flop(c.size.hidden, c.size.layers), "FLOP model"


def stack_seconds(stack, measured: dict[str, float], gpu: str = "H200") -> float:
    """Estimated training seconds of a stack of (cell, seed) members, all steps: the shape's milliseconds per
    model-step (`shape_step_ms`: measured with two training workers per GPU, else calibrated on a similar measured
    shape, else the FLOP model's for `gpu`), plus the start-up of a stack (`config.STACK_OVERHEAD_SECONDS`)."""
    c = stack[0][0]
    ms, _ = shape_step_ms(c, measured, gpu)
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
    times EVAL_SLACK, plus EVAL_TESTING_SECONDS. EVAL_MARGIN while a task has no measurement at all."""
    own = measured_finetune_seconds(cell.dir, "results_*.csv")
    everywhere = measured_finetune_seconds(cell.dir.parent)
    depth = FINETUNE_FIXED_SHARE + (1 - FINETUNE_FIXED_SHARE) * cell.size.layers / 12
    secs = 0.0
    for task in [TASK] + ([NER_TASK] if "ner" in cell.exp.tasks else []):
        if task in own:
            secs += own[task]
        elif task in everywhere:
            secs += everywhere[task] * depth
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


def dry_run(cells: list[Cell], slots: int, max_stack: int = MAX_STACK, gpu: str | None = None) -> str:
    """What a call would do, without training: every stack still to train (shape, models, estimated seconds, the
    slot it would take if each slot took the next job when free), the NSP models and evaluations left, and the
    busiest slot's training time (the call's lower bound before evaluations). A stack paused with a checkpoint is
    counted from its last checkpoint (`stack_seconds_left`). `gpu` ("H100", "H200") uses only the speeds measured on
    such a GPU and the FLOP model for it; None pools every measurement (the FLOP model then assumes an H200)."""
    by_name = {c.name: c for c in cells}
    measured = measured_step_ms(cells[0].dir.parent / "stacks", gpu) if cells else {}
    jobs = jobs_of(cells, slots, max_stack)
    loads, rows = [0.0] * slots, []
    for job in (j for j in jobs if j["kind"] == "stack"):
        stack = [(by_name[n], s) for n, s in job["members"]]
        est = stack_seconds_left(stack, measured, gpu or "H200")
        slot = loads.index(min(loads))
        loads[slot] += est
        shape = stack[0][0].size.name
        rows.append({"slot": slot, "shape": shape, "models": len(stack), "estimated s": round(est),
                     "speed": shape_step_ms(stack[0][0], measured, gpu or "H200")[1],
                     "cells": ", ".join(sorted({n for n, _ in job["members"]}))})
    count = lambda kind: sum(j["kind"] == kind for j in jobs)  # noqa: E731
    evals = [by_name[j["members"][0][0]] for j in jobs if j["kind"] == "eval"]
    eval_line = ""
    if evals:
        med = measured_finetune_seconds(cells[0].dir.parent)
        if med:
            secs = sum(med.get(TASK, 0.0) + (med.get(NER_TASK, 0.0) if "ner" in c.exp.tasks else 0.0) for c in evals)
            eval_line = (f"\nevaluations: about {secs / 60:.0f} worker-minutes of fine-tuning for the {len(evals)} left "
                         f"(median measured fine-tuning: " + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(med.items()))
                         + "; data and testing on top), shared by the evaluation workers")
    head = (f"{plural(count('stack'), 'stack')} ({plural(sum(r['models'] for r in rows), 'model')}), "
            f"{plural(count('nsp'), 'model')} one at a time (NSP, control) and "
            f"{plural(count('eval'), 'evaluation')} left over {slots} slots"
            f"{'' if gpu is None else f' (speeds measured on {gpu}s only)'}")
    if not rows:
        return head + eval_line
    table = pd.DataFrame(rows).to_string(index=False, max_colwidth=70)
    return (f"{head}\n{table}\nbusiest slot: about {max(loads) / 60:.1f} minutes of training "
            f"(evaluations and NSP models come on top){eval_line}")


def jobs_of(cells: list[Cell], slots: int, max_stack: int = MAX_STACK) -> list[dict]:
    """The part's jobs in the order they are handed out: stacks (the longest first, by the shapes' measured speeds
    where a finished stack has timed them, else by the FLOP model), NSP models, evaluations.
    The stack plan is made from every (cell, seed), done or not, so a resumed call finds the same stacks; a stack's
    job then trains only its members that still need it (no model and no results: a cell evaluated elsewhere, whose
    weights stayed on another machine, is not trained again). Its members get their models together, so the subset,
    and with it the stack's checkpoint folder, stays the same until the stack is done."""
    members = [(c, s) for c in cells for s in c.seeds]
    needs = lambda c, s: not (c.dir / f"model_{s}.safetensors").exists() and not c.evaluated(s)  # noqa: E731
    stacks = [[m for m in st if needs(*m)] for st in plan_stacks(members, slots, max_stack)]
    measured = measured_step_ms(cells[0].dir.parent / "stacks") if cells else {}
    # the slowest stack starts first: it sets the end of the call
    jobs = [{"kind": "stack", "members": [[c.name, s] for c, s in st]}
            for st in sorted((st for st in stacks if st), key=lambda st: stack_seconds(st, measured), reverse=True)]
    jobs += [{"kind": "nsp", "members": [[c.name, s]]} for c, s in members if c.exp.alone and needs(c, s)]
    jobs += [{"kind": "eval", "members": [[c.name, s]]} for c, s in members
             if not c.evaluated(s)]
    return jobs


def do_job(job: dict, cells: dict[str, Cell], device, time_limit, progress=False, compile=None,
           graphs=True) -> bool | None:
    """Run one job; True done, False stopped by the time limit, None: an evaluation whose model is not there yet."""
    members = [(cells[n], s) for n, s in job["members"]]
    if job["kind"] == "stack":
        return StackTrainer(members, device, compile=compile, graphs=graphs).run(time_limit, progress)
    cell, seed = members[0]
    if job["kind"] == "nsp":
        return cell._pretrain_alone([seed], device, time_limit, progress)
    if not (cell.dir / f"model_{seed}.safetensors").exists():
        return None
    if time_limit is not None and time_limit < eval_seconds(cell):
        return False
    cell.evaluate_seed(seed, device, progress)
    return True


def run_part(part: str, profile: str = "lab", seeds=None, device="cpu", time_limit: float | None = None,
             progress: bool = True, cache_dir=None, root=None, devices=None, workers_per_gpu: int = 1,
             compile=None, graphs: bool = True, max_stack: int = MAX_STACK,
             eval_workers_per_gpu: int = 0, last_call: bool = False) -> pd.DataFrame:
    """Every cell of a part (resumable): data prepared once on the CPU, then stacks, NSP models and evaluations,
    in this process (one device, one worker) or in `workers_per_gpu` worker processes per device, plus
    `eval_workers_per_gpu` that take evaluations only (an evaluation keeps a GPU about a tenth busy, so several run
    side by side; they do not change the stack plan, which depends on `workers_per_gpu` alone). `last_call`: see
    `work` (needs a `time_limit`). Returns the part's finished results with their majority baselines, as one long
    frame."""
    if workers_per_gpu < 1 or eval_workers_per_gpu < 0:
        raise ConfigError(f"workers_per_gpu must be >= 1 and eval_workers_per_gpu >= 0; got {workers_per_gpu}, "
                          f"{eval_workers_per_gpu}")
    if last_call and time_limit is None:
        raise ConfigError("last_call decides what can still finish before the time limit: give a time_limit too")
    compile_mode(compile)
    t0 = time.time()
    cells = part_cells(part, profile, seeds, cache_dir, root)
    prepare(cells, part, profile, seeds, cache_dir, root, progress)
    devices = list(devices or [device])
    slots = len(devices) * workers_per_gpu
    jobs = jobs_of(cells, slots, max_stack)
    by_name = {c.name: c for c in cells}
    left = lambda: None if time_limit is None else time_limit - (time.time() - t0)  # noqa: E731
    if slots == 1 and not eval_workers_per_gpu:
        gpu, measured = card_speeds(cells[0].dir.parent / "stacks", devices[0]) if last_call else ("H200", {})
        for job in jobs:
            if left() is not None and left() <= 0:
                break
            if last_call and too_long(job, by_name, left(), measured, gpu):
                continue  # its models could not be evaluated in this call
            if do_job(job, by_name, devices[0], left(), progress, compile, graphs) is False:
                break
    elif jobs:
        queue = cells[0].dir.parent / "queue"
        queue.mkdir(parents=True, exist_ok=True)
        for stale in queue.glob("*.json"):  # jobs of an earlier, interrupted call: replanned above
            stale.unlink()
        for k, job in enumerate(jobs):
            atomic.write_json(queue / f"{k:04d}.json", job)
        args = [sys.executable, "-m", "xlrepro.papers.k2020.worker", "--part", part, "--profile", profile,
                "--queue", str(queue)]
        args += ["--seeds", *map(str, seeds)] if seeds is not None else []
        args += ["--root", str(root)] if root is not None else []
        args += ["--cache-dir", str(cache_dir)] if cache_dir is not None else []
        args += ["--deadline", repr(t0 + time_limit)] if time_limit is not None else []
        args += ["--compile", compile_mode(compile, "cuda") or "none"] if compile else []
        args += [] if graphs else ["--no-graphs"]
        args += ["--last-call"] if last_call else []
        # CPU threads shared out among the workers (each would otherwise start one per core); changes no number
        threads = max(1, (os.cpu_count() or 1) // (len(devices) * (workers_per_gpu + eval_workers_per_gpu)))
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        procs = [subprocess.Popen(args + ["--device", dev, "--tag", f"{dev.replace(':', '')}_{w}"], env=env)
                 for dev in devices for w in range(workers_per_gpu)]
        procs += [subprocess.Popen(args + ["--device", dev, "--tag", f"{dev.replace(':', '')}_eval{w}",
                                           "--kinds", "eval"], env=env)
                  for dev in devices for w in range(eval_workers_per_gpu)]
        codes = [p.wait() for p in procs]
        if any(codes):
            raise RuntimeError(f"k2020 workers failed with exit codes {codes}; see their output above")
    return collect(cells)


def _prepare_one(args) -> str:
    part, profile, seeds, cache_dir, root, name = args
    cell = next(c for c in part_cells(part, profile, seeds, cache_dir, root) if c.name == name)
    cell.table()
    return name


def prepare(cells: list[Cell], part, profile, seeds, cache_dir, root, progress: bool = True) -> None:
    """Each cell's tokenizer and pair table (CPU, ~10 s a cell on one core; kept in the cell's folder, so a later call
    reuses them), in parallel processes: one per cell, at most one per CPU core; and the NER stand-in's silver labels
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
    todo = [c.name for c in cells if not (c.dir / "pairs.npz").exists()]
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


def claim(queue: Path, tag: str, skip: set, kinds=None) -> Path | None:
    """Rename the first unclaimed job not in `skip` (and, with `kinds`, of one of those kinds) to
    claimed-<tag>-<name>; None when there is none. `tag` has no "-" (release splits on it)."""
    if "-" in tag:
        raise ValueError(f"a worker tag has no '-'; got {tag!r}")
    for candidate in sorted(queue.glob("[0-9]*.json")):
        if candidate.name in skip:
            continue
        if kinds is not None:
            try:
                if json.loads(candidate.read_text())["kind"] not in kinds:
                    continue
            except FileNotFoundError:
                continue  # another worker took it
        claimed = candidate.with_name(f"claimed-{tag}-{candidate.name}")
        try:
            os.rename(candidate, claimed)
            return claimed
        except FileNotFoundError:
            continue  # another worker took it
    return None


def release(job: Path) -> None:
    os.rename(job, job.with_name(job.name.split("-", 2)[2]))


def card_speeds(folder: Path, device) -> tuple[str, dict[str, float]]:
    """The card `device` is (one of GPUS; "H200" for anything else, the FLOP model's reference) and the measured
    ms per model-step to plan with: that card's where a shape was timed on it, else every card's."""
    from xlrepro.engine.models import device_name
    gpu = next((g for g in GPUS if g in device_name(device)), "H200")
    return gpu, {**measured_step_ms(folder), **measured_step_ms(folder, gpu)}


def training_job(queue: Path, member) -> tuple[Path, dict] | None:
    """The queued stack or NSP job (claimed or not) that trains `member` ([cell name, seed]), or None."""
    for _ in range(3):  # a job renamed (claimed, released) during the scan is looked for again
        moved = False
        for f in sorted(queue.glob("*.json")):
            try:
                spec = json.loads(f.read_text())
            except FileNotFoundError:
                moved = True
                continue
            if spec["kind"] != "eval" and list(member) in [list(m) for m in spec["members"]]:
                return f, spec
        if not moved:
            break
    return None


def too_long(spec: dict, cells: dict[str, Cell], left: float, measured: dict[str, float], gpu: str) -> bool:
    """Whether a stack or NSP job cannot finish and still leave time to evaluate its models (`eval_seconds`) in
    `left` seconds (by `stack_seconds_left`, or NSP_STEP_MS for an NSP model). Evaluations are never too long here
    (`work` holds them to `eval_seconds` itself)."""
    members = [(cells[n], s) for n, s in spec["members"]]
    if spec["kind"] == "stack":
        need = stack_seconds_left(members, measured, gpu)
    elif spec["kind"] == "nsp":
        from .config import NSP_STEP_MS
        need = members[0][0].profile.pretrain.steps * NSP_STEP_MS / 1000
    else:
        return False
    return need + eval_seconds(members[0][0]) > left


def work(queue: Path, cells: dict[str, Cell], device: str, tag: str, deadline: float | None = None,
         compile=None, graphs: bool = True, poll: float = 2.0, kinds=None, last_call: bool = False) -> None:
    """A worker's loop: claim jobs (of `kinds` only, when given) until none is left or the `deadline` (a `time.time()`
    value, shared by every worker of a call, so a worker's own start-up counts against it) has passed. An evaluation
    whose model another worker is still training goes back to the queue; while only such jobs remain, the worker
    waits for them. With `last_call` (no call follows on this machine, so a model not evaluated by the deadline is
    lost with it), a stack or NSP job that cannot finish with time left to evaluate (`too_long`) is not started: the
    worker takes evaluations instead."""
    never: set = set()  # jobs too long for what is left of the call: they only get longer

    def leave(job: Path, why: str) -> None:  # back to the queue for a later call; not tried again in this one
        release(job)
        name = job.name.split("-", 2)[2]
        never.add(name)
        skip.add(name)
        print(f"[{tag}] not started: {why}", flush=True)

    gpu, measured = "H200", None
    while True:
        left = None if deadline is None else deadline - time.time()
        if left is not None and left <= 0:
            return
        skip: set = set(never)
        ran = False
        while (job := claim(queue, tag, skip, kinds)) is not None:
            spec = json.loads(job.read_text())
            left = None if deadline is None else deadline - time.time()
            if last_call and left is not None and spec["kind"] != "eval":
                if measured is None:
                    gpu, measured = card_speeds(next(iter(cells.values())).dir.parent / "stacks", device)
                if too_long(spec, cells, left, measured, gpu):
                    leave(job, f"{spec['kind']} {spec['members'][:3]} cannot finish and be evaluated in the "
                               f"{left:.0f} s left")
                    continue
            held = False  # an evaluation held to `eval_seconds` here (do_job's own check could read newer results)
            if spec["kind"] == "eval" and left is not None:  # not resumable: a shorter one may still fit
                cell, seed = cells[spec["members"][0][0]], spec["members"][0][1]
                if (cell.dir / f"model_{seed}.safetensors").exists():
                    if left < (need := eval_seconds(cell)):
                        leave(job, f"eval {spec['members']} needs about {need:.0f} s, {left:.0f} s left")
                        continue
                    held = True
            t_job = time.time()
            done = do_job(spec, cells, device, None if held else left, False, compile, graphs)
            if done is None:  # its model is not trained yet
                release(job)
                skip.add(job.name.split("-", 2)[2])
                if last_call and left is not None:
                    if measured is None:
                        gpu, measured = card_speeds(next(iter(cells.values())).dir.parent / "stacks", device)
                    trainer = training_job(queue, spec["members"][0])
                    if trainer is None or (not trainer[0].name.startswith("claimed-")
                                           and too_long(trainer[1], cells, left, measured, gpu)):
                        never.add(job.name.split("-", 2)[2])  # nobody will train its model in this call
                continue
            ran = True
            until = "" if deadline is None else f", {deadline - time.time():.0f} s to the deadline"
            print(f"[{tag}] {'done' if done else 'paused'}: {spec['kind']} {spec['members'][:3]}"
                  f"{' ...' if len(spec['members']) > 3 else ''} in {time.time() - t_job:.0f} s{until}", flush=True)
            if done:
                job.unlink()
            else:
                release(job)
                return
        if not skip - never:
            return  # nothing left that this worker may start
        if not ran:
            time.sleep(poll)
