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


# ---- the GPU evaluation's files (scripts/device_liu.sh evaluate, unpacked into gpu_results_dir()) ----------------

GPU_COMMAND = ("bash scripts/device_liu.sh train 540 && bash scripts/device_liu.sh evaluate 540 (on a 4-GPU node; "
               "then `mkdir -p runs/liu2020/lab/gpu-results && tar -xzf liu.tgz -C runs/liu2020/lab/gpu-results`)")


def gpu_results_dir(root=None) -> Path:
    """Where the chapters read the GPU evaluation: runs/liu2020/lab/gpu-results (or `root`)."""
    from xlrepro.paths import runs_dir
    return Path(root) if root else runs_dir() / "liu2020" / "lab" / "gpu-results"


def gpu_pending(what: str) -> str:
    return f"**{what}**: pending the GPU run (`{GPU_COMMAND}`)."


def bert_retrieval_results(names, root=None) -> pd.DataFrame | None:
    """MRR per layer of the BERTs `names` that the GPU run evaluated (None if none)."""
    folder = gpu_results_dir(root) / "retrieval"
    frames = [pd.read_csv(folder / f"{n}.csv") for n in names if (folder / f"{n}.csv").exists()]
    return pd.concat(frames, ignore_index=True) if frames else None


def transfer_results(root=None) -> pd.DataFrame | None:
    """Zero-shot accuracy, long: experiment (bert-<model> or <static run>), seed, metric accuracy, language."""
    import json
    folder = gpu_results_dir(root) / "transfer"
    rows = []
    for f in sorted(folder.glob("*.json")) if folder.exists() else []:
        r = json.loads(f.read_text())
        if r["mode"] not in ("all", "static"):
            continue
        exp = f"bert-{r['model']}" if r["mode"] == "all" else r["model"]
        rows += [{"experiment": exp, "seed": r["seed"], "metric": "accuracy", "value": v, "language": l}
                 for l, v in r["accuracy"].items()]
    return pd.DataFrame(rows) if rows else None


def choose_alpha(by_alpha: dict) -> str:
    """The alpha (key) with the best dev accuracy; ties go to the alpha nearest 0, then the smaller one."""
    return min(by_alpha, key=lambda a: (-by_alpha[a]["dev"], abs(float(a)), float(a)))


def table4(root=None, all_layers: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """L Table 4 per seed and language: finetune-all (the zero-shot run of big-w512), finetune-half (bottom half
    frozen, alpha 0) and finetune-half+MDS (alpha chosen on the target's dev split; its alpha in metric alpha)."""
    import json
    folder = gpu_results_dir(root) / "transfer"
    rows = []
    for f in sorted(folder.glob("*-half-s*.json")) if folder.exists() else []:
        r = json.loads(f.read_text())
        for lang, by_alpha in r["accuracy"].items():
            a = choose_alpha(by_alpha)
            base = {"seed": r["seed"], "language": lang}
            rows += [{**base, "experiment": "finetune-half", "metric": "accuracy", "value": by_alpha["0.0"]["test"]},
                     {**base, "experiment": "finetune-half+MDS", "metric": "accuracy", "value": by_alpha[a]["test"]},
                     {**base, "experiment": "finetune-half+MDS", "metric": "alpha", "value": float(a)}]
    if not rows:
        return None
    out = pd.DataFrame(rows)
    if all_layers is not None:
        big = all_layers[all_layers["experiment"] == "bert-big-w512"].assign(experiment="finetune-all")
        out = pd.concat([big, out], ignore_index=True)
    return out
