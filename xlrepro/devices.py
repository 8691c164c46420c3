"""Where training runs, and the guard against starting a paper-size training on a CPU by accident."""
from __future__ import annotations

from .config import ConfigError


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def check_long_run(what: str, device: str, allow_cpu: bool = False) -> None:
    """Refuse `what` (a full-size training) on a CPU unless `allow_cpu`: it would take days there."""
    if str(device).startswith("cpu") and not allow_cpu:
        raise ConfigError(f"{what} would train on the CPU, which takes days at the paper's settings; run it on a "
                          f"GPU, shrink it (smoke parameters), or pass --allow-cpu to train on the CPU anyway")
