"""The browser test's text checks (tests/book_checks.py) on hand-made strings."""
from .book_checks import glued_numbers, raw_table_markup


def test_raw_table_markup_finds_a_table_left_as_text():
    # what the page showed: the whole Markdown table as one paragraph, "---" typeset as an em dash
    paragraph = "| model | metric | gap in std | |—|—|—| | 0 | µ | 3.1 |"
    assert raw_table_markup(paragraph) == ["|—|—|"]
    lines = "| model | metric |\n|---|---|\n| 0 | µ |"
    assert raw_table_markup(lines) == ["|---|---|", "| model | metric |", "| 0 | µ |"]
    assert raw_table_markup("| :-- | --: |") == ["| :-- | --: |"]


def test_raw_table_markup_leaves_prose_tables_and_code_alone():
    rendered = "model\tmetric\tgap in std\n0\tµ\t3.1"  # a rendered table's text: cells apart by tabs
    assert raw_table_markup(rendered) == []
    for text in ["the absolute gap |x − y| over |y|", "xlrepro train k2020 | tee log", "p < 0.05 — two-sided – ok",
                 "a | b", "|r| ≥ 0.3 and |ρ| < 0.1"]:
        assert raw_table_markup(text) == [], text


def test_glued_numbers_finds_numbers_without_a_separator():
    assert glued_numbers("en 89.247.547.045.4") == ["89.247.547.045.4"]
    assert glued_numbers("12541303923 1.6000001.60e-03") == ["1.6000001.60"]
    assert glued_numbers("(0.59.123.5)") == ["0.59.123.5"]


def test_glued_numbers_leaves_versions_sections_and_decimals_alone():
    for text in ["torch 2.13.0", "Python 3.11.7", "§3.2.1", "2026.11.26", "jupyter-book 1.0.4.post1",
                 "89.2 47.5", "0.875", "1,234.56", "v1.100.2a", "12541 303923"]:
        assert glued_numbers(text) == [], text
