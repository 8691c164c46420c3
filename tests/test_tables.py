"""Tables for people: hand-made numbers with known cells."""
import pandas as pd
import pytest

from xlrepro.tables import paired_cell, paired_table, paper_number, p_value, split_columns


def test_paper_number_in_the_papers_style():
    assert paper_number(0.7) == ".70"
    assert paper_number(0.97) == ".97"
    assert paper_number(217.0, 0) == "217"
    assert paper_number(float("nan")) == "–"


def test_paired_cell():
    assert paired_cell(0.594, 0.012, 0.70) == "0.59 ± 0.01 (.70)"
    assert paired_cell(0.594, 0.012, None) == "0.59 ± 0.01"
    assert paired_cell(float("nan"), float("nan"), 0.7) == "– (.70)"


def test_paired_table_names_and_cells():
    ours = pd.DataFrame({"experiment": ["0", "0", "8", "8"], "seed": [0, 1, 0, 1], "metric": ["mu"] * 4,
                         "value": [0.6, 0.62, 0.02, 0.04]})
    paper = pd.DataFrame({"experiment": ["0", "8"], "metric": ["mu", "mu"], "mean": [0.70, 0.12], "std": [0.03, 0.0]})
    t = paired_table(ours, paper, ["0", "8"], ["mu"], {"mu": "µ"})
    assert list(t.columns) == ["µ"] and list(t.index) == ["0", "8"]
    assert t.loc["0", "µ"] == "0.61 ± 0.01 (.70)"
    assert t.loc["8", "µ"] == "0.03 ± 0.01 (.12)"
    with pytest.raises(ValueError, match="metrics: mu"):
        paired_table(ours, paper, ["0"], ["mu"], {"retr_l8": "retrieval"})


def test_split_columns_keeps_every_column_once():
    t = pd.DataFrame([range(7)], columns=list("abcdefg"))
    parts = split_columns(t, 3)
    assert [list(p.columns) for p in parts] == [["a", "b", "c"], ["d", "e", "f"], ["g"]]
    with pytest.raises(ValueError, match="1 or more"):
        split_columns(t, 0)


def test_p_value():
    assert p_value(0.0) == "< 1e-4"
    assert p_value(0.00005) == "< 1e-4"
    assert p_value(0.0123456) == "0.0123"
    assert p_value(0.09) == "0.09"
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        p_value(1.5)
