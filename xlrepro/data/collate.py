"""Padding id sequences into a batch: the project's one implementation."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int, *, width: int | None = None,
              dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    """(ids [N, W], lengths [N]): row i holds seqs[i] and then `pad_id` up to W, the longest sequence's length
    unless `width` is given (at least that long)."""
    if len(seqs) == 0:
        raise ValueError("pad_batch needs at least one sequence")
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    longest = int(lengths.max())
    width = longest if width is None else width
    if width < longest:
        raise ValueError(f"width {width} is shorter than the longest sequence ({longest})")
    ids = np.full((len(seqs), width), pad_id, dtype=dtype)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = s
    return ids, lengths
