"""The gates of the K et al. 2020 chapters (gates.yaml): did the B-BERTs learn what the claims are about?

- ``base_transfers``: each base pair model (``en-X`` and ``enfake-X``, X in es, hi, ru; the linguistic chapter's
  results) transfers to X: the mean zero-shot accuracy on X over seeds minus 2 SE (sample std / sqrt(seeds)) is at
  least `points` above the accuracy of the majority class on the same test pairs (``majority/<experiment>``).
- ``ablations_learn_source``: every model of the chapters' results (each experiment but the ``majority/`` rows)
  learned its source task: the mean accuracy on its own source language (``en`` or ``enfake``, the experiment's first
  part) is at least `points` above its majority class.
- ``alltext_pilot_transfers``: the pilot on all the offline text (profile ``alltext``, one seed; pilot_alltext.csv)
  transfers on dev in every base pair cell: target dev accuracy at least `points` above the majority class.
  ``alltext2x_pilot_transfers`` and ``alltext4x_pilot_transfers``: the same check on the pilots with twice and four
  times the steps (profiles ``alltext2x``, ``alltext4x``). A pilot gate's ``seeds`` restricts it to its declared seeds.
- ``alltext_base_transfers``, ``alltext2x_base_transfers``, ``alltext4x_base_transfers``: ``base_transfers``'
  check on a scaling profile's runs of all the base cells (pilot_<profile>.csv); with ``seeds``, pending until every
  cell has all of them. ``alltext8x_base_transfers``: the same on the Russian pair alone (its ``targets``).
- A gate with ``superseded_by`` (and ``why``) was replaced by that gate before its runs finished: neither passed nor
  failed (`superseded`).

`gate_frame` returns gates.csv's rows (gate, criterion, value, threshold, passed, detail); `main` writes
book/results/k2020/gates.csv from the published results:

    python -m xlrepro.papers.k2020.gates
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from .constants import PILOTS, RECIPES

GATES_FILE = Path(__file__).with_name("gates.yaml")
COLUMNS = ["gate", "criterion", "value", "threshold", "passed", "detail"]


def load_gates(path: str | Path = GATES_FILE) -> dict:
    return yaml.safe_load(Path(path).read_text())


def gate_spec(gate: str) -> dict:
    """gates.yaml's entry of `gate` (its id); an empty dict where none has it."""
    return next((g for g in load_gates()["gates"] if g["id"] == gate), {})


def gate_passed(value) -> bool:
    """Whether a gates.csv ``passed`` cell says passed (True as a bool or as text; blank, pending or False: no)."""
    return value is True or str(value) == "True"


def _accuracy(df: pd.DataFrame, exp: str, lang: str, metric: str = "accuracy") -> pd.Series:
    """The section task's `metric` (accuracy on test, dev_accuracy on dev) of `exp` on `lang`, one value a seed."""
    rows = df[(df["experiment"] == exp) & (df["metric"] == metric) & (df["language"] == lang)
              & (df["task"] == "sections")]
    return rows.drop_duplicates(["seed"])["value"]


def _criterion(g: dict) -> str:
    return g["criterion"].replace("`points`", f"{g['points']:g}")


def gate_cells(g: dict) -> list[str]:
    """The pair cells a transfer gate reads: each of its sources with each of its targets (``<source>-<target>``)."""
    return [f"{s}-{t}" for s in g["sources"] for t in g["targets"]]


def base_transfers(g: dict, results: dict[str, pd.DataFrame]) -> dict:
    df = results.get(g["artifact"])
    cells = gate_cells(g)
    if df is None:
        return {"value": None, "threshold": len(cells), "passed": None, "detail": "no results"}
    if "seeds" in g:  # every cell needs all of its declared seeds; until then the gate is pending
        have = {e: set(df[df["experiment"] == e]["seed"]) for e in cells}
        short = [e for e in cells if not set(g["seeds"]) <= have[e]]
        if short:
            return {"value": None, "threshold": len(cells), "passed": None,
                    "detail": "pending: " + "; ".join(
                        f"{e} has seeds {', '.join(map(str, sorted(have[e]))) or 'none'} of "
                        f"{', '.join(map(str, g['seeds']))}" for e in short)}
        df = df[df["seed"].isin(list(g["seeds"]) + [-1])]
    failed, passing = [], []
    for exp in cells:
        target = exp.split("-")[1]
        acc, major = _accuracy(df, exp, target), _accuracy(df, f"majority/{exp}", target)
        if acc.empty or major.empty:
            failed.append(f"{exp} (no results)")
            continue
        se = acc.std(ddof=1) / len(acc) ** 0.5 if len(acc) > 1 else float("nan")
        low = acc.mean() - 2 * se
        value = f"{exp} ({acc.mean():.3f} - 2 SE {2 * se:.3f} vs majority {major.mean():.3f})"
        if not low >= major.mean() + g["points"] / 100:  # NaN (one seed) fails too
            failed.append(value)
        else:
            passing.append(value)
    return {"value": len(cells) - len(failed), "threshold": len(cells), "passed": not failed,
            "detail": "failing: " + "; ".join(failed) if failed else "every cell passes: " + "; ".join(passing)}


def failing_cells(detail: str) -> list[str]:
    """The pair cells that a `base_transfers` row's detail names as failing (its "failing: <cell> (...); ..." form);
    none for a row that passed, is pending or was superseded."""
    if not isinstance(detail, str) or not detail.startswith("failing: "):
        return []
    return [part.strip().split(" ")[0] for part in detail[len("failing: "):].split(";") if part.strip()]


def stronger_passes(gates: pd.DataFrame, gate: str) -> dict[str, tuple[str, str]]:
    """For each cell that `gate` (a scaling profile's ``<profile>_base_transfers`` row of gates.csv) names as failing:
    the first base gate of a stronger recipe (a later profile of `PILOTS`) that passed with the cell among its cells
    (`gate_cells` of gates.yaml), as (gate id, recipe label). Cells no stronger recipe passed are left out."""
    row = gates[gates["gate"] == gate] if len(gates) else gates
    profile = gate.split("_")[0]
    if row.empty or profile not in PILOTS:
        return {}
    passed = {g for g, p in zip(gates["gate"], gates["passed"]) if gate_passed(p)}
    out = {}
    for cell in failing_cells(row["detail"].iloc[0]):
        for later in PILOTS[PILOTS.index(profile) + 1:]:
            g = gate_spec(f"{later}_base_transfers")
            if g and g["id"] in passed and cell in gate_cells(g):
                out[cell] = (g["id"], RECIPES[later])
                break
    return out


def stronger_sentence(cells: list[str], gate: str, label: str) -> str:
    """How the readings name cells that fail a recipe's gate and pass `gate`, a stronger recipe's (`stronger_passes`):
    the pass is the stronger recipe's, which differs in its learning-rate schedule as well as its length (a run is not
    the same model at the same step under a longer schedule), so the sentence does not say that the steps made it
    pass."""
    many = len(cells) > 1
    return (f"At a stronger recipe ({label}) {', '.join(cells)} pass{'' if many else 'es'} "
            f"{'their' if many else 'its'} transfer gate (`{gate}`)")


def ablations_learn_source(g: dict, results: dict[str, pd.DataFrame]) -> dict:
    models, failed = set(), []
    for name in g["artifacts"]:
        df = results.get(name)
        if df is None:
            continue
        for exp in sorted(set(df["experiment"])):
            if exp.startswith("majority/") or exp in models:
                continue
            source = exp.split("-")[0]
            acc, major = _accuracy(df, exp, source), _accuracy(df, f"majority/{exp}", source)
            if acc.empty or major.empty:
                continue
            models.add(exp)
            if acc.mean() < major.mean() + g["points"] / 100:
                failed.append(f"{exp} ({acc.mean():.3f} vs majority {major.mean():.3f})")
    if not models:
        return {"value": None, "threshold": None, "passed": None, "detail": "no results"}
    return {"value": len(models) - len(failed), "threshold": len(models), "passed": not failed,
            "detail": "failing: " + "; ".join(failed) if failed else "every model passes"}


def alltext_pilot_transfers(g: dict, results: dict[str, pd.DataFrame]) -> dict:
    """The pilot's gate on dev (one seed, so no SE): the target's mean dev accuracy at least `points` above the
    majority class's dev accuracy, for every base pair cell."""
    df = results.get(g["artifact"])
    cells = gate_cells(g)
    if df is None:
        trained = results.get(f"{g['artifact']}/pretraining")
        detail = "no results" if trained is None else (
            "no zero-shot results: pre-training finished (" + "; ".join(
                f"{r.model} {r.steps:,} steps, final MLM loss {r.final_loss:.2f}" for r in trained.itertuples())
            + "), the fine-tunings did not run")
        return {"value": None, "threshold": len(cells), "passed": None, "detail": detail}
    if "seeds" in g:  # the pilot's declared seeds (majority rows carry seed -1 and stay)
        df = df[df["seed"].isin(list(g["seeds"]) + [-1])]
    failed, margins = [], []
    for exp in cells:
        target = exp.split("-")[1]
        acc, major = (_accuracy(df, e, target, "dev_accuracy") for e in (exp, f"majority/{exp}"))
        if acc.empty or major.empty:
            failed.append(f"{exp} (no results)")
            continue
        margin = acc.mean() - major.mean()
        margins.append(f"{exp} {100 * margin:+.1f}")
        if not margin >= g["points"] / 100:
            failed.append(f"{exp} ({acc.mean():.3f} vs majority {major.mean():.3f})")
    detail = ("failing: " + "; ".join(failed) if failed else "every cell passes") + \
        (f" (dev margins in points: {', '.join(margins)})" if margins else "")
    return {"value": len(cells) - len(failed), "threshold": len(cells), "passed": not failed, "detail": detail}


def gate_frame(results: dict[str, pd.DataFrame], spec: dict | None = None) -> pd.DataFrame:
    """gates.csv's rows from the chapters' result frames (name -> long frame; a missing name: its gate pending)."""
    spec = spec or load_gates()
    check = {"base_transfers": base_transfers, "ablations_learn_source": ablations_learn_source,
             "alltext_pilot_transfers": alltext_pilot_transfers, "alltext_base_transfers": base_transfers,
             "alltext2x_pilot_transfers": alltext_pilot_transfers, "alltext2x_base_transfers": base_transfers,
             "alltext4x_pilot_transfers": alltext_pilot_transfers, "alltext4x_base_transfers": base_transfers,
             "alltext8x_base_transfers": base_transfers}
    rows = [{"gate": g["id"], "criterion": _criterion(g), **(superseded(g) if "superseded_by" in g else
                                                            check[g["id"]](g, results))} for g in spec["gates"]]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["threshold"] = frame["threshold"].astype("Int64")  # counts of cells or models (a superseded gate: none)
    return frame


def superseded(g: dict) -> dict:
    """The row of a gate declared and then replaced before its runs finished (``superseded_by``: the gate that
    replaces it; ``why``): neither passed nor failed, the reason in its detail."""
    return {"value": None, "threshold": None, "passed": None,
            "detail": f"superseded by {g['superseded_by']}: {g['why']}"}


def read_gates(folder: str | Path, spec: dict | None = None) -> pd.DataFrame:
    folder = Path(folder)
    spec = spec or load_gates()
    names = {g.get("artifact") for g in spec["gates"]} | {a for g in spec["gates"] for a in g.get("artifacts", [])}
    results = {n: pd.read_csv(folder / f"{n}.csv") for n in names - {None} if (folder / f"{n}.csv").exists()}
    for n in names - {None}:
        stacks = sorted((folder / n).glob("stack_*.json"))
        if stacks:  # a pilot's pre-training records (the engine's stack timing: members, steps, loss curve)
            results[f"{n}/pretraining"] = pretraining_records(stacks)
    return gate_frame(results, spec)


def pretraining_records(paths) -> pd.DataFrame:
    """model, steps, final_loss of each member of the stacks' timing records (`mlm_loss_curve`: step -> [M])."""
    import json
    rows = []
    for path in paths:
        t = json.loads(Path(path).read_text())
        curve = t["mlm_loss_curve"]
        last = max(curve, key=int)
        rows += [{"model": m, "steps": int(last), "final_loss": float(v)} for m, v in zip(t["members"], curve[last])]
    return pd.DataFrame(rows)


def main() -> None:
    from xlrepro.results import results_dir
    folder = results_dir("k2020")
    frame = read_gates(folder)
    frame.to_csv(folder / "gates.csv", index=False)
    print(frame[["gate", "value", "threshold", "passed"]].to_string(index=False))


if __name__ == "__main__":
    main()
