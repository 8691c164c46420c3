"""Known-answer tests for xlrepro.evaluation.overlap (Wu & Dredze 2019, §5.4 and Figure 3)."""

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from xlrepro.evaluation.overlap import overlap_vs_transfer, plot_overlap_vs_transfer, subword_overlap  # noqa: E402


# ------------------------------------------------------------------------------------------ subword_overlap
def test_hand_worked_example():
    # V_train = {a, b, c}; target test set "b d d": V_test = {b, d}, c_b = 1, c_d = 2; V_obs = {b}.
    # p_type  = |V_obs| / |V_test| * 100 = 1/2 * 100 = 50
    # p_token = c_b / (c_b + c_d) * 100 = 1/3 * 100 = 33.33...
    out = subword_overlap([["a", "b"], ["b", "c"]], [["b", "d", "d"]])
    assert out["p_type"] == pytest.approx(50.0)
    assert out["p_token"] == pytest.approx(100.0 / 3)
    assert out["n_source_types"] == 3
    assert out["n_source_tokens"] == 4
    assert out["n_target_types"] == 2
    assert out["n_target_tokens"] == 3
    assert out["n_shared_types"] == 1
    assert out["n_shared_tokens"] == 1


def test_denominator_is_the_target_not_the_source():
    # Swapping roles changes the answer: target "a b b c" against source "b d d".
    # V_test = {a, b, c}, V_obs = {b}: p_type = 1/3 * 100; tokens: c_b = 2 of 4 -> 50.
    out = subword_overlap([["b", "d", "d"]], [["a", "b"], ["b", "c"]])
    assert out["p_type"] == pytest.approx(100.0 / 3)
    assert out["p_token"] == pytest.approx(50.0)


def test_source_counts_do_not_matter_only_its_types():
    # V_en_train is a set: repeating English pieces changes nothing; target counts do matter.
    once = subword_overlap([["x", "y"]], [["x", "z", "z", "z"]])
    many = subword_overlap([["x"] * 50, ["y"] * 7], [["x", "z", "z", "z"]])
    assert once["p_type"] == many["p_type"] == pytest.approx(50.0)
    assert once["p_token"] == many["p_token"] == pytest.approx(25.0)


def test_identical_corpora_give_100_percent():
    corpus = [["the", "##s", "cat"], ["cat", "sat", "sat"]]
    out = subword_overlap(corpus, corpus)
    assert out["p_type"] == pytest.approx(100.0)
    assert out["p_token"] == pytest.approx(100.0)
    assert out["n_shared_types"] == out["n_target_types"] == 4


def test_disjoint_corpora_give_zero():
    out = subword_overlap([["a", "b"]], [["c"], ["d", "d"]])
    assert out["p_type"] == 0.0
    assert out["p_token"] == 0.0
    assert out["n_shared_types"] == out["n_shared_tokens"] == 0


def test_pieces_compared_as_exact_strings():
    # "##s" (continuation) and "s" (word-initial) are different word pieces.
    out = subword_overlap([["s"]], [["##s", "s"]])
    assert out["p_type"] == pytest.approx(50.0)
    assert out["p_token"] == pytest.approx(50.0)


def test_accepts_one_pass_generators():
    src = (s for s in [["a", "b"], ["b", "c"]])
    tgt = (s for s in [["b", "d", "d"]])
    out = subword_overlap(src, tgt)
    assert out["p_type"] == pytest.approx(50.0)
    assert out["p_token"] == pytest.approx(100.0 / 3)


def test_empty_target_and_bare_strings_rejected():
    with pytest.raises(ValueError):
        subword_overlap([["a"]], [[], []])
    with pytest.raises(TypeError):
        subword_overlap([["a"]], ["abc"])


# ------------------------------------------------------------------------------------------ overlap_vs_transfer
def _frames(p_type, p_token, acc, langs=None):
    langs = langs or [f"l{i}" for i in range(len(acc))]
    ov = pd.DataFrame({"language": langs, "p_type": p_type, "p_token": p_token})
    ac = pd.DataFrame({"language": langs, "accuracy": acc})
    return ov, ac


def test_pearson_perfectly_linear_and_anticorrelated():
    acc = [0.2, 0.4, 0.5, 0.9]
    p_type = [2 * a + 10 for a in acc]      # exactly linear, increasing -> r = 1
    p_token = [-3 * a + 80 for a in acc]    # exactly linear, decreasing -> r = -1
    out = overlap_vs_transfer(*_frames(p_type, p_token, acc)).set_index("measure")
    assert list(out.index) == ["p_type", "p_token"]
    assert out.at["p_type", "r"] == pytest.approx(1.0, abs=1e-12)
    assert out.at["p_token", "r"] == pytest.approx(-1.0, abs=1e-12)
    assert out.at["p_type", "p"] == pytest.approx(0.0, abs=1e-9)
    assert (out["n"] == 4).all()


def test_pearson_matches_hand_computation_and_joins_on_language():
    # x = [1, 2, 3], y = [1, 3, 2]: r = 0.5 by hand (cov 1 / (sqrt 2 * sqrt 2) over centred sums);
    # two-sided p for r = 0.5, n = 3: t = r sqrt(1/(1-r^2)) = 1/sqrt(3), df = 1 -> p = 1 - 2/pi * atan(1/sqrt(3)) = 2/3.
    ov = pd.DataFrame({"language": ["de", "fr", "zh", "xx"], "p_type": [1, 2, 3, 99], "p_token": [3, 2, 1, 0]})
    ac = pd.DataFrame({"language": ["zh", "de", "fr"], "accuracy": [2.0, 1.0, 3.0]})  # shuffled; xx has none
    out = overlap_vs_transfer(ov, ac).set_index("measure")
    assert out.at["p_type", "r"] == pytest.approx(0.5)
    assert out.at["p_type", "p"] == pytest.approx(2 / 3)
    assert out.at["p_token", "r"] == pytest.approx(-0.5)
    assert (out["n"] == 3).all()


def test_pearson_not_rank_correlation():
    # Monotone but not linear: Spearman would give 1, Pearson does not.
    # x = [1, 2, 3, 10], y = [1, 2, 3, 4]: centred x = [-3, -2, -1, 6], centred y = [-1.5, -.5, .5, 1.5];
    # sum dx dy = 14, sum dx^2 = 50, sum dy^2 = 5 -> r = 14 / sqrt(250).
    out = overlap_vs_transfer(*_frames([1, 2, 3, 10], [1, 2, 3, 10], [1, 2, 3, 4])).set_index("measure")
    assert out.at["p_type", "r"] == pytest.approx(14 / math.sqrt(250))
    assert out.at["p_token", "r"] == pytest.approx(14 / math.sqrt(250))


def test_overlap_vs_transfer_rejects_bad_input():
    ov, ac = _frames([1, 2, 3], [1, 2, 3], [1, 2, 3])
    with pytest.raises(ValueError):
        overlap_vs_transfer(ov.drop(columns="p_token"), ac)
    with pytest.raises(ValueError):
        overlap_vs_transfer(pd.concat([ov, ov.iloc[:1]]), ac)  # duplicated language
    with pytest.raises(ValueError):
        overlap_vs_transfer(ov.iloc[:2], ac)  # only 2 languages


# ------------------------------------------------------------------------------------------ plot
def test_plot_has_two_labelled_axes_with_r_in_titles():
    acc = [0.2, 0.4, 0.5, 0.9]
    ov, ac = _frames([2 * a for a in acc], [-a for a in acc], acc, langs=["de", "es", "fr", "zh"])
    fig = plot_overlap_vs_transfer(ov.merge(ac, on="language"))
    try:
        assert isinstance(fig, Figure)
        assert len(fig.axes) == 2
        left, right = fig.axes
        assert "p_type" in left.get_title() and "r = 1.00" in left.get_title()
        assert "p_token" in right.get_title() and "r = -1.00" in right.get_title()
        for ax in (left, right):
            assert sorted(t.get_text() for t in ax.texts) == ["de", "es", "fr", "zh"]
            offsets = ax.collections[0].get_offsets()
            assert len(offsets) == 4
            assert not any(math.isnan(v) for v in offsets[:, 1])
    finally:
        plt.close(fig)
