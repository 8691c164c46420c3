"""Claims as data: each paper's ``papers/<paper>/claims.yaml`` states its claims and the tests that decide them.

One function, :func:`evaluate`, turns a test and the results frames into a verdict; :func:`claims_table` does it
for a chapter and writes ``claims.csv``. Nothing here names a paper.

A claim in the YAML::

    - id: overparam_lowers          # unique within the paper
      chapter: architecture         # the notebook that tests it
      section: "§3.1, Table 1"
      quote: "..."                  # the paper's words, verbatim
      claim: "..."                  # one sentence for the table
      artifact: table1              # default results CSV (book/results/<paper>/<artifact>.csv) for its selectors
      test: {kind: greater, left: {experiment: "0", metric: mu}, right: {experiment: "15", metric: mu},
             margin: 0.05, noise: 2se}
      why: "one line on why this threshold"
      after_run: "..."              # optional: a note written after seeing the run, shown with the evidence and
                                    # labelled so; it never changes the criterion or the verdict
      requires: [base_transfers]    # optional: preconditions (names of the file's `preconditions`, or inline
                                    # {name, says, test}); one that fails makes the verdict "inconclusive"
      nulls:                        # optional: null models the test must not pass (else "inconclusive")
        - {says: "bag of tokens: the input embeddings", set: {layer: 0}, into: [value]}   # name: optional, for
                                    # the reason code null:<name> (default: what it sets, e.g. layer=0)
      min_seeds: 5                  # optional: the seeds the test needs (power); a run with fewer is "inconclusive"

A paper's file may also hold ``preconditions:`` (name -> {says, test, artifact?}: what must hold for a claim's test to
mean anything; met when its test is "reproduced") and ``health:`` (the rule that marks failed runs, read by
:mod:`xlrepro.health`). Failed runs (``health.csv``) are left out of every selection of the artifacts they cover, and
the evidence names them.

A selector picks rows of a results frame: ``artifact`` (else the claim's), ``experiment``, ``metric``, ``layer`` (a
number, ``last`` or ``"K of N"``, resolved against the depth of the rows: :func:`resolve_layers`), ``step``, ``language`` (a value or a list), ``exclude_language`` (list); or ``reference: <table>`` for the paper's
numbers (:func:`xlrepro.reference.paper_numbers`). Curves (rows with ``step``) reduce per seed with ``at:
final|half`` (the value there) or ``event: half_final|drop_90_log|argmin`` (the step of the event); ``fraction:
true`` divides that step by the last one. ``minus: <selector>`` subtracts another selection seed by seed (a
selection without seeds, seed -1, from every seed). Rows left after that are averaged per seed: a selection is one
number per seed.

Kinds (``KINDS``) and what they call reproduced / partly (anything else is "not reproduced"):

- ``greater``: mean(left) − mean(right) ≥ margin (> 0; a number or "P% of left|right") AND beyond seed noise /
  exactly one of the two.
- ``within``: |mean(value) − target| (a number or a selector) plus noise < tolerance (number or "P% of target") /
  the mean alone within it.
- ``above`` / ``below``: mean beyond ``bound`` AND beyond noise / the mean beyond it, noise not.
- ``correlation``: over the shared ``over`` keys, ``method`` pearson|spearman (scipy.stats, two-sided p) has the
  claimed ``sign`` with |r| ≥ min_r AND p < max_p / the claimed sign and one of the two.
- ``monotone``: along ``over``, last − first in ``direction`` ≥ margin beyond noise AND no step back larger than
  ``tolerance`` / the first alone.
- ``flat``: max − min of the means along ``over`` plus noise < max_spread / the spread alone.
- ``argmax``: among ``candidates`` (values of ``over``) ``expect`` has the highest mean AND beats the runner-up
  beyond noise / the highest mean alone.
- ``all`` (``parts``; ``combine: weakest`` gives the weakest part's verdict instead) and ``each`` (``test`` for every value of ``over``: ``values``, else those in the data less
  ``exclude``; ``into`` names the selectors that get the value, their ``minus`` too, default all): reproduced if every part is; partly if
  the parts score at least half (reproduced 1, partly ½); else not reproduced.
- ``not_testable_offline`` (``reason``): needs the paper profile.

Inconclusive (:data:`INCONCLUSIVE`): the test cannot decide. A precondition failed; a declared null model passes the
same test; the run has fewer seeds than ``min_seeds``; or a ``within``/``flat`` test whose k SE alone reaches its
tolerance (it could not pass whatever the means) and whose gap is not beyond the tolerance by k SE either; or a
test that reads a model whose every run failed (health.csv: no run is left to test); or a test that reads a model
the profile does not run at all (`claims_table`'s ``not_run``). Where parts of an
``all``/``each`` test are inconclusive, the whole is. Each of these causes has a short code (:data:`REASONS`), kept
in claims.csv's ``reason`` column (:func:`reason_code`; empty for a decided claim) and put in words by
:func:`reason_words`: the findings page groups the undecided claims by it.

Partly on numbers without seed noise (``deterministic``) needs a stated minimum effect: in ``greater``, the
difference must reach ``partly_margin`` (default half the margin), not merely have the right sign.

A claim whose artifact, or one of whose model IDs, is not in the results yet gets the verdict "pending" from
:func:`claims_table` (the run is declared but not made); :func:`evaluate` raises :class:`MissingResults` instead.

Recipes: a paper may retrain some of its cells with a stronger recipe declared before those runs (more text, more
steps), published beside the base results (:func:`recipe_frames`). Each claim is then read on the first recipe,
strongest first, that holds every model it reads (its preconditions included), its evidence saying so; a claim that
reads a model the recipe has not trained (pending, missing or not run there) is read on the base results, as before.
So a claim never mixes recipes.

Noise (``NOISE``), named in every comparing test: ``2se`` (the difference exceeds ``k`` (default 2) standard
errors, scipy.stats.sem per sample), ``welch`` (one-sided Welch t-test, scipy.stats.ttest_ind, p < ``alpha``) or
``deterministic`` (the numbers have no seed: all rows have seed -1; only the margin counts). A stochastic sample of
one seed has unknown noise: it never counts as beyond noise. A deterministic sample (seed -1) has none.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from .results import VERDICTS
from .selections import (DETERMINISTIC_SEED, AllRunsFailed, Data, MissingResults, NotRun, Pending,  # noqa: F401
                         _as_list, claims_path, load_claims_file, resolve_layers, rows)  # resolve_layers: claims.<name>

# the verdicts, defined once with the results contract; PENDING: the run a claim reads has not been made yet
REPRODUCED, PARTLY, NOT, INCONCLUSIVE, OFFLINE, PENDING = VERDICTS
KINDS = ("greater", "within", "above", "below", "correlation", "monotone", "flat", "argmax", "all", "each",
         "not_testable_offline")
NOISE = ("2se", "welch", "deterministic")
COMBINE = ("score", "weakest")  # how `all` combines its parts
SELECTOR_KEYS = ("artifact", "reference", "experiment", "metric", "layer", "step", "language", "exclude_language",
                 "at", "event", "fraction", "minus")
PRECONDITION_KEYS = ("name", "says", "test", "artifact")
NULL_KEYS = ("says", "set", "into", "name")
EVENTS = ("half_final", "drop_90_log", "argmin")
CLAIM_KEYS = ("id", "chapter", "section", "quote", "claim", "artifact", "test", "why", "after_run", "requires",
              "nulls", "min_seeds")
OPTIONAL_KEYS = ("artifact", "after_run", "requires", "nulls", "min_seeds")
# claims.csv's columns after xlrepro.results.CLAIM_COLUMNS (the chapter column comes last)
EXTRA_COLUMNS = ("id", "quote", "precondition", "precondition_met", "reason")
# Why a verdict is inconclusive, as claims.csv's `reason` column writes it: one code per cause, joined by ";" in the
# order the causes are checked (preconditions, nulls, seeds, then the test's own); empty for a decided claim.
#   precondition:<name>  a precondition (its name in the claims file) is not met
#   null:<name>          a declared null model passes the same test (the null's `name`, else its `set`: layer=0)
#   min_seeds            the run has fewer seeds than the claim's min_seeds
#   underpowered         a within/flat test whose noise alone reaches its tolerance (it could not pass)
#   all_runs_failed      the test reads a model whose every run failed (health.csv)
#   not_run              the test reads a model that the profile does not run at all (a part it leaves out)
REASONS = ("precondition", "null", "min_seeds", "underpowered", "all_runs_failed", "not_run")
REASON_SEP = ";"


class Outcome(NamedTuple):
    """What a test gives: its verdict, the evidence in words and, for an inconclusive verdict, the reason code
    (:data:`REASONS`; "" otherwise)."""
    verdict: str
    evidence: str
    reason: str = ""


def load_claims(paper: str, path: str | os.PathLike | None = None) -> list[dict]:
    """The claims of `paper` (from `path`, default ``xlrepro/papers/<paper>/claims.yaml``), checked for shape.

    Each claim's ``requires`` comes back resolved: a list of {name, says, test[, artifact]} mappings."""
    doc = load_claims_file(paper, path)
    claims = doc["claims"]
    named = doc.get("preconditions") or {}
    if not isinstance(named, Mapping):
        raise ValueError(f"{paper}: 'preconditions' must map names to {{says, test}}")
    for name, p in named.items():
        _check_precondition({"name": name, **p}, where=f"precondition {name!r}")
    ids = set()
    for c in claims:
        missing = [k for k in CLAIM_KEYS if k not in c and k not in OPTIONAL_KEYS]
        if missing:
            needed = [k for k in CLAIM_KEYS if k not in OPTIONAL_KEYS]
            raise ValueError(f"claim {c.get('id', '?')!r} lacks {missing}; each claim needs {', '.join(needed)}")
        unknown = [k for k in c if k not in CLAIM_KEYS]
        if unknown:
            raise ValueError(f"claim {c['id']!r} has unknown keys {unknown}; valid keys: {', '.join(CLAIM_KEYS)}")
        if c["id"] in ids:
            raise ValueError(f"claim id {c['id']!r} appears twice")
        ids.add(c["id"])
        check_test(c["test"], where=f"claim {c['id']!r}")
        c["requires"] = [_resolve_precondition(r, named, c["id"]) for r in c.get("requires") or []]
        for n in c.get("nulls") or []:
            _check_null(n, where=f"claim {c['id']!r}")
        if "min_seeds" in c and not (isinstance(c["min_seeds"], int) and c["min_seeds"] >= 2):
            raise ValueError(f"claim {c['id']!r}: min_seeds must be an integer ≥ 2; got {c['min_seeds']!r}")
    return claims


def _check_precondition(p: Mapping, where: str) -> None:
    unknown = [k for k in p if k not in PRECONDITION_KEYS]
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; valid keys: {', '.join(PRECONDITION_KEYS)}")
    if not p.get("says") or not isinstance(p.get("test"), Mapping):
        raise ValueError(f"{where}: a precondition needs 'says' (what must hold, in words) and a 'test'")
    check_test(p["test"], where)


def _resolve_precondition(ref, named: Mapping, claim_id: str) -> dict:
    if isinstance(ref, str):
        if ref not in named:
            raise ValueError(f"claim {claim_id!r} requires unknown precondition {ref!r}; "
                             f"defined: {', '.join(named) or 'none'}")
        return {"name": ref, **named[ref]}
    if isinstance(ref, Mapping):
        p = {"name": ref.get("name", "inline"), **ref}
        _check_precondition(p, where=f"claim {claim_id!r}")
        return p
    raise ValueError(f"claim {claim_id!r}: each 'requires' entry is a precondition's name or a mapping")


def _check_null(n: Mapping, where: str) -> None:
    unknown = [k for k in n if k not in NULL_KEYS] if isinstance(n, Mapping) else ["(not a mapping)"]
    if unknown or not n.get("says") or not isinstance(n.get("set"), Mapping):
        raise ValueError(f"{where}: a null is {{says, set, into?, name?}} (set: selector keys to override, e.g. "
                         f"{{layer: 0}}); got {n!r}")
    _check_selector(n["set"], where)
    if "name" in n and not re.fullmatch(r"[\w.=,-]+", str(n["name"])):
        raise ValueError(f"{where}: a null's name is one word (letters, digits, _ . = , -); got {n['name']!r}")


def null_name(n: Mapping) -> str:
    """A null model's short name for the reason code: its ``name``, else its ``set`` as key=value pairs
    (``{layer: 0}`` -> ``layer=0``)."""
    if n.get("name"):
        return str(n["name"])
    return ",".join(f"{k}={'/'.join(map(str, _as_list(v)))}" for k, v in n["set"].items())


def reason_code(*parts: str) -> str:
    """The reason column's value from causes in order (empty ones dropped, repeats kept once): e.g.
    ``reason_code("precondition:base", "underpowered")`` -> ``"precondition:base;underpowered"``."""
    codes = [c for p in parts for c in str(p).split(REASON_SEP) if c]
    for c in codes:
        if c.split(":")[0] not in REASONS:
            raise ValueError(f"unknown reason {c!r}; valid reasons: {', '.join(REASONS)}")
    return REASON_SEP.join(dict.fromkeys(codes))


def reason_words(code: str, claim: Mapping | None = None) -> str:
    """One reason code in a few words for readers; with the `claim` (from :func:`load_claims`), a precondition
    or null is named by its ``says``. E.g. ``precondition:base`` -> "precondition not met: <what base says>"."""
    kind, _, name = code.partition(":")
    if kind not in REASONS:
        raise ValueError(f"unknown reason {code!r}; valid reasons: {', '.join(REASONS)}")
    claim = claim or {}
    if kind == "precondition":
        says = next((p["says"] for p in claim.get("requires") or [] if p.get("name") == name), name)
        return f"precondition not met: {says}"
    if kind == "null":
        says = next((n["says"] for n in claim.get("nulls") or [] if null_name(n) == name), name)
        return f"a null model passes the test too ({says})"
    if kind == "min_seeds":
        need = claim.get("min_seeds")
        return f"the run has fewer seeds than the {need} the test needs" if need else \
            "the run has fewer seeds than the test needs"
    if kind == "underpowered":
        return "the test could not pass at this seed count (its noise alone reaches the tolerance)"
    if kind == "not_run":
        return "a model it reads is not run at this profile"
    return "every run of a model it compares failed (health.csv)"


def check_test(test: Mapping, where: str = "test") -> None:
    """Raise ValueError (naming the valid choices) for an unknown kind, noise or selector key."""
    kind = test.get("kind")
    if kind not in KINDS:
        raise ValueError(f"{where}: unknown kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    if kind == "all":
        if test.get("combine", "score") not in COMBINE:
            raise ValueError(f"{where}: unknown combine {test['combine']!r}; valid choices: {', '.join(COMBINE)}")
        for p in test["parts"]:
            check_test(p, where)
        return
    if kind == "each":
        check_test(test["test"], where)
        return
    if kind == "not_testable_offline":
        if not test.get("reason"):
            raise ValueError(f"{where}: not_testable_offline needs a reason")
        return
    if kind in ("greater", "within", "above", "below", "monotone", "flat", "argmax"):
        noise = test.get("noise")
        if noise not in NOISE:
            raise ValueError(f"{where}: unknown noise {noise!r}; valid choices: {', '.join(NOISE)}")
        if kind in ("within", "flat") and noise == "welch":
            raise ValueError(f"{where}: {kind} takes noise 2se or deterministic, not welch")
    if kind == "greater" and not _margin_positive(test.get("margin")):
        raise ValueError(f"{where}: greater needs a positive margin (a number or 'P% of left|right'), so that "
                         f"direction alone or a tie never passes; got {test.get('margin')!r}")
    if kind == "correlation" and test.get("method", "pearson") not in ("pearson", "spearman"):
        raise ValueError(f"{where}: unknown method {test['method']!r}; valid choices: pearson, spearman")
    for key in ("left", "right", "value", "target"):
        if isinstance(test.get(key), Mapping):
            _check_selector(test[key], where)


def _check_selector(sel: Mapping, where: str) -> None:
    unknown = [k for k in sel if k not in SELECTOR_KEYS]
    if unknown:
        raise ValueError(f"{where}: unknown selector keys {unknown}; valid keys: {', '.join(SELECTOR_KEYS)}")
    if "event" in sel and sel["event"] not in EVENTS:
        raise ValueError(f"{where}: unknown event {sel['event']!r}; valid events: {', '.join(EVENTS)}")
    if "at" in sel and sel["at"] not in ("final", "half"):
        raise ValueError(f"{where}: unknown 'at' {sel['at']!r}; valid choices: final, half")
    if isinstance(sel.get("minus"), Mapping):
        _check_selector(sel["minus"], where)


def _margin_positive(m) -> bool:
    if isinstance(m, str):
        hit = re.fullmatch(r"\s*([0-9.]+)\s*% of (left|right|target)\s*", m)
        return bool(hit) and float(hit.group(1)) > 0
    return isinstance(m, (int, float)) and m > 0


def _curve_value(curve: pd.Series, sel: Mapping) -> float:
    """One seed's curve (value indexed by step) reduced to a number."""
    curve = curve.sort_index()
    last = float(curve.index.max())
    if "at" in sel:
        return float(curve.iloc[-1] if sel["at"] == "final" else curve[curve.index <= last / 2].iloc[-1])
    ev = sel["event"]
    if ev == "half_final":
        step = curve.index[(curve >= 0.5 * curve.iloc[-1]).to_numpy().argmax()]
    elif ev == "drop_90_log":
        lg = np.log(curve)
        step = lg.index[(lg <= lg.iloc[0] - 0.9 * (lg.iloc[0] - lg.iloc[-1])).to_numpy().argmax()]
    else:
        step = curve.idxmin()
    return float(step) / last if sel.get("fraction") else float(step)


def sample(sel: Mapping, data: Data, df: pd.DataFrame | None = None) -> pd.Series:
    """One number per seed (index: seed) for a selector."""
    df = rows(sel, data) if df is None else df
    if df.empty:
        raise ValueError(f"selector {dict(sel)} picks no rows")
    df = df.assign(value=pd.to_numeric(df["value"]))
    if "at" in sel or "event" in sel:
        keys = ["seed"] + [k for k in ("experiment", "metric", "language", "layer") if k in df.columns]
        df = df.groupby(keys, dropna=False).apply(
            lambda g: _curve_value(g.set_index("step")["value"], sel), include_groups=False).rename("value").reset_index()
    out = df.groupby("seed")["value"].mean()
    if not _deterministic(out):
        data.seeds_seen.append(len(out))
    if "minus" in sel:
        other = sample({"artifact": sel.get("artifact"), **sel["minus"]} if "artifact" in sel else sel["minus"], data)
        if _deterministic(other) and not _deterministic(out):  # a number without seed: taken from every seed
            other = pd.Series(float(other.mean()), index=out.index)
        shared = out.index.intersection(other.index)
        if len(shared) == 0:
            raise ValueError(f"selector {dict(sel)}: 'minus' shares no seed with it")
        out = out[shared] - other[shared]
    return out


def by(sel: Mapping, over: str, data: Data) -> dict[str, pd.Series]:
    """Per value of `over` (e.g. language, layer, step, experiment): one number per seed."""
    df = rows(sel, data)
    if over not in df.columns:
        raise KeyError(f"cannot go over {over!r}: columns are {', '.join(df.columns)}")
    def at(k):  # the selector narrowed to one value of `over`, its `minus` too
        return {**sel, over: k, **({"minus": {**sel["minus"], over: k}} if "minus" in sel else {})}
    return {str(k): sample(at(str(k)), data, g) for k, g in df.groupby(df[over].astype(str), sort=False)}


# ------------------------------------------------------------------------------------------------- statistics
def _deterministic(s: pd.Series) -> bool:
    return bool((s.index == DETERMINISTIC_SEED).all())


def _sem(s: pd.Series) -> float:
    """Standard error of the mean over seeds; 0 without seeds, NaN (unknown) for one stochastic seed."""
    if _deterministic(s):
        return 0.0
    return float(sps.sem(s.to_numpy(), ddof=1)) if len(s) > 1 else math.nan


def beyond_noise(a: pd.Series, b: pd.Series | float, noise: str, test: Mapping) -> tuple[bool, str]:
    """Is mean(a) − mean(b) > 0 beyond seed noise? Returns (answer, a few words for the evidence)."""
    bs = b if isinstance(b, pd.Series) else pd.Series([float(b)], index=[DETERMINISTIC_SEED])
    diff = a.mean() - bs.mean()
    if noise == "deterministic":
        stray = [s for s in (a, bs) if not _deterministic(s)]
        if stray:
            raise ValueError("noise 'deterministic' needs numbers without seeds (seed -1); this sample has seeds "
                             f"{sorted(stray[0].index)}: use 2se or welch")
        return bool(diff > 0), "no seed noise"
    if noise == "2se":
        k = float(test.get("k", 2))
        se = math.hypot(_sem(a), _sem(bs))
        if math.isnan(se):
            return False, "noise unknown (one seed)"
        return bool(diff > k * se), f"{k:g} SE = {k * se:.3g}"
    alpha = float(test.get("alpha", 0.05))
    if len(a) < 2 and len(bs) < 2 or (len(a) < 2 and not _deterministic(a)) or (len(bs) < 2 and not _deterministic(bs)):
        return False, "noise unknown (one seed)"
    if _deterministic(bs):
        p = sps.ttest_1samp(a.to_numpy(), bs.mean(), alternative="greater").pvalue
    elif _deterministic(a):
        p = sps.ttest_1samp(bs.to_numpy(), a.mean(), alternative="less").pvalue
    else:
        p = sps.ttest_ind(a.to_numpy(), bs.to_numpy(), equal_var=False, alternative="greater").pvalue
    p = float(p) if not np.isnan(p) else (0.0 if diff > 0 else 1.0)  # both samples constant: the sign decides
    return bool(p < alpha), f"Welch p = {p:.2g}"


def _amount(spec, left: float, right: float) -> float:
    """A margin or tolerance: a number, or 'P% of left|right|target'."""
    if isinstance(spec, str):
        hit = re.fullmatch(r"\s*([0-9.]+)\s*% of (left|right|target)\s*", spec)
        if not hit:
            raise ValueError(f"cannot read {spec!r}: write a number or 'P% of left', 'P% of right', 'P% of target'")
        return float(hit.group(1)) / 100 * abs(left if hit.group(2) == "left" else right)
    return float(spec)


def _r(x: float) -> float:
    """Round off float dust, so that 0.7 - 0.6 meets a margin of 0.1 and a tie stays a tie."""
    return round(float(x), 12)


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _plural(word: str) -> str:
    """'seed' -> 'seeds', 'heads' stays 'heads' (a column named in the plural already)."""
    return word if word.endswith("s") else f"{word}s"


def _sel_name(sel) -> str:
    if not isinstance(sel, Mapping):
        return _fmt(float(sel))
    parts = [str(sel[k]) if not isinstance(sel[k], list) else "/".join(map(str, sel[k]))
             for k in ("reference", "experiment", "metric", "language", "layer", "at", "event") if k in sel]
    if "exclude_language" in sel:
        parts.append("without " + "/".join(_as_list(sel["exclude_language"])))
    name = " ".join(parts)
    return f"{name} − ({_sel_name(sel['minus'])})" if "minus" in sel else name


def _n(s: pd.Series) -> str:
    return "no seed" if _deterministic(s) else f"{len(s)} seed{'s' if len(s) != 1 else ''}"


def _grade(strong: bool, weak: bool) -> str:
    return REPRODUCED if strong and weak else PARTLY if strong or weak else NOT


# ------------------------------------------------------------------------------------------------- verdicts
def evaluate(test: Mapping, data: Data, profile: str = "lab") -> tuple[str, str]:
    """(verdict, evidence) of one test; see the module docstring for each kind. A test (or a part of an ``all`` or
    ``each``) that reads a model whose every run failed (health.csv) is inconclusive. :func:`outcome` also gives
    the reason code of an inconclusive verdict."""
    return tuple(outcome(test, data, profile)[:2])


def outcome(test: Mapping, data: Data, profile: str = "lab") -> Outcome:
    """(verdict, evidence, reason) of one test: `evaluate` with the reason code (:data:`REASONS`) of an
    inconclusive verdict: ``underpowered`` or ``all_runs_failed`` (those of its parts, for ``all`` and ``each``)."""
    try:
        return _evaluate(test, data, profile)
    except AllRunsFailed as gone:
        return Outcome(INCONCLUSIVE, str(gone.args[0]), "all_runs_failed")


def _evaluate(test: Mapping, data: Data, profile: str = "lab") -> Outcome:
    check_test(test)
    kind = test["kind"]
    if kind == "not_testable_offline":
        return Outcome(OFFLINE, test["reason"]) if profile != "paper" else \
            Outcome(NOT, "the paper profile has no test for it yet")
    if kind == "all":
        return _combine([outcome(p, data, profile) for p in test["parts"]], test.get("combine", "score"))
    if kind == "each":
        return _each(test, data, profile)
    noise = test.get("noise")
    if kind == "greater":
        a, b = sample(test["left"], data), sample(test["right"], data)
        diff = _r(a.mean() - b.mean())
        margin = _r(_amount(test["margin"], a.mean(), b.mean()))
        sig, how = beyond_noise(a, b, noise, test)
        ev = (f"{_sel_name(test['left'])} {_fmt(a.mean())} ({_n(a)}) − {_sel_name(test['right'])} {_fmt(b.mean())}"
              f" ({_n(b)}) = {_fmt(diff)}; margin {_fmt(margin)}; {how}")
        if noise == "deterministic":  # no noise to be beyond: partly needs a stated minimum effect, not the sign
            least = _r(_amount(test.get("partly_margin", margin / 2), a.mean(), b.mean()))
            return Outcome(REPRODUCED if diff >= margin and diff > 0 else PARTLY if diff >= least and diff > 0 else NOT,
                           ev + f"; partly from {_fmt(least)}")
        return Outcome(_grade(diff > 0 and diff >= margin, diff > 0 and sig), ev)
    if kind in ("above", "below"):
        v, bound = sample(test["value"], data), float(test["bound"])
        a, b = (v, bound) if kind == "above" else (pd.Series([bound], index=[DETERMINISTIC_SEED]), v)
        b_mean = b if not isinstance(b, pd.Series) else b.mean()
        sig, how = beyond_noise(a, b, noise, test)
        ok = a.mean() > b_mean
        return Outcome(REPRODUCED if ok and sig else PARTLY if ok else NOT,
                       f"{_sel_name(test['value'])} {_fmt(v.mean())} ({_n(v)}), {kind} {_fmt(bound)}; {how}")
    if kind == "within":
        v = sample(test["value"], data)
        t = sample(test["target"], data) if isinstance(test["target"], Mapping) else \
            pd.Series([float(test["target"])], index=[DETERMINISTIC_SEED])
        gap = _r(abs(v.mean() - t.mean()))
        tol = _r(_amount(test["tolerance"], v.mean(), t.mean()))
        se = 0.0 if noise == "deterministic" else math.hypot(_sem(v), _sem(t))
        if noise == "deterministic" and not (_deterministic(v) and _deterministic(t)):
            raise ValueError("noise 'deterministic' needs numbers without seeds (seed -1); use 2se")
        k = float(test.get("k", 2))
        strong = not math.isnan(se) and gap + k * se < tol
        verdict = REPRODUCED if strong else PARTLY if gap < tol else NOT
        data.power.append((k * se, tol, min(len(v), len(t)) if not _deterministic(t) else len(v)))
        if _underpowered(k, se, tol, gap):
            verdict = INCONCLUSIVE
        return Outcome(verdict,
                f"{_sel_name(test['value'])} {_fmt(v.mean())} ({_n(v)}) vs "
                + (f"{_sel_name(test['target'])} {_fmt(t.mean())}" if isinstance(test["target"], Mapping) else _fmt(t.mean()))
                + ": "
                f"gap {_fmt(gap)}, tolerance {_fmt(tol)}; " + ("noise unknown (one seed)" if math.isnan(se) else f"{k:g} SE = {_fmt(k * se)}")
                + (UNDERPOWERED if verdict == INCONCLUSIVE else ""),
                "underpowered" if verdict == INCONCLUSIVE else "")
    if kind == "correlation":
        return _correlation(test, data)
    over = test["over"]
    groups = by(test["value"], over, data)
    if kind == "monotone":
        keys = sorted(groups, key=float)
        sign = 1 if test.get("direction", "increasing") == "increasing" else -1
        means = [sign * groups[k].mean() for k in keys]
        first, last = groups[keys[0]] * sign, groups[keys[-1]] * sign
        rise = _r(last.mean() - first.mean())
        sig, how = beyond_noise(last, first, noise, test)
        worst = max([means[i] - means[i + 1] for i in range(len(means) - 1)] + [0.0])
        strong = rise > 0 and rise >= float(test["margin"]) and sig
        return Outcome(REPRODUCED if strong and worst <= float(test["tolerance"]) else PARTLY if strong else NOT,
                f"{_sel_name(test['value'])} over {len(keys)} {_plural(over)}: "
                f"{test.get('direction', 'increasing')} by "
                f"{_fmt(rise)} (margin {_fmt(float(test['margin']))}; {how}); largest step back {_fmt(worst)} "
                f"(tolerance {_fmt(float(test['tolerance']))})")
    if kind == "flat":
        means = {k: g.mean() for k, g in groups.items()}
        hi, lo = max(means, key=means.get), min(means, key=means.get)
        spread = _r(means[hi] - means[lo])
        se = math.hypot(_sem(groups[hi]), _sem(groups[lo]))
        k = float(test.get("k", 2))
        strong = not math.isnan(se) and spread + k * se < float(test["max_spread"])
        verdict = REPRODUCED if strong else PARTLY if spread < float(test["max_spread"]) else NOT
        data.power.append((k * se, float(test["max_spread"]), min(len(groups[hi]), len(groups[lo]))))
        if _underpowered(k, se, float(test["max_spread"]), spread):
            verdict = INCONCLUSIVE
        return Outcome(verdict,
                f"{_sel_name(test['value'])} over {len(means)} {_plural(over)}: {_fmt(means[lo])} ({over} {lo}) to "
                f"{_fmt(means[hi])} ({over} {hi}), spread {_fmt(spread)} (max {_fmt(float(test['max_spread']))}); "
                + ("noise unknown (one seed)" if math.isnan(se) else f"{k:g} SE = {_fmt(k * se)}")
                + (UNDERPOWERED if verdict == INCONCLUSIVE else ""),
                "underpowered" if verdict == INCONCLUSIVE else "")
    # argmax
    cands = [str(c) for c in test["candidates"]]
    missing = [c for c in cands if c not in groups]
    if missing:
        raise KeyError(f"argmax candidates {missing} not in the data; valid choices: {', '.join(groups)}")
    means = {c: groups[c].mean() for c in cands}
    ranked = sorted(cands, key=means.get, reverse=True)
    expect = str(test["expect"])
    top, runner = ranked[0], ranked[1]
    is_top = top == expect and means[top] > means[runner]  # a shared maximum is no argmax
    sig, how = beyond_noise(groups[top], groups[runner], noise, test) if is_top else (False, "")
    ev = (f"highest {_sel_name(test['value'])}: {top} {_fmt(means[top])}, then {runner} {_fmt(means[runner])}; "
          f"expected {expect}" + (f"; {how}" if how else ""))
    return Outcome(REPRODUCED if is_top and sig else PARTLY if is_top else NOT, ev)


UNDERPOWERED = ("; underpowered: k SE alone reaches the tolerance, so the test could not pass at this seed count, and "
                "the gap is not beyond the tolerance by k SE either")


def _underpowered(k: float, se: float, tol: float, gap: float) -> bool:
    """An equivalence test that could not pass (k SE ≥ tolerance) and whose gap does not clearly fail it."""
    return not math.isnan(se) and se > 0 and k * se >= tol and not gap - k * se > tol


def _correlation(test: Mapping, data: Data) -> Outcome:
    over = test["over"]
    left = {k: s.mean() for k, s in by(test["left"], over, data).items()}
    right = {k: s.mean() for k, s in by(test["right"], over, data).items()}
    keys = [k for k in left if k in right]
    if len(keys) < 3:
        return Outcome(NOT, f"only {len(keys)} shared {_plural(over)}; a correlation needs 3")
    x, y = [left[k] for k in keys], [right[k] for k in keys]
    method = test.get("method", "pearson")
    res = (sps.pearsonr if method == "pearson" else sps.spearmanr)(x, y)
    r, p = float(res[0]), float(res[1])
    sign = 1 if test.get("sign", "positive") == "positive" else -1
    right_sign = sign * r > 0
    strong, sig = sign * r >= float(test["min_r"]), p < float(test["max_p"])
    verdict = REPRODUCED if right_sign and strong and sig else PARTLY if right_sign and (strong or sig) else NOT
    return Outcome(verdict, f"{method} r = {r:.2f}, p = {p:.2g} over {len(keys)} {_plural(over)} "
                            f"({_sel_name(test['left'])} vs {_sel_name(test['right'])})")


def _combine(results: list[Outcome], how: str = "score") -> Outcome:
    score = {REPRODUCED: 1.0, PARTLY: 0.5, NOT: 0.0, OFFLINE: 0.0}
    verdicts = [r.verdict for r in results]
    evidence = "; ".join(f"[{r.verdict}] {r.evidence}" for r in results)
    if INCONCLUSIVE in verdicts:  # a part the experiment cannot decide leaves the whole undecided
        return Outcome(INCONCLUSIVE, evidence, reason_code(*(r.reason for r in results if r.verdict == INCONCLUSIVE)))
    mean = sum(score[v] for v in verdicts) / len(verdicts)
    verdict = REPRODUCED if all(v == REPRODUCED for v in verdicts) else PARTLY if mean >= 0.5 else NOT
    if how == "weakest":  # the verdict of the weakest part
        verdict = min(verdicts, key=lambda v: score[v])
    return Outcome(verdict, evidence)


def _substitute(test: Mapping, over: str, value: str, into=("left", "right", "value", "target")) -> dict:
    """`test` with `over` set to `value` in the selectors named by `into`, and in their ``minus`` (as `by` does): a
    difference per language is taken within the language."""
    if test.get("kind") == "all":  # an inner `all`: every part gets the value
        return {**test, "parts": [_substitute(p, over, value, into) for p in test["parts"]]}
    out = dict(test)
    for key in into:
        if isinstance(out.get(key), Mapping):
            sel = out[key]
            out[key] = {**sel, over: value, **({"minus": {**sel["minus"], over: value}}
                                               if isinstance(sel.get("minus"), Mapping) else {})}
    return out


def _each(test: Mapping, data: Data, profile: str) -> Outcome:
    over, inner = test["over"], test["test"]
    if "values" in test:
        values = [str(v) for v in test["values"]]
    else:  # the values of the inner test's first selector (an inner `all` or `each` needs `values`)
        first = next((inner[k] for k in ("left", "value") if isinstance(inner.get(k), Mapping)), None)
        if first is None:
            raise ValueError(f"each over {over}: its test ({inner['kind']}) has no left or value selector to take "
                             f"the {_plural(over)} from; list them in 'values'")
        values = list(dict.fromkeys(rows(first, data)[over].astype(str)))
    values = [v for v in values if v not in _as_list(test.get("exclude", []))]
    if not values:  # e.g. a run on fewer languages than the claim needs: its claim waits, as for a missing model
        raise MissingResults(f"no {over} left to test (the results hold none but the excluded "
                             f"{', '.join(_as_list(test.get('exclude', []))) or 'ones'})")
    into = test.get("into", ("left", "right", "value", "target"))
    results = {v: outcome(_substitute(inner, over, v, into), data, profile) for v in values}
    verdict, _, reason = _combine(list(results.values()))
    counts = {k: sum(r[0] == k for r in results.values()) for k in (REPRODUCED, PARTLY, NOT, INCONCLUSIVE)}
    def names(verdict: str) -> str:
        vs = [v for v, r in results.items() if r[0] == verdict]
        return f"{', '.join(vs[:8])}{' …' if len(vs) > 8 else ''}"

    ev = (f"{counts[REPRODUCED]} of {len(values)} {_plural(over)} reproduced"
          + (f", {counts[PARTLY]} partly ({names(PARTLY)})" if counts[PARTLY] else ", 0 partly")
          + (f", {counts[NOT]} not ({names(NOT)})" if counts[NOT] else "")
          + (f", {counts[INCONCLUSIVE]} inconclusive ({names(INCONCLUSIVE)})" if counts[INCONCLUSIVE] else "")
          + f". Each: {_criterion(inner)}")
    return Outcome(verdict, ev, reason)


# ------------------------------------------------------------------------------------------------- criterion
def _criterion(test: Mapping) -> str:
    """The test in words, for the claims table."""
    kind = test["kind"]
    noise = {"2se": f"beyond {test.get('k', 2)} SE", "welch": f"Welch p < {test.get('alpha', 0.05)}",
             "deterministic": "no seed noise"}.get(test.get("noise"), "")
    if kind == "greater":
        return f"{_sel_name(test['left'])} − {_sel_name(test['right'])} ≥ {test['margin']}, {noise}"
    if kind in ("above", "below"):
        return f"{_sel_name(test['value'])} {'>' if kind == 'above' else '<'} {test['bound']}, {noise}"
    if kind == "within":
        plus = f" + {test.get('k', 2)} SE" if test["noise"] == "2se" else ""
        return f"|{_sel_name(test['value'])} − {_sel_name(test['target'])}|{plus} < {test['tolerance']}"
    if kind == "correlation":
        return (f"{test.get('method', 'pearson')} r of {_sel_name(test['left'])} and {_sel_name(test['right'])} over "
                f"{_plural(test['over'])}: {test.get('sign', 'positive')}, |r| ≥ {test['min_r']}, "
                f"p < {test['max_p']}")
    if kind == "monotone":
        return (f"{_sel_name(test['value'])} {test.get('direction', 'increasing')} over {test['over']}: last − first ≥ "
                f"{test['margin']} {noise}, no step back > {test['tolerance']}")
    if kind == "flat":
        plus = f" + {test.get('k', 2)} SE" if test["noise"] == "2se" else ""
        return f"{_sel_name(test['value'])} over {_plural(test['over'])}: max − min{plus} < {test['max_spread']}"
    if kind == "argmax":
        return f"highest {_sel_name(test['value'])} among {', '.join(map(str, test['candidates']))} is {test['expect']}, {noise}"
    if kind == "all":
        return " AND ".join(f"({_criterion(p)})" for p in test["parts"])
    if kind == "each":
        return f"for every {test['over']}: {_criterion(test['test'])}"
    return f"not testable offline: {test['reason']}"


def criterion(claim: Mapping) -> str:
    """The claim's test in words, with the reason for its threshold (and its nulls and seed count, if declared)."""
    extra = "".join(f" Must fail on the null model: {n['says']}." for n in claim.get("nulls") or [])
    if claim.get("min_seeds"):
        extra += f" Needs {claim['min_seeds']} seeds."
    return f"{_criterion(claim['test'])}. Why: {claim['why']}{extra}"


# ------------------------------------------------------------------------------------------------- chapter table
NOT_RESULTS = ("claims", "health", "gates")  # CSVs of a results folder that are not results artifacts


def read_results(folder: str | os.PathLike) -> dict[str, pd.DataFrame]:
    """Every results CSV of a folder by artifact name (claims.csv and run records left out)."""
    from .results import read_csv
    return {p.stem: read_csv(p) for p in sorted(Path(folder).glob("*.csv")) if p.stem not in NOT_RESULTS}


def with_null(test: Mapping, null: Mapping) -> dict:
    """`test` with the null's selector keys set (``set``) in the selectors named by ``into`` (default all), through
    ``all`` parts and ``each`` tests, ``minus`` selectors left alone."""
    into = tuple(null.get("into", ("left", "right", "value", "target")))
    if test["kind"] == "all":
        return {**test, "parts": [with_null(p, null) for p in test["parts"]]}
    if test["kind"] == "each":
        return {**test, "test": with_null(test["test"], null)}
    out = dict(test)
    for key in into:
        if isinstance(out.get(key), Mapping):
            out[key] = {**out[key], **null["set"]}
    return out


@dataclass
class Judgement:
    verdict: str
    evidence: str
    precondition: str = ""       # the preconditions in words ("" where the claim declares none)
    precondition_met: str = ""   # "yes", "no", "pending" or "" (none declared)
    reason: str = ""             # why it is inconclusive, as codes (REASONS; e.g. "precondition:base"); "" if decided


def judge(claim: Mapping, data: Data, profile: str = "lab") -> Judgement:
    """The verdict of one claim: its test, and around it its preconditions, nulls and seed count.

    A failed precondition, a null that passes the same test, or fewer seeds than ``min_seeds`` make the verdict
    inconclusive; the test's own evidence is still shown. The judgement's ``reason`` holds the codes of every cause
    (:data:`REASONS`), the test's own (underpowered, all runs failed) last. Raises Pending / MissingResults like
    `evaluate`."""
    pre = list(claim.get("requires") or [])
    said = "; ".join(p["says"] for p in pre)
    failed, codes = [], []
    for p in pre:
        pdata = replace(data, artifact=p.get("artifact", data.artifact), seeds_seen=[])
        v, e = evaluate(p["test"], pdata, profile)
        if v != REPRODUCED:
            failed.append(f"{p['says']} — not met: {e}")
            codes.append(f"precondition:{p['name']}")
    verdict, evidence, own = outcome(claim["test"], data, profile)
    met = "" if not pre else "no" if failed else "yes"
    reasons = []
    if failed:
        reasons.append("precondition failed: " + "; ".join(failed))
    for n in claim.get("nulls") or []:
        ndata = replace(data, left_out={}, seeds_seen=[])
        try:
            nv, ne = evaluate(with_null(claim["test"], n), ndata, profile)
        except MissingResults:  # a model the null reads is not in the results (yet): as for the test itself
            raise
        except (KeyError, ValueError) as err:
            raise ValueError(f"claim {claim.get('id', '?')!r}: its null {n['says']!r} cannot be evaluated: {err}")
        if nv == REPRODUCED and verdict in (REPRODUCED, PARTLY):
            reasons.append(f"a null model passes the same test ({n['says']}: {ne})")
            codes.append(f"null:{null_name(n)}")
    need = claim.get("min_seeds")
    if need and data.seeds_seen and min(data.seeds_seen) < need and verdict not in (OFFLINE,):
        reasons.append(f"the test needs {need} seeds to decide; the run has {min(data.seeds_seen)}")
        codes.append("min_seeds")
    if reasons and verdict not in (OFFLINE, PENDING):
        return Judgement(INCONCLUSIVE, f"Inconclusive: {' | '.join(reasons)}. The test itself: {verdict}, "
                                       f"{evidence}", said, met, reason_code(*codes, own))
    return Judgement(verdict, evidence, said, met, own if verdict == INCONCLUSIVE else "")


def _left_out_words(left_out: Mapping) -> str:
    runs = {}
    for (artifact, exp, seed), reason in sorted(left_out.items(), key=str):
        runs.setdefault((exp, seed), (reason, []))[1].append(artifact)
    return "; ".join(f"model {exp} seed {seed} ({reason})" for (exp, seed), (reason, _) in runs.items())


def prepare_recipes(paper: str, frames: Mapping[str, pd.DataFrame],
                    recipes: Sequence[tuple[str, Mapping[str, pd.DataFrame]]],
                    health: Sequence[pd.DataFrame] | None = None) -> list[tuple]:
    """(label, frames, pending, failed runs) of each stronger recipe for `read_on_recipes`: an experiment of the
    base `frames` absent from a recipe's is pending there; its failed runs come from `health` (one frame per recipe,
    in order: the recipe's health.csv as `xlrepro.verdicts.recipe_health` computes it) or else from the paper's
    health rule applied to the recipe's own frames."""
    from .health import assess, exclusions, load_rules
    rules = load_rules(paper) if claims_path(paper).is_file() else []
    names = lambda fs: {str(e) for f in fs.values() if "experiment" in f for e in f["experiment"].unique()}  # noqa
    if health is not None and len(health) != len(recipes):
        raise ValueError(f"one health frame per recipe: {len(recipes)} recipes, {len(health)} frames")
    return [(label, rframes, frozenset(names(frames) - names(rframes)),
             exclusions(assess(rules, rframes) if health is None else health[i]))
            for i, (label, rframes) in enumerate(recipes)]


def read_on_recipes(claim: Mapping, stronger: list[tuple], paper: str, profile: str = "lab",
                    base_read: set | None = None):
    """(Data, Judgement) of `claim` on the first recipe of `stronger` (`prepare_recipes`) that holds every model it
    reads, its evidence starting "At <label>:"; None where none does (the base results decide). A recipe holds them
    where the claim's selections find no model missing there and, with `base_read` (the experiments the claim read
    on the base results, `Data.read`), pick every one of those: a selector that names no experiment (`each` over
    whatever models a frame has) must not read a subset of its models on the recipe. A recipe whose frames the
    claim cannot read (a missing column, a null that cannot be evaluated) is passed over too."""
    for label, rframes, waiting, rfailed in stronger:
        data = Data(rframes, paper, claim.get("artifact"), waiting, rfailed)
        try:
            j = judge(claim, data, profile)
        except (Pending, NotRun, KeyError, ValueError):  # MissingResults is a KeyError: a model it has not trained
            continue
        if j.verdict == PENDING or (base_read is not None and not base_read <= data.read):
            continue
        return data, replace(j, evidence=f"At {label}: {j.evidence}")
    return None


def claims_table(paper: str, chapter: str, results: str | os.PathLike | Mapping[str, pd.DataFrame],
                 out: str | os.PathLike | None = None, profile: str = "lab",
                 claims: list[dict] | None = None, pending=(), health: pd.DataFrame | None = None,
                 not_run: Mapping[str, str] | None = None,
                 recipes: Sequence[tuple[str, Mapping[str, pd.DataFrame]]] = (),
                 recipe_health: Sequence[pd.DataFrame] | None = None) -> pd.DataFrame:
    """Verdicts of `chapter`'s claims, as a frame (claim, section, criterion, evidence, verdict, id, quote,
    precondition, precondition_met, reason: the codes of :data:`REASONS` for an inconclusive verdict).

    `results`: a results folder (its CSVs by file name) or a mapping artifact -> long frame. The rows replace this
    chapter's rows in ``<out>/claims.csv`` (`out` defaults to `results` when that is a folder; the other chapters'
    rows stay). `pending`: experiments not trained yet; a claim that reads one gets the verdict "pending".
    `not_run`: experiments the profile does not run at all, each with its reason; a claim that reads one is
    inconclusive (reason ``not_run``), its evidence giving the reason.
    `health`: the runs' health (:func:`xlrepro.health.assess`); by default the paper's health rule is applied to the
    frames given (and to the results folder's CSVs), and failed runs are left out of every selection, named in the
    evidence.
    `recipes`: (label, frames) of stronger recipes, strongest first (:func:`recipe_frames`): a claim is read on the
    first that holds every model it reads (an experiment of the base frames absent there is pending there), its
    evidence starting "At <label>:"; else on `results`. Each recipe's failed runs come from `recipe_health` (one
    frame per recipe: `xlrepro.verdicts.recipe_health`) or else from the health rule applied to its own frames.
    """
    from .health import assess, exclusions, load_rules
    from .results import CLAIM_COLUMNS, read_claims, write_claims
    claims = load_claims(paper) if claims is None else claims
    chapters = sorted({c["chapter"] for c in claims})
    mine = [c for c in claims if c["chapter"] == chapter]
    if not mine:
        raise ValueError(f"paper {paper!r} has no claims for chapter {chapter!r}; chapters: {', '.join(chapters)}")
    frames = results if isinstance(results, Mapping) else read_results(results)
    folder = out if out is not None else (None if isinstance(results, Mapping) else results)
    if health is None:
        every = {**(read_results(folder) if folder is not None and Path(folder).is_dir() else {}), **frames}
        health = assess(load_rules(paper) if claims_path(paper).is_file() else [], every)
    failed = exclusions(health)
    stronger = prepare_recipes(paper, frames, recipes, recipe_health)
    rows_ = []
    for c in mine:
        pre = "; ".join(p["says"] for p in c.get("requires") or [])
        data = Data(frames, paper, c.get("artifact"), frozenset(map(str, pending)), failed,
                    not_run={str(k): v for k, v in (not_run or {}).items()})
        read = None
        try:
            try:
                j = judge(c, data, profile)
                judged = True
            except (Pending, NotRun, MissingResults):
                judged = False
                if not stronger:
                    raise
            read = read_on_recipes(c, stronger, paper, profile, base_read=data.read if judged else None)
            if read is not None:
                data, j = read
            elif not judged:
                j = judge(c, data, profile)  # raises again: the base results decide, as pending or not run
        except Pending as wait:
            j = Judgement(PENDING, str(wait), pre, "pending" if pre else "")
        except NotRun as skipped:
            j = Judgement(INCONCLUSIVE, f"Inconclusive: {skipped}", pre, "", reason_code("not_run"))
        except MissingResults as e:  # the run is still to be made: say so rather than stop the chapter
            missing = getattr(e, "experiments", None)
            words = f"model {', '.join(missing)} has no results yet" if missing else f"no results yet ({e.args[0]})"
            j = Judgement(PENDING, words, pre, "pending" if pre else "")
        evidence = j.evidence
        if data.left_out and j.verdict != PENDING:
            where = "health.csv" if read is None else "the recipe's health.csv"
            evidence = f"{evidence}. Left out as failed runs ({where}): {_left_out_words(data.left_out)}"
        if c.get("after_run") and j.verdict != PENDING:
            evidence = f"{evidence}. Note written after the run: {c['after_run']}"
        rows_.append({"claim": c["claim"], "section": c["section"], "criterion": criterion(c),
                      "evidence": evidence, "verdict": j.verdict, "id": c["id"], "quote": c["quote"],
                      "precondition": j.precondition, "precondition_met": j.precondition_met,
                      "reason": j.reason})
    table = pd.DataFrame(rows_, columns=[*CLAIM_COLUMNS, *EXTRA_COLUMNS])
    if folder is not None:
        path = Path(folder) / "claims.csv"
        old = read_claims(path) if path.exists() else pd.DataFrame(columns=[*CLAIM_COLUMNS, "chapter"])
        records = [{**{k: "" for k in ("section", "criterion", *EXTRA_COLUMNS)}, **r}  # rows from before the columns
                   for r in (old.to_dict("records") if "chapter" in old else [])]
        mine_at = [i for i, r in enumerate(records) if r["chapter"] == chapter]
        at = mine_at[0] if mine_at else len(records)  # the chapter's rows keep their place in the file
        keep = [r for r in records if r["chapter"] != chapter]
        at -= sum(1 for i in mine_at if i < at)
        write_claims(keep[:at] + [{**r, "chapter": chapter} for r in rows_] + keep[at:], path)
    return table
