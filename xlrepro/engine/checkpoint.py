"""One checkpoint format for every training loop: a stack's state and the loop's progress, written atomically.

A checkpoint is one `torch.save` file (a dict):

    format   FORMAT (1)
    stack    `ModelStack.state_dict()`: the stacked parameters [M, ...], AdamW's state, the step count
    elapsed  seconds of training so far (earlier calls included; evaluation time left out where the loop says so)
    losses   the loop's loss record so far (whatever JSON-able list or dict the loop keeps)
    rng      PyTorch's CPU generator state (and CUDA's, on a GPU) at the time of saving
    extra    anything else a loop needs to resume (a dict; e.g. evaluation curves); "fallbacks" holds the stack's
             record of compiled steps that failed (`ModelStack.fallbacks`), restored on loading

It is written to a temporary file and renamed (`xlrepro.atomic`), so a run killed while saving leaves the previous
checkpoint whole. Checkpoints written before this format (a dict with "stack" and optionally "losses" or
"loss_curve", "elapsed", "fallbacks" and the loop's own keys; or a model trained alone: "model", "opt", "sched",
"step", "elapsed") load too: what they lack reads as empty (no loss
record: None).

    save(path, stack, elapsed=12.5, losses=[[0, 10.4]])
    state = load(path, stack)       # stack restored in place; state.step, state.elapsed, state.losses, state.extra
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import atomic

FORMAT = 1


@dataclass
class Resumed:
    """What `load` read besides the stack (restored in place)."""
    step: int
    elapsed: float = 0.0
    losses: list | dict | None = None  # None: the checkpoint holds no loss record
    extra: dict = field(default_factory=dict)
    rng: dict | None = None


def rng_state(device: torch.device) -> dict:
    """PyTorch's generator states: the CPU's, and the device's on a GPU."""
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def save(path: str | Path, stack, *, elapsed: float, losses: list | dict, extra: dict | None = None) -> None:
    """Write `stack`'s state and the loop's progress to `path`, atomically (see the module docstring)."""
    with atomic.atomic_path(Path(path)) as tmp:
        torch.save({"format": FORMAT, "stack": stack.state_dict(), "elapsed": float(elapsed), "losses": losses,
                    "rng": rng_state(stack.device), "extra": {"fallbacks": list(stack.fallbacks), **(extra or {})}},
                   tmp)


def load(path: str | Path, stack, *, restore_rng: bool = False) -> Resumed:
    """Restore `stack` (parameters, optimizer, step) from the checkpoint at `path` and return the loop's progress.

    restore_rng: also set PyTorch's generators to their saved states (loops that re-seed from the step, as
    `pretrain.pretrain_loop` does, need not)."""
    state = torch.load(Path(path), map_location=stack.device, weights_only=False)
    if isinstance(state, dict) and "stack" not in state and {"model", "opt", "sched", "step"} <= state.keys():
        # an older checkpoint of one model trained alone (`single.SingleModel`'s state at the top level)
        state = {"stack": {k: state[k] for k in ("model", "opt", "sched", "step")}, "elapsed": state.get("elapsed", 0.0)}
    if not isinstance(state, dict) or "stack" not in state:
        raise ValueError(f"{path} is not a training checkpoint (no 'stack' entry)")
    if state.get("format", FORMAT) != FORMAT:
        raise ValueError(f"{path} has checkpoint format {state['format']}; this engine reads format {FORMAT}")
    stack.load_state_dict(state["stack"])
    rng = state.get("rng")
    if restore_rng and rng is not None:
        torch.set_rng_state(rng["cpu"])
        if "cuda" in rng and stack.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"], stack.device)
    if "fallbacks" in state.get("extra", state):  # the compiled steps that failed in earlier calls
        stack.fallbacks = list(state.get("extra", state)["fallbacks"])
    known = {"format", "stack", "elapsed", "losses", "loss_curve", "rng", "extra"}
    extra = {**{k: v for k, v in state.items() if k not in known}, **state.get("extra", {})}  # older files' own keys
    losses = state.get("losses", state.get("loss_curve"))  # "loss_curve": older stacked-trainer files
    return Resumed(step=stack.step_count, elapsed=state.get("elapsed", 0.0), losses=losses, extra=extra, rng=rng)


def progress(path: str | Path) -> Resumed:
    """The loop's progress recorded in a checkpoint (step, elapsed, losses, extra) without a stack to restore:
    read memory-mapped on the CPU, so a large stack's file costs little (e.g. to report how far a run stands)."""
    state = torch.load(Path(path), map_location="cpu", weights_only=False, mmap=True)
    if not isinstance(state, dict) or ("stack" not in state and "step" not in state):
        raise ValueError(f"{path} is not a training checkpoint (no 'stack' entry)")
    step = state["stack"]["step"] if "stack" in state else state["step"]
    return Resumed(step=int(step), elapsed=state.get("elapsed", 0.0),
                   losses=state.get("losses", state.get("loss_curve")), extra=state.get("extra", {}),
                   rng=state.get("rng"))

