"""MLM masking (Devlin et al. 2019), vectorised over a stack of models on the GPU.

15% of the word pieces (never [CLS]/[SEP]/[PAD]) are selected; a selected piece becomes [MASK] with p[mask],
stays itself with p[id], and becomes a random piece of the whole doubled vocabulary with p[rand] (so an English
sentence can receive a piece of the other language, as in HF's data collator). With a fourth probability p[knn]
(Dufter & Schütze's knn-replace, §4) it becomes one of its k nearest neighbours in another language, drawn
uniformly from a neighbour table.
"""
from __future__ import annotations

import torch

from .noise import MASK_ACTION, MASK_KNN, MASK_RANDOM_ID, MASK_SELECT, Noise


def mask_tokens(ids: torch.Tensor, maskable: torch.Tensor, mask_id: torch.Tensor, probs: torch.Tensor,
                vocab_size: int, mlm_probability: float, generator: torch.Generator | None = None,
                noise: "Noise | None" = None, neighbours: torch.Tensor | None = None):
    """Return (inputs, labels): labels are -100 where nothing is predicted.

    With `noise` (ids [M, B, W] of M stacked models) every draw is the model's own, keyed by its seed, the step,
    the sentence's row and the position (`xlrepro.training.noise`), so a model masks the same alone or in a stack.

    ids, maskable, mask_id: [..., L] (mask_id per position: a language may have its own [MASK] id).
    probs: (p[mask], p[id], p[rand]) or (p[mask], p[id], p[rand], p[knn]) in the last dimension, broadcastable to
           ids once it is dropped (e.g. [M, 1, 1, 4] for a stack of M models; p[knn] = 0 for a model without it).
           The action draw r in [0, 1) picks [MASK] below p[mask], the piece itself below p[mask] + p[id], a
           neighbour at or above p[mask] + p[id] + p[rand] where p[knn] > 0, else a random piece.
    neighbours: the neighbour table, needed when p[knn] is given: [V] (each piece's nearest neighbour), [V, k]
           (k neighbours, one drawn uniformly), or [M, V, k] (a table per model of a stack, ids [M, ...]).
    """
    n_probs = probs.shape[-1]
    if n_probs not in (3, 4):
        raise ValueError(f"probs must end in 3 (mask, id, rand) or 4 (mask, id, rand, knn) values; got {n_probs}")
    if n_probs == 4 and neighbours is None:
        raise ValueError("probs with p[knn] need a neighbour table ([V], [V, k] or [M, V, k])")
    if noise is not None:
        width = ids.shape[-1]
        u = noise.uniform_tokens(MASK_SELECT, width)
        r = noise.uniform_tokens(MASK_ACTION, width)
        random_ids = (noise.uniform_tokens(MASK_RANDOM_ID, width) * vocab_size).long().clamp_(max=vocab_size - 1)
    else:
        u = torch.rand(ids.shape, device=ids.device, generator=generator)
        r = torch.rand(ids.shape, device=ids.device, generator=generator)
        random_ids = torch.randint(vocab_size, ids.shape, device=ids.device, generator=generator)
    selected = (u < mlm_probability) & maskable
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    p_mask = probs[..., 0]
    p_keep = probs[..., 1]
    to_mask = selected & (r < p_mask)
    to_rand = selected & (r >= p_mask + p_keep)
    inputs = torch.where(to_mask, mask_id, ids)
    if n_probs == 4:
        to_knn = to_rand & (r >= p_mask + p_keep + probs[..., 2]) & (probs[..., 3] > 0)
        to_rand = to_rand & ~to_knn
        inputs = torch.where(to_knn, knn_ids(ids, neighbours, noise, generator), inputs)
    inputs = torch.where(to_rand, random_ids, inputs)
    return inputs, labels


def knn_ids(ids: torch.Tensor, neighbours: torch.Tensor, noise: "Noise | None" = None,
            generator: torch.Generator | None = None) -> torch.Tensor:
    """[...] one of the k neighbours of every piece of ids [...], drawn uniformly (always the first when k = 1).

    neighbours: [V], [V, k] or [M, V, k] (then ids is [M, ...] and model m reads table m)."""
    table = neighbours.view(-1, 1) if neighbours.dim() == 1 else neighbours
    k = table.shape[-1]
    if k == 1:
        choice = torch.zeros_like(ids)
    elif noise is not None:
        choice = (noise.uniform_tokens(MASK_KNN, ids.shape[-1]) * k).long().clamp_(max=k - 1)
    else:
        choice = torch.randint(k, ids.shape, device=ids.device, generator=generator)
    if table.dim() == 2:  # one table for all: [V, k]
        return table[ids, choice]
    if table.dim() != 3 or table.shape[0] != ids.shape[0]:
        raise ValueError(f"a per-model neighbour table is [M, V, k] with M = ids.shape[0] = {ids.shape[0]}; "
                         f"got {tuple(neighbours.shape)}")
    model = torch.arange(ids.shape[0], device=ids.device).view(-1, *([1] * (ids.dim() - 1)))
    return table[model, ids, choice]
