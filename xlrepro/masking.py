"""MLM masking (Devlin et al. 2019), vectorised over a stack of models on the GPU.

15% of the word pieces (never [CLS]/[SEP]/[PAD]) are selected; a selected piece becomes [MASK] with p[mask],
stays itself with p[id], and becomes a random piece of the whole doubled vocabulary with p[rand] (so an English
sentence can receive a piece of the other language, as in HF's data collator).
"""
from __future__ import annotations

import torch

from .training.noise import MASK_ACTION, MASK_RANDOM_ID, MASK_SELECT, Noise


def mask_tokens(ids: torch.Tensor, maskable: torch.Tensor, mask_id: torch.Tensor, probs: torch.Tensor,
                vocab_size: int, mlm_probability: float, generator: torch.Generator | None = None,
                noise: "Noise | None" = None):
    """Return (inputs, labels): labels are -100 where nothing is predicted.

    With `noise` (ids [M, B, W] of M stacked models) every draw is the model's own, keyed by its seed, the step,
    the sentence's row and the position (`xlrepro.training.noise`), so a model masks the same alone or in a stack.

    ids, maskable, mask_id: [..., L] (mask_id per position: a language may have its own [MASK] id).
    probs: (p[mask], p[id], p[rand]) in the last dimension, broadcastable to ids once it is dropped
           (e.g. [M, 1, 1, 3] for a stack of M models).
    """
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
    inputs = torch.where(to_rand, random_ids, inputs)
    return inputs, labels
