"""K et al. (2020)'s B-BERTs trained many at once: every (cell, seed) of one shape shares a `ModelStack`.

Which cells can share a stack. The fused stack needs one architecture (hidden, layers, heads, FFN), one optimiser
recipe (learning rate, warm-up, steps, weight decay) and one word-embedding table size. Cells differ in corpora and
vocabularies (each trains its own joint word-piece vocabulary; the id-way Fake-English doubles it; the word level has
20k words; characters a few hundred), so the profile declares `embedding_rows` (lab: 20480): every model's table has
that many rows, the vocabulary's ids first and unused rows after them (as BERT's [unused] pieces; no input uses them,
and the random replacement of whole-word masking draws only the vocabulary's ids). The padding is part of every
cell's configuration, so a cell trains the same alone or stacked. NSP cells have a second head and train apart.

What stays each model's own (`xlrepro/training/noise.py`): initialisation (its seed), data order (`PairTable.draw`:
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
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from xlrepro import atomic
from xlrepro.config import ConfigError, choose, plural
from xlrepro.training.noise import MASK_ACTION, MASK_RANDOM_ID, MASK_SELECT
from xlrepro.training.stacked import ModelStack, OptimConfig, compile_mode, masked_capacity, select_masked

from .bbert import CHECKPOINT_SECONDS, NER_TASK, RESULT_COLUMNS, TASK, Cell, whole_word_mask
from .config import (EVAL_MARGIN, EVAL_SLACK, EVAL_TESTING_SECONDS, FINETUNE_FIXED_SHARE, GPUS, PADDED_WIDTH,
                     STACK_OVERHEAD_SECONDS, stack_caps, step_ms)

MAX_STACK = 16  # models per stack: ~1.2 GB of activations each for the 192 x 12 base at 128 pairs (GPUs of 80 GB)
LOSS_EVERY = 200  # steps: each model's mean MLM loss goes into timing.json (a diverged model shows there)
LENGTH_BIN_SALT = 0x4B32  # the shared length-quantile order: a permutation per cycle of `bins` steps


def shared_bin(step: int, bins: int) -> int:
    """The length quantile every model of every stack draws from at `step`: each cycle of `bins` steps visits every
    quantile once, in an order that depends on the cycle only (never on a seed or a stack)."""
    if bins < 1:
        raise ValueError(f"bins must be >= 1; got {bins}")
    if bins == 1:
        return 0
    cycle, within = divmod(step, bins)
    return int(np.random.default_rng([cycle, LENGTH_BIN_SALT]).permutation(bins)[within])


@dataclass
class PairTable:
    """A cell's pre-training pairs, all languages in one padded table (built on the CPU, once per cell).

    ids [N, W] int32; types [N, W] int8; wstart [N, W] int16 (input position of each piece's word-initial piece);
    maskable [N, W] bool (content pieces: no [CLS]/[SEP]/language-id separators, no padding); lengths [N] int16;
    is_next [N] bool; offsets/sizes [L] (each language's rows); probs [L] (language sampling, exponent alpha);
    by_length [N] (each language's rows sorted by length, stable: the quantiles of `draw`)."""
    ids: np.ndarray
    types: np.ndarray
    wstart: np.ndarray
    maskable: np.ndarray
    lengths: np.ndarray
    is_next: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray
    probs: np.ndarray
    by_length: np.ndarray

    @classmethod
    def build(cls, pairs: dict, special, pretrain) -> "PairTable":
        """From `Cell.pretraining_pairs` (per language: ids, types, word starts, lengths, is_next)."""
        from xlrepro.training.mini_mbert import sampling_weights
        langs = list(pairs)
        width = max(p[0].shape[1] for p in pairs.values())
        pad = lambda a: np.pad(a, ((0, 0), (0, width - a.shape[1])))  # noqa: E731
        ids = np.concatenate([pad(pairs[l][0]) for l in langs])
        lengths = np.concatenate([pairs[l][3] for l in langs])
        sizes = np.array([len(pairs[l][0]) for l in langs], np.int64)
        if pretrain.length_bins > sizes.min():
            raise ConfigError(f"length_bins {pretrain.length_bins} exceeds the smallest language's {sizes.min()} pairs")
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        weights = sampling_weights(dict(zip(langs, sizes.tolist())), pretrain.alpha)
        content = np.arange(width)[None, :] < lengths[:, None]
        maskable = content & ~np.isin(ids, np.array(sorted(special)))
        by_length = np.concatenate([o + np.argsort(lengths[o:o + n], kind="stable") for o, n in zip(offsets, sizes)])
        return cls(ids.astype(np.int32), np.concatenate([pad(pairs[l][1]) for l in langs]).astype(np.int8),
                   np.concatenate([pad(pairs[l][2]) for l in langs]).astype(np.int16), maskable,
                   lengths.astype(np.int16), np.concatenate([pairs[l][4] for l in langs]).astype(bool),
                   offsets, sizes, np.array([weights[l] for l in langs]), by_length)

    def draw(self, seed: int, step: int, batch_size: int, bins: int = 1) -> np.ndarray:
        """[B] rows of a model's batch: languages by `probs`, then uniformly among the language's pairs of the
        step's shared length quantile (all pairs with bins = 1). Depends on (seed, step) only: resumable."""
        rng = np.random.default_rng([seed, step])
        langs = rng.choice(len(self.sizes), size=batch_size, p=self.probs)
        b = shared_bin(step, bins)
        lo, hi = (b * self.sizes) // bins, ((b + 1) * self.sizes) // bins
        k = rng.integers(lo[langs], hi[langs])
        return self.by_length[self.offsets[langs] + k]

    def save(self, path: Path) -> None:
        with atomic.atomic_path(path) as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, **self.__dict__)

    @classmethod
    def load(cls, path: Path) -> "PairTable":
        with np.load(path) as z:
            return cls(**{k: z[k] for k in z.files})


# ----------------------------------------------------------------------------------------------- planning
def stack_shape(cell: Cell) -> tuple:
    """What models of one stack must share: architecture, optimiser recipe, batch, table rows. Cells trained one seed
    at a time (NSP and its control): None."""
    if cell.exp.alone:
        return None
    s, p = cell.size, cell.profile.pretrain
    return (s.hidden, s.layers, s.heads, s.ffn, s.lr, p.steps, p.warmup, p.weight_decay, p.batch_size, p.max_length,
            p.mlm_probability, p.length_bins, cell.vocab_rows)


def stack_key(members) -> str:
    return hashlib.sha1(",".join(f"{c.key}/{s}" for c, s in members).encode()).hexdigest()[:12]


def stack_folder(members, root: Path | None = None) -> Path:
    """Where a stack of (cell, seed) members keeps its checkpoint, progress.json and timing.json."""
    base = Path(root) if root is not None else members[0][0].dir.parent
    return base / "stacks" / stack_key(members)


def plan_stacks(members, slots: int = 1, max_stack: int = MAX_STACK) -> list[list]:
    """(cell, seed) members grouped by `stack_shape`, each group cut into stacks of at most `max_stack`. The `slots`
    (GPUs x workers) are shared out among the groups by their sizes, at least one each, and a group is cut into as
    many stacks as it has slots (so one big stack does not leave the other GPUs idle, while the many small groups of
    a sweep over shapes stay whole: a stack of one runs uncompiled and slower). The plan changes no number. NSP
    members are left out (they train one by one)."""
    if slots < 1 or max_stack < 1:
        raise ConfigError(f"slots and max_stack must be >= 1; got {slots}, {max_stack}")
    groups: dict[tuple, list] = {}
    for cell, seed in members:
        shape = stack_shape(cell)
        if shape is not None:
            groups.setdefault(shape, []).append((cell, seed))
    stacks = []
    for group, cap in zip(groups.values(), stack_caps([len(g) for g in groups.values()], slots, max_stack)):
        stacks += [group[i:i + cap] for i in range(0, len(group), cap)]
    return stacks


# ----------------------------------------------------------------------------------------------- training
class StackTrainer:
    """Pre-train (cell, seed) members of one shape together; each model is saved into its cell's folder."""

    def __init__(self, members, device="cpu", compile=None, graphs: bool = True, root: Path | None = None):
        if not members:
            raise ValueError("a stack needs at least one member")
        shapes = {stack_shape(c) for c, _ in members}
        if len(shapes) != 1 or None in shapes:
            raise ValueError(f"members of one stack need one shape and no NSP; got {len(shapes)} shapes")
        names = [f"{c.name}/{s}" for c, s in members]
        if len(set(names)) != len(names):
            raise ValueError(f"a (cell, seed) appears twice in one stack: {names}")
        self.members = members
        self.device = torch.device(device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # graph capture records on the current device's stream
        self.compile = compile_mode(compile, self.device)
        self.graphs = graphs and self.device.type == "cuda"
        cell0 = members[0][0]
        self.size, self.p = cell0.size, cell0.profile.pretrain
        self.folder = stack_folder(members, root)

    def _device_data(self):
        """The tables of the stack's distinct cells on the device, one after the other; member m's rows start at
        offset[m]. Per member: [MASK] id and vocabulary size (the range of random replacements), [M, 1, 1]."""
        cells, tables = {}, []
        for c, _ in self.members:
            if c.dir not in cells:
                cells[c.dir] = (sum(len(t.ids) for t in tables), len(tables))
                tables.append(c.table())
        width = max(t.ids.shape[1] for t in tables)
        cat = lambda name: np.concatenate([np.pad(getattr(t, name), ((0, 0), (0, width - t.ids.shape[1])))  # noqa
                                           for t in tables])
        dev = self.device
        m, b = len(self.members), self.p.batch_size
        return dict(
            tables=tables, table_of=[cells[c.dir][1] for c, _ in self.members],
            offset=np.array([cells[c.dir][0] for c, _ in self.members]),
            host_lengths=np.concatenate([t.lengths for t in tables]).astype(np.int64),
            ids=torch.from_numpy(cat("ids")).to(dev), types=torch.from_numpy(cat("types")).to(dev),
            wstart=torch.from_numpy(cat("wstart")).to(dev), maskable=torch.from_numpy(cat("maskable")).to(dev),
            lengths=torch.from_numpy(np.concatenate([t.lengths for t in tables]).astype(np.int64)).to(dev),
            mask_id=torch.tensor([c.ids["[MASK]"] for c, _ in self.members], device=dev).view(m, 1, 1),
            vocab=torch.tensor([c.vocab_size for c, _ in self.members], device=dev).view(m, 1, 1),
            rows=torch.zeros((m, b), dtype=torch.int64, device=dev), width=width)

    def _batch(self, d, stack: ModelStack, width: int):
        """Inputs of one step for all models from device tensors only (capturable in a CUDA graph)."""
        rows = d["rows"]  # [M, B] rows of the stacked tables
        x = d["ids"][rows, :width].long()  # [M, B, W]
        tt, ws = d["types"][rows, :width].long(), d["wstart"][rows, :width].long()
        maskable, n = d["maskable"][rows, :width], d["lengths"][rows]  # [M, B, W], [M, B]
        noise = stack.noise
        u, r = noise.uniform_tokens(MASK_SELECT, width), noise.uniform_tokens(MASK_ACTION, width)
        rnd = torch.minimum((noise.uniform_tokens(MASK_RANDOM_ID, width) * d["vocab"]).long(), d["vocab"] - 1)
        inputs, labels = whole_word_mask(x, maskable, ws, u, r, rnd, d["mask_id"], self.p.mlm_probability)
        sel = select_masked(labels, masked_capacity(rows.shape[1] * width, self.p.mlm_probability))
        pos = torch.arange(width, device=self.device)
        attention = (pos < n[..., None])[:, :, None, None, :]  # [M, B, 1, 1, W]
        return inputs, attention, pos.expand_as(x), tt, *sel

    def _new_stack(self) -> ModelStack:
        from xlrepro.models import init_model
        p = self.p
        models = [init_model(self.size, c.vocab_rows, s, positions=p.max_length) for c, s in self.members]
        optim = OptimConfig(lr=self.size.lr, weight_decay=p.weight_decay, eps=1e-6,
                            warmup_steps=math.ceil(p.warmup * p.steps), total_steps=p.steps, max_grad_norm=1.0)
        stack = ModelStack(models, optim, self.device, compile=self.compile, seeds=[s for _, s in self.members],
                           graphs=self.graphs)
        stack.noise.rows = torch.arange(p.batch_size, device=self.device)
        return stack

    def run(self, time_limit: float | None = None, progress: bool = True) -> bool:
        """Train to the end (True) or until `time_limit` seconds (False, checkpointed); save every model."""
        from safetensors.torch import save_model
        from tqdm.auto import tqdm

        from xlrepro.models import device_name
        if all((c.dir / f"model_{s}.safetensors").exists() for c, s in self.members):
            return True
        t0 = time.time()
        p = self.p
        d = self._device_data()
        stack = self._new_stack()
        ckpt, elapsed = self.folder / "checkpoint.pt", 0.0
        curve: dict[int, list[float]] = {}  # step -> each model's mean MLM loss over the LOSS_EVERY steps before it
        if ckpt.exists():
            state = torch.load(ckpt, map_location=self.device, weights_only=False)
            stack.load_state_dict(state["stack"])
            elapsed = state["elapsed"]
            curve = state.get("loss_curve", {})
            stack.fallbacks = state.get("fallbacks", [])  # earlier calls' (each call compiles afresh)
        label = ",".join(sorted({c.name for c, _ in self.members}))
        bar = tqdm(total=p.steps, initial=stack.step_count, disable=not progress,
                   desc=f"{len(self.members)}x {self.size.name} ({label[:60]})")
        t_start = last_save = time.time()
        tokens = padded = 0
        loss_sum = torch.zeros(len(self.members), device=self.device)  # [M], read back once per LOSS_EVERY steps
        window = 0  # steps in loss_sum (fewer than LOSS_EVERY in the first window after a resume)
        while stack.step_count < p.steps:
            step = stack.step_count
            picked = np.stack([d["offset"][i] + d["tables"][d["table_of"][i]].draw(s, step, p.batch_size,
                                                                                   p.length_bins)
                               for i, (_, s) in enumerate(self.members)])  # [M, B]
            lengths = d["host_lengths"][picked]
            width = min(int(math.ceil(lengths.max() / 8) * 8), d["width"])
            tokens, padded = tokens + int(lengths.sum()), padded + picked.size * width
            rows = torch.as_tensor(picked)
            if self.device.type == "cuda":
                rows = rows.pin_memory()
            d["rows"].copy_(rows, non_blocking=True)
            loss_sum += stack.step(lambda w=width: self._batch(d, stack, w), graph_key=width if self.graphs else None)
            window += 1
            if stack.step_count % LOSS_EVERY == 0 or stack.step_count == p.steps:
                curve[stack.step_count] = [round(v, 4) for v in (loss_sum / window).tolist()]
                loss_sum.zero_()
                window = 0
            bar.update(1)
            over = time_limit is not None and time.time() - t0 > time_limit
            if over or time.time() - last_save > CHECKPOINT_SECONDS:
                with atomic.atomic_path(ckpt) as tmp:
                    torch.save({"stack": stack.state_dict(), "elapsed": elapsed + time.time() - t_start,
                                "loss_curve": curve, "fallbacks": stack.fallbacks}, tmp)
                atomic.write_json(self.folder / "progress.json", {"step": stack.step_count, "steps": p.steps,
                                                                  "shape": self.size.name,
                                                                  "compile_fallbacks": stack.fallbacks})
                last_save = time.time()
            if over and stack.step_count < p.steps:
                bar.close()
                return False
        bar.close()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = elapsed + time.time() - t_start
        for i, (cell, seed) in enumerate(self.members):
            with atomic.atomic_path(cell.dir / f"model_{seed}.safetensors") as tmp:
                save_model(stack.export(i).bert.to(torch.bfloat16).cpu(), str(tmp))
        atomic.write_json(self.folder / "timing.json", {
            "members": [f"{c.name}/{s}" for c, s in self.members], "shape": self.size.name, "steps": p.steps,
            "train_seconds": seconds, "ms_per_model_step": 1000 * seconds / (p.steps * len(self.members)),
            "padding_share_this_call": 1 - tokens / max(padded, 1), "device": device_name(self.device),
            "compile": self.compile or "none", "graphs": self.graphs, "torch": torch.__version__,
            # compiled steps that failed: the stack went on eagerly (same losses, lower speed) from that step
            "compile_fallbacks": stack.fallbacks,
            "loss_every": LOSS_EVERY, "mlm_loss_curve": {str(k): v for k, v in sorted(curve.items())}})
        ckpt.unlink(missing_ok=True)
        (self.folder / "progress.json").unlink(missing_ok=True)
        return True


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
    from xlrepro.models import device_name
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
