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


def fixed(table: pd.DataFrame, digits: int | Mapping[str, int] = 2) -> pd.DataFrame:
    """A copy of `table` whose float columns are text with `digits` decimals (one number for every column, or per
    column name; a column not named keeps its floats), thousands separated, blank where missing: tables of
    measurements print like the prose that cites them (a Styler would show six decimals and 'nan')."""
    out = table.copy()
    for c in out.columns:
        if not pd.api.types.is_float_dtype(out[c]):
            continue
        d = digits.get(c) if isinstance(digits, Mapping) else digits
        if d is not None:
            out[c] = ["" if pd.isna(v) else f"{v:,.{d}f}" for v in out[c]]
    return out


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


def format_p(table: pd.DataFrame, columns: Sequence[str] = ("p",)) -> pd.DataFrame:
    """A copy of `table` with its p-value `columns` written by `p_value` ('< 1e-4', '0.0123')."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"no column {missing} in the table; columns: {', '.join(map(str, table.columns))}")
    out = table.copy()
    for c in columns:
        out[c] = out[c].map(p_value)
    return out


def split_card(table: pd.DataFrame, main: Mapping[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A data card cut in two: the columns a reader needs (`main`, renamed by it, in its order) and the rest
    (every other column, unchanged), both with the table's index."""
    missing = [c for c in main if c not in table.columns]
    if missing:
        raise ValueError(f"no column {missing} in the card; columns: {', '.join(map(str, table.columns))}")
    first = table[list(main)].rename(columns=dict(main))
    rest = table.drop(columns=list(main))
    return first, rest


def _html(table: pd.DataFrame) -> str:
    """A whole table as HTML (no pandas truncation: the Styler renders every row and column)."""
    styler = table.style.format(na_rep=MISSING, precision=2)
    if isinstance(table.index, pd.RangeIndex):  # row numbers say nothing to a reader
        styler = styler.hide(axis="index")
    return styler.to_html()


def details_html(summary: str, tables: Sequence[pd.DataFrame], width: int = 6) -> str:
    """A collapsed HTML block (<details>) holding `tables`, each cut into parts of at most `width` columns."""
    import html

    if not summary:
        raise ValueError("a collapsed block needs a summary line")
    parts = [_html(part) for t in tables for part in split_columns(t, width)]
    return f"<details><summary>{html.escape(summary)}</summary>\n" + "\n".join(parts) + "\n</details>"


def show_card(table: pd.DataFrame, main: Mapping[str, str], summary: str, caption: str | None = None,
              width: int = 6) -> None:
    """Display a data card: the `main` columns as a table, every other column in a collapsed block."""
    from IPython.display import HTML, display

    first, rest = split_card(table, main)
    show(first, width=max(width, first.shape[1]), caption=caption)
    if rest.shape[1]:
        display(HTML(details_html(summary, [rest], width)))


# Machine column names a reader meets in the appendix and the run tables, and what the book calls them.
COLUMN_NAMES = {
    "seconds_per_step": "s per step", "steps_per_second": "steps / s", "tokens_per_second": "tokens / s",
    "mfu": "model FLOP utilisation", "device": "GPU", "ms_per_step": "ms per step",
    "ms_per_model_step": "ms per model-step", "warmup_and_compile_s": "warm-up and compile (s)",
    "peak_gb": "peak memory (GB)", "train_seconds": "training time (s)",
    "wall_seconds_incl_eval": "wall time with evaluation (s)", "within_2_std": "within 2 std",
    "welch_p_below_05": "Welch p < 0.05", "ppl_train": "perplexity, train", "ppl_dev": "perplexity, dev",
    "mu": "µ", "gpus": "GPUs", "experiments": "model IDs", "experiment": "model ID",
}


def readable(table: pd.DataFrame, names: Mapping[str, str] | None = None,
             p_columns: Sequence[str] = ()) -> pd.DataFrame:
    """A copy of `table` with human column and index names (COLUMN_NAMES, updated by `names`; names not listed stay)
    and its `p_columns` written by `p_value`."""
    out = format_p(table, p_columns) if p_columns else table.copy()
    mapping = {**COLUMN_NAMES, **dict(names or {})}
    out = out.rename(columns=lambda c: mapping.get(c, c) if isinstance(c, str) else c)
    out.index.names = [mapping.get(n, n) if isinstance(n, str) else n for n in out.index.names]
    return out
