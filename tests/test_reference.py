"""The transcribed paper numbers: a few cells checked by hand against the paper texts."""
import math

import pandas as pd
import pytest

from xlrepro.papers import papers
from xlrepro.reference import paper_numbers, tables


def cell(df, experiment, metric, **where):
    sel = df[(df["experiment"] == experiment) & (df["metric"] == metric)]
    for k, v in where.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, (experiment, metric, where, sel)
    return sel.iloc[0]


def test_papers_and_tables():
    assert list(papers("paper")) == ["dufter2020", "wu2019", "k2020", "liu2020"]  # the papers, in book order
    assert set(tables("dufter2020")) == {"Table 1", "Table 2", "Table 3", "Table 4", "Table 5",
                                         "Table 6", "Table 10"}
    assert {"Table 2", "Table 3", "Table 4", "Table 5", "Table 6"} <= set(tables("wu2019"))


def test_dufter_table1_cells():
    t1 = paper_numbers("dufter2020", "Table 1")
    r = cell(t1, "0", "retr_l8")
    assert (r["mean"], r["std"]) == (0.97, 0.01)
    r = cell(t1, "0", "ppl_dev")  # printed "217 07.8"
    assert (r["mean"], r["std"]) == (217, 7.8)
    r = cell(t1, "0", "ppl_train")  # printed "9 00.2"
    assert (r["mean"], r["std"]) == (9, 0.2)
    r = cell(t1, "0", "mu")
    assert r["mean"] == 0.70 and math.isnan(r["std"])
    r = cell(t1, "8", "mu")
    assert r["mean"] == 0.12
    r = cell(t1, "18", "ppl_dev")  # "4128 42.7"
    assert (r["mean"], r["std"]) == (4128, 42.7)
    r = cell(t1, "30", "retr_l0")  # knn-replace ".31 .08"
    assert (r["mean"], r["std"]) == (0.31, 0.08)
    assert list(dict.fromkeys(t1["experiment"])) == [
        "0", "1", "2", "4", "5", "6", "7", "8", "15", "16", "17", "3", "9", "18", "19", "30"]
    # every model has the 9 metrics once
    assert (t1.groupby("experiment").size() == 9).all()
    assert set(t1["metric"]) == {"mu", "align_l0", "retr_l0", "trans_l0", "align_l8", "retr_l8",
                                 "trans_l8", "ppl_train", "ppl_dev"}
    assert t1["epochs"].isna().all()


def test_dufter_table2_and_table_name_forms():
    t2 = paper_numbers("dufter2020", "Table 2")
    assert cell(t2, "21b", "mu")["mean"] == 0.07
    assert cell(t2, "21", "ppl_dev")["mean"] == 383
    assert t2["std"].isna().all()
    pd.testing.assert_frame_equal(t2, paper_numbers("dufter2020", "table2"))
    pd.testing.assert_frame_equal(t2, paper_numbers("dufter2020", "2"))


def test_dufter_table10_epochs():
    t10 = paper_numbers("dufter2020", "Table 10")
    r = cell(t10, "17", "ppl_dev", epochs=250)  # "1111 30.7"
    assert (r["mean"], r["std"]) == (1111, 30.7)
    assert cell(t10, "0", "ppl_train", epochs=100)["std"] == 0.22  # "9 00.22"
    assert sorted(t10["epochs"].unique().tolist()) == [100, 250]


def test_dufter_table3_xnli_and_others():
    t3 = paper_numbers("dufter2020", "Table 3")
    r = cell(t3, "30-base", "xnli_hi")
    assert (r["mean"], r["std"]) == (0.54, 0.00)
    assert cell(t3, "0-base", "xnli_de")["mean"] == 0.57
    assert cell(t3, "mBERT", "xnli_en")["mean"] == 0.81
    assert list(dict.fromkeys(t3["experiment"])) == ["0-base", "3-base", "8-base", "30-base", "mBERT"]
    t6 = paper_numbers("dufter2020", "Table 6")
    assert cell(t6, "mBERT", "parameters_millions")["mean"] == 178
    t5 = paper_numbers("dufter2020", "Table 5")
    assert cell(t5, "small-bible", "runtime_minutes")["mean"] == 35


def test_wu_xnli_zero_shot_mbert():
    t3 = paper_numbers("wu2019", "Table 3")
    z = t3[t3["experiment"] == "mBERT/zero-shot"].set_index("language")["mean"]
    assert z["en"] == 82.1 and z["de"] == 71.1 and z["sw"] == 50.4 and z["avg"] == 66.3
    assert len(z) == 16  # 15 languages + average
    assert abs(z.drop("avg").mean() - z["avg"]) < 0.05
    assert (t3["std"].isna()).all()


def test_wu_other_tables():
    mldoc = paper_numbers("wu2019", "Table 2")
    assert cell(mldoc, "mBERT/zero-shot", "accuracy", language="ja")["mean"] == 56.5
    ner = paper_numbers("wu2019", "Table 4")
    assert cell(ner, "mBERT/zero-shot", "f1", language="de")["mean"] == 69.56
    # "-" cells are skipped, not guessed
    assert ner[(ner["experiment"] == "Xie et al. (2018)/zero-shot") & (ner["language"] == "en")].empty
    parse = paper_numbers("wu2019", "Table 6")
    r = cell(parse, "mBERT/zero-shot", "las", language="no")  # "no" stays a language code
    assert r["mean"] == 68.9


def test_unknown_paper_or_table_names_choices():
    with pytest.raises(ValueError, match="dufter2020, wu2019"):
        paper_numbers("devlin2019")
    with pytest.raises(ValueError, match="Table 1"):
        paper_numbers("dufter2020", "Table 99")
