"""Multilinguality metrics of Dufter & Schütze (2020), "Identifying Elements Essential for BERT's Multilinguality".

The paper (§2.2 and appendix A.1) measures how multilingual a model trained on English and a shifted copy of it is with:

* **word alignment** (F1 of Sabet et al.'s *Argmax* method against the identity gold alignment, or the
  anti-diagonal one for the inv-order experiments);
* **sentence retrieval** ρ (precision@1 of mean-pooled sentence vectors, averaged over both directions);
* **word translation** τ (exactly the same retrieval measure, over the vectors of the vocabulary tokens fed as
  ``[CLS] tok [SEP]``);
* the **multilinguality score** µ = (τ0 + τ8 + ρ0 + ρ8) / 4, alignment left out as in the paper;
* **MLM perplexity** exp(-mean log p) on the masked tokens.

Everything here is a pure function of torch tensors. Similarities are computed in float32 on whatever device the
inputs live on (CPU or CUDA); nothing is moved to the host except the final counts. Retrieval is vectorised and
chunked so that a 20k x 20k problem never holds more than ``chunk x m`` similarities at once. Alignment loops over
sentences only (each sentence is a small n x n matrix).

Ties: every argmax follows ``torch.argmax``'s documented rule that the *first* maximal index wins. For retrieval
that means a query whose similarities are all equal (e.g. a zero vector) retrieves row 0; it is counted correct only
for i = 0. The authors' code (argmin of the cosine distance, see ANCHORS.md) has the same first-index behaviour.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

__all__ = [
    "cosine_similarity_matrix",
    "retrieval_precision",
    "mean_pool",
    "mutual_argmax_alignment",
    "alignment_prf",
    "identity_gold",
    "inverted_gold",
    "corpus_alignment_f1",
    "perplexity",
    "multilinguality_score",
]

_EPS = 1e-8


def _normalise_rows(x: Tensor, eps: float = _EPS) -> Tensor:
    """Unit-normalise rows in float32; a zero row stays zero (its norm is clamped to eps) instead of becoming NaN."""
    x = x.to(torch.float32)
    return x / x.norm(dim=1, keepdim=True).clamp_min(eps)


def cosine_similarity_matrix(a: Tensor, b: Tensor, eps: float = _EPS) -> Tensor:
    """Cosine similarities between every row of ``a`` [n, d] and every row of ``b`` [m, d]; returns [n, m].

    Rows are normalised once and multiplied, which is one matmul instead of n*m pairwise calls. A zero row has
    similarity 0 with everything (no NaN), so it can never win a retrieval except through the first-index tie rule.
    """
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"expected [n, d] and [m, d] tensors, got {tuple(a.shape)} and {tuple(b.shape)}")
    return _normalise_rows(a, eps) @ _normalise_rows(b, eps).T


def _count_hits(q: Tensor, t: Tensor, chunk: int) -> Tensor:
    """Number of rows i of (unit-normalised) ``q`` whose most similar row of ``t`` is row i, chunk rows at a time."""
    m = q.shape[0]
    hits = torch.zeros((), dtype=torch.long, device=q.device)
    for start in range(0, m, chunk):
        stop = min(start + chunk, m)
        sims = q[start:stop] @ t.T  # [<=chunk, m]: the only large intermediate
        best = sims.argmax(dim=1)  # first maximal index on ties
        hits += (best == torch.arange(start, stop, device=q.device)).sum()
    return hits


def retrieval_precision(queries: Tensor, targets: Tensor, chunk: int = 4096) -> float:
    """Precision@1 retrieval averaged over both directions: ρ (sentences) and τ (words) of the paper.

    Row i of ``queries`` [m, d] is the translation of row i of ``targets`` [m, d]. With R the cosine-similarity
    matrix (R_il = cos(queries_i, targets_l)),

        ρ = 1/(2m) Σ_i ( [argmax_l R_il = i] + [argmax_l R_li = i] ).

    Use it with mean-pooled sentence vectors for sentence retrieval ρ and with the per-token vocabulary vectors
    (source ids vs. their translations' ids, same order) for word translation τ; the paper defines τ
    "like sentence retrieval", so one function serves both.

    The second direction (argmax over a column of R) is computed as the rows of Rᵀ = targets·queriesᵀ, so at most
    ``chunk x m`` similarities exist at any time (m = 20000, chunk = 4096: ~330 MB in float32). Ties are broken by
    ``torch.argmax``'s first-index rule. The two directions are separate matmuls; in floating point Rᵀ can differ
    from R in the last bit, which only matters for exact ties.
    """
    if queries.dim() != 2 or queries.shape != targets.shape:
        raise ValueError(f"queries and targets must both be [m, d], got {tuple(queries.shape)} and {tuple(targets.shape)}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    m = queries.shape[0]
    if m == 0:
        raise ValueError("retrieval precision of an empty set is undefined")
    q = _normalise_rows(queries)
    t = _normalise_rows(targets)
    hits = _count_hits(q, t, chunk) + _count_hits(t, q, chunk)
    return hits.item() / (2 * m)


def mean_pool(hidden: Tensor, keep: Tensor) -> Tensor:
    """Mean of ``hidden`` [b, L, d] over the positions where ``keep`` [b, L] is True; returns [b, d] float32.

    The paper's sentence vector averages all tokens "ignoring CLS and SEP"; the authors also drop [PAD]. Callers
    express that through ``keep``. A row with no kept position returns the zero vector rather than NaN.
    """
    if hidden.dim() != 3 or keep.shape != hidden.shape[:2]:
        raise ValueError(f"expected hidden [b, L, d] and keep [b, L], got {tuple(hidden.shape)} and {tuple(keep.shape)}")
    keep = keep.to(device=hidden.device, dtype=torch.bool).unsqueeze(-1)  # [b, L, 1]
    # masked_fill rather than multiply-by-mask: a dropped position contributes exactly 0 even if it holds inf/NaN.
    summed = hidden.to(torch.float32).masked_fill(~keep, 0.0).sum(dim=1)
    return summed / keep.sum(dim=1).clamp_min(1).to(torch.float32)


def mutual_argmax_alignment(sim: Tensor) -> set[tuple[int, int]]:
    """Sabet et al. (2020)'s *Argmax* alignment from a similarity matrix ``sim`` [n, k].

    (i, j) is aligned iff i = argmax_l S[l, j] and j = argmax_l S[i, l], i.e. i and j are mutual nearest
    neighbours. Each row has at most one edge, so the forward argmax of every row is checked against the backward
    argmax of the column it points to, without any loop. Ties: first maximal index.
    """
    if sim.dim() != 2:
        raise ValueError(f"expected a [n, k] similarity matrix, got {tuple(sim.shape)}")
    n, k = sim.shape
    if n == 0 or k == 0:
        return set()
    row_best = sim.argmax(dim=1)  # j* for every i
    col_best = sim.argmax(dim=0)  # i* for every j
    rows = torch.arange(n, device=sim.device)
    mutual = col_best[row_best] == rows
    return set(zip(rows[mutual].tolist(), row_best[mutual].tolist()))


def _prf_from_counts(tp: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    # The paper leaves empty sets undefined; 0 is the conservative value (nothing predicted = nothing right).
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    f1 = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return p, r, f1


def alignment_prf(pred: set, gold: set) -> tuple[float, float, float]:
    """Precision |P∩G|/|P|, recall |P∩G|/|G| and F1 = 2pr/(p+r) of predicted alignment edges; 0 where undefined."""
    return _prf_from_counts(len(pred & gold), len(pred), len(gold))


def identity_gold(n: int) -> set[tuple[int, int]]:
    """Gold alignment of a sentence and its token-by-token translation: token i ↔ token i."""
    return {(i, i) for i in range(n)}


def inverted_gold(n: int) -> set[tuple[int, int]]:
    """Gold alignment for inv-order, where the translation is reversed: token i ↔ token n-1-i."""
    return {(i, n - 1 - i) for i in range(n)}


def corpus_alignment_f1(pairs: Iterable[tuple[Tensor, Tensor]], inverted: bool = False) -> float:
    """Alignment F1 over a corpus of (source [n, d], translation [n, d]) word-piece vector pairs.

    Special tokens must already be removed, and the translation's vectors must be in the order the model saw them
    (reversed for inv-order, hence ``inverted=True`` selects the anti-diagonal gold). Each sentence is aligned with
    :func:`mutual_argmax_alignment` on its cosine-similarity matrix S_ij = cos(eng_i, fake_j).

    Counts are **micro-averaged**: |P∩G|, |P| and |G| are summed over all sentences and P, R, F1 computed once, so
    long sentences weigh more than short ones (the usual convention for alignment scores; a per-sentence mean of F1
    would differ).
    """
    gold_fn = inverted_gold if inverted else identity_gold
    tp = n_pred = n_gold = 0
    for eng, fake in pairs:
        if eng.dim() != 2 or eng.shape != fake.shape:
            raise ValueError(f"each pair must be two [n, d] tensors of equal shape, got {tuple(eng.shape)} and {tuple(fake.shape)}")
        pred = mutual_argmax_alignment(cosine_similarity_matrix(eng, fake))
        gold = gold_fn(eng.shape[0])
        tp += len(pred & gold)
        n_pred += len(pred)
        n_gold += len(gold)
    return _prf_from_counts(tp, n_pred, n_gold)[2]


def perplexity(log_probs_of_targets: Tensor) -> float:
    """MLM perplexity exp(-1/n Σ log p_wk) from the natural-log probabilities of the correct tokens [n].

    The mean is taken in float64 so that millions of masked tokens do not lose precision in the sum.
    """
    lp = log_probs_of_targets.reshape(-1)
    if lp.numel() == 0:
        raise ValueError("perplexity of zero tokens is undefined")
    return torch.exp(-lp.to(torch.float64).mean()).item()


def multilinguality_score(trans_l0: float, trans_l8: float, retr_l0: float, retr_l8: float) -> float:
    """µ = (τ0 + τ8 + ρ0 + ρ8) / 4. Alignment is omitted, as in the paper: with shared position embeddings and an
    identity gold alignment it is almost trivial, so it would not compare models fairly."""
    return (trans_l0 + trans_l8 + retr_l0 + retr_l8) / 4.0
