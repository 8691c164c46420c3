"""Evaluate one trained model as Dufter & Schütze §2.2 do: alignment F1, sentence retrieval ρ and word translation τ
at layers 0 and 8, the multilinguality score µ, and MLM perplexity on train and dev.

Layer 0 is the embedding output (token + position + segment embeddings after LayerNorm), as in the paper.
Vectors exclude [CLS], [SEP] and [PAD] (and their Fake-English twins). Alignment is computed in batches on the
GPU here; `metrics.mutual_argmax_alignment` is the readable one-sentence reference it is tested against.

Two paths give the same numbers (to floating-point rounding; `tests/test_stacked_eval.py`): `evaluate` runs one
Hugging Face model (the reference, and the path for models that are not in a stack), and `evaluate_stack` runs all
M models of a `ModelStack` in one batched forward (`fused_bert.stacked_hidden_states`), each model on its own
experiment's inputs, then the same metric functions per model. `EVALUATIONS` names them for the grid.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from transformers import BertForMaskedLM

from xlrepro.data.bible import DEV_SENTENCES
from xlrepro.evaluation.metrics import mean_pool, multilinguality_score, perplexity, retrieval_precision
from xlrepro.engine.fused_bert import stacked_hidden_states, stacked_mlm_log_probs
from xlrepro.engine.stacked import select_masked

from .config import Experiment
from .lab import VOCAB_PER_LANGUAGE, LabData
from .transforms import BilingualSet, build_bilingual, fake_sentence, english_sentence, pad_rows

EVAL_MASK_SEED = 12345  # the same masked positions for every model, so perplexities are comparable
EVALUATIONS = ("stacked", "per-model")  # how a stack's models are evaluated (the same numbers; see the docstring)
# Rows of each model per stacked forward (a speed setting: numbers change only by rounding). On a GPU a forward holds
# up to STACK_BATCHES reference batches' rows (batch_size x STACK_BATCHES / M per model); on the CPU, where tensors
# that stay in cache win, CPU_ROWS (a stack of 3 small models, 200 sentences, one thread: 16 rows 2.8 s, 64 rows
# 2.5 s, 256 rows 6.2 s, against 6.2-7.7 s model by model).
STACK_BATCHES = 8
CPU_ROWS = 64

# Chance levels of the metrics (a random model), drawn as dashed grey lines in the chapters' figures. Retrieval ρ and
# translation τ are precision@1 over all candidates (`retrieval_precision`): a random ranking finds the translation
# with probability 1 / candidates. ρ ranks the DEV_SENTENCES parallel dev sentences, τ the vocabulary's pieces but its
# five special tokens ([PAD], [UNK], [CLS], [SEP], [MASK]; `vocabulary_set`); µ, the mean of ρ and τ at layers 0 and 8,
# is the mean of their levels (about 0.0003). Alignment F1 (mutual argmax) and perplexity have no level that the
# chapters could state without the corpus.
CANDIDATES = {"retr": DEV_SENTENCES, "trans": VOCAB_PER_LANGUAGE - 5}


def chance_level(metric: str) -> float | None:
    """The value of `metric` (a Table 1 code: "retr_l8", "trans_l0", "mu", ...) for a model that ranks at random;
    None where there is none to draw (alignment F1, perplexity)."""
    if metric == "mu":
        return float(np.mean([1 / CANDIDATES[k] for k in ("retr", "retr", "trans", "trans")]))
    kind = metric.split("_")[0]
    return 1 / CANDIDATES[kind] if kind in CANDIDATES else None


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
    return tuple(int(c) for c in alignment_counts_per_row(en, fake, keep, inverted).sum(0).tolist())


def alignment_counts_per_row(en: torch.Tensor, fake: torch.Tensor, keep: torch.Tensor, inverted) -> torch.Tensor:
    """`batched_alignment_counts` per sentence pair: [B, 3] (|P ∩ G|, |P|, |G|) on the device, without a sync;
    inverted: a bool, or a [B] bool tensor (pairs of several experiments at once)."""
    sim = torch.einsum("bid,bjd->bij", F.normalize(en.float(), dim=-1), F.normalize(fake.float(), dim=-1))
    valid = keep[:, :, None] & keep[:, None, :]
    sim = sim.masked_fill(~valid, float("-inf"))
    fwd = sim.argmax(dim=2)  # for each English piece i, its best Fake-English j
    bwd = sim.argmax(dim=1)  # for each Fake-English piece j, its best English i
    i = torch.arange(sim.shape[1], device=sim.device).expand_as(fwd)
    mutual = keep & (torch.gather(bwd, 1, fwd) == i)
    lengths = keep.sum(1, keepdim=True)  # word pieces per sentence; pieces sit at positions 1..n
    if isinstance(inverted, torch.Tensor):  # position 1+k <-> 1+(n-1-k) where inverted
        gold_j = torch.where(inverted.to(keep.device)[:, None], lengths + 1 - i, i)
    else:
        gold_j = (lengths + 1 - i) if inverted else i
    correct = mutual & (fwd == gold_j)
    return torch.stack([correct.sum(1), mutual.sum(1), keep.sum(1)], 1)


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


# -------------------------------------------------------------------- all models of a stack at once
def perplexity_masks(data: BilingualSet, batch_size: int, mlm_probability: float = 0.15) -> torch.Tensor:
    """[N, width] bool: the positions `mlm_perplexity` masks in `data` with this batch size. The draws depend on the
    batches (one `torch.rand` of each batch's shape, from one generator seeded EVAL_MASK_SEED), so they are replayed
    here batch by batch, in the same order, whatever batches the stacked forward then uses."""
    gen = torch.Generator(device="cpu").manual_seed(EVAL_MASK_SEED)
    chosen = torch.zeros(data.ids.shape, dtype=torch.bool)
    for start in range(0, len(data), batch_size):
        rows = np.arange(start, min(len(data), start + batch_size))
        width = int(data.lengths[rows].max())
        keep = _content_mask(torch.as_tensor(data.lengths[rows]), width)
        chosen[start:start + len(rows), :width] = (torch.rand((len(rows), width), generator=gen) < mlm_probability) & keep
    return chosen


def _pad_width(a: np.ndarray, width: int, fill) -> np.ndarray:
    return a[:, :width] if a.shape[1] >= width else np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=fill)


class _Stacked:
    """Inputs of M models from their own experiments' sets: each distinct set is read once, then gathered per model."""

    def __init__(self, datas: list[BilingualSet], device):
        self.device = device
        self.distinct = list({id(d): d for d in datas}.values())
        self.of = torch.tensor([[id(d) for d in self.distinct].index(id(x)) for x in datas], device=device)  # [M]
        if len({len(d) for d in self.distinct}) != 1:
            raise ValueError(f"a stacked evaluation needs sets of one size; got {sorted({len(d) for d in self.distinct})}")
        if len({d.pad_id for d in self.distinct}) != 1:
            raise ValueError("a stacked evaluation needs one padding id")

    def width(self, rows: np.ndarray) -> int:
        return max(int(d.lengths[rows].max()) for d in self.distinct)

    def inputs(self, rows: np.ndarray, width: int) -> dict[str, torch.Tensor]:
        """input_ids, attention_mask (ids != pad, as `_inputs`), position_ids, token_type_ids: each [M, b, W]."""
        ids, pos, types = [], [], []
        for d in self.distinct:
            ids.append(_pad_width(d.ids[rows], width, d.pad_id))
            lp = (d.fake[rows] & d.lang_pos).astype(np.int64)[:, None]  # as BilingualSet.position_ids/token_type_ids
            pos.append(np.arange(width)[None, :] + lp * d.max_length)
            types.append(np.repeat(lp, width, axis=1))
        stack = lambda xs: torch.as_tensor(np.stack(xs), device=self.device)[self.of]
        ids = stack(ids)
        return {"input_ids": ids, "attention_mask": ids != self.distinct[0].pad_id, "position_ids": stack(pos),
                "token_type_ids": stack(types)}

    def lengths(self, rows: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.stack([d.lengths[rows] for d in self.distinct]), device=self.device)[self.of]


def _chunks(lengths: np.ndarray, size: int):
    """Row indices in chunks of `size`, longest rows first (less padding than the file order; every metric is
    per row, and the callers put rows back in their order)."""
    order = np.argsort(-lengths, kind="stable")
    for start in range(0, len(order), size):
        yield order[start:start + size]


def _restore(chunks: list[np.ndarray], device) -> torch.Tensor:
    """Indices that put rows gathered chunk by chunk back in their order (0..n-1)."""
    return torch.as_tensor(np.argsort(np.concatenate(chunks)), device=device)


def _stacked_pairs(params, config, datas: list[BilingualSet], layers, rows_per_model: int, device):
    """For the English rows 0..n-1 and their Fake-English twins n..2n-1 of every model's set, in one forward per chunk:
    yields (rows, keep [M, b, W], [(English [M, b, W, H], Fake [M, b, W, H]) per layer])."""
    st = _Stacked(datas, device)
    n = len(datas[0]) // 2
    for rows in _chunks(np.max([d.lengths[:n] for d in st.distinct], axis=0), rows_per_model):
        both = np.concatenate([rows, rows + n])
        width = st.width(both)
        hidden, _ = stacked_hidden_states(params, config, **st.inputs(both, width), layers=layers)
        lengths = st.lengths(rows)  # [M, b]; a Fake-English twin has its English sentence's length
        keep = _content_mask(lengths.reshape(-1), width).view(*lengths.shape, width)
        yield rows, keep, [(h[:, :len(rows)], h[:, len(rows):]) for h in hidden]


@torch.no_grad()
def stacked_sentence_metrics(params, config, devs: list[BilingualSet], inverted: list[bool], layers,
                             rows_per_model: int, device) -> list[dict[str, float]]:
    """`sentence_metrics` of M models at once."""
    m = len(devs)
    pooled = {l: ([], []) for l in layers}  # [M, b, H] per chunk
    counts = {l: torch.zeros(m, 3, dtype=torch.int64, device=device) for l in layers}
    seen = []
    for rows, keep, pairs in _stacked_pairs(params, config, devs, layers, rows_per_model, device):
        seen.append(rows)
        flat = keep.flatten(0, 1)  # [M*b, W]: the models' rows side by side
        inv = torch.tensor(inverted, device=device).repeat_interleave(len(rows))  # [M*b]
        for l, (e, f) in zip(layers, pairs):
            e, f = e.flatten(0, 1), f.flatten(0, 1)  # [M*b, W, H]
            pooled[l][0].append(mean_pool(e.float(), flat).view(m, len(rows), -1))
            pooled[l][1].append(mean_pool(f.float(), flat).view(m, len(rows), -1))
            counts[l] += alignment_counts_per_row(e, f, flat, inv).view(m, len(rows), 3).sum(1)
    back = _restore(seen, device)
    counts = {l: c.cpu().numpy() for l, c in counts.items()}
    pooled = {l: (torch.cat(en, 1)[:, back], torch.cat(fake, 1)[:, back]) for l, (en, fake) in pooled.items()}
    results = []
    for i in range(m):
        result = {}
        for l in layers:
            result[f"retr_l{l}"] = retrieval_precision(pooled[l][0][i], pooled[l][1][i])
            correct, predicted, gold = counts[l][i]
            p, r = correct / max(predicted, 1), correct / max(gold, 1)
            result[f"align_l{l}"] = 0.0 if p + r == 0 else 2 * p * r / (p + r)
        results.append(result)
    return results


@torch.no_grad()
def stacked_word_translation(params, config, vocabs: list[BilingualSet], layers, rows_per_model: int,
                             device) -> list[dict[str, float]]:
    """`word_translation` of M models at once."""
    m = len(vocabs)
    vecs = {l: ([], []) for l in layers}  # [M, b, H] per chunk: the piece's vector (position 1)
    seen = []
    for rows, _, pairs in _stacked_pairs(params, config, vocabs, layers, rows_per_model, device):
        seen.append(rows)
        for l, (e, f) in zip(layers, pairs):
            vecs[l][0].append(e[:, :, 1].float())
            vecs[l][1].append(f[:, :, 1].float())
    back = _restore(seen, device)
    vecs = {l: (torch.cat(en, 1)[:, back], torch.cat(fake, 1)[:, back]) for l, (en, fake) in vecs.items()}
    return [{f"trans_l{l}": retrieval_precision(vecs[l][0][i], vecs[l][1][i]) for l in layers} for i in range(m)]


@torch.no_grad()
def stacked_mlm_perplexity(params, config, datas: list[BilingualSet], mask_ids: list[np.ndarray], batch_size: int,
                           rows_per_model: int, device, mlm_probability: float = 0.15) -> list[float]:
    """`mlm_perplexity` of M models at once, on the same masked positions: `perplexity_masks` replays its draws for
    its batch size (`batch_size`); the forward may batch the rows differently (`rows_per_model`)."""
    st = _Stacked(datas, device)
    masks = {id(d): perplexity_masks(d, batch_size, mlm_probability) for d in st.distinct}  # [N, width_d] each
    mask_ids = torch.as_tensor(np.stack(mask_ids), device=device)  # [M, N]: each model's [MASK] id per row
    logps = [[] for _ in datas]
    for rows in _chunks(np.max([d.lengths for d in st.distinct], axis=0), rows_per_model):
        width = st.width(rows)
        inputs = st.inputs(rows, width)
        ids = inputs["input_ids"]  # [M, b, W]
        chosen = torch.stack([torch.as_tensor(_pad_width(masks[id(d)][rows].numpy(), width, False))
                              for d in st.distinct]).to(device)[st.of]  # [M, b, W]
        mask_id = mask_ids[:, torch.as_tensor(rows, device=device)]  # [M, b]
        inputs["input_ids"] = torch.where(chosen, mask_id[..., None].expand_as(ids), ids)
        _, x = stacked_hidden_states(params, config, **inputs, through=config.num_hidden_layers)
        counts = chosen.flatten(1).sum(1).tolist()  # masked pieces per model, in row-major order as `hidden[chosen]`
        labels = torch.where(chosen, ids, -100)
        sel_index, sel_labels = select_masked(labels, max(max(counts), 1))
        logp = stacked_mlm_log_probs(params, config, x, sel_index, sel_labels)  # [M, C]
        for i, c in enumerate(counts):
            logps[i].append(logp[i, :c])
    return [perplexity(torch.cat(lp)) for lp in logps]


@torch.no_grad()
def evaluate_stack(params: dict, config, exps: list[Experiment], lab: LabData, sets: list[EvalSets], layers=(0, 8),
                   batch_size: int = 256, device=None, with_perplexity: bool = True,
                   rows_per_model: int | None = None) -> list[dict[str, float]]:
    """All Table 1 metrics of the M models of a stack, in one batched forward per chunk of rows: `evaluate`'s numbers
    (to floating-point rounding) for each model.

    params: the stacked parameters [M, ...] (`ModelStack.params`, or a subset of its models); config: their
    `BertConfig`; exps, sets: each model's experiment and its `EvalSets` (models of one experiment share them).
    batch_size: `evaluate`'s batch size, which fixes the perplexity masks; rows_per_model: rows of each model per
    forward (default: batch_size x STACK_BATCHES / M on a GPU, CPU_ROWS on the CPU). Rows are batched longest first.
    """
    m = len(exps)
    if m == 0 or len(sets) != m or any(v.shape[0] != m for v in params.values()):
        raise ValueError(f"{m} experiments, {len(sets)} evaluation sets and parameters for "
                         f"{sorted({v.shape[0] for v in params.values()})} models: they must agree (and be > 0)")
    n_layers = config.num_hidden_layers
    if any(not 0 <= l <= n_layers for l in layers):
        raise ValueError(f"layers {list(layers)}: valid layers are 0..{n_layers}")
    for part in ("dev", "vocab", "train") if with_perplexity else ("dev", "vocab"):
        _Stacked([getattr(s, part) for s in sets], "cpu")  # sets of one size, one padding id: checked before any work
    device = torch.device(device or next(iter(params.values())).device)
    if rows_per_model is not None and rows_per_model < 1:
        raise ValueError(f"rows_per_model={rows_per_model}: must be None or >= 1")
    rows = rows_per_model or (CPU_ROWS if device.type == "cpu" else max(1, math.ceil(batch_size * STACK_BATCHES / m)))
    layers = list(layers)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        results = stacked_sentence_metrics(params, config, [s.dev for s in sets], [e.inv_order for e in exps], layers,
                                           rows, device)
        word_rows = rows if device.type == "cpu" else max(rows, math.ceil(1024 * STACK_BATCHES / m))  # 3 pieces a row
        for r, t in zip(results, stacked_word_translation(params, config, [s.vocab for s in sets], layers, word_rows,
                                                          device)):
            r.update(t)
        if with_perplexity:
            for which, datas in (("ppl_train", [s.train for s in sets]), ("ppl_dev", [s.dev for s in sets])):
                mask_ids = [mask_ids_for(d, lab, e) for d, e in zip(datas, exps)]
                for r, ppl in zip(results, stacked_mlm_perplexity(params, config, datas, mask_ids, batch_size, rows,
                                                                  device)):
                    r[which] = ppl
    if 0 in layers and 8 in layers:
        for r in results:
            r["mu"] = multilinguality_score(r["trans_l0"], r["trans_l8"], r["retr_l0"], r["retr_l8"])
    return results
