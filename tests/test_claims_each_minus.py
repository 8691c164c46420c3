"""`each` narrows a selector's `minus` to the same value of `over`: a difference per language stays in the language."""
import pandas as pd

from xlrepro import claims as C


def test_each_narrows_minus_to_its_value():
    rows = [{"experiment": e, "seed": -1, "metric": "mrr", "language": l, "value": v}
            for e, vals in (("a", {"fr": 0.30, "de": 0.60}), ("b", {"fr": 0.29, "de": 0.10})) for l, v in vals.items()]
    data = C.Data({"t": pd.DataFrame(rows)}, artifact="t")
    test = {"kind": "each", "over": "language", "into": ["value"],
            "test": {"kind": "below", "value": {"experiment": "a", "metric": "mrr",
                                                "minus": {"experiment": "b", "metric": "mrr"}},
                     "bound": 0.02, "noise": "deterministic"}}
    verdict, evidence = C.evaluate(test, data)
    # fr: 0.30 - 0.29 = 0.01 < 0.02 (against both languages' b, 0.195, it would fail); de: 0.60 - 0.10 = 0.5
    assert verdict == C.PARTLY and evidence.startswith("1 of 2 languages reproduced"), evidence
    assert "not (de)" in evidence, evidence
