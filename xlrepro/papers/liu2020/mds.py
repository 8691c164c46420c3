"""Language-specific information in BERT (Liu et al. 2020, long version §4).

- `language_means`: R_L^l, the mean of the hidden states of all non-pad tokens of a language's sentences, for
  every layer (0 = embeddings .. 12), with the number of sentences and tokens it used (their follow-up code limits
  it by accident to one batch of 16 sentences; ours uses every sentence given).
- `mds_hook`: a forward hook on one `BertLayer` that adds alpha · D to its output hidden states, D = R_target −
  R_source (the mean difference shift), so that the forward pass continues from the shifted states.
- `convert_rate` (their formula) and `bleu1` (nltk's corpus BLEU with weights (1,0,0,0)) score the unmasked
  predictions of the shifted model.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Mapping, Sequence

import numpy as np
import torch

from xlrepro.config import ConfigError


def check_layer(layer: int, n_layers: int) -> int:
    if not isinstance(layer, (int, np.integer)) or not 1 <= layer <= n_layers:
        raise ConfigError(f"layer {layer!r} out of range; valid choices: 1..{n_layers} (the output of that "
                          f"encoder layer)")
    return int(layer)


@contextmanager
def mds_hook(bert, layer: int, shift: torch.Tensor, alpha: float):
    """Within the block, `bert`'s encoder layer `layer` (1-based, as the paper counts) outputs h + alpha·shift.

    `bert` is an HF `BertModel` (or anything with `.encoder.layer`); `shift` [H] is D = R_target − R_source.
    """
    layers = bert.encoder.layer
    check_layer(layer, len(layers))

    def add(module, args, output):
        if isinstance(output, tuple):
            return (output[0] + alpha * shift.to(output[0]),) + tuple(output[1:])
        return output + alpha * shift.to(output)

    handle = layers[layer - 1].register_forward_hook(add)
    try:
        yield
    finally:
        handle.remove()


@torch.no_grad()
def language_means(bert, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, dict]:
    """R [L+1, H] (layer 0 = embeddings) over all non-pad tokens of `batches` (input_ids [B, W],
    attention_mask [B, W]), and {"sentences", "tokens"} counted."""
    total, n_tok, n_sent = None, 0, 0
    for ids, mask in batches:
        out = bert(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        hs = torch.stack(out.hidden_states)  # [L+1, B, W, H]
        m = mask.to(hs.dtype)[None, :, :, None]  # [1, B, W, 1]
        s = (hs * m).sum(dim=(1, 2)).double()  # [L+1, H]
        total = s if total is None else total + s
        n_tok += int(mask.sum())
        n_sent += int(ids.shape[0])
    if total is None or n_tok == 0:
        raise ValueError("language_means got no tokens")
    return (total / n_tok).float(), {"sentences": n_sent, "tokens": n_tok}


def nearest_mean_language(states: torch.Tensor, means: Mapping[str, torch.Tensor]) -> list[str]:
    """For each row of states [N, H], the language whose mean [H] is nearest (Euclidean)."""
    names = list(means)
    M = torch.stack([means[n] for n in names])  # [K, H]
    return [names[i] for i in torch.cdist(states.float(), M.float()).argmin(1).tolist()]


def convert_rate(outputs: Iterable[str], source_vocab: set[str], target_vocab: set[str]) -> float:
    """(# y in V_t − V_s) / (# y − # y in V_s ∩ V_t) over output tokens y (tokens of both vocabularies are left
    out of numerator and denominator; tokens in neither count in the denominator only)."""
    outputs = list(outputs)
    shared = source_vocab & target_vocab
    num = sum(1 for y in outputs if y in target_vocab and y not in source_vocab)
    den = len(outputs) - sum(1 for y in outputs if y in shared)
    if den == 0:
        return float("nan")
    return num / den


def bleu1(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> float:
    """Corpus BLEU-1 (unigram precision x brevity penalty), in percent, one reference per hypothesis (nltk)."""
    from nltk.translate.bleu_score import corpus_bleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    return 100.0 * corpus_bleu([[list(r)] for r in references], [list(h) for h in hypotheses],
                               weights=(1.0,))


def language_vocabulary(streams: Iterable[Sequence[str]], min_count: int = 1) -> set[str]:
    """V_lang: the WordPiece tokens a language's corpus uses (at least `min_count` times), specials excluded."""
    from collections import Counter
    c = Counter(t for s in streams for t in s)
    return {t for t, n in c.items() if n >= min_count and not (t.startswith("[") and t.endswith("]"))}
