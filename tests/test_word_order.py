"""Table 4's word-order metric on known answers: inversions of a permutation, the best matching of a matrix."""
import math

import numpy as np
import pytest

from xlrepro.evaluation.word_order import kendall_tau_distance, match_alignment, sentence_word_order


@pytest.mark.parametrize("perm, expected", [
    ([0, 1, 2, 3], 1.0),                      # same order
    ([3, 2, 1, 0], 0.0),                      # reversed: all 6 pairs discordant
    ([1, 0, 2, 3], 1 - math.sqrt(1 / 6)),     # one inversion of six pairs
    ([2, 0, 1, 3, 4], 1 - math.sqrt(2 / 10)),  # two inversions of ten pairs
    ([5], 1.0),
])
def test_kendall_tau_distance(perm, expected):
    assert kendall_tau_distance(perm) == pytest.approx(expected)


def test_positions_must_be_distinct():
    with pytest.raises(ValueError, match="distinct"):
        kendall_tau_distance([0, 0, 1])


def test_match_is_the_best_matching_not_the_greedy_one():
    # greedy (row argmax) would give 0->0 (0.9) and then 1->1 (0.1): total 1.0;
    # the best matching is 0->1 (0.8) and 1->0 (0.85): total 1.65
    sim = np.array([[0.9, 0.8], [0.85, 0.1]])
    assert match_alignment(sim) == [(0, 1), (1, 0)]
    assert sentence_word_order(sim) == pytest.approx(0.0)  # the two words swap: one of one pair discordant


def test_rectangular_and_permuted_identity():
    perm = np.array([2, 0, 3, 1])
    sim = np.full((4, 6), 0.1)
    sim[np.arange(4), perm] = 1.0                       # source i aligns with target perm[i]
    assert match_alignment(sim) == list(enumerate(perm.tolist()))
    assert sentence_word_order(sim) == pytest.approx(1 - math.sqrt(3 / 6))  # (2,0,3,1): 3 inversions of 6
    with pytest.raises(ValueError, match="non-empty"):
        match_alignment(np.zeros((0, 3)))
