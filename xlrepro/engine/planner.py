"""The stack planner: how many models share one stack, and whether a stack compiles, by model size and GPU memory.

A stack (`stacked.ModelStack`) trains M models of one shape in one set of kernels. How large M may be depends on
the engine (eager vmap or the fused, compiled loss) and on the GPU's memory; whether a stack compiles depends on
its size too (a stack of one model of some sizes compiled too slowly). These are measurements of this engine on
the named sizes, so they live here, beside the engine, and every recipe asks the planner:

    sizes = max_stack(compile=True)            # {"small": 25, "base": 5} on an 80 GB GPU
    stacks = deal(models, sizes["small"], gpus=2)
    mode = stack_compile(True, "cuda:0", len(stacks[0]), "small")
    levers = stack_levers("baddbmm", len(stacks[0]), "small")

The named sizes are BERT shapes: "small" is hidden 64 x 12 layers x 1 head (ffn 256), "base" is BERT-base (768 x 12
x 12, ffn 3072). Nothing here changes a number: a model trains the same in any stack, compiled or not (to
floating-point rounding on a GPU).
"""
from __future__ import annotations

import math
from typing import Sequence, TypeVar

from .fused_bert import LINEARS, Levers
from .stacked import compile_mode

T = TypeVar("T")

#: Models per stack for the eager engine (vmap over HF's model).
MAX_STACK = {"small": 20, "base": 1}
# The fused, compiled stacks gain per model from larger stacks (H200, real data, ms per model-step:
# small 2.60 vmap x20 -> 1.26 compiled x20 -> 1.10 compiled x50; base 28.3 alone -> 23.0 compiled -> 18.0 compiled x5),
# and each stack compiles once (15-30 s region by region, 1-2 minutes as one graph), so fewer, larger stacks pay.
MAX_STACK_COMPILED = {"small": 50, "base": 5}
# On an 80 GB H100 a compiled stack of 50 small models ran out of memory (the eager warm-up of a new width runs while
# the CUDA graphs' pool holds the earlier widths' activations); 25 peaked at 24.8 GB there.
MAX_STACK_COMPILED_80GB = {"small": 25, "base": 5}
LARGE_GPU_BYTES = 100e9  # GPUs with at least this much memory take MAX_STACK_COMPILED
# ms per model-step measured on an H200 (real data): eager vmap stacks, and fused, compiled stacks. A rough cost, to
# hand out the largest jobs first.
MODEL_STEP_MS = {"small": 2.5, "base": 25.0}
MODEL_STEP_MS_COMPILED = {"small": 1.1, "base": 18.0}

# Sizes whose compiled stack of ONE model trains (H200, torch 2.11): BERT-base compiled in 44 s and stepped at 20.5 ms
# against 40.8 ms eager with CUDA graphs (book/results/bench/profile/grid_base_stack.json). A compiled BERT-small stack
# of one seemed to stall in its first step: one Triton kernel of its attention backward (the softmax backward fused
# with the dropout hash, a persistent reduction) spent minutes in Triton's LLVM and ptxas passes. With Inductor's
# persistent reductions off it compiles in 29 s (`PERSISTENT_REDUCTIONS_OFF`).
ONE_MODEL_COMPILES = ("base", "small")
# Sizes whose compiled stack of one model compiles with Inductor's persistent reductions off (`fused_bert.Levers`).
PERSISTENT_REDUCTIONS_OFF = ("small",)


def smallest_gpu_memory() -> int:
    """Bytes of memory of this machine's smallest GPU (0 without one)."""
    import torch
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return min((torch.cuda.get_device_properties(i).total_memory for i in range(n)), default=0)


def max_stack_compiled() -> dict[str, int]:
    """The compiled stack sizes for this machine's smallest GPU (GPUs under 100 GB get smaller small-model stacks)."""
    return MAX_STACK_COMPILED if smallest_gpu_memory() >= LARGE_GPU_BYTES else MAX_STACK_COMPILED_80GB


def max_stack(compile: str | bool | None = None, override: dict[str, int] | None = None) -> dict[str, int]:
    """Models per stack for each named size: the compiled sizes where this machine compiles (`compile_mode`), else
    the eager ones; `override` (e.g. a `--max-stack` option) replaces some."""
    bad = sorted(set(override or {}) - set(MAX_STACK))
    if bad:
        raise ValueError(f"unknown model size(s) {bad}; valid: {', '.join(sorted(MAX_STACK))}")
    return {**(max_stack_compiled() if compile_mode(compile) else MAX_STACK), **(override or {})}


def deal(group: Sequence[T], per_stack: int, gpus: int = 1) -> list[list[T]]:
    """Cut a group of models that can share kernels into stacks of at most `per_stack`, dealt in turn.

    With several GPUs the group is cut into a multiple of the GPU count of stacks (as many stacks as models at most),
    so that it shares out evenly: 15 models at 5 a stack on two GPUs train as 4 + 4 | 4 + 3 rather than as
    5 + 5 | 5, which would leave one GPU idle for a third of the time. Dealt round-robin, the stacks are of equal size
    (to one model) and each gets its share of every kind of model in the group's order."""
    if per_stack < 1 or gpus < 0:
        raise ValueError(f"per_stack must be >= 1 and gpus >= 0 (0 and 1: one device); got {per_stack}, {gpus}")
    if not group:
        return []
    k = math.ceil(len(group) / per_stack)
    if gpus > 1:
        k = min(len(group), gpus * math.ceil(k / gpus))
    return [list(group[j::k]) for j in range(k)]


def model_step_ms(size: str, compile: str | bool | None = None) -> float:
    """Milliseconds per model and step of a model of a named size, compiled where this machine compiles."""
    table = MODEL_STEP_MS_COMPILED if compile_mode(compile) else MODEL_STEP_MS
    if size not in table:
        raise ValueError(f"no measured step time for size {size!r}; valid: {', '.join(sorted(table))}")
    return table[size]


def share_slots(group_sizes: list[int], slots: int, max_stack: int) -> list[int]:
    """Models per stack of each group of models that can share kernels, when many small groups (a sweep over
    shapes) share `slots` (GPUs x workers): the slots are shared out by group size, at least one a group, and a group
    is cut into as many stacks as it has slots, none above `max_stack`. So one big group does not leave the other
    slots idle, while the many small groups stay whole (a stack of one runs uncompiled and slower)."""
    if slots < 1 or max_stack < 1:
        raise ValueError(f"slots and max_stack must be >= 1; got {slots}, {max_stack}")
    total = sum(group_sizes)
    return [min(max_stack, math.ceil(n / max(1, round(slots * n / total)))) for n in group_sizes]


def take_slots(seconds: Sequence[float], slots: int) -> tuple[list[int], list[float]]:
    """The slot each job takes, in the order given, when each of `slots` workers takes the next job once free (each
    job goes to the slot with the least work so far), and the slots' total seconds: how a queue deals its jobs."""
    if slots < 1:
        raise ValueError(f"slots must be >= 1; got {slots}")
    loads, taken = [0.0] * slots, []
    for s in seconds:
        taken.append(loads.index(min(loads)))
        loads[taken[-1]] += s
    return taken, loads


def wrap_stacks(sizes: Sequence[int], seconds: Sequence[float], slots: int, max_stack: int | Sequence[int],
                min_piece: int = 2) -> list[list[int]]:
    """Stack sizes for each group of models that can share kernels (`sizes[g]` models of `seconds[g]` each), so that
    `slots` workers, each taking the next stack when free (the longest first), finish together: McNaughton's
    wrap-around rule for divisible work, written out here because no scheduling library is a dependency. The groups'
    models are laid end to end and each goes to the slot its middle falls in, the slots being equal shares of the
    total time; each group's run of models within one slot is a stack. A piece below `min_piece` models joins the
    smaller neighbouring piece of its group (a stack of one may train uncompiled and slower, `stack_compile`), and
    a piece above `max_stack` (one number, or one per group) is cut into as few even stacks as fit."""
    caps = [max_stack] * len(sizes) if isinstance(max_stack, int) else list(max_stack)
    if slots < 1 or min_piece < 1 or len(caps) != len(sizes) or any(c < 1 for c in caps):
        raise ValueError(f"slots, max_stack (one per group where a list) and min_piece must be >= 1; got {slots}, "
                         f"{max_stack}, {min_piece}")
    if len(sizes) != len(seconds) or any(n < 0 for n in sizes) or any(s < 0 for s in seconds):
        raise ValueError(f"sizes and seconds: one non-negative number each per group; got {sizes}, {seconds}")
    weights = list(seconds) if sum(n * s for n, s in zip(sizes, seconds)) > 0 else [1.0] * len(sizes)
    share = sum(n * s for n, s in zip(sizes, weights)) / slots
    out, start = [], 0.0
    for n, s, cap in zip(sizes, weights, caps):
        pieces: list[list] = []  # [slot, models]
        for j in range(n):
            slot = min(slots - 1, int((start + (j + 0.5) * s) / share)) if share > 0 else 0
            if pieces and pieces[-1][0] == slot:
                pieces[-1][1] += 1
            else:
                pieces.append([slot, 1])
        start += n * s
        counts = [k for _, k in pieces]
        while len(counts) > 1 and min(counts) < min_piece:
            i = next(i for i, k in enumerate(counts) if k < min_piece)
            near = [j for j in (i - 1, i + 1) if 0 <= j < len(counts)]
            j = min(near, key=lambda j: (counts[j], j))
            counts[min(i, j)] += counts[max(i, j)]
            del counts[max(i, j)]
        stacks = []
        for k in counts:
            parts = math.ceil(k / cap)
            stacks += [k // parts + (1 if r < k % parts else 0) for r in range(parts)]
        out.append(stacks)
    return out


def stack_compile(compile, device, models: int, size: str = "small") -> str | None:
    """The compile mode of a stack of `models` models of size `size`: the requested mode (`compile_mode`), except
    for a stack of one model of a size not in `ONE_MODEL_COMPILES`, which trains eagerly with CUDA graphs. Numbers
    change only by rounding."""
    mode = compile_mode(compile, device)
    return None if models == 1 and size not in ONE_MODEL_COMPILES else mode


def stack_levers(linear: str, models: int, size: str) -> Levers | None:
    """The fused loss's speed options for a stack: `linear` ("baddbmm", the default, or another of `LINEARS`), and
    Inductor's persistent reductions off for a stack of one model of a size in `PERSISTENT_REDUCTIONS_OFF`. None
    where both are the defaults (the stack then runs exactly as without levers)."""
    if linear not in LINEARS:
        raise ValueError(f"linear={linear!r}: valid choices are {', '.join(LINEARS)}")
    persistent = not (models == 1 and size in PERSISTENT_REDUCTIONS_OFF)
    return None if linear == "baddbmm" and persistent else Levers(linear=linear, persistent_reductions=persistent)
