"""The training check of the engine's FP8 switch (`xlrepro.engine.fused_bert.Fp8Linear`, the bench's ``ours-fp8``).

Its criterion was written before any run (`xlrepro.bench`, beside the ``ours-fp8`` engine): K et al.'s base en-es
B-BERT of the lab recipe, trained one model per stack with the linear layers as one plain product (``en-es/mm``) and
in FP8 (``en-es/fp8``), seeds 0-2 (part ``fp8check`` of experiments.yaml):

1. the seed means of the final MLM loss (each model's mean over the last `FINAL_POINTS` recorded points of its stack's
   loss curve) differ by at most `LOSS_TOLERANCE` nats;
2. the seed means of the zero-shot accuracy on es (section task, test) differ by less than 2 SE of the mm seeds.

Only if both hold may a chapter train with it. Train and read it with:

    xlrepro train k2020 --part fp8check --profile lab --compile --time-limit 540
    python -m xlrepro.papers.k2020.fp8_check
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
from scipy import stats

from xlrepro.config import ConfigError

LOSS_TOLERANCE = 0.02  # nats (criterion 1)
FINAL_POINTS = 5       # the last recorded points of a loss curve that make its final loss
CELLS = {"mm": "en-es/mm", "fp8": "en-es/fp8"}


def final_losses(stacks: Path, cells=tuple(CELLS.values())) -> dict[tuple[str, int], float]:
    """(cell, seed) -> final MLM loss: the mean of the last FINAL_POINTS points of its member's curve in the stacks'
    timing records (``<stacks>/*/timing.json``: ``members`` "<cell>/<seed>", ``mlm_loss_curve`` step -> a loss per
    member)."""
    out = {}
    for f in sorted(Path(stacks).glob("*/timing.json")):
        t = json.loads(f.read_text())
        curve = t.get("mlm_loss_curve") or {}
        steps = sorted(curve, key=int)[-FINAL_POINTS:]
        for i, member in enumerate(t["members"]):
            cell, seed = member.rsplit("/", 1)
            if cell in cells and steps:
                out[cell, int(seed)] = sum(float(curve[s][i]) for s in steps) / len(steps)
    return out


def check(losses: dict[tuple[str, int], float], accuracy: dict[tuple[str, int], float]) -> dict:
    """The two criteria on the final losses and the es accuracies of both cells (every seed of each): the seed means,
    their differences, 2 SE of the mm seeds' accuracy, each criterion and `adopted` (both hold). ConfigError where a
    cell has fewer than two seeds of either (no SE to compare with)."""
    def seeds(values, cell):
        v = [x for (c, _), x in sorted(values.items()) if c == cell]
        if len(v) < 2:
            raise ConfigError(f"the FP8 check needs at least two seeds of {cell}; it has {len(v)}")
        return v

    mean = lambda v: sum(v) / len(v)  # noqa: E731
    loss = {k: seeds(losses, c) for k, c in CELLS.items()}
    acc = {k: seeds(accuracy, c) for k, c in CELLS.items()}
    two_se = 2 * float(stats.sem(acc["mm"]))  # the sample's standard error (ddof 1)
    out = {"loss_mm": mean(loss["mm"]), "loss_fp8": mean(loss["fp8"]),
           "loss_difference": abs(mean(loss["fp8"]) - mean(loss["mm"])), "loss_tolerance": LOSS_TOLERANCE,
           "es_mm": mean(acc["mm"]), "es_fp8": mean(acc["fp8"]),
           "es_difference": abs(mean(acc["fp8"]) - mean(acc["mm"])), "es_2se_mm": two_se}
    out["criterion_1"] = out["loss_difference"] <= LOSS_TOLERANCE
    out["criterion_2"] = out["es_difference"] < two_se
    out["adopted"] = out["criterion_1"] and out["criterion_2"]
    return out


def run_check(profile: str = "lab") -> dict:
    """`check` on the trained cells of part fp8check under runs/k2020/<profile>."""
    from .bbert import Cell
    from .config import load_plan
    from .report import run_folder
    plan = load_plan()
    accuracy = {}
    for cell_name in CELLS.values():
        cell = Cell(plan, profile, cell_name)
        for s in cell.seeds:
            if cell.evaluated(s):
                r = cell.evaluate_seed(s)
                hit = r[(r["metric"] == "accuracy") & (r["language"] == "es") & (r["task"] == "sections")]
                accuracy[cell_name, s] = float(hit["value"].iloc[0])
    return check(final_losses(run_folder(profile) / "stacks"), accuracy)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m xlrepro.papers.k2020.fp8_check", description=__doc__.split("\n")[0])
    p.add_argument("--profile", default="lab", choices=["lab"])
    a = p.parse_args(argv)
    print(pd.Series(run_check(a.profile)).to_string())


if __name__ == "__main__":
    main()
