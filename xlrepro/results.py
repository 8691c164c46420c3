"""The results contract of the book: tidy long CSVs, written atomically, read back with string IDs.

Every experiment writes ``book/results/<paper>/<artifact>.csv`` with the columns

    experiment (str, the paper's model ID: "0", "21b"), seed, metric, value
    [+ optional layer, step, language]

one row per (experiment, seed, metric[, layer, step, language]). Notebooks read these files,
`summarise` them over seeds and put them `side_by_side` with the paper's numbers
(:func:`xlrepro.reference.paper_numbers`). Claims and verdicts go through `write_claims`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

from .atomic import atomic_open
from .paths import repo_root

REQUIRED = ("experiment", "seed", "metric", "value")
OPTIONAL = ("layer", "step", "language")
# inconclusive: the experiment cannot decide the claim (a precondition failed, a null model passes the test too, or
# the run has fewer seeds than the test needs); pending: the run a claim reads has not been made yet
VERDICTS = ("reproduced", "partly", "not reproduced", "inconclusive", "not testable offline", "pending")
# claims.csv: the paper's claim, where the paper makes it, the test (xlrepro.claims), our numbers, the verdict
CLAIM_COLUMNS = ("claim", "section", "criterion", "evidence", "verdict")
MISSING = "–"  # en dash: shown where a number is missing


# ----------------------------------------------------------------------------- paths


def results_dir(paper: str, root: str | os.PathLike | None = None) -> Path:
    """``<repo root>/book/results/<paper>``; `root` overrides the search done by `repo_root`."""
    if not paper or os.sep in paper or (os.altsep and os.altsep in paper) or paper in (".", ".."):
        raise ValueError(f"paper must be a plain folder name (a paper's or a chapter folder's); got {paper!r}")
    base = Path(root).expanduser().resolve() if root is not None else repo_root()
    return base / "book" / "results" / paper


def check_long(df: pd.DataFrame) -> None:
    """Raise ValueError unless `df` follows the contract (required columns, no missing IDs)."""
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ValueError(
            f"results frame lacks columns {missing}; required: {', '.join(REQUIRED)}"
            f" (optional: {', '.join(OPTIONAL)})")
    if df["experiment"].isna().any():
        raise ValueError("results frame has rows without an experiment ID")


def duplicate_key(df: pd.DataFrame) -> dict | None:
    """The key of the first row whose key an earlier row has, as a dict; None where every key is unique.

    A row's key is every column but `value`: the contract's (experiment, seed, metric[, layer, step, language])
    and any column a file adds to tell its rows apart (e.g. K et al.'s `task`)."""
    check_long(df)
    keys = [c for c in df.columns if c != "value"]
    dup = df.duplicated(subset=keys)
    return df.loc[dup.idxmax(), keys].to_dict() if dup.any() else None


def write_csv(df: pd.DataFrame, path: str | os.PathLike, *, check: bool = True) -> Path:
    """Write a results frame to `path` atomically (temp file in the same folder, fsync, os.replace).

    Parent folders are created. `experiment` is always written as a string. With `check` (default)
    the frame must have the contract's columns (see `REQUIRED`). Returns the path written.
    """
    if check:
        check_long(df)
    out = df.copy()
    if "experiment" in out.columns:
        out["experiment"] = out["experiment"].astype(str)
    path = Path(path)
    with atomic_open(path) as f:
        out.to_csv(f, index=False)
    return path


def read_csv(path: str | os.PathLike) -> pd.DataFrame:
    """Read a results CSV; `experiment` (and `metric`, `language`) come back as strings, so "0"
    stays "0" and "21b" stays "21b"; only empty cells are missing values."""
    text_cols = {c: str for c in ("experiment", "metric", "language")}
    df = pd.read_csv(path, dtype=text_cols, keep_default_na=False, na_values=[""])
    if "experiment" in df.columns:
        df["experiment"] = df["experiment"].astype(str)
    return df


# ----------------------------------------------------------------------------- summaries


def _keys(df: pd.DataFrame) -> list[str]:
    return ["experiment", "metric"] + [c for c in OPTIONAL if c in df.columns]


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and std (ddof=1; NaN for a single seed) of `value` over seeds, per (experiment, metric
    [, layer, step, language]), with `n` the number of seeds that have a value.

    Groups keep the order of first appearance. Two rows for the same seed and key raise ValueError.
    """
    check_long(df)
    keys = _keys(df)
    dup = df.duplicated(subset=keys + ["seed"], keep=False)
    if dup.any():
        raise ValueError(f"{int(dup.sum())} rows repeat the same seed for the same {keys}; "
                         f"first: {df[dup].iloc[0].to_dict()}")
    work = df.copy()
    work["experiment"] = work["experiment"].astype(str)
    work["value"] = pd.to_numeric(work["value"])
    g = work.groupby(keys, sort=False, dropna=False)["value"]
    out = g.agg(mean="mean", std="std", n="count").reset_index()  # pandas std: ddof=1
    out["n"] = out["n"].astype(int)
    return out


# ----------------------------------------------------------------------------- side by side


def fmt(mean: float | None, std: float | None = None, digits: int = 2) -> str:
    """'0.97 ± 0.01'; the mean alone where std is missing; '–' where the mean is missing."""
    if mean is None or pd.isna(mean):
        return MISSING
    if std is None or pd.isna(std):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def _lookup(df: pd.DataFrame, what: str) -> dict[tuple[str, str], tuple[float, float]]:
    """(experiment, metric) -> (mean, std); raises if a pair is ambiguous."""
    df = df.copy()
    df["experiment"] = df["experiment"].astype(str)
    dup = df.duplicated(subset=["experiment", "metric"], keep=False)
    if dup.any():
        first = df[dup].iloc[0]
        raise ValueError(
            f"{what} has several rows for experiment {first['experiment']!r}, metric "
            f"{first['metric']!r}; filter it first (e.g. one table, epochs, layer or language)")
    std = df["std"] if "std" in df.columns else pd.Series(float("nan"), index=df.index)
    return {(e, m): (mu, sd) for e, m, mu, sd in zip(df["experiment"], df["metric"], df["mean"], std)}


def side_by_side(ours_long: pd.DataFrame, paper_long: pd.DataFrame, experiments: Sequence,
                 metrics: Sequence[str], *, formatted: bool = True, digits: int = 2) -> pd.DataFrame:
    """One row per experiment (in the given order) with, per metric, our result next to the paper's.

    `ours_long` is a results frame (experiment, seed, metric, value: summarised here) or an
    already summarised one (with `mean`, `std`); `paper_long` is e.g. ``paper_numbers(p, table)``.
    Each (experiment, metric) must be unique in both after summarising, else ValueError.

    formatted=True: columns ``experiment``, then ``<metric> ours`` and ``<metric> paper`` as text
    "mean ± std" ('–' where missing). formatted=False: the raw numbers, columns
    ``<metric> ours mean``, ``<metric> ours std``, ``<metric> ours n``, ``<metric> paper mean``,
    ``<metric> paper std`` (NaN where missing).
    """
    ours = summarise(ours_long) if "value" in ours_long.columns else ours_long
    ours_map = _lookup(ours, "our results")
    n_map = {}
    if "n" in ours.columns:
        n_map = {(str(e), m): n for e, m, n in zip(ours["experiment"], ours["metric"], ours["n"])}
    paper_map = _lookup(paper_long, "the paper table")
    nan = float("nan")
    rows = []
    for exp in experiments:
        exp = str(exp)
        row: dict[str, object] = {"experiment": exp}
        for m in metrics:
            o_mean, o_std = ours_map.get((exp, m), (nan, nan))
            p_mean, p_std = paper_map.get((exp, m), (nan, nan))
            if formatted:
                row[f"{m} ours"] = fmt(o_mean, o_std, digits)
                row[f"{m} paper"] = fmt(p_mean, p_std, digits)
            else:
                row[f"{m} ours mean"] = o_mean
                row[f"{m} ours std"] = o_std
                row[f"{m} ours n"] = n_map.get((exp, m), 0)
                row[f"{m} paper mean"] = p_mean
                row[f"{m} paper std"] = p_std
        rows.append(row)
    out = pd.DataFrame(rows)
    out["experiment"] = out["experiment"].astype(str)
    return out


# ----------------------------------------------------------------------------- claims


def write_claims(rows: Iterable[Mapping[str, object]], path: str | os.PathLike) -> Path:
    """Write claim rows (dicts with every key of CLAIM_COLUMNS) to a CSV atomically.

    `verdict` must be one of VERDICTS, else ValueError naming them. Extra keys become extra columns.
    """
    rows = [dict(r) for r in rows]
    for i, r in enumerate(rows):
        missing = [k for k in CLAIM_COLUMNS if k not in r]
        if missing:
            raise ValueError(f"claim row {i} lacks {missing}; each row needs {', '.join(CLAIM_COLUMNS)}")
        if r["verdict"] not in VERDICTS:
            raise ValueError(f"claim row {i}: unknown verdict {r['verdict']!r}; "
                             f"valid choices: {', '.join(map(repr, VERDICTS))}")
    extra = [k for r in rows for k in r if k not in CLAIM_COLUMNS]
    columns = list(CLAIM_COLUMNS) + list(dict.fromkeys(extra))
    df = pd.DataFrame(rows, columns=columns)
    path = Path(path)
    with atomic_open(path) as f:
        df.to_csv(f, index=False)
    return path


def read_claims(path: str | os.PathLike) -> pd.DataFrame:
    """Read a claims CSV written by `write_claims`."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


# ----------------------------------------------------------------------------- summaries of one model
def stats(df: pd.DataFrame, exp: str, metric: str) -> tuple[float, float]:
    """Mean and std over seeds of one (experiment, metric) of a long results frame."""
    v = df[(df["experiment"] == str(exp)) & (df["metric"] == metric)]["value"]
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else float("nan")


def published_blockers(*, publish: bool, differing: Sequence[str], missing: Sequence[str], where: str) -> list[str]:
    """Why a chapter cannot be rendered from its published results: not the published run (`publish` False), a
    parameter off the published run's default (`differing`), a published file missing (`missing`, from `where`)."""
    blockers = [] if publish else ["publish=False (only the published run is rendered from its results)"]
    if differing:
        blockers.append(f"parameters differ from the published run's: {', '.join(differing)}")
    if missing:
        blockers.append(f"no published {', '.join(missing)} in {where}")
    return blockers


def published_or(source: str, chapter: str, blockers: Sequence[str], fallback: str) -> tuple[str, str] | None:
    """The part of a chapter's source rule every paper shares: "published" asked for is granted only without
    `blockers` (else a ConfigError naming them and `fallback`, the paper's source that reads or trains the runs);
    "auto" with blockers falls back. None: "auto" without blockers, for the paper's own remaining checks."""
    from .config import ConfigError
    if source == "published":
        if blockers:
            raise ConfigError(f"source='published' renders {chapter} from the published results only for the "
                              f"published run at its defaults; here: {'; '.join(blockers)}. Use source='{fallback}' "
                              f"(or 'auto')")
        return "published", "source='published'"
    if blockers:
        return fallback, "; ".join(blockers)
    return None
