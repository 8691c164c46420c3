"""Data parallel over two CPU processes (gloo) equals one process on the whole batch."""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.test_stacked import OPT, tiny
from xlrepro.engine.stacked import ModelStack, select_masked


def batches(steps=3, m=2, b=8, w=6):
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(steps):
        ids = torch.randint(5, 50, (m, b, w), generator=g)
        labels = torch.full_like(ids, -100)
        cols = torch.stack([torch.randperm(w, generator=g)[:2] for _ in range(m * b)]).view(m, b, 2)
        labels.scatter_(2, cols, ids.gather(2, cols))  # exactly two predictions per sentence on every rank
        out.append((ids, labels))
    return out


def train(rows: slice):
    stack = ModelStack([tiny(1, "eager"), tiny(2, "eager")], OPT, "cpu")
    for ids, labels in batches():
        ids, labels = ids[:, rows], labels[:, rows]
        m, b, w = ids.shape
        sel, lab = select_masked(labels, 2 * b)
        stack.train_step(ids, torch.zeros(m, b, 1, 1, w), torch.arange(w).expand(m, b, w), torch.zeros_like(ids),
                         sel, lab)
    return {k: v.detach().clone() for k, v in stack.params.items()}


def _rank(rank, path, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2)
    params = train(slice(rank, None, 2))
    if rank == 0:
        torch.save(params, out)
    dist.destroy_process_group()


def test_two_ranks_equal_one_process(tmp_path):
    out = tmp_path / "ddp.pt"
    # forked ranks: spawned ones re-import torch and the test modules (about 5 s of a 6 s test)
    mp.start_processes(_rank, args=(str(tmp_path / "rendezvous"), str(out)), nprocs=2, start_method="fork")
    ddp, single = torch.load(out), train(slice(None))
    for k in single:
        torch.testing.assert_close(ddp[k], single[k], rtol=1e-4, atol=1e-6, msg=k)
