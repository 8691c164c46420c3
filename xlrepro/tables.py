"""Tables for people: our number and the paper's in one cell, human column names, wide tables split, p-values.

`paired_table` builds on `xlrepro.results.side_by_side` (the same lookup and checks) and writes each metric as one
cell, ``0.59 ± 0.01 (.70)``: ours (mean ± std over seeds), the paper's in parentheses. `split_columns` cuts a wide
table into several of at most `width` columns that repeat the index, so that none is wider than the page.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from .results import MISSING, fmt, side_by_side


def paper_number(mean: float | None, digits: int = 2) -> str:
    """The paper's style: '.70' for a fraction below 1, '217' or '1.5' otherwise; '–' where missing."""
    if mean is None or pd.isna(mean):
        return MISSING
    text = f"{mean:.{digits}f}"
    if abs(mean) < 1:
        text = text.replace("0.", ".", 1)
    return text.rstrip("0").rstrip(".") if "." in text and abs(mean) >= 10 else text


def paired_cell(o_mean, o_std, p_mean, digits: int = 2) -> str:
    """'0.59 ± 0.01 (.70)': ours, then the paper's in parentheses (left out where the paper has no number)."""
    ours = fmt(o_mean, o_std, digits)
    return ours if p_mean is None or pd.isna(p_mean) else f"{ours} ({paper_number(p_mean, digits)})"


def paired_table(ours_long: pd.DataFrame, paper_long: pd.DataFrame, experiments: Sequence,
                 metrics: Sequence[str], names: Mapping[str, str] | None = None, digits: int = 2) -> pd.DataFrame:
    """One row per experiment, one column per metric (named by `names`, else the metric code), each cell ours with
    the paper's number in parentheses; index: the experiment."""
    raw = side_by_side(ours_long, paper_long, experiments, metrics, formatted=False)
    names = dict(names or {})
    unknown = [m for m in names if m not in metrics]
    if unknown:
        raise ValueError(f"names for metrics not in the table: {unknown}; metrics: {', '.join(metrics)}")
    out = pd.DataFrame({"experiment": raw["experiment"]})
    for m in metrics:
        d = 0 if m.startswith("ppl") else digits
        out[names.get(m, m)] = [paired_cell(o, s, p, d) for o, s, p in
                                zip(raw[f"{m} ours mean"], raw[f"{m} ours std"], raw[f"{m} paper mean"])]
    return out.set_index("experiment")


def split_columns(table: pd.DataFrame, width: int) -> list[pd.DataFrame]:
    """`table` cut into tables of at most `width` columns each (the index repeated in each)."""
    if width < 1:
        raise ValueError(f"width must be 1 or more; got {width}")
    return [table.iloc[:, k:k + width] for k in range(0, table.shape[1], width)] or [table]


def p_value(p: float) -> str:
    """A p-value for print: '< 1e-4' below 0.0001, else 3 significant digits ('0.0123', '0.09')."""
    if p is None or pd.isna(p):
        return MISSING
    if not 0 <= p <= 1:
        raise ValueError(f"a p-value lies in [0, 1]; got {p}")
    return "< 1e-4" if p < 1e-4 else f"{p:.3g}"


def show(table: pd.DataFrame, width: int = 5, caption: str | None = None) -> None:
    """Display `table` in parts of at most `width` columns, every cell whole (no pandas truncation)."""
    from IPython.display import display

    parts = split_columns(table, width)
    with pd.option_context("display.max_columns", None, "display.max_colwidth", None, "display.max_rows", None):
        for k, part in enumerate(parts):
            styler = part.style
            if caption:
                styler = styler.set_caption(caption + (f" ({k + 1}/{len(parts)})" if len(parts) > 1 else ""))
            display(styler)
