"""Where we differ from a paper, and why: every large gap between our numbers and the paper's, with its known cause.

`differences` lists each number of our long results frame (one per `keys`: experiment and metric, and e.g. language)
whose mean over seeds lies more than `k` (2) standard deviations from the paper's mean; the standard deviation is
that of our seeds, or, where ours is missing (one seed) or 0, the larger of ours and the paper's. Numbers the paper
does not give and experiments we have not run are skipped. Each listed gap gets the text of every known cause whose
patterns match it (a paper's ``differences.yaml``, read through `xlrepro.config.from_dict`, which rejects unknown
keys), or "cause not known". `differences_markdown` renders the list for a chapter.

A paper keeps its causes in ``xlrepro/papers/<paper>/differences.yaml`` and calls these functions with its own
defaults (its printed rounding, its metric names); nothing here names a paper.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import yaml

from .config import ConfigError, from_dict
from .results import MISSING, fmt

UNKNOWN = "cause not known"
COLUMNS = ("experiment", "metric", "ours_mean", "ours_std", "seeds", "paper_mean", "paper_std", "gap", "spread",
           "gap_in_std", "causes", "cause")
KEYS = ("experiment", "metric")  # what identifies a number, at least; a paper may add e.g. "language"


@dataclass(frozen=True)
class Cause:
    id: str = field(metadata={"help": "a short name of the cause, unique in the file"})
    experiments: tuple[str, ...] = field(metadata={"help": "experiments it applies to; shell patterns ('*', '1?')"})
    metrics: tuple[str, ...] = field(metadata={"help": "metrics it applies to; shell patterns ('ppl_*', '*')"})
    text: str = field(metadata={"help": "one or two sentences: what differs and why it moves the number"})
    languages: tuple[str, ...] = field(default=("*",), metadata={
        "help": "languages it applies to, where numbers have one; shell patterns (default every language)"})

    def applies(self, experiment: str, metric: str, language: str | None = None) -> bool:
        return (any(fnmatch.fnmatchcase(str(experiment), p) for p in self.experiments)
                and any(fnmatch.fnmatchcase(metric, p) for p in self.metrics)
                and (language is None or any(fnmatch.fnmatchcase(str(language), p) for p in self.languages)))


@dataclass(frozen=True)
class Causes:
    causes: tuple[Cause, ...] = field(metadata={"help": "the known causes, in the order their texts are joined"})


def parse_causes(raw, where: str = "differences.yaml") -> tuple[Cause, ...]:
    """Causes from a parsed YAML mapping; unknown or missing keys, empty pattern lists and repeated ids raise
    ConfigError (a ValueError) naming the valid keys."""
    causes = from_dict(Causes, raw, where).causes
    for k, c in enumerate(causes):
        for name in ("experiments", "metrics", "languages"):
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


def load_causes(source: str | Path) -> tuple[Cause, ...]:
    """The known causes of a YAML file: `source` is a path, or a package's import name (its ``differences.yaml``)."""
    path = Path(source)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise FileNotFoundError(f"no causes file at {path}")
        return parse_causes(yaml.safe_load(path.read_text(encoding="utf-8")), path.name)
    text = resources.files(str(source)).joinpath("differences.yaml").read_text(encoding="utf-8")
    return parse_causes(yaml.safe_load(text), f"{source}/differences.yaml")


def _check_frame(df: pd.DataFrame, what: str, columns: tuple[str, ...]) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what} must be a pandas DataFrame with columns {', '.join(columns)}; got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} lacks columns {', '.join(missing)}; expected {', '.join(columns)} "
                         f"(has {', '.join(map(str, df.columns))})")
    df = df.copy()
    for c in ("experiment", "language"):
        if c in df.columns:
            df[c] = df[c].astype(str)
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


def _check_keys(keys) -> tuple[str, ...]:
    keys = tuple(keys)
    if not set(KEYS) <= set(keys) or len(set(keys)) != len(keys) or not all(isinstance(k, str) for k in keys):
        raise ValueError(f"keys must name distinct columns and include {', '.join(KEYS)} (e.g. "
                         f"('experiment', 'metric', 'language')); got {keys!r}")
    return keys


def differences(ours: pd.DataFrame, paper: pd.DataFrame, causes: tuple[Cause, ...], k: float = 2.0,
                rounding: float | dict[str, float] = 0.0, keys=KEYS) -> pd.DataFrame:
    """Every number (one per `keys`) where |our mean - the paper's mean| > k x spread, largest gap (in spreads) first.

    ours: long frame, columns `keys`, seed, value (one row per model and number; a ``step`` column, as in a curves
    frame, is cut to each model's last checkpoint first). paper: columns `keys`, mean, std
    (`xlrepro.reference.paper_numbers`). spread = our seeds' std (ddof 1); where that is missing or 0, the larger of
    it and the paper's std (0 where neither exists, so any gap is listed). A gap no larger than the paper's rounding
    (`rounding`: one number, or metric pattern -> number, first match wins) is not listed either. Returns the
    columns of `COLUMNS` (plus the extra keys); ``causes`` holds the matched ids (";"-joined), ``cause`` their texts
    joined, or "cause not known".
    """
    keys = _check_keys(keys)
    if not isinstance(k, (int, float)) or not np.isfinite(k) or k <= 0:
        raise ValueError(f"k (the number of standard deviations) must be a positive number; got {k!r}")
    if not isinstance(rounding, (int, float, dict)) or isinstance(rounding, bool) or \
            any(not isinstance(v, (int, float)) or v < 0 for v in (rounding.values() if isinstance(rounding, dict)
                                                                  else [rounding])):
        raise ValueError(f"rounding must be a number >= 0 or a mapping of metric patterns to such numbers; "
                         f"got {rounding!r}")
    if "step" in getattr(ours, "columns", ()):
        ours = final_values(ours)
    ours = _check_frame(ours, "ours", (*keys, "seed", "value"))
    paper = _check_frame(paper, "paper", (*keys, "mean", "std"))
    causes = tuple(causes)
    if paper.duplicated(list(keys)).any():
        dup = paper[paper.duplicated(list(keys), keep=False)][list(keys)]
        raise ValueError(f"paper has several numbers for {dup.drop_duplicates().values.tolist()}; pass one table")

    extra = [c for c in keys if c not in KEYS]
    ours = ours.dropna(subset=["value"])
    agg = (ours.groupby(list(keys))["value"]
           .agg(ours_mean="mean", ours_std=lambda v: v.std(ddof=1) if len(v) > 1 else np.nan, seeds="count")
           .reset_index())
    # Inner join: numbers the paper does not give and experiments we have not run drop out here.
    both = agg.merge(paper[[*keys, "mean", "std"]].rename(columns={"mean": "paper_mean", "std": "paper_std"}),
                     on=list(keys), how="inner")
    both = both.dropna(subset=["paper_mean"])
    rows = []
    for r in both.to_dict("records"):
        gap = r["ours_mean"] - r["paper_mean"]
        own = r["ours_std"] if pd.notna(r["ours_std"]) else 0.0
        spread = own if own > 0 else max(own, r["paper_std"] if pd.notna(r["paper_std"]) else 0.0)
        if not (abs(gap) > k * spread and abs(gap) > _rounding(r["metric"], rounding)):
            continue
        matched = [c for c in causes if c.applies(r["experiment"], r["metric"], r.get("language"))]
        rows.append({**r, "gap": gap, "spread": spread,
                     "gap_in_std": abs(gap) / spread if spread > 0 else np.inf,
                     "causes": ";".join(c.id for c in matched),
                     "cause": " ".join(c.text.strip() for c in matched) or UNKNOWN})
    out = pd.DataFrame(rows, columns=list(COLUMNS) + extra)
    # Largest first: gaps in spreads (metrics differ in scale); ties (e.g. no spread at all) by the absolute gap.
    out["_abs"] = out["gap"].abs()
    return (out.sort_values(["gap_in_std", "_abs", *keys], ascending=[False, False] + [True] * len(keys),
                            kind="stable").drop(columns="_abs").reset_index(drop=True))


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def differences_markdown(ours: pd.DataFrame, paper: pd.DataFrame, causes: tuple[Cause, ...],
                         labels: dict[str, str] | None = None, k: float = 2.0, names: dict[str, str] | None = None,
                         rounding: float | dict[str, float] = 0.0, keys=KEYS,
                         digits: Callable[[str, float], int] = lambda metric, paper_mean: 2,
                         empty: str | None = None, legend: bool = False):
    """`differences` as an `IPython.display.Markdown` table: model, metric (and each extra key, e.g. language), ours
    (mean ± std, seeds), the paper's, the gap in standard deviations, the cause. `labels`: experiment -> description
    (a model is shown as "ID description"); `names`: metric -> shown name; `digits(metric, paper_mean)`: decimals
    shown; `empty`: the text when no gap is listed (default: says that none exceeds k standard deviations);
    `legend`: the cause column holds the causes' ids and their texts follow the table once (for long lists whose
    rows share causes)."""
    from IPython.display import Markdown

    keys = _check_keys(keys)
    table = differences(ours, paper, causes, k, rounding, keys)
    if table.empty:
        return Markdown(empty or f"No gap to the paper is larger than {k:g} standard deviations of our seeds.")
    labels, names = dict(labels or {}), dict(names or {})
    extra = [c for c in keys if c not in KEYS]
    head = ["model", "metric", *extra, "ours (mean ± std, seeds)", "paper", "gap in std", "cause"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table.to_dict("records"):
        d = digits(r["metric"], r["paper_mean"])
        model = f"{r['experiment']} {labels[r['experiment']]}" if r["experiment"] in labels else r["experiment"]
        ours_text = f"{fmt(r['ours_mean'], r['ours_std'], d)} ({r['seeds']})"
        paper_text = fmt(r["paper_mean"], r["paper_std"], d)
        size = f"{r['gap_in_std']:.1f}" if np.isfinite(r["gap_in_std"]) else f"{MISSING} (no spread)"
        cause = (", ".join(r["causes"].split(";")) if r["causes"] else UNKNOWN) if legend else r["cause"]
        cells = [model, names.get(r["metric"], r["metric"]), *(r[c] for c in extra), ours_text, paper_text, size, cause]
        lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    if legend:
        used = list(dict.fromkeys(i for ids in table["causes"] if ids for i in ids.split(";")))
        texts = {c.id: c.text.strip() for c in causes}
        lines += ["", *(f"- **{i}**: {_cell(texts[i])}" for i in used)]
    return Markdown("\n".join(lines))
