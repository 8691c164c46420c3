"""Chapter helpers for Liu et al. 2020: where results go, the static runs, and "pending" notes for GPU results."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .run import TRAIN_COMMAND

PENDING = ("Pending the GPU run: the BERT models are not trained yet. Train them with `{cmd}` (resumable jobs of "
           "at most 9 minutes; about 30 GPU-minutes on one H100 for the four), then rerun this chapter.")


def results_folder(publish: bool, results=None, smoke: bool = False) -> Path:
    """`results` if given, book/results/liu2020 for the published run, else a folder under runs/ (never book/)."""
    from xlrepro.paths import runs_dir
    from xlrepro.results import results_dir

    if publish and smoke:
        raise ValueError("a smoke run (max_chapters set) never publishes into book/results")
    folder = Path(results) if results else results_dir("liu2020") if publish else \
        runs_dir() / "liu2020" / "lab" / ("results-smoke" if smoke else "results")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def bert_pending(name: str = "") -> str:
    return PENDING.format(cmd=TRAIN_COMMAND + (f" --models {name}" if name else ""))


def bert_trained(name: str) -> bool:
    from .run import bert_configs
    return (bert_configs()[name].folder() / "training.json").exists()


def mrr_table(df: pd.DataFrame) -> pd.DataFrame:
    """experiment x language: 'MRR [low, high]'."""
    wide = df.pivot_table(index=["experiment", "language"], columns="metric", values="value", aggfunc="first")
    cell = wide.apply(lambda r: f"{r['mrr']:.3f} [{r['mrr_low']:.3f}, {r['mrr_high']:.3f}]", axis=1)
    return cell.unstack("language")
