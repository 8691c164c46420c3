"""Dufter & Schütze claims: the numbers a claims.yaml line takes from elsewhere in the repository are those of the
code and data it names, and the knn-replace chapter's claims read what its notebook passes."""
from pathlib import Path

import pandas as pd
import pytest

from xlrepro import claims as C
from xlrepro.health import assess, load_rules
from xlrepro.papers import get_paper
from xlrepro.papers.dufter2020 import knn_chapter, word_order
from xlrepro.papers.dufter2020.config import load_chapter
from xlrepro.papers.wu2019.overlap_scope import shared_script_languages
from xlrepro.results import read_csv
from xlrepro.verdicts import chapter_frames

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "book" / "results" / "dufter2020"
CLAIMS = {c["id"]: c for c in C.load_claims("dufter2020")}
FILE = C.load_claims_file("dufter2020")


def _selectors(test):
    if test["kind"] == "all":
        return [s for p in test["parts"] for s in _selectors(p)]
    if test["kind"] == "each":
        return _selectors(test["test"])
    return [test[k] for k in ("left", "right", "value", "target") if isinstance(test.get(k), dict)]


def test_learned_english_preconditions_use_the_chapters_margin_and_the_recorded_majority_class():
    pre = {k: v for k, v in FILE["preconditions"].items() if k.startswith("learned_english_")}
    assert pre
    for name, p in pre.items():
        model = name.removeprefix("learned_english_")
        t = p["test"]
        assert p["artifact"] == "table3" and t["kind"] == "greater"
        assert t["margin"] == knn_chapter.TABLE3_LEARNED_MARGIN
        assert t["left"] == {"experiment": model, "metric": "accuracy", "language": "en"}
        assert t["right"] == {"experiment": model, "metric": "majority", "language": "en"}


def test_every_table3_claim_requires_that_the_models_it_compares_learned_english():
    table3 = [c for c in CLAIMS.values() if c.get("artifact") == "table3"]
    assert len(table3) == 4
    for c in table3:
        models = {str(s["experiment"]) for s in _selectors(c["test"])}
        required = {p["name"] for p in c["requires"]}
        assert {f"learned_english_{m}" for m in models} <= required, c["id"]


def test_the_diverged_rule_fails_only_model_0_seed_0_of_the_published_grid():
    health = assess(load_rules("dufter2020"), C.read_results(RESULTS))
    failed = health[health.status == "failed"]
    assert list(zip(failed.experiment, failed.seed)) == [("0", 0)]
    assert set(health.rule) == {"diverged", "diverged_nonparallel", "diverged_long"}


def test_word_order_within_script_part_reads_wu_and_dredzes_script_split():
    same_script = shared_script_languages(read_csv(ROOT / "book/results/wu2019/overlap.csv"))
    test = CLAIMS["word_order_correlates"]["test"]
    within = [s for s in _selectors(test) if "language" in s]
    assert within and all(sorted(map(str, s["language"])) == same_script for s in within)


def test_knn_replace_claims_read_what_the_chapter_notebook_passes():
    """The notebook's claims cell passes the run's frames (Table 1 and Figure 7 of models 0 and 30, Table 10, the
    neighbour table, table3.csv, Table 4 through word_order.claim_frame); `xlrepro verdicts` reads the folder's CSVs.
    Both give the same verdicts."""
    folder = chapter_frames(get_paper("dufter2020"), "knn_replace", RESULTS)
    ch = load_chapter("dufter2020")
    t1 = folder["table1"]
    notebook = {"table1": t1[t1.experiment.astype(str).isin(ch.tables["fig7"])], "fig7": folder["fig7"],
                "table10": folder["table10"], "knn_table": folder["knn_table"],
                "table3": knn_chapter.table3_results(RESULTS),
                "table4": word_order.claim_frame(read_csv(RESULTS / "table4.csv"))}
    a = C.claims_table("dufter2020", "knn_replace", {k: v for k, v in notebook.items() if len(v)})
    b = C.claims_table("dufter2020", "knn_replace", dict(folder), health=assess(load_rules("dufter2020"), folder))
    pd.testing.assert_series_equal(a["verdict"], b["verdict"])
    assert list(a["evidence"]) == list(b["evidence"])


def test_every_table3_claim_requires_that_the_models_it_compares_left_the_unigram_level_in_pretraining():
    table3 = [c for c in CLAIMS.values() if c.get("artifact") == "table3"]
    for c in table3:
        models = {str(s["experiment"]) for s in _selectors(c["test"])}
        assert {f"pretrained_{m}" for m in models} <= {p["name"] for p in c["requires"]}, c["id"]
    for m in ("0", "3", "8", "30"):
        assert "(declared after the run)" in FILE["preconditions"][f"pretrained_{m}"]["says"]
        t = FILE["preconditions"][f"pretrained_{m}"]["test"]
        assert t["kind"] == "greater" and t["margin"] == 2.0 and t["noise"] == "2se"
        assert t["left"] == {"experiment": m, "metric": "unigram_entropy", "language": "all"}
        assert t["right"] == {"experiment": m, "metric": "pretrain_loss", "language": "all"}
