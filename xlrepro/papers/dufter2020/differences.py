"""Where we differ from Dufter & Schütze, and why: every large gap between our numbers and the paper's, with its cause.

`differences` lists each (experiment, metric) of our long results frame whose mean over seeds lies more than
`k` (2) standard deviations from the paper's mean; the standard deviation is that of our seeds, or, where ours is
missing (one seed) or 0, the larger of ours and the paper's. Metrics the paper does not give and experiments we
have not trained are skipped. Each listed gap gets the text of every known cause whose patterns match it
(``differences.yaml``, read through `xlrepro.config.from_dict`, which rejects unknown keys), or "cause not known".
`differences_markdown` renders the list for a chapter.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from xlrepro.config import ConfigError, from_dict
from xlrepro.results import MISSING, fmt

UNKNOWN = "cause not known"
# Half a unit of the paper's last printed digit: Table 1 prints fractions with two decimals (".97") and perplexities
# as integers ("217"), so a gap within these bounds may be the paper's rounding alone and is not listed.
PAPER_ROUNDING = {"ppl_*": 0.5, "*": 0.005}
COLUMNS = ("experiment", "metric", "ours_mean", "ours_std", "seeds", "paper_mean", "paper_std", "gap", "spread",
           "gap_in_std", "causes", "cause")


@dataclass(frozen=True)
class Cause:
    id: str = field(metadata={"help": "a short name of the cause, unique in the file"})
    experiments: tuple[str, ...] = field(metadata={"help": "model IDs it applies to; shell patterns ('*', '1?')"})
    metrics: tuple[str, ...] = field(metadata={"help": "metrics it applies to; shell patterns ('ppl_*', '*')"})
    text: str = field(metadata={"help": "one or two sentences: what differs and why it moves the number"})

    def applies(self, experiment: str, metric: str) -> bool:
        return (any(fnmatch.fnmatchcase(str(experiment), p) for p in self.experiments)
                and any(fnmatch.fnmatchcase(metric, p) for p in self.metrics))


@dataclass(frozen=True)
class Causes:
    causes: tuple[Cause, ...] = field(metadata={"help": "the known causes, in the order their texts are joined"})


def parse_causes(raw, where: str = "differences.yaml") -> tuple[Cause, ...]:
    """Causes from a parsed YAML mapping; unknown or missing keys, empty pattern lists and repeated ids raise
    ConfigError (a ValueError) naming the valid keys."""
    causes = from_dict(Causes, raw, where).causes
    for k, c in enumerate(causes):
        for name in ("experiments", "metrics"):
            patterns = getattr(c, name)
            if isinstance(patterns, str) or not patterns or not all(isinstance(p, str) and p for p in patterns):
                raise ConfigError(f"{where}.causes[{k}] ({c.id}): {name} must be a non-empty list of patterns "
                                  f"such as ['*'] or ['0', '15']; got {patterns!r}")
        if not isinstance(c.text, str) or not c.text.strip():
            raise ConfigError(f"{where}.causes[{k}] ({c.id}): text must be one or two sentences; got {c.text!r}")
    ids = [c.id for c in causes]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ConfigError(f"{where}: cause ids must be unique; repeated: {', '.join(repeated)}")
    return causes


def load_causes(path: str | Path | None = None) -> tuple[Cause, ...]:
    """The known causes: ``differences.yaml`` of this package, or the YAML file at `path`."""
    if path is None:
        text = resources.files(__package__).joinpath("differences.yaml").read_text(encoding="utf-8")
        return parse_causes(yaml.safe_load(text))
    path = Path(path)
    return parse_causes(yaml.safe_load(path.read_text(encoding="utf-8")), path.name)


def _check_frame(df: pd.DataFrame, what: str, columns: tuple[str, ...]) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what} must be a pandas DataFrame with columns {', '.join(columns)}; got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} lacks columns {', '.join(missing)}; expected {', '.join(columns)} "
                         f"(has {', '.join(map(str, df.columns))})")
    df = df.copy()
    df["experiment"] = df["experiment"].astype(str)
    return df


def final_values(curves: pd.DataFrame) -> pd.DataFrame:
    """A long curves frame (experiment, seed, step, metric, value) cut to each model's last checkpoint."""
    curves = _check_frame(curves, "curves", ("experiment", "seed", "step", "metric", "value"))
    last = curves.groupby(["experiment", "seed"])["step"].transform("max")
    return curves[curves["step"] == last].drop(columns="step").reset_index(drop=True)


def _rounding(metric: str, rounding) -> float:
    if not isinstance(rounding, dict):
        return float(rounding)
    return next((float(v) for p, v in rounding.items() if fnmatch.fnmatchcase(metric, p)), 0.0)


def differences(ours: pd.DataFrame, paper: pd.DataFrame, causes: tuple[Cause, ...] | None = None,
                k: float = 2.0, rounding: float | dict[str, float] | None = None) -> pd.DataFrame:
    """Every (experiment, metric) where |our mean - the paper's mean| > k x spread, largest gap (in spreads) first.

    ours: long frame, columns experiment, seed, metric, value (one row per model and metric; a ``step`` column,
    as in a curves frame, is cut to each model's last checkpoint first). paper: columns experiment, metric, mean,
    std (`xlrepro.reference.paper_numbers`). spread = our seeds' std (ddof 1); where that is missing or 0, the
    larger of it and the paper's std (0 where neither exists, so any gap is listed). A gap no larger than the
    paper's rounding (`rounding`: one number, or metric pattern -> number, first match wins; default
    `PAPER_ROUNDING`) is not listed either. causes: default
    ``differences.yaml``. Returns the columns of `COLUMNS`; ``causes`` holds the matched ids (";"-joined),
    ``cause`` their texts joined, or "cause not known".
    """
    if not np.isfinite(k) or k <= 0:
        raise ValueError(f"k (the number of standard deviations) must be a positive number; got {k!r}")
    if "step" in getattr(ours, "columns", ()):
        ours = final_values(ours)
    ours = _check_frame(ours, "ours", ("experiment", "seed", "metric", "value"))
    paper = _check_frame(paper, "paper", ("experiment", "metric", "mean", "std"))
    causes = load_causes() if causes is None else tuple(causes)
    rounding = PAPER_ROUNDING if rounding is None else rounding
    if not isinstance(rounding, (int, float, dict)) or isinstance(rounding, bool) or \
            any(not isinstance(v, (int, float)) or v < 0 for v in (rounding.values() if isinstance(rounding, dict)
                                                                  else [rounding])):
        raise ValueError(f"rounding must be a number >= 0 or a mapping of metric patterns to such numbers; "
                         f"got {rounding!r}")
    if paper.duplicated(["experiment", "metric"]).any():
        dup = paper[paper.duplicated(["experiment", "metric"], keep=False)][["experiment", "metric"]]
        raise ValueError(f"paper has several numbers for {dup.drop_duplicates().values.tolist()}; pass one table")

    ours = ours.dropna(subset=["value"])
    agg = (ours.groupby(["experiment", "metric"])["value"]
           .agg(ours_mean="mean", ours_std=lambda v: v.std(ddof=1) if len(v) > 1 else np.nan, seeds="count")
           .reset_index())
    # Inner join: metrics the paper does not give and experiments we have not trained drop out here.
    both = agg.merge(paper[["experiment", "metric", "mean", "std"]].rename(
        columns={"mean": "paper_mean", "std": "paper_std"}), on=["experiment", "metric"], how="inner")
    both = both.dropna(subset=["paper_mean"])
    rows = []
    for r in both.itertuples(index=False):
        gap = r.ours_mean - r.paper_mean
        own = r.ours_std if pd.notna(r.ours_std) else 0.0
        spread = own if own > 0 else max(own, r.paper_std if pd.notna(r.paper_std) else 0.0)
        if not (abs(gap) > k * spread and abs(gap) > _rounding(r.metric, rounding)):
            continue
        matched = [c for c in causes if c.applies(r.experiment, r.metric)]
        rows.append({**r._asdict(), "gap": gap, "spread": spread,
                     "gap_in_std": abs(gap) / spread if spread > 0 else np.inf,
                     "causes": ";".join(c.id for c in matched),
                     "cause": " ".join(c.text.strip() for c in matched) or UNKNOWN})
    out = pd.DataFrame(rows, columns=list(COLUMNS))
    # Largest first: gaps in spreads (metrics differ in scale); ties (e.g. no spread at all) by the absolute gap.
    out["_abs"] = out["gap"].abs()
    return (out.sort_values(["gap_in_std", "_abs", "experiment", "metric"], ascending=[False, False, True, True],
                            kind="stable").drop(columns="_abs").reset_index(drop=True))


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _digits(metric: str, paper_mean: float) -> int:
    """Decimals shown: perplexities of 100 or more as integers (the paper's "217"), lower ones with one decimal
    (train perplexities of 1-16 differ in their first decimal), fractions with two."""
    if metric.startswith("ppl"):
        return 0 if abs(paper_mean) >= 100 else 1
    return 2


def differences_markdown(ours: pd.DataFrame, paper: pd.DataFrame, labels: dict[str, str] | None = None,
                         causes: tuple[Cause, ...] | None = None, k: float = 2.0, names: dict[str, str] | None = None,
                         rounding: float | dict[str, float] | None = None):
    """`differences` as an `IPython.display.Markdown` table: model, metric, ours (mean ± std, seeds), the paper's,
    the gap in standard deviations, the cause. `labels`: experiment -> description (a model is shown as "ID
    description", as in the chapters' tables); `names`: metric -> shown name (default: the chapters' METRIC_NAMES)."""
    from IPython.display import Markdown

    table = differences(ours, paper, causes, k, rounding)
    if table.empty:
        return Markdown(f"No gap to the paper is larger than {k:g} standard deviations of our seeds.")
    if names is None:
        from .report import METRIC_NAMES as names
    labels, names = dict(labels or {}), dict(names)
    lines = ["| model | metric | ours (mean ± std, seeds) | paper | gap in std | cause |", "|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        d = _digits(r.metric, r.paper_mean)
        model = f"{r.experiment} {labels[r.experiment]}" if r.experiment in labels else r.experiment
        ours_text = f"{fmt(r.ours_mean, r.ours_std, d)} ({r.seeds})"
        paper_text = fmt(r.paper_mean, r.paper_std, d)
        size = f"{r.gap_in_std:.1f}" if np.isfinite(r.gap_in_std) else f"{MISSING} (no spread)"
        lines.append("| " + " | ".join(_cell(x) for x in (model, names.get(r.metric, r.metric), ours_text,
                                                          paper_text, size, r.cause)) + " |")
    return Markdown("\n".join(lines))
