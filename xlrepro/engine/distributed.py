"""Data-parallel training over several GPUs of one host, launched by `torchrun`.

    torchrun --nproc_per_node 2 -m xlrepro.cli train <paper> --data-parallel [options]

(Without --data-parallel the ranks share out whole jobs through the work queue, `queue.py`.)

Every rank builds the same stacks with the same initial weights, takes its share of each step's batch
(rows rank, rank + world, ...), and averages gradients with an all-reduce before clipping and the optimizer step,
so the global batch (and the number of steps) stays the paper's. Rank 0 evaluates and writes results.
This is the path of one GPU plus three calls; PyTorch's DistributedDataParallel is not used because a stack of
vmap-ed models has no nn.Module whose parameters it could wrap.
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist


def world() -> tuple[int, int]:
    """(rank, world size); (0, 1) outside torchrun."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_from_env() -> str | None:
    """Join the process group that torchrun describes in the environment; returns this rank's device."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    cuda = torch.cuda.is_available()
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        return f"cuda:{local}"
    return "cpu"


def average_gradients(grads: list[torch.Tensor]) -> None:
    """Sum every gradient over the ranks in one flat buffer, then divide by the world size."""
    _, size = world()
    if size == 1 or not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat.div_(size)
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def any_rank(flag: bool) -> bool:
    """True on every rank if it is true on one (e.g. a time limit reached)."""
    _, size = world()
    if size == 1:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def barrier() -> None:
    if world()[1] > 1:
        dist.barrier()
