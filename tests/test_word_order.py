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


# ------------------------------------------------------------------------------------------ Dice similarity
from xlrepro.evaluation.word_order import (DiceSimilarity, aligned_word_order, corpus_word_order,  # noqa: E402
                                           order_identical)


def test_dice_on_three_verses_by_hand():
    # verse 1: a b / x y ; verse 2: a / x ; verse 3: b c / y z
    src = [["a", "b"], ["a"], ["b", "c"]]
    tgt = [["x", "y"], ["x"], ["y", "z"]]
    d = DiceSimilarity(src, tgt)
    # counts: a 2, b 2, c 1; x 2, y 2, z 1. C(a,x)=2, C(a,y)=1, C(b,y)=2, C(b,x)=1, C(b,z)=1, C(c,z)=1, C(c,y)=1
    assert d.dice("a", "x") == pytest.approx(2 * 2 / (2 + 2))    # 1.0
    assert d.dice("a", "y") == pytest.approx(2 * 1 / (2 + 2))    # 0.5
    assert d.dice("b", "z") == pytest.approx(2 * 1 / (2 + 1))    # 0.667
    assert d.dice("c", "z") == pytest.approx(2 * 1 / (1 + 1))    # 1.0
    assert d.dice("a", "z") == 0.0 and d.dice("c", "x") == 0.0  # never together
    assert d.dice("unseen", "x") == 0.0
    m = d.matrix(["b", "a", "a"], ["z", "x"])                   # repeated words repeat their row
    np.testing.assert_allclose(m, [[2 / 3, 0.5], [0.0, 1.0], [0.0, 1.0]])


def test_dice_word_counted_once_per_verse_and_restricted_vocabulary():
    d = DiceSimilarity([["a", "a", "b"], ["b"]], [["x", "x"], ["y"]], source_vocabulary=["a"], target_vocabulary=["x"])
    assert d.dice("a", "x") == pytest.approx(1.0)   # count(a) = 1 verse, count(x) = 1 verse, together once
    assert d.dice("b", "y") == 0.0                  # left out of the vocabularies
    kept = DiceSimilarity([["a"], ["b"]], [["x"], ["y"]], source_vocabulary=["a", "never"])
    assert kept.dice("never", "x") == 0.0           # a kept word that no verse holds: count 0, Dice 0 (not NaN)
    with pytest.raises(ValueError, match="parallel"):
        DiceSimilarity([["a"]], [["x"], ["y"]])


def _corpus(seed=0, verses=60, vocab=14):
    """Verses of distinct words drawn at random; every word's set of verses differs from every other's, so Dice of a
    word with its renamed twin (1.0) is strictly above Dice with any other word."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocab)]
    corpus = [list(rng.choice(words, size=int(rng.integers(3, 8)), replace=False)) for _ in range(verses)]
    sets = {w: frozenset(i for i, v in enumerate(corpus) if w in v) for w in words}
    assert len(set(sets.values())) == vocab and all(sets.values())
    return corpus


def test_renamed_corpus_keeps_order_and_reversed_corpus_inverts_it():
    src = _corpus()
    renamed = [[w.replace("w", "z") for w in v] for v in src]
    same = corpus_word_order(src, renamed, DiceSimilarity(src, renamed))
    assert same == {"kendall_tau": 1.0, "sentences": len(src), "skipped": 0,
                    "aligned_pairs": pytest.approx(np.mean([len(v) for v in src]))}
    reversed_ = [v[::-1] for v in renamed]
    rev = corpus_word_order(src, reversed_, DiceSimilarity(src, reversed_))
    assert rev["kendall_tau"] == 0.0 and rev["sentences"] == len(src)
    for s, t in zip(src, reversed_):                           # every verse, not only the mean
        assert aligned_word_order(DiceSimilarity(src, reversed_).matrix(s, t))[0] == 0.0


def test_repeated_words_keep_their_order_with_the_ordered_tie_break():
    # "a b a" against "x y x": both a's have identical rows, so matchings a1->x3, a3->x1 and a1->x1, a3->x3 weigh the
    # same; "ordered" picks the uncrossed one (distance 1.0), the evidence cannot tell them apart
    sim = np.array([[1.0, 0.2, 1.0], [0.2, 1.0, 0.2], [1.0, 0.2, 1.0]])
    assert order_identical(sim, [(0, 2), (1, 1), (2, 0)]) == [(0, 0), (1, 1), (2, 2)]
    assert aligned_word_order(sim, "ordered") == (1.0, 3)
    with pytest.raises(ValueError, match="ordered, none"):
        aligned_word_order(sim, "diagonal")


def test_zero_similarity_pairs_dropped_and_short_verses_skipped():
    # a->x (0.9), b->z (0.8) aligned; c can only take y with similarity 0: dropped, 2 pairs left, swapped order
    sim = np.array([[0.0, 0.0, 0.9], [0.8, 0.0, 0.0], [0.0, 0.0, 0.0]])
    tau, n = aligned_word_order(sim)
    assert n == 2 and tau == 0.0
    assert math.isnan(aligned_word_order(np.array([[0.5, 0.0], [0.0, 0.0]]))[0])  # one pair: no order to measure
    d = DiceSimilarity([["a", "b"], ["c", "d"]], [["x", "y"], ["u", "v"]])
    res = corpus_word_order([["a", "b"], ["q"], ["a", "q"]], [["x", "y"], ["x"], ["x", "r"]], d)
    assert res["sentences"] == 1 and res["skipped"] == 2 and res["kendall_tau"] == pytest.approx(1.0)
