"""Liu et al.'s gates (`xlrepro.papers.liu2020.gates`) on hand-made result frames with known answers."""
import pandas as pd
import pytest

from xlrepro.config import ConfigError
from xlrepro.papers.liu2020 import gates

SPEC = {"model": "big-w512", "gates": [
    {"id": "loss_below_unigram", "criterion": "loss `margin` nats under, in `languages`", "margin": 2.0, "languages": 2},
    {"id": "retrieval_above_chance", "criterion": "`factor` x chance", "factor": 2.0, "languages": 2},
    {"id": "zero_shot_above_majority", "criterion": "`points` points", "points": 5.0, "share": 0.5}]}
EXP = "bert-big-w512"


def rows(exp, metric, values, **extra):
    return pd.DataFrame([{"experiment": exp, "metric": metric, "language": l, "value": v, **extra}
                         for l, v in values.items()])


def test_each_gate_counts_the_languages_that_pass():
    loss = pd.concat([rows(EXP, "mlm_loss", {"en": 3.0, "fr": 4.5, "de": 1.5}),
                      rows(EXP, "unigram_entropy", {"en": 6.0, "fr": 6.0, "de": 3.0}),
                      rows("bert-small-w512", "mlm_loss", {"en": 9.0, "fr": 9.0, "de": 9.0})])  # another model
    # best layer: fr .30 (layer 1) >= 2 x .10; de .15 < 2 x .10 at every layer
    retrieval = pd.concat([rows(EXP, "mrr", {"fr": 0.05, "de": 0.15}, layer=0),
                           rows(EXP, "mrr", {"fr": 0.30, "de": 0.10}, layer=1)])
    base = pd.concat([rows("chance-identical", "mrr", {"fr": 0.10, "de": 0.10}),
                      rows("majority-test", "accuracy", {"en": 0.25, "fr": 0.25, "de": 0.25})])
    # fr: mean .40, std .0 -> .40 >= .30; de: mean .31, 2 SE of (.30, .32) = .0115 -> .2985 < .30; en is the source
    transfer = pd.concat([rows(EXP, "accuracy", {"en": 0.9, "fr": 0.40, "de": 0.30}, seed=0),
                          rows(EXP, "accuracy", {"en": 0.9, "fr": 0.40, "de": 0.32}, seed=1)])
    g = gates.gate_frame(loss, retrieval, transfer, base, SPEC).set_index("gate")
    assert g.loc["loss_below_unigram", ["value", "threshold", "passed", "languages"]].tolist() == [1, 2, False, "en"]
    assert g.loc["retrieval_above_chance", ["value", "threshold", "passed"]].tolist() == [1, 2, False]
    assert g.loc["zero_shot_above_majority", ["value", "threshold", "passed", "languages"]].tolist() == \
        [1, 1, True, "fr"]
    assert g.loc["loss_below_unigram", "criterion"] == "big-w512: loss 2 nats under, in 2 (of 3)"


def test_a_missing_result_leaves_its_gate_pending():
    g = gates.gate_frame(None, None, None, None, SPEC)
    assert g["passed"].isna().all() and g["value"].isna().all()


def test_the_committed_gates_load_and_unknown_ids_are_refused(tmp_path):
    assert [g["id"] for g in gates.load_gates()["gates"]] == [
        "loss_below_unigram", "retrieval_above_chance", "zero_shot_above_majority"]
    bad = tmp_path / "g.yaml"
    bad.write_text("model: big-w512\ngates:\n  - {id: nope, criterion: x}\n")
    with pytest.raises(ConfigError, match="valid choices: loss_below_unigram"):
        gates.load_gates(bad)


def test_published_gates_match_the_published_results():
    from xlrepro.results import results_dir
    folder = results_dir("liu2020")
    published = pd.read_csv(folder / "gates.csv")
    again = gates.read_gates(folder)
    pd.testing.assert_frame_equal(published, again, check_dtype=False)
    assert published["passed"].all()  # the run the book shows passed every gate fixed before it
