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
    assert t.loc["base", "change"] == "+2.0%" and t.loc["base", "within 3 %"] == "yes"
    assert t.loc["small", "change"] == "+5.0%" and t.loc["small", "within 3 %"] == "no"


def test_retrain_within_two_published_std():
    published = pd.Series([0.4, 0.5, 0.6])  # mean .5, sample std .1
    inside = retrain_within(pd.Series([0.69]), published)
    assert inside["published std"] == pytest.approx(0.1) and inside["within 2 std"] is True
    assert retrain_within(pd.Series([0.71]), published)["within 2 std"] is False
    assert retrain_within(pd.Series([0.6, 0.8]), published)["new mean"] == pytest.approx(0.7)


def test_retrain_within_says_nothing_against_a_single_published_run():
    out = retrain_within(pd.Series([2.5]), pd.Series([2.9]))
    assert out["within 2 std"] is None and out["published runs"] == 1


def test_retrain_view_writes_mean_std_and_runs_and_a_dash_without_spread():
    from xlrepro.papers.appendix.engineering import retrain_view
    check = pd.DataFrame([
        {"paper": "p", "model": "m", "quantity": "mu", **retrain_within(pd.Series([0.69]), pd.Series([0.4, 0.5, 0.6]))},
        {"paper": "p", "model": "m", "quantity": "loss", **retrain_within(pd.Series([2.5]), pd.Series([2.9]))}])
    v = retrain_view(check)
    assert v.loc[("p", "m", "mu")].tolist() == ["0.690 (1)", "0.500 ± 0.100 (3)", "yes"]
    assert v.loc[("p", "m", "loss")].tolist() == ["2.500 (1)", "2.900 (1)", "–"]
