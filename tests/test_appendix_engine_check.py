"""The engine's own check in the appendix: same speed (bench rows before/after on one card) and same numbers
(models retrained on the engine against the published spread), on hand-made frames."""
import pandas as pd
import pytest

from xlrepro.papers.appendix.engineering import retrain_within, same_speed


def _bench(rows):
    return pd.DataFrame([{"case": c, "engine_key": k, "engine": k, "family": f, "status": "ok",
                          "ms_per_model_step": ms} for c, k, f, ms in rows])


def test_same_speed_compares_our_rows_only_and_flags_a_change_over_3_percent():
    before = _bench([("base", "ours", "ours", 50.0), ("base", "hf-best", "hf", 60.0), ("small", "ours", "ours", 4.0)])
    after = _bench([("base", "ours", "ours", 51.0), ("base", "hf-best", "hf", 90.0), ("small", "ours", "ours", 4.2)])
    t = same_speed(before, after).set_index("case")
    assert list(t.index) == ["base", "small"]  # the HF row is not ours
    assert t.loc["base", "change"] == "+2.0%" and bool(t.loc["base", "within 3 %"])
    assert t.loc["small", "change"] == "+5.0%" and not bool(t.loc["small", "within 3 %"])


def test_retrain_within_two_published_std():
    published = pd.Series([0.4, 0.5, 0.6])  # mean .5, sample std .1
    inside = retrain_within(pd.Series([0.69]), published)
    assert inside["published std"] == pytest.approx(0.1) and inside["within 2 std"] is True
    assert retrain_within(pd.Series([0.71]), published)["within 2 std"] is False
    assert retrain_within(pd.Series([0.6, 0.8]), published)["new mean"] == pytest.approx(0.7)


def test_retrain_within_says_nothing_against_a_single_published_run():
    out = retrain_within(pd.Series([2.5]), pd.Series([2.9]))
    assert out["within 2 std"] is None and out["published runs"] == 1
