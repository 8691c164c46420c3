"""Word-order distance between parallel sentences (Dufter & Schütze appendix B.2, Table 4).

Words are aligned with the Match algorithm of Sabet et al. (2020, SimAlign): a maximum-weight bipartite matching of
the two sentences' similarity matrix (`scipy.optimize.linear_sum_assignment`). The aligned target positions, read in
source order, form a permutation; its Kendall's tau distance (Birch & Osborne 2011) is 1 - sqrt(discordant pairs /
all pairs): 1 for the same order, 0 for the reversed one. Kendall's tau itself comes from scipy.stats.
"""
from __future__ import annotations

import math

import numpy as np
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
    discordant = max(0.0, (1.0 - float(tau)) / 2)
    return 1.0 - math.sqrt(discordant)


def sentence_word_order(similarity: np.ndarray) -> float:
    """Kendall's tau distance of one sentence pair from its Match alignment."""
    return kendall_tau_distance([t for _, t in match_alignment(similarity)])
