"""The run record of a chapter: which machine trained and executed it, at which commit, with which versions.

The book's text speaks only of the project; a machine's name, the date and the commit go here, saved as
``book/results/<paper>/run_record_<chapter>.json`` and shown as a small table at the end of each chapter.
Paths are shown relative to the repository (`shown`), never as the machine's absolute paths.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import time
from pathlib import Path

import pandas as pd

from .atomic import atomic_open
from .paths import repo_root



def _process_start() -> float:
    """When this process (the notebook's kernel) started; the import time where psutil cannot tell."""
    try:
        import psutil
        return psutil.Process().create_time()
    except Exception:  # noqa: BLE001 - psutil missing or the platform does not say
        return time.time()


_STARTED = _process_start()  # the kernel's start: a chapter that imports this module late still times its whole run


def shown(path: str | os.PathLike) -> str:
    """`path` relative to the repository root; outside it, '<outside the repository>/<name>'."""
    p = Path(path).expanduser().resolve()
    try:
        return p.relative_to(repo_root()).as_posix() or "."
    except ValueError:
        return f"<outside the repository>/{p.name}"


def git_commit(root: str | os.PathLike | None = None) -> str:
    """`git rev-parse HEAD` of the repository, or "unknown" outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root or repo_root(), capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def training_devices(run_folder: str | os.PathLike | None) -> list[str]:
    """The distinct ``device`` fields of the JSON records (metrics.json, timing.json, …) under a run folder."""
    if run_folder is None or not Path(run_folder).is_dir():
        return []
    found = []
    for path in sorted(Path(run_folder).rglob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("device"), str):
            found.append(doc["device"])
    return sorted(set(found))


def this_machine() -> str:
    """The machine that executes the notebook: its GPU(s), else its CPU."""
    try:
        import torch
        if torch.cuda.is_available():
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            return ", ".join(f"{names.count(n)} x {n}" for n in dict.fromkeys(names))
    except Exception:  # noqa: BLE001 - a record is written even without a working torch
        pass
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def _version(module: str) -> str:
    try:
        return __import__(module).__version__
    except Exception:  # noqa: BLE001
        return "not installed"


def run_record(paper: str, chapter: str, run_folder: str | os.PathLike | None = None,
               started: float | None = None, notes: dict | None = None) -> dict:
    """The record of this execution of `chapter`; `run_folder` is the training run whose device fields count;
    `notes` add fields or replace them (e.g. "training devices" of a chapter rendered from published results)."""
    now = time.time()
    record = {
        "paper": paper,
        "chapter": chapter,
        "training devices": ", ".join(training_devices(run_folder)) or "none recorded",
        "executed on": this_machine(),
        "git commit": git_commit(),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "wall time (s)": round(now - (started if started is not None else _STARTED), 1),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    return {**record, **{str(k): str(v) for k, v in (notes or {}).items()}}


def save_run_record(record: dict, folder: str | os.PathLike) -> Path:
    """Write `record` as ``<folder>/run_record_<chapter>.json`` (atomically)."""
    path = Path(folder) / f"run_record_{record['chapter']}.json"
    with atomic_open(path) as f:
        f.write(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return path


def record_table(record: dict) -> pd.DataFrame:
    """The record as a two-column table for the chapter's last cell."""
    return pd.DataFrame({"": list(record), "value": [str(v) for v in record.values()]})


def show_run_record(paper: str, chapter: str, results: str | os.PathLike, run_folder=None,
                    notes: dict | None = None) -> pd.DataFrame:
    """Build, save (beside the chapter's results) and return the run record as a table (`run_record`'s `notes`)."""
    record = run_record(paper, chapter, run_folder, notes=notes)
    save_run_record(record, results)
    return record_table(record)
