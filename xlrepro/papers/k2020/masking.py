"""Whole-word masking as K et al.'s scripts do it: a word is selected with probability p and all its pieces are
predicted; each selected piece becomes [MASK] (80%), stays (10%) or becomes a random piece (10%)."""
from __future__ import annotations

import torch


def whole_word_mask(ids, maskable, word_start, u_select, u_action, random_ids, mask_id: int, p: float):
    """(inputs, labels) of whole-word masking. ids, maskable, word_start (index of each piece's word-initial
    piece), u_select, u_action, random_ids: [..., W]. A piece is selected when its word's first piece drew
    u_select < p; selected pieces: [MASK] if u_action < 0.8, unchanged if < 0.9, else the random id."""
    selected = (torch.gather(u_select, -1, word_start) < p) & maskable
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    mask_id = torch.as_tensor(mask_id, dtype=ids.dtype, device=ids.device)  # a scalar, or [M, 1, 1] per model
    inputs = torch.where(selected & (u_action < 0.8), mask_id, ids)
    inputs = torch.where(selected & (u_action >= 0.9), random_ids, inputs)
    return inputs, labels
