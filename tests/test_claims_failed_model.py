"""A model whose every run failed (health.csv) leaves nothing to test: the test that reads it is inconclusive, not
pending (its run was made) and not a crash."""
import pandas as pd

from xlrepro import claims as C
from xlrepro import health as H


def _claim(test):
    return {"id": "x", "chapter": "ch", "section": "§1", "quote": "q", "claim": "c", "artifact": "t", "test": test,
            "why": "w"}


def test_a_model_whose_every_run_failed_makes_its_test_inconclusive_and_is_named():
    # model c never left the majority class in any seed; a and b learnt
    df = pd.DataFrame([{"experiment": e, "seed": s, "metric": m, "value": v}
                       for e, learnt, acc in (("a", 0.6, 0.40), ("b", 0.6, 0.30), ("c", 0.0, 0.25))
                       for s in (0, 1, 2) for m, v in (("learnt", learnt), ("acc", acc + 0.01 * s))])
    rule = {"name": "never_learnt", "reads": {"artifact": "t", "metric": "learnt"}, "kind": "at_most", "bound": 0.02,
            "covers": ["t"], "why": "at the majority class on its own language"}
    health = H.assess([rule], {"t": df})
    assert health[health.status == "failed"][["experiment", "seed"]].values.tolist() == [["c", 0], ["c", 1], ["c", 2]]
    fine = {"kind": "greater", "left": {"experiment": "a", "metric": "acc"}, "right": {"experiment": "b",
            "metric": "acc"}, "margin": 0.05, "noise": "2se"}
    on_c = {"kind": "within", "value": {"experiment": "c", "metric": "acc"}, "target": {"experiment": "a",
            "metric": "acc"}, "tolerance": 0.03, "noise": "2se"}
    row = C.claims_table("p", "ch", {"t": df}, claims=[_claim({"kind": "all", "parts": [fine, on_c]})],
                         health=health).iloc[0]
    assert row["verdict"] == C.INCONCLUSIVE and row["reason"] == "all_runs_failed"
    assert "[reproduced] a acc" in row["evidence"]  # the part that reads learnt models keeps its evidence
    assert "[inconclusive] every run of model c failed (health.csv: never_learnt" in row["evidence"]
    assert "Left out as failed runs (health.csv): model c seed 0" in row["evidence"]
    alone = C.claims_table("p", "ch", {"t": df}, claims=[_claim(fine)], health=health).iloc[0]
    assert alone["verdict"] == C.REPRODUCED and "Left out" not in alone["evidence"] and alone["reason"] == ""
    # a model that was never run is still pending, and a typo still names the valid choices
    missing = {**on_c, "value": {"experiment": "d", "metric": "acc"}}
    assert C.claims_table("p", "ch", {"t": df}, claims=[_claim(missing)], health=health).iloc[0]["verdict"] == \
        C.PENDING
