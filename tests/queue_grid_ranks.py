"""One rank of a tiny Dufter & Schütze grid (models 0 and 3, seed 0) under torchrun, for tests/test_queue.py:
dealt as for two GPUs (two stacks of one, each rank taking one from the queue), or with "data-parallel" both stacks
trained by both ranks together. Usage: python -m tests.queue_grid_ranks ROOT [data-parallel]."""
import sys

from xlrepro.papers.dufter2020.grid import run_grid

TINY = dict(epochs=2, max_sentences=24, batch_size=8)

if __name__ == "__main__":
    dp = sys.argv[2:] == ["data-parallel"]
    assert run_grid("dufter2020", ["0", "3"], [0], root=sys.argv[1], device="cpu", gpus=None if dp else 2,
                    progress=False, data_parallel=dp, **TINY)
