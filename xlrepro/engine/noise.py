"""Per-model random numbers that do not depend on the stack a model is trained in.

A model's masking and dropout must be its own: the same (seed, step, sentence row, position) gives the same draw
whether the model trains alone, in a stack of fifty, on one GPU or under data parallelism, compiled or not, with or
without CUDA graphs. PyTorch's generators hand out numbers by *offset into a tensor*, so a model's draws would move
with its place in the stack and with the padded width of the step. Here every draw is a hash of its coordinates
instead (a counter-based generator, in the spirit of Philox): element-wise integer arithmetic that runs the same on
CPU and GPU, inside `vmap`, `torch.compile` and CUDA-graph capture. No PyTorch or NumPy API offers a counter-based
generator keyed by tensor coordinates, so it is written here; `tests/test_noise.py` checks it against a plain-Python
reference and its uniformity.

The hash is Chris Wellons' "lowbias32" 32-bit integer mixer. The draws compute it in int32 tensors that hold the
uint32 values as two's-complement bit patterns: products wrap modulo 2**32 and right shifts are made logical with a
mask, so the bits are those of the uint32 hash (PyTorch's uint32 has no shifts on the CPU). An int64 version (values
in [0, 2**32), products wrapping modulo 2**64) gives the same bits with twice the memory traffic and a GPU's slow
64-bit multiplies: it is what the draws used first, and `tests/test_noise.py` checks the two agree.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

M32 = 0xFFFFFFFF
POSITIONS = 512  # stride of a position inside a row; widths never exceed it (BERT's 512 positions)

# Streams: one per use, so that no two uses of a model's numbers coincide.
MASK_SELECT, MASK_ACTION, MASK_RANDOM_ID = 1, 2, 3
MASK_KNN = 4  # which of the k nearest neighbours a knn-replaced piece becomes (Dufter & Schütze §4)
EMBEDDINGS = 8
LAYER_BASE = 16  # + 4 * layer + {0: attention probabilities, 1: attention output, 2: feed-forward output}


def to_bits32(x: torch.Tensor) -> torch.Tensor:
    """int64 values, taken modulo 2**32, as int32 bit patterns (the uint32 value v is stored as v - 2**32 when
    v >= 2**31)."""
    x = x & M32
    return torch.where(x >= 1 << 31, x - (1 << 32), x).to(torch.int32)


def from_bits32(x: torch.Tensor) -> torch.Tensor:
    """The uint32 values of int32 bit patterns, as int64 in [0, 2**32)."""
    return x.to(torch.int64) & M32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32. On int32 tensors (uint32 bit patterns, see `to_bits32`) it wraps like uint32 arithmetic; on int64
    tensors holding values in [0, 2**32) it returns the same values as int64."""
    if x.dtype == torch.int32:
        x = x ^ ((x >> 16) & 0xFFFF)  # a logical shift: the arithmetic one, sign bits masked off
        x = x * 0x7FEB352D
        x = x ^ ((x >> 15) & 0x1FFFF)
        x = x * (0x846CA68B - (1 << 32))  # the same multiplier modulo 2**32, as an int32
        return x ^ ((x >> 16) & 0xFFFF)
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & M32
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def mix32_reference(x: int) -> int:
    """The same hash in plain Python integers (for the tests)."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def stream_key(seeds: torch.Tensor, stream: "int | torch.Tensor", step: torch.Tensor) -> torch.Tensor:
    """[M] keys of a stream at a step. seeds: [M] int64; step: a 0-d int64 tensor (a device tensor under graphs)."""
    k = mix32((seeds & M32) ^ ((stream * 0x9E3779B9) & M32))
    return mix32(k ^ (step & M32))


def uniform(keys: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """float32 draws in [0, 1): keys [M] (one per model, int64), index [M, ...] or [...] element coordinates, taken
    modulo 2**32: int32 bit patterns (cheapest: built in int32, whose products wrap alike) or int64."""
    keys = to_bits32(keys)
    keys = keys.view(-1, *([1] * max(index.dim() - 1, 0))) if index.dim() > 0 else keys
    index = index if index.dtype == torch.int32 else to_bits32(index)
    h = mix32(mix32(keys ^ index) ^ keys)
    return ((h >> 8) & 0xFFFFFF).to(torch.float32) * (1.0 / (1 << 24))


def uniform_int64(keys: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """`uniform` computed in int64 (its first form): the reference the int32 form is tested against."""
    keys = keys.view(-1, *([1] * max(index.dim() - 1, 0))) if index.dim() > 0 else keys
    h = mix32(mix32(keys ^ (index & M32)) ^ keys)
    return (h >> 8).to(torch.float32) * (1.0 / (1 << 24))


@dataclass
class Noise:
    """What a stacked step needs to draw a model's own numbers.

    seeds: [M] int64, one per model (its own seed); step: 0-d int64, the optimiser step (updated in place, so that a
    captured CUDA graph reads the current value); rows: [B] int64, each batch row's index in the model's full batch
    (under data parallelism a rank holds rows rank, rank + world, ...), so draws do not depend on the rank either.
    """

    seeds: torch.Tensor
    step: torch.Tensor
    rows: torch.Tensor

    def keys(self, stream: int) -> torch.Tensor:
        return stream_key(self.seeds, stream, self.step)

    def token_index(self, width: int) -> torch.Tensor:
        """[B, W] coordinates of (row, position), independent of the padded width; int32 (wrapping as uint32)."""
        pos = torch.arange(width, device=self.rows.device, dtype=torch.int32)
        return self.rows.to(torch.int32)[:, None] * POSITIONS + pos[None, :]

    def uniform_tokens(self, stream: int, width: int) -> torch.Tensor:
        """[M, B, W] draws, one per model, row and position."""
        return uniform(self.keys(stream), self.token_index(width).unsqueeze(0))

    def dropout_hidden(self, x: torch.Tensor, p: float, stream: int, width: int) -> torch.Tensor:
        """Dropout on hidden states x [M, B*W, H] (rows of width W), masks keyed by (row, position, unit)."""
        if p == 0.0:
            return x
        m, n, h = x.shape
        units = torch.arange(h, device=x.device, dtype=torch.int32).view(1, 1, h)
        index = self.token_index(width).reshape(1, n, 1) * h + units  # [1, B*W, H] int32
        keep = uniform(self.keys(stream), index) >= p
        return torch.where(keep, x / (1.0 - p), torch.zeros((), dtype=x.dtype, device=x.device))

    def dropout_attention(self, probs: torch.Tensor, p: float, stream: int, m: int) -> torch.Tensor:
        """Dropout on attention probabilities [M*B, heads, W, W], masks keyed by (row, head, query, key)."""
        if p == 0.0:
            return probs
        mb, heads, w, _ = probs.shape
        b = mb // m
        dev = probs.device
        i32 = dict(device=dev, dtype=torch.int32)  # int32 coordinates: products wrap as uint32 (`uniform`)
        rows = self.rows.to(torch.int32).view(1, b, 1, 1, 1)
        head = torch.arange(heads, **i32).view(1, 1, heads, 1, 1)
        q = torch.arange(w, **i32).view(1, 1, 1, w, 1)
        k = torch.arange(w, **i32).view(1, 1, 1, 1, w)
        index = ((rows * heads + head) * POSITIONS + q) * POSITIONS + k  # [1, B, heads, W, W]
        keep = uniform(self.keys(stream), index.expand(m, b, heads, w, w)) >= p
        keep = keep.reshape(mb, heads, w, w)
        return torch.where(keep, probs / (1.0 - p), torch.zeros((), dtype=probs.dtype, device=dev))


def dropout(x, p: float, training: bool, noise: Noise | None, stream: int, width: int):
    """Dropout of hidden states: the model's own masks when `noise` is given, else PyTorch's."""
    if not training or p == 0.0:
        return x
    return noise.dropout_hidden(x, p, stream, width) if noise is not None else F.dropout(x, p, True)
