"""Evaluate one trained model as Dufter & Schütze §2.2 do: alignment F1, sentence retrieval ρ and word translation τ
at layers 0 and 8, the multilinguality score µ, and MLM perplexity on train and dev.

Layer 0 is the embedding output (token + position + segment embeddings after LayerNorm), as in the paper.
Vectors exclude [CLS], [SEP] and [PAD] (and their Fake-English twins). Alignment is computed in batches on the
GPU here; `metrics.mutual_argmax_alignment` is the readable one-sentence reference it is tested against.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from transformers import BertForMaskedLM

from xlrepro.evaluation.metrics import mean_pool, multilinguality_score, perplexity, retrieval_precision

from .config import Experiment
from .lab import LabData
from .transforms import BilingualSet, build_bilingual, fake_sentence, english_sentence, pad_rows

EVAL_MASK_SEED = 12345  # the same masked positions for every model, so perplexities are comparable


def _inputs(data: BilingualSet, rows: np.ndarray, device) -> dict[str, torch.Tensor]:
    width = int(data.lengths[rows].max())
    ids = torch.as_tensor(data.ids[rows, :width], device=device)
    return {
        "input_ids": ids,
        "attention_mask": (ids != data.pad_id).long(),
        "position_ids": torch.as_tensor(data.position_ids(rows)[:, :width], device=device),
        "token_type_ids": torch.as_tensor(data.token_type_ids(rows)[:, :width], device=device),
    }


def _content_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """True at word pieces, False at [CLS] (position 0), [SEP] (position length-1) and padding."""
    pos = torch.arange(width, device=lengths.device)
    return (pos[None, :] >= 1) & (pos[None, :] < lengths[:, None] - 1)


def batched_alignment_counts(en: torch.Tensor, fake: torch.Tensor, keep: torch.Tensor, inverted: bool):
    """Mutual-argmax alignment of B sentence pairs at once; returns (|P ∩ G|, |P|, |G|) summed over the batch.

    en, fake: [B, L, d] at the same padded positions (position 0 is [CLS]); keep: [B, L] word-piece mask.
    Gold: identity, or the anti-diagonal of the word pieces for inv-order.
    """
    sim = torch.einsum("bid,bjd->bij", F.normalize(en.float(), dim=-1), F.normalize(fake.float(), dim=-1))
    valid = keep[:, :, None] & keep[:, None, :]
    sim = sim.masked_fill(~valid, float("-inf"))
    fwd = sim.argmax(dim=2)  # for each English piece i, its best Fake-English j
    bwd = sim.argmax(dim=1)  # for each Fake-English piece j, its best English i
    i = torch.arange(sim.shape[1], device=sim.device).expand_as(fwd)
    mutual = keep & (torch.gather(bwd, 1, fwd) == i)
    lengths = keep.sum(1, keepdim=True)  # word pieces per sentence; pieces sit at positions 1..n
    gold_j = (lengths + 1 - i) if inverted else i  # position 1+k <-> 1+(n-1-k)
    correct = mutual & (fwd == gold_j)
    return int(correct.sum()), int(mutual.sum()), int(keep.sum())


@torch.no_grad()
def _hidden(model, inputs, layers):
    out = model.bert(**inputs, output_hidden_states=True)
    return [out.hidden_states[l] for l in layers], out.last_hidden_state


@torch.no_grad()
def sentence_metrics(model: BertForMaskedLM, dev: BilingualSet, inverted: bool, layers, batch_size: int, device):
    """Retrieval ρ and alignment F1 per layer on the parallel dev set (rows 0..n-1 English, n..2n-1 Fake)."""
    n = len(dev) // 2
    pooled = {l: ([], []) for l in layers}
    counts = {l: np.zeros(3, dtype=np.int64) for l in layers}
    for start in range(0, n, batch_size):
        rows = np.arange(start, min(n, start + batch_size))
        en_in, fake_in = _inputs(dev, rows, device), _inputs(dev, rows + n, device)
        keep = _content_mask(torch.as_tensor(dev.lengths[rows], device=device), en_in["input_ids"].shape[1])
        en_h, _ = _hidden(model, en_in, layers)
        fake_h, _ = _hidden(model, fake_in, layers)
        for l, e, f in zip(layers, en_h, fake_h):
            pooled[l][0].append(mean_pool(e.float(), keep))
            pooled[l][1].append(mean_pool(f.float(), keep))
            counts[l] += batched_alignment_counts(e, f, keep, inverted)
    result = {}
    for l in layers:
        result[f"retr_l{l}"] = retrieval_precision(torch.cat(pooled[l][0]), torch.cat(pooled[l][1]))
        correct, predicted, gold = counts[l]
        p, r = correct / max(predicted, 1), correct / max(gold, 1)
        result[f"align_l{l}"] = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    return result


def vocabulary_set(lab: LabData, exp: Experiment, max_length: int) -> BilingualSet:
    """Every non-special English piece alone as `[CLS] piece [SEP]`, then its Fake-English twin."""
    fe = lab.fe
    pieces = [np.array([i]) for i in range(fe.tokenizer.get_vocab_size()) if i not in set(fe.special_ids.tolist())]
    pieces = pieces[:lab.eval_vocab]
    rows = [english_sentence(fe, p) for p in pieces] + [fake_sentence(fe, p, exp) for p in pieces]
    fake = np.array([False] * len(pieces) + [True] * len(pieces))
    return pad_rows(rows, fake, fe.pad, max_length, exp.lang_pos)


@torch.no_grad()
def word_translation(model, vocab: BilingualSet, layers, batch_size: int, device):
    n = len(vocab) // 2
    vecs = {l: ([], []) for l in layers}
    for start in range(0, n, batch_size):
        rows = np.arange(start, min(n, start + batch_size))
        for side, offset in ((0, 0), (1, n)):
            hs, _ = _hidden(model, _inputs(vocab, rows + offset, device), layers)
            for l, h in zip(layers, hs):
                vecs[l][side].append(h[:, 1].float())
    return {f"trans_l{l}": retrieval_precision(torch.cat(vecs[l][0]), torch.cat(vecs[l][1])) for l in layers}


@torch.no_grad()
def mlm_perplexity(model, data: BilingualSet, mask_ids: np.ndarray, batch_size: int, device,
                   mlm_probability: float = 0.15) -> float:
    """Perplexity (base e) on 15% of the word pieces, all replaced by [MASK]; the positions are seeded."""
    gen = torch.Generator(device="cpu").manual_seed(EVAL_MASK_SEED)
    logps = []
    for start in range(0, len(data), batch_size):
        rows = np.arange(start, min(len(data), start + batch_size))
        inputs = _inputs(data, rows, device)
        ids = inputs["input_ids"]
        keep = _content_mask(torch.as_tensor(data.lengths[rows], device=device), ids.shape[1])
        chosen = (torch.rand(ids.shape, generator=gen).to(device) < mlm_probability) & keep
        mask_id = torch.as_tensor(mask_ids[rows], device=device)[:, None].expand_as(ids)
        inputs["input_ids"] = torch.where(chosen, mask_id, ids)
        hidden = model.bert(**inputs).last_hidden_state[chosen]
        logits = model.cls(hidden).float()
        logps.append(torch.log_softmax(logits, -1).gather(1, ids[chosen][:, None]).squeeze(1))
    return perplexity(torch.cat(logps))


def mask_ids_for(data: BilingualSet, lab: LabData, exp: Experiment) -> np.ndarray:
    """The [MASK] id of each row: Fake-English rows use the shifted [MASK] under shift-special."""
    shifted = lab.fe.mask + lab.fe.shift
    return np.where(data.fake & exp.shift_special, shifted, lab.fe.mask)


class EvalSets:
    """The inputs one experiment is evaluated on, built once and reused for every model and checkpoint."""

    def __init__(self, lab: LabData, exp: Experiment, max_length: int = 128, train: BilingualSet | None = None):
        self.dev = build_bilingual(lab.fe, lab.dev_pieces, exp, max_length, parallel_only=True)
        self.vocab = vocabulary_set(lab, exp, max_length)
        self.train = train or build_bilingual(lab.fe, lab.train_pieces, exp, max_length)


@torch.no_grad()
def evaluate(model: BertForMaskedLM, exp: Experiment, lab: LabData, layers=(0, 8), max_length: int = 128,
             batch_size: int = 256, device=None, sets: EvalSets | None = None,
             with_perplexity: bool = True) -> dict[str, float]:
    """All Table 1 metrics for one model."""
    device = device or next(model.parameters()).device
    model.eval()
    sets = sets or EvalSets(lab, exp, max_length)
    dev = sets.dev
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=torch.device(device).type == "cuda"):
        result = sentence_metrics(model, dev, exp.inv_order, layers, batch_size, device)
        result.update(word_translation(model, sets.vocab, layers, max(batch_size, 1024), device))
        if with_perplexity:
            train_set = sets.train
            result["ppl_train"] = mlm_perplexity(model, train_set, mask_ids_for(train_set, lab, exp), batch_size, device)
            result["ppl_dev"] = mlm_perplexity(model, dev, mask_ids_for(dev, lab, exp), batch_size, device)
    if 0 in layers and 8 in layers:
        result["mu"] = multilinguality_score(result["trans_l0"], result["trans_l8"], result["retr_l0"], result["retr_l8"])
    return result
