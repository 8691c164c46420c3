"""Liu et al. 2020 baselines (chance MRR, majority class, unigram entropy) on hand-made cases with known answers."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from xlrepro.papers.liu2020 import baselines as B
from xlrepro.papers.liu2020.retrieval import word_retrieval


def test_expected_reciprocal_rank_known_answers():
    assert B.expected_reciprocal_rank(1, 1) == 1.0
    assert B.expected_reciprocal_rank(3, 1) == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)  # uniform rank 1..3
    # 2 golds among 3: the best is first with probability 2/3, second with 1/3
    assert B.expected_reciprocal_rank(3, 2) == pytest.approx(2 / 3 + 1 / 3 / 2)
    assert B.expected_reciprocal_rank(4, 4) == 1.0
    with pytest.raises(ValueError):
        B.expected_reciprocal_rank(2, 3)


def test_chance_mrr_hand_made_dictionary():
    # sources a, b, c; candidates x, y, a, c; c's gold is itself, a is a candidate but not a's gold
    pairs = [("a", "x"), ("b", "y"), ("b", "a"), ("c", "c")]
    m = 4
    plain = (B.expected_reciprocal_rank(m, 1) + B.expected_reciprocal_rank(m, 2) + B.expected_reciprocal_rank(m, 1)) / 3
    assert B.chance_mrr(pairs) == pytest.approx(plain)
    # identical strings: c -> 1; a: its own string first, x uniform among the other 3 -> E[1/(1+R')]
    a = (1 / 2 + 1 / 3 + 1 / 4) / 3
    assert B.chance_mrr(pairs, identical_first=True) == pytest.approx((a + B.expected_reciprocal_rank(m, 2) + 1) / 3)
    assert B.identical_share(pairs) == pytest.approx(1 / 3)


def test_chance_mrr_matches_the_evaluation_with_random_vectors():
    """Random vectors, one per token string (as a static model has), through the evaluation's own word_retrieval:
    the mean MRR over many draws is the identical-first chance level."""
    pairs = [("a", "x"), ("a", "y"), ("b", "z"), ("c", "c"), ("d", "a"), ("e", "w"), ("e", "c")]
    rng = np.random.default_rng(0)
    words = sorted({w for p in pairs for w in p})
    draws = []
    for _ in range(4000):
        table = dict(zip(words, rng.standard_normal((len(words), 8))))
        draws.append(word_retrieval(pairs, lambda ws: np.stack([table[w] for w in ws]))[1].mean())
    se = np.std(draws) / math.sqrt(len(draws))
    assert abs(np.mean(draws) - B.chance_mrr(pairs, identical_first=True)) < 4 * se
    assert abs(np.mean(draws) - B.chance_mrr(pairs)) > 4 * se  # the identical strings matter


def test_majority_share_and_entropy():
    assert B.majority_share([0, 0, 1, 2]) == 0.5
    assert B.unigram_entropy({"a": 5, "b": 5}) == pytest.approx(math.log(2))
    assert B.unigram_entropy({"a": 7}) == 0.0
    rows = B.transfer_rows([1, 1, 0], {"en": [0, 0, 1, 2], "fr": [0, 0, 1, 2]})
    df = B.frame(rows).set_index(["experiment", "metric", "language"])["value"]
    assert df[("majority-test", "accuracy", "fr")] == 0.5
    assert df[("majority-train", "accuracy", "fr")] == 0.25  # predicts 1, the training majority
    assert df[("majority-test", "pairs", "en")] == 4


def test_dictionaries_checked_against_the_chapter(tmp_path):
    df = B.frame(B.retrieval_rows({"fr": [("a", "x"), ("b", "y")]}))
    csv = tmp_path / "dictionaries.csv"
    pd.DataFrame([{"experiment": "dictionary", "seed": -1, "metric": "source_words", "value": 2, "language": "fr"},
                  {"experiment": "dictionary", "seed": -1, "metric": "source_words", "value": 0, "language": "vi"}]
                 ).to_csv(csv, index=False)
    B.check_dictionaries(df, csv)
    pd.DataFrame([{"experiment": "dictionary", "seed": -1, "metric": "source_words", "value": 3, "language": "fr"}]
                 ).to_csv(csv, index=False)
    with pytest.raises(ValueError, match="differ"):
        B.check_dictionaries(df, csv)
