"""Q4's pooled and within-script correlations on a hand-made case where the pooled r is only the script split."""
import pandas as pd
import pytest

from xlrepro.papers.wu2019.overlap_scope import overlap_correlations, shared_script_languages


def frames():
    # latin languages: high overlap, accuracy unrelated to it inside the group; others: no overlap, low accuracy
    p_type = {"en": 100, "a": 40, "b": 50, "c": 60, "d": 70, "x": 1, "y": 2, "z": 0.5}
    acc = {"en": 0.9, "a": 0.72, "b": 0.70, "c": 0.71, "d": 0.69, "x": 0.40, "y": 0.41, "z": 0.42}
    overlap = pd.DataFrame([{"experiment": "overlap", "seed": -1, "language": l, "metric": m, "value": v}
                            for l, v in p_type.items() for m in ("p_type", "p_token")])
    zero = pd.DataFrame([{"experiment": "zero-shot", "seed": s, "language": l, "metric": "accuracy", "value": v}
                         for l, v in acc.items() for s in (0, 1)])
    return overlap, zero


def test_within_script_languages():
    overlap, _ = frames()
    assert shared_script_languages(overlap) == ["a", "b", "c", "d"]
    assert shared_script_languages(overlap, 55) == ["c", "d"]
    with pytest.raises(ValueError, match="no p_type"):
        shared_script_languages(overlap[overlap.metric == "p_token"])


def test_pooled_r_is_the_script_split_within_r_is_not():
    overlap, zero = frames()
    t = overlap_correlations(overlap, zero).set_index(["overlap", "scope"])
    pooled = t.loc[("p_type", "pooled")]
    within = t.loc[("p_type", "within script (p_type > 10%)")]
    assert pooled["languages"] == 7 and within["languages"] == 4
    assert pooled["r"] > 0.9 and pooled["p"] < 0.01
    assert within["r"] == pytest.approx(-0.8)  # accuracies 0.72, 0.70, 0.71, 0.69 against 40..70: r = -0.8


def test_the_claims_within_script_list_is_the_published_overlap_split():
    """claims.yaml names the within-script languages; they must be the ones above 10% p_type in overlap.csv."""
    from pathlib import Path

    from xlrepro.claims import load_claims
    from xlrepro.results import read_csv

    root = Path(__file__).resolve().parents[1]
    overlap = read_csv(root / "book" / "results" / "wu2019" / "overlap.csv")
    claim = next(c for c in load_claims("wu2019") if c["id"] == "overlap_correlates")
    listed = [p["left"]["language"] for p in claim["test"]["parts"] if "language" in p["left"]]
    assert listed and all(sorted(l) == shared_script_languages(overlap) for l in listed)
