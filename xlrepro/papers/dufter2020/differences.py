"""Where we differ from Dufter & Schütze, and why: `xlrepro.differences` with this paper's defaults.

The causes are this package's ``differences.yaml``; a gap within the paper's printed rounding (`PAPER_ROUNDING`) is
not listed; perplexities are shown with the paper's digits and metrics with the chapters' names (`METRIC_NAMES`).
"""
from __future__ import annotations

import pandas as pd

from xlrepro import differences as _shared
from xlrepro.differences import UNKNOWN, Cause, final_values, parse_causes  # noqa: F401  (this module's API)

# Half a unit of the paper's last printed digit: Table 1 prints fractions with two decimals (".97") and perplexities
# as integers ("217"), so a gap within these bounds may be the paper's rounding alone and is not listed.
PAPER_ROUNDING = {"ppl_*": 0.5, "*": 0.005}
COLUMNS = _shared.COLUMNS


def load_causes(path=None) -> tuple[Cause, ...]:
    """The known causes: ``differences.yaml`` of this package, or the YAML file at `path`."""
    return _shared.load_causes(__package__ if path is None else path)


def differences(ours: pd.DataFrame, paper: pd.DataFrame, causes: tuple[Cause, ...] | None = None,
                k: float = 2.0, rounding: float | dict[str, float] | None = None) -> pd.DataFrame:
    """`xlrepro.differences.differences` over (experiment, metric), with this paper's causes and rounding."""
    return _shared.differences(ours, paper, load_causes() if causes is None else causes, k,
                               PAPER_ROUNDING if rounding is None else rounding)


def _digits(metric: str, paper_mean: float) -> int:
    """Decimals shown: perplexities of 100 or more as integers (the paper's "217"), lower ones with one decimal
    (train perplexities of 1-16 differ in their first decimal), fractions with two."""
    if metric.startswith("ppl"):
        return 0 if abs(paper_mean) >= 100 else 1
    return 2


def differences_markdown(ours: pd.DataFrame, paper: pd.DataFrame, labels: dict[str, str] | None = None,
                         causes: tuple[Cause, ...] | None = None, k: float = 2.0, names: dict[str, str] | None = None,
                         rounding: float | dict[str, float] | None = None):
    """The chapters' table of gaps: `labels` experiment -> description, `names` metric -> shown name (default the
    chapters' METRIC_NAMES)."""
    if names is None:
        from .report import METRIC_NAMES as names
    return _shared.differences_markdown(ours, paper, load_causes() if causes is None else causes, labels, k, names,
                                        PAPER_ROUNDING if rounding is None else rounding, digits=_digits)
