"""Run health: which trained runs failed, by a rule each paper states once, with its reason, in its claims.yaml.

A failed run (a diverged pre-training, a classifier that never left the majority class on its own training
language) is no evidence about the paper: it is left out of every claim's selection of the artifacts it covers, and
the evidence names it (:func:`xlrepro.claims.claims_table`). ``book/results/<paper>/health.csv`` lists every run each
rule read, failed or not, so a reader sees what was left out and why. Nothing here names a paper.

A rule in ``claims.yaml``::

    health:
      - name: diverged                                  # unique within the paper
        reads: {artifact: table1, metric: ppl_train}    # a selector (xlrepro.claims): one number per (experiment, seed)
        kind: above_median                              # RULE_KINDS
        factor: 5
        covers: [table1, fig6, fig7]                    # the artifacts whose rows come from the same runs
        why: "..."                                      # the reason for the rule and its threshold

Kinds: ``above_median`` (failed: value > factor × the median of its experiment's seeds; for losses and
perplexities, where a diverged seed sits far above its siblings), ``at_most`` (failed: value ≤ ``bound``; for an
accuracy that never left the majority class) and ``at_least`` (failed: value ≥ ``bound``; for a loss that never
left its starting level). Instead of a number, ``bound_from`` may name a selector whose mean is the bound (a majority
class the results hold, say), plus ``margin`` (default 0).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

import pandas as pd

from .atomic import atomic_open

RULE_KINDS = ("above_median", "at_most", "at_least")
RULE_KEYS = ("name", "reads", "kind", "factor", "bound", "bound_from", "margin", "covers", "why")
COLUMNS = ("rule", "experiment", "seed", "value", "status", "reason", "covers")
OK, FAILED = "ok", "failed"
FILE = "health.csv"


def check_rule(rule: Mapping, where: str = "health rule") -> None:
    """Raise ValueError (naming the valid choices) for a malformed rule."""
    unknown = [k for k in rule if k not in RULE_KEYS]
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; valid keys: {', '.join(RULE_KEYS)}")
    missing = [k for k in ("name", "reads", "kind", "covers", "why") if k not in rule]
    if missing:
        raise ValueError(f"{where}: lacks {missing}")
    if rule["kind"] not in RULE_KINDS:
        raise ValueError(f"{where}: unknown kind {rule['kind']!r}; valid kinds: {', '.join(RULE_KINDS)}")
    need = "factor" if rule["kind"] == "above_median" else "bound"
    if need == "bound" and isinstance(rule.get("bound_from"), Mapping):
        if "bound" in rule:
            raise ValueError(f"{where}: give 'bound' or 'bound_from', not both")
        if not isinstance(rule.get("margin", 0), (int, float)):
            raise ValueError(f"{where}: 'margin' must be a number")
    elif not isinstance(rule.get(need), (int, float)) or (need == "factor" and rule[need] <= 1):
        raise ValueError(f"{where}: kind {rule['kind']} needs a number '{need}'"
                         + (" greater than 1" if need == "factor" else ""))
    if not isinstance(rule["reads"], Mapping) or "artifact" not in rule["reads"]:
        raise ValueError(f"{where}: 'reads' is a selector with an artifact, e.g. {{artifact: table1, metric: loss}}")
    if not isinstance(rule["covers"], list) or not rule["covers"]:
        raise ValueError(f"{where}: 'covers' lists the artifacts that hold the same runs")


def load_rules(paper: str, path: str | os.PathLike | None = None) -> list[dict]:
    """The health rules of `paper`'s claims.yaml (an empty list where it states none), checked."""
    from .selections import load_claims_file
    rules = load_claims_file(paper, path).get("health") or []
    names = set()
    for r in rules:
        check_rule(r, f"{paper} health rule {r.get('name', '?')!r}")
        if r["name"] in names:
            raise ValueError(f"{paper}: health rule {r['name']!r} appears twice")
        names.add(r["name"])
    return rules


def _values(rule: Mapping, frames: Mapping[str, pd.DataFrame]) -> pd.Series | None:
    """One number per (experiment, seed) of what the rule reads; None where its artifact is absent."""
    from .selections import Data, MissingResults, rows
    if rule["reads"]["artifact"] not in frames:
        return None
    frame, metric = frames[rule["reads"]["artifact"]], rule["reads"].get("metric")
    if metric is not None and ("metric" not in frame or str(metric) not in set(frame["metric"].astype(str))):
        return None  # no run of what the rule reads (e.g. no cell evaluated on the task it checks)
    try:
        df = rows(rule["reads"], Data(frames))
    except MissingResults:  # a chapter's frames that hold none of the models the rule reads
        return None
    df = df.assign(value=pd.to_numeric(df["value"]), seed=pd.to_numeric(df["seed"]).astype(int),
                   experiment=df["experiment"].astype(str))
    return df.groupby(["experiment", "seed"], sort=False)["value"].mean()


def assess(rules: list[Mapping], frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Every run each rule reads, with its status (ok / failed) and the reason; rules whose artifact is absent from
    `frames` are skipped (a chapter that does not hold them)."""
    out = []
    for rule in rules:
        values = _values(rule, frames)
        if values is None:
            continue
        kind = rule["kind"]
        bound = _bound(rule, frames) if kind != "above_median" else None
        if kind != "above_median" and bound is None:
            continue  # the frames hold no row of what the bound reads
        medians = values.groupby(level="experiment").median()
        for (exp, seed), v in values.items():
            if kind == "above_median":
                limit = rule["factor"] * medians[exp]
                bad = v > limit
                why = f"{_metric(rule)} {v:.4g} > {rule['factor']:g} × its seeds' median {medians[exp]:.4g}"
            elif kind == "at_most":
                bad = v <= bound
                why = f"{_metric(rule)} {v:.4g} ≤ {bound:.4g}"
            else:
                bad = v >= bound
                why = f"{_metric(rule)} {v:.4g} ≥ {bound:.4g}"
            out.append({"rule": rule["name"], "experiment": exp, "seed": int(seed), "value": float(v),
                        "status": FAILED if bad else OK, "reason": f"{rule['name']}: {why}" if bad else "",
                        "covers": ";".join(rule["covers"])})
    return pd.DataFrame(out, columns=list(COLUMNS))


def _bound(rule: Mapping, frames: Mapping[str, pd.DataFrame]) -> float | None:
    """The rule's bound: its number, or the mean of what ``bound_from`` selects plus ``margin``."""
    if "bound_from" not in rule:
        return float(rule["bound"])
    from .selections import Data, MissingResults, rows
    if rule["bound_from"].get("artifact") not in frames:
        return None
    try:
        df = rows(rule["bound_from"], Data(frames))
    except MissingResults:
        return None
    return float(pd.to_numeric(df["value"]).mean()) + float(rule.get("margin", 0))


def _metric(rule: Mapping) -> str:
    sel = rule["reads"]
    return " ".join(str(sel[k]) for k in ("metric", "language") if k in sel) or "value"


def exclusions(health: pd.DataFrame) -> dict[str, dict[tuple[str, int], str]]:
    """artifact -> {(experiment, seed): reason} of the failed runs (the shape `xlrepro.claims.Data` takes)."""
    out: dict[str, dict[tuple[str, int], str]] = {}
    for r in health[health["status"] == FAILED].itertuples(index=False):
        for artifact in str(r.covers).split(";"):
            out.setdefault(artifact, {})[(str(r.experiment), int(r.seed))] = r.reason
    return out


def failed_runs(health: pd.DataFrame) -> pd.DataFrame:
    """The failed runs, one row each (experiment, seed, reason)."""
    bad = health[health["status"] == FAILED]
    return bad[["experiment", "seed", "reason"]].drop_duplicates(["experiment", "seed"]).reset_index(drop=True)


def write_health(health: pd.DataFrame, folder: str | os.PathLike) -> Path:
    """``<folder>/health.csv``, atomically."""
    path = Path(folder) / FILE
    with atomic_open(path) as f:
        health.to_csv(f, index=False)
    return path


def read_health(folder: str | os.PathLike) -> pd.DataFrame | None:
    """``<folder>/health.csv`` or None."""
    path = Path(folder) / FILE
    if not path.is_file():
        return None
    return pd.read_csv(path, dtype={"experiment": str, "rule": str, "reason": str, "covers": str},
                       keep_default_na=False)


def without_failed(frame: pd.DataFrame, folder: str | os.PathLike, artifact: str) -> tuple[pd.DataFrame, str | None]:
    """`frame` (long: experiment, seed, ...) without the runs that health.csv in `folder` marks failed for
    `artifact` (a results file or chapter its rows cover: table1, fig6, architecture, ...), and one line naming each
    run left out and why (None: nothing left out, or no health record). The chapters show means and figures over what
    is kept; their CSVs keep every run."""
    health = read_health(folder)
    bad = exclusions(health).get(artifact, {}) if health is not None else {}
    keys = list(zip(frame["experiment"].astype(str), frame["seed"].astype(int)))
    drop = pd.Series([k in bad for k in keys], index=frame.index, dtype=bool)
    if not drop.any():
        return frame, None
    left = sorted({k for k, d in zip(keys, drop) if d}, key=lambda k: (k[0], k[1]))
    return frame[~drop], (f"Left out of {artifact_label(artifact)} means and figures below (failed runs, health.csv; "
                          "the CSV keeps them): " + "; ".join(f"model {e}, seed {s} ({bad[(e, s)]})" for e, s in left))


def artifact_label(artifact: str) -> str:
    """How a sentence names the artifact whose runs it speaks of: "table1" -> "Table 1's", "fig7" -> "Figure 7's",
    a chapter's name -> "this chapter's" (a chapter may show other runs, e.g. knn_replace's Table 3, which the line
    must not seem to cover)."""
    m = re.fullmatch(r"(table|fig)(\d+)", artifact)
    return f"{'Table' if m.group(1) == 'table' else 'Figure'} {m.group(2)}'s" if m else "this chapter's"
