"""What `claims` and `health` both read: a paper's claims file and the rows a selector picks from the results.

A selector (``{artifact, experiment, metric, language, layer, step, ...}``, see `xlrepro.claims`) picks rows of a
results artifact (or of the paper's numbers, ``reference``); runs that `xlrepro.health` found failed are left out of
every selection and remembered for the evidence.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd
import yaml

FILE_KEYS = ("claims", "preconditions", "health")
DETERMINISTIC_SEED = -1


def claims_path(paper: str) -> Path:
    return Path(__file__).parent / "papers" / paper / "claims.yaml"


def load_claims_file(paper: str, path: str | os.PathLike | None = None) -> dict:
    """The whole claims file of `paper` (claims, preconditions, health), unchecked."""
    path = Path(path) if path else claims_path(paper)
    if not path.is_file():
        known = sorted(p.parent.name for p in (Path(__file__).parent / "papers").glob("*/claims.yaml"))
        raise FileNotFoundError(f"no claims for paper {paper!r} at {path}; papers with claims: {', '.join(known)}")
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("claims"), list):
        raise ValueError(f"{path}: expected a mapping with a list under 'claims'")
    unknown = [k for k in doc if k not in FILE_KEYS]
    if unknown:
        raise ValueError(f"{path}: unknown top-level keys {unknown}; valid keys: {', '.join(FILE_KEYS)}")
    return doc


class Pending(Exception):
    """A test reads an experiment that is declared pending (not trained yet)."""

    def __init__(self, experiments):
        super().__init__(f"model {', '.join(experiments)} awaits its GPU run")
        self.experiments = list(experiments)


class NotRun(Exception):
    """A test reads an experiment that the profile does not run at all (a part it leaves out, with its reason)."""

    def __init__(self, why: Mapping[str, str]):
        super().__init__("not run at this profile: " + "; ".join(f"{e} ({w})" for e, w in why.items()))
        self.why = dict(why)


# ------------------------------------------------------------------------------------------------- selections
class MissingResults(KeyError):
    """A claim reads an artifact, a model ID or a language that the results do not hold (a run still to be made, or a
    run on fewer languages).

    `claims.claims_table` turns it into the verdict "pending"; `claims.evaluate` lets it through, so a test sees it."""


class AllRunsFailed(MissingResults):
    """Every run of a model a test reads failed (health.csv), so its rows were all left out: the test cannot decide.
    `claims.evaluate` turns it into the verdict "inconclusive" for the test (or the part of an ``all``/``each``) that
    reads it, naming the failed runs."""


@dataclass
class Data:
    """The frames a claim reads: results artifacts by name, and the paper (for ``reference`` selectors)."""

    frames: Mapping[str, pd.DataFrame]
    paper: str | None = None
    artifact: str | None = None  # the claim's default artifact
    pending: frozenset = frozenset()  # experiments declared but not trained yet: their claims are PENDING
    # failed runs (xlrepro.health): artifact -> {(experiment, seed): reason}; their rows are left out of every selection
    excluded: Mapping[str, Mapping[tuple[str, int], str]] = field(default_factory=dict)
    left_out: dict = field(default_factory=dict)  # (artifact, experiment, seed) -> reason, for the evidence
    all_failed: dict = field(default_factory=dict)  # artifact -> {experiment: reasons} of models whose every run failed
    seeds_seen: list = field(default_factory=list)  # the seed count of every stochastic sample taken
    power: list = field(default_factory=list)  # (k SE, tolerance, seeds) of every within/flat comparison made
    # experiments the profile does not run (-> why): their claims are inconclusive (reason not_run)
    not_run: Mapping[str, str] = field(default_factory=dict)
    # the experiments the selections picked (shared by the copies a judgement makes): a claim read on a stronger
    # recipe must read there every model it reads on the base results (`claims.read_on_recipes`)
    read: set = field(default_factory=set)

    def frame(self, sel: Mapping) -> pd.DataFrame:
        if "reference" in sel:
            from .reference import paper_numbers
            df = paper_numbers(self.paper, sel["reference"]).rename(columns={"mean": "value"})
            return df.assign(seed=DETERMINISTIC_SEED, metric=df.get("metric", "value"))
        name = sel.get("artifact", self.artifact)
        if name not in self.frames:
            raise MissingResults(f"no results artifact {name!r}; available: {', '.join(sorted(self.frames)) or 'none'}")
        df = self.frames[name]
        failed = self.excluded.get(name)
        if failed and len(df):
            keys = list(zip(df["experiment"].astype(str), pd.to_numeric(df["seed"]).astype(int)))
            drop = np.array([k in failed for k in keys], dtype=bool)
            if drop.any():
                gone = {k[0] for k, d in zip(keys, drop) if d} - {k[0] for k, d in zip(keys, drop) if not d}
                self.all_failed[name] = {e: sorted({failed[k] for k, d in zip(keys, drop) if d and k[0] == e})
                                         for e in gone}
                self.left_out.update({(name, *k): failed[k] for k, d in zip(keys, drop)
                                      if d and _dropped_matches(sel, (name, *k))})
                df = df[~drop]
        return df


def _as_list(v) -> list:
    return [str(x) for x in v] if isinstance(v, (list, tuple)) else [str(v)]


def rows(sel: Mapping, data: Data) -> pd.DataFrame:
    """The rows a selector picks (before any reduction); errors name the valid values."""
    skipped = [w for w in _as_list(sel.get("experiment", [])) if w in data.not_run and "reference" not in sel]
    if skipped:  # before the frame: a model never run has no results to look for
        raise NotRun({w: data.not_run[w] for w in skipped})
    df = data.frame(sel)
    for key in ("experiment", "metric", "language", "layer", "step"):
        if key not in sel:
            continue
        if key not in df.columns:
            raise KeyError(f"selector key {key!r}: the frame has no such column; columns: {', '.join(df.columns)}")
        col = df[key].astype(str)
        want = _as_list(sel[key]) if key != "layer" else resolve_layers(sel[key], df[key])
        waiting = [w for w in want if key == "experiment" and w in data.pending and "reference" not in sel]
        if waiting:
            raise Pending(waiting)
        bad = [w for w in want if w not in set(col)]
        if bad and key == "experiment" and "reference" not in sel:
            gone = data.all_failed.get(sel.get("artifact", data.artifact), {})
            if all(w in gone for w in bad):
                raise AllRunsFailed("every run of model " + "; ".join(f"{w} failed (health.csv: {', '.join(gone[w])})"
                                                                      for w in bad) + ": no run left to test")
        if bad:
            err = (MissingResults if key in ("experiment", "language") else KeyError)(f"unknown {key} {bad} in {sel.get('reference') or sel.get('artifact', data.artifact)}; "
                           f"valid choices: {', '.join(sorted(set(col)))}")
            if key == "experiment" and "reference" not in sel:
                err.experiments = bad  # the models without results, for the verdict's words
            raise err
        df = df[col.isin(want)]
    if "exclude_language" in sel:
        df = df[~df["language"].astype(str).isin(_as_list(sel["exclude_language"]))]
    if "reference" not in sel and "experiment" in df:
        data.read.update(df["experiment"].astype(str))
    return df


def _dropped_matches(sel: Mapping, key: tuple) -> bool:
    """Would the selector have picked a left-out run (artifact, experiment, seed)? Only its experiment is compared."""
    return "experiment" not in sel or key[1] in _as_list(sel["experiment"])


LAYER_OF = re.compile(r"\s*(\d+)\s+of\s+(\d+)\s*")


def resolve_layers(spec, layers: pd.Series) -> list[str]:
    """A selector's ``layer`` resolved against the model's depth (the largest layer number among the rows picked so
    far): ``last`` is that layer; ``"K of N"`` is layer K of an N-layer model scaled to this depth,
    ceil(K * depth / N) (layer K itself when depth is N; "10 of 12" is layer 2 of a 2-layer model). Numbers stay as
    they are. So a claim on "the last layer" tests layer 12 of a 12-layer BERT and still reads a 2-layer smoke
    model."""
    out = []
    for v in (spec if isinstance(spec, (list, tuple)) else [spec]):
        text = str(v)
        hit = LAYER_OF.fullmatch(text)
        if text.strip() != "last" and not hit:  # a layer number (an unknown one is named by `rows`)
            out.append(text)
            continue
        numbers = pd.to_numeric(layers, errors="coerce").dropna()
        if numbers.empty:
            raise KeyError(f"layer {v!r}: the rows have no numeric layer to resolve it against")
        depth = int(numbers.max())
        if hit:
            k, n = int(hit.group(1)), int(hit.group(2))
            if not 0 <= k <= n or n == 0:
                raise ValueError(f"layer {v!r}: need 0 <= K <= N and N > 0")
            out.append(str(math.ceil(k * depth / n)))
        else:
            out.append(str(depth))
    return list(dict.fromkeys(out))
