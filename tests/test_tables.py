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


def test_format_p_writes_small_p_values_as_a_bound():
    from xlrepro.tables import format_p
    t = pd.DataFrame({"measure": ["p_type", "p_token"], "r": [0.61, 0.2], "p": [0.0, 0.0345]})
    out = format_p(t)
    assert list(out["p"]) == ["< 1e-4", "0.0345"]
    assert t["p"].tolist() == [0.0, 0.0345]  # the input is left as it was
    with pytest.raises(ValueError, match="columns: measure, r, p"):
        format_p(t, ["pvalue"])


def test_split_card_keeps_the_readers_columns_in_order_and_the_rest():
    from xlrepro.tables import split_card
    card = pd.DataFrame({"sha256": ["ab", "cd"], "verses": [31102, 7957], "edition_name": ["WEB", "NT"],
                         "bytes": [10, 20]}, index=pd.Index(["en", "ko"], name="lang"))
    first, rest = split_card(card, {"edition_name": "edition", "verses": "verses"})
    assert list(first.columns) == ["edition", "verses"] and first.loc["ko", "verses"] == 7957
    assert list(rest.columns) == ["sha256", "bytes"] and list(rest.index) == ["en", "ko"]
    with pytest.raises(ValueError, match="columns: sha256, verses, edition_name, bytes"):
        split_card(card, {"licence": "licence"})


def test_details_html_is_collapsed_and_holds_every_column():
    from xlrepro.tables import details_html
    wide = pd.DataFrame([range(9)], columns=[f"col{k}" for k in range(9)])
    html = details_html("the other columns", [wide], width=4)
    assert html.startswith("<details><summary>the other columns</summary>") and html.endswith("</details>")
    assert html.count("<table") == 3  # 9 columns in parts of 4, 4 and 1
    assert all(f">col{k}<" in html for k in range(9))
    with pytest.raises(ValueError, match="summary"):
        details_html("", [wide])


def test_show_never_truncates_a_wide_long_table(capsys):
    pytest.importorskip("IPython")
    from xlrepro.tables import show
    shown = []
    import IPython.display
    original = IPython.display.display
    IPython.display.display = lambda obj: shown.append(obj.to_html() if hasattr(obj, "to_html") else obj)
    try:
        with pd.option_context("display.max_columns", 3, "display.max_rows", 3):
            show(pd.DataFrame([[k] * 25 for k in range(80)], columns=[f"l{k}" for k in range(25)]), width=25)
    finally:
        IPython.display.display = original
    assert len(shown) == 1 and "..." not in shown[0] and "…" not in shown[0]
    assert all(f">l{k}<" in shown[0] for k in range(25)) and shown[0].count("<tr>") == 81


def test_readable_names_columns_and_index_and_formats_p():
    from xlrepro.tables import readable
    t = pd.DataFrame({"experiment": ["0", "1"], "ms_per_step": [52.0, 25.1], "welch p": [0.00001, 0.2],
                      "odd_name": [1, 2]}).set_index("experiment")
    out = readable(t, {"odd_name": "odd name"}, p_columns=["welch p"])
    assert list(out.columns) == ["ms per step", "welch p", "odd name"] and out.index.name == "model ID"
    assert list(out["welch p"]) == ["< 1e-4", "0.2"]
    assert list(t.columns) == ["ms_per_step", "welch p", "odd_name"]  # the input is left as it was


def test_fixed_writes_floats_with_their_decimals_and_blanks():
    from xlrepro.tables import fixed
    t = pd.DataFrame({"ms": [48.6400001, float("nan")], "steps": [9100, 22750], "pflop": [739.9333, 13.6],
                      "name": ["a", "b"]})
    out = fixed(t, {"ms": 2, "pflop": 1})
    assert out["ms"].tolist() == ["48.64", ""]
    assert out["pflop"].tolist() == ["739.9", "13.6"]
    assert out["steps"].tolist() == [9100, 22750] and out["name"].tolist() == ["a", "b"]  # not floats: kept
    assert fixed(pd.DataFrame({"s": [1234.5]}), 0)["s"].tolist() == ["1,234"]  # round half to even, separators
