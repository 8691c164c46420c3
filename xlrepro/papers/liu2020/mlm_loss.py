"""The MLM loss per language beside the unigram entropy: how far below the level of a model that knows only each
language's token frequencies a BERT got (the pilot's curves and the chapters' pre-training gate read it)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from xlrepro.engine.masking import mask_tokens

PROBE_ROWS = 16  # training rows per language for the per-language MLM loss (smoke runs: 2)
PROBE_SEED = 2020


def probe_batches(ids: torch.Tensor, lengths: torch.Tensor, starts: np.ndarray, langs: Sequence[str], mask_id: int,
                  vocab_size: int, mlm_probability: float, n_rows: int = PROBE_ROWS) -> dict:
    """{language: (inputs [n, W], attention mask, labels)}: n_rows rows spread evenly over the language's
    training rows, masked once with a fixed generator (15 %, 80/10/10: the training's masking)."""
    g = torch.Generator().manual_seed(PROBE_SEED)
    probs = torch.tensor([0.8, 0.1, 0.1])
    out = {}
    for k, lang in enumerate(langs):
        lo, hi = int(starts[k]), int(starts[k + 1])
        pick = np.unique(np.linspace(lo, hi - 1, min(n_rows, hi - lo)).astype(int))
        n = lengths[pick].long()
        W = int(n.max())
        x = ids[pick, :W].long()
        pos = torch.arange(W)
        content = (pos >= 1) & (pos < (n - 1)[:, None])
        inputs, labels = mask_tokens(x, content, torch.tensor(mask_id), probs, vocab_size, mlm_probability,
                                     generator=g)
        out[lang] = (inputs, (pos < n[:, None]).long(), labels)
    return out


@torch.no_grad()
def language_losses(model, probes: dict, device) -> dict[str, float]:
    """Mean MLM cross-entropy (nats) over the masked tokens of each language's probe rows."""
    device = torch.device(device)
    out = {}
    for lang, (inputs, attention, labels) in probes.items():
        labels = labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            hidden = model.bert(input_ids=inputs.to(device), attention_mask=attention.to(device))[0]
            logits = model.cls(hidden[labels != -100])  # the masked positions only: [k, V]
        out[lang] = torch.nn.functional.cross_entropy(logits.float(), labels[labels != -100]).item()
    return out


def unigram_entropies(ids: torch.Tensor, lengths: torch.Tensor, starts: np.ndarray, langs: Sequence[str]
                      ) -> dict[str, float]:
    """Nats per token of each language's unigram distribution over its training rows ([CLS]/[SEP]/padding out):
    every token of the corpus is in exactly one row, so this is `baselines.unigram_entropy` of the corpus."""
    out = {}
    for k, lang in enumerate(langs):
        rows, n = ids[starts[k]:starts[k + 1]], lengths[starts[k]:starts[k + 1]]
        W = rows.shape[1]
        keep = (torch.arange(W) >= 1) & (torch.arange(W) < (n.long() - 1)[:, None])
        c = np.bincount(rows[keep].numpy().astype(np.int64))
        p = c[c > 0] / c.sum()
        out[lang] = float(-(p * np.log(p)).sum())
    return out
