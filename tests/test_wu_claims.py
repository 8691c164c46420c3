"""Wu & Dredze claims tested on the paper's own numbers: a criterion the paper's data fail would be a defect."""
import pandas as pd

from xlrepro import claims as C
from xlrepro.reference import paper_numbers

CLAIMS = {c["id"]: c for c in C.load_claims("wu2019")}


def _paper_frozen() -> pd.DataFrame:
    """The paper's XNLI freezing runs as a frozen.csv (fractions, no seed): fine-tune-all is Table 3's mBERT zero-shot
    row, freeze-0..3 are Figure 1b's n = 0, 3, 6, 9 (our freeze-k of 4 layers stands for n = 3k of 12)."""
    rows = []
    for experiment, table, name in [("all", "Table 3", "mBERT/zero-shot")] + [
            (f"freeze-{k}", "Figure 1b", f"mBERT/freeze-{3 * k}") for k in range(4)]:
        df = paper_numbers("wu2019", table)
        df = df[(df["experiment"] == name) & (df["language"] != "avg")]
        rows += [{"experiment": experiment, "seed": -1, "language": l, "metric": "accuracy", "value": v / 100}
                 for l, v in zip(df["language"], df["mean"])]
    return pd.DataFrame(rows)


def test_freezing_criterion_passes_on_the_papers_xnli_and_fails_without_a_freezing_effect():
    claim = CLAIMS["freezing_helps_half_depth"]
    data = C.Data({"frozen": _paper_frozen()}, "wu2019", "frozen")
    verdict, evidence = C.evaluate(claim["test"], data)
    assert verdict == C.REPRODUCED, evidence
    for null in claim["nulls"]:
        assert C.evaluate(C.with_null(claim["test"], null), data)[0] != C.REPRODUCED
