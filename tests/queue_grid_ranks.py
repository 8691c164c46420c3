"""One rank of a tiny Dufter & Schütze grid (models 0 and 3, seed 0, two stacks of one) under torchrun, for
tests/test_queue.py. Usage: python -m tests.queue_grid_ranks ROOT."""
import sys

from xlrepro.papers.dufter2020.grid import run_grid

TINY = dict(epochs=2, max_sentences=24, batch_size=8)

if __name__ == "__main__":
    assert run_grid("dufter2020", ["0", "3"], [0], root=sys.argv[1], device="cpu", gpus=2, progress=False, **TINY)
