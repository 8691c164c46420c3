"""Word-order distance between parallel sentences (Dufter & Schütze appendix B.2, Table 4).

Words are aligned with the Match algorithm of Sabet et al. (2020, SimAlign): a maximum-weight bipartite matching of
the two sentences' similarity matrix (`scipy.optimize.linear_sum_assignment`). The aligned target positions, read in
source order, form a permutation; its Kendall's tau distance (Birch & Osborne 2011) is 1 - sqrt(discordant pairs /
all pairs): 1 for the same order, 0 for the reversed one. Kendall's tau itself comes from scipy.stats.

The similarity matrix can come from any source; `DiceSimilarity` is one that needs no neural model (Dice association
of word co-occurrence over parallel sentences), `VectorSimilarity` the cosine of contextual word vectors (SimAlign's
similarity, e.g. from `xlrepro.evaluation.probe.word_features`), and `corpus_word_order` averages the distance over a
corpus.
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

import numpy as np
import scipy.sparse as sp
from scipy import stats
from scipy.optimize import linear_sum_assignment


def match_alignment(similarity: np.ndarray) -> list[tuple[int, int]]:
    """(source, target) pairs of the maximum-weight matching of similarity [n_src, n_tgt], in source order."""
    sim = np.asarray(similarity, dtype=np.float64)
    if sim.ndim != 2 or 0 in sim.shape:
        raise ValueError(f"similarity must be a non-empty [n_src, n_tgt] matrix; got shape {sim.shape}")
    rows, cols = linear_sum_assignment(sim, maximize=True)
    return sorted(zip(rows.tolist(), cols.tolist()))


def kendall_tau_distance(permutation) -> float:
    """1 - sqrt(share of discordant pairs) of a sequence of distinct target positions; 1.0 for fewer than 2."""
    p = np.asarray(permutation)
    if len(set(p.tolist())) != len(p):
        raise ValueError("the positions must be distinct (a one-to-one alignment)")
    if len(p) < 2:
        return 1.0
    tau = stats.kendalltau(np.arange(len(p)), p).statistic  # no ties: tau = 1 - 2 * discordant share
    pairs = len(p) * (len(p) - 1) // 2
    discordant = round((1.0 - float(tau)) / 2 * pairs)  # an integer: rounding removes float error that sqrt magnifies
    return 1.0 - math.sqrt(discordant / pairs)


def sentence_word_order(similarity: np.ndarray) -> float:
    """Kendall's tau distance of one sentence pair from its Match alignment."""
    return kendall_tau_distance([t for _, t in match_alignment(similarity)])


# ------------------------------------------------------------------------------------------ similarity without a model
# Dice association of word co-occurrence over parallel sentences (Och & Ney 2003, §2's association baseline):
#     Dice(e, f) = 2 C(e, f) / (count(e) + count(f)),
# C(e, f) the number of sentence pairs holding e on the source side and f on the target side, count(.) the number of
# sentences holding the word. No maintained library computes it in this form (NLTK's and fast_align's aligners fit
# IBM models; SimAlign needs a neural encoder), so it is written here with scipy.sparse: one sparse product.

def incidence(sentences: Sequence[Sequence[str]], vocabulary: Mapping[str, int]) -> sp.csr_matrix:
    """Binary sentence-by-word matrix [n_sentences, len(vocabulary)]: 1 where the word occurs (once or more) in the
    sentence. Words outside `vocabulary` are left out."""
    rows, cols = [], []
    for i, words in enumerate(sentences):
        ids = {vocabulary[w] for w in words if w in vocabulary}
        rows += [i] * len(ids)
        cols += sorted(ids)
    data = np.ones(len(rows), dtype=np.int32)
    return sp.csr_matrix((data, (rows, cols)), shape=(len(sentences), len(vocabulary)), dtype=np.int32)


class DiceSimilarity:
    """Dice coefficients between source and target words, counted over parallel sentences (lists of words).

    `source_vocabulary` / `target_vocabulary`: the words to keep (default: every word of the parallel sentences);
    restricting them to the words that will be looked up keeps the co-occurrence matrix small and changes no value
    (a word's count and co-occurrences do not depend on the other words kept).
    """

    def __init__(self, source: Sequence[Sequence[str]], target: Sequence[Sequence[str]],
                 source_vocabulary: Iterable[str] | None = None, target_vocabulary: Iterable[str] | None = None):
        if len(source) != len(target):
            raise ValueError(f"source and target must be parallel; got {len(source)} and {len(target)} sentences")
        if len(source) == 0:
            raise ValueError("need at least one parallel sentence")
        src_words = source_vocabulary if source_vocabulary is not None else (w for s in source for w in s)
        tgt_words = target_vocabulary if target_vocabulary is not None else (w for s in target for w in s)
        self.source_index = {w: i for i, w in enumerate(sorted(set(src_words)))}
        self.target_index = {w: i for i, w in enumerate(sorted(set(tgt_words)))}
        e = incidence(source, self.source_index)  # [n_sentences, V_src]
        f = incidence(target, self.target_index)  # [n_sentences, V_tgt]
        self.cooccurrence = (e.T @ f).tocsr()     # [V_src, V_tgt] sentences holding both words
        self.source_count = np.asarray(e.sum(axis=0)).ravel()  # [V_src] sentences holding the word
        self.target_count = np.asarray(f.sum(axis=0)).ravel()  # [V_tgt]
        self.sentences = len(source)

    def dice(self, source_word: str, target_word: str) -> float:
        """Dice(e, f); 0 for a word never seen."""
        return float(self.matrix([source_word], [target_word])[0, 0])

    def matrix(self, source_words: Sequence[str], target_words: Sequence[str]) -> np.ndarray:
        """Similarity matrix [len(source_words), len(target_words)] of one sentence pair (repeated words repeat
        their row or column); 0 for words never seen in the parallel sentences."""
        src = np.array([self.source_index.get(w, -1) for w in source_words])
        tgt = np.array([self.target_index.get(w, -1) for w in target_words])
        out = np.zeros((len(src), len(tgt)))
        ks, kt = src >= 0, tgt >= 0
        if ks.any() and kt.any():
            co = self.cooccurrence[src[ks]][:, tgt[kt]].toarray()                     # [n_src_known, n_tgt_known]
            total = self.source_count[src[ks]][:, None] + self.target_count[tgt[kt]][None, :]
            # a kept word absent from every sentence has count 0: 0 / 0 is its Dice of 0
            out[np.ix_(ks, kt)] = np.divide(2.0 * co, total, out=np.zeros(co.shape), where=total > 0)
        return out


# ------------------------------------------------------------------------------------------ similarity from an encoder
class VectorSimilarity:
    """Cosine similarities of contextual word vectors, as SimAlign computes them: one [n_words, hidden] tensor (or
    array) per sentence on each side, parallel to the corpus that `corpus_word_order` is given. A word without a
    vector (a NaN row, see `word_features`) has similarity 0 to every word: no evidence, as an unseen word under Dice.
    """

    def __init__(self, source_vectors: Sequence, target_vectors: Sequence):
        if len(source_vectors) != len(target_vectors):
            raise ValueError(f"source and target must be parallel; got {len(source_vectors)} and "
                             f"{len(target_vectors)} sentences")
        self.source = [self._unit(v) for v in source_vectors]
        self.target = [self._unit(v) for v in target_vectors]

    @staticmethod
    def _unit(vectors) -> np.ndarray:
        v = np.asarray(vectors, dtype=np.float64)
        if v.ndim != 2:
            raise ValueError(f"each sentence needs a [n_words, hidden] matrix; got shape {v.shape}")
        v = np.nan_to_num(v, nan=0.0)
        norm = np.linalg.norm(v, axis=1, keepdims=True)
        return np.divide(v, norm, out=np.zeros_like(v), where=norm > 0)  # a zero row stays zero: cosine 0

    def pair_matrix(self, index: int, source_words: Sequence[str], target_words: Sequence[str]) -> np.ndarray:
        """Cosine matrix [len(source_words), len(target_words)] of sentence pair `index`; the word lists must have
        as many words as that sentence has vectors."""
        s, t = self.source[index], self.target[index]
        if (len(source_words), len(target_words)) != (len(s), len(t)):
            raise ValueError(f"sentence {index}: {len(source_words)} x {len(target_words)} words but "
                             f"{len(s)} x {len(t)} vectors")
        return s @ t.T


# ------------------------------------------------------------------------------------------ one sentence, a corpus
TIE_BREAKS = ("ordered", "none")


def _identical_groups(matrix: np.ndarray) -> list[np.ndarray]:
    """Indices of the rows of `matrix` that are exactly equal to another row, one array per group of equal rows."""
    _, inverse, counts = np.unique(matrix, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    return [np.flatnonzero(inverse == g) for g in np.flatnonzero(counts > 1)]


def order_identical(similarity: np.ndarray, pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """A matching of the same weight in which words with identical similarities keep their order.

    Source words with equal rows of `similarity` [n_src, n_tgt] (a word repeated in the sentence: "the ... the") can
    swap their targets without changing the matching's weight, and so can target words with equal columns; the
    evidence cannot tell such matchings apart. Each group's targets (sources) are given in increasing order to its
    sources (targets) in increasing order, repeated until nothing changes; every step removes crossings and adds
    none, so it ends. Exact: no epsilon is added to the similarities. Returns the pairs in source order."""
    sim = np.asarray(similarity)
    target_of = dict(pairs)
    changed = True
    while changed:
        changed = False
        for group in _identical_groups(sim):          # equal rows: permute their targets
            src = sorted(int(s) for s in group if int(s) in target_of)
            tgt = sorted(target_of[s] for s in src)
            for s, t in zip(src, tgt):
                if target_of[s] != t:
                    target_of[s], changed = t, True
        source_of = {t: s for s, t in target_of.items()}
        for group in _identical_groups(sim.T):        # equal columns: permute their sources
            tgt = sorted(int(t) for t in group if int(t) in source_of)
            src = sorted(source_of[t] for t in tgt)
            for t, s in zip(tgt, src):
                if source_of[t] != s:
                    source_of[t], changed = s, True
        target_of = {s: t for t, s in source_of.items()}
    return sorted(target_of.items())


def aligned_word_order(similarity: np.ndarray, tie_break: str = "ordered") -> tuple[float, int]:
    """(Kendall's tau distance, aligned pairs) of one sentence pair from its Match alignment, matched pairs of
    similarity 0 left out (no evidence that the two words translate each other); distance NaN under 2 pairs.

    tie_break: "ordered" (`order_identical`) chooses, among the matchings of equal weight that differ only in how
    repeated words are paired ("the ... the" against "le ... le": identical rows), the one that keeps their order,
    rather than crossing them arbitrarily; SimAlign's contextual embeddings, which hold position, separate such words
    by themselves. This leans towards monotone order only where the similarities carry no evidence either way.
    "none": scipy's arbitrary but deterministic choice among equal matchings.
    """
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}; got {tie_break!r}")
    sim = np.asarray(similarity, dtype=np.float64)
    pairs = match_alignment(sim)
    if tie_break == "ordered":
        pairs = order_identical(sim, pairs)
    pairs = [(s, t) for s, t in pairs if sim[s, t] > 0]
    if len(pairs) < 2:
        return math.nan, len(pairs)
    return kendall_tau_distance([t for _, t in pairs]), len(pairs)


def corpus_word_order(source: Sequence[Sequence[str]], target: Sequence[Sequence[str]],
                      similarity: DiceSimilarity | VectorSimilarity, tie_break: str = "ordered",
                      progress: bool = False) -> dict:
    """Mean Kendall's tau distance over parallel sentences (lists of words), each aligned by Match over
    `similarity.matrix(words, words)` (word similarities: Dice) or `similarity.pair_matrix(i, words, words)`
    (contextual: the i-th sentence pair's own vectors). Sentences with fewer than 2 aligned pairs are skipped and
    counted. Returns
    {"kendall_tau": mean, "sentences": used, "skipped": skipped, "aligned_pairs": mean pairs per sentence used}."""
    if len(source) != len(target):
        raise ValueError(f"source and target must be parallel; got {len(source)} and {len(target)} sentences")
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}; got {tie_break!r}")
    from tqdm.auto import tqdm
    taus, pairs, skipped = [], [], 0
    contextual = hasattr(similarity, "pair_matrix")
    for i, (s, t) in enumerate(tqdm(list(zip(source, target)), disable=not progress, desc="verses", leave=False)):
        if len(s) < 2 or len(t) < 2:
            skipped += 1
            continue
        tau, n = aligned_word_order(similarity.pair_matrix(i, s, t) if contextual else similarity.matrix(s, t),
                                    tie_break)
        if math.isnan(tau):
            skipped += 1
            continue
        taus.append(tau)
        pairs.append(n)
    return {"kendall_tau": float(np.mean(taus)) if taus else math.nan, "sentences": len(taus), "skipped": skipped,
            "aligned_pairs": float(np.mean(pairs)) if pairs else math.nan}
