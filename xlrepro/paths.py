"""Where the prepared data cache and training runs live (override with XLREPRO_CACHE / XLREPRO_RUNS)."""
from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The checkout that holds `_toc.yml` (or `pyproject.toml`), searched upwards from the working directory."""
    if os.environ.get("XLREPRO_ROOT"):
        return Path(os.environ["XLREPRO_ROOT"])
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").exists() or (folder / "pyproject.toml").exists():
            return folder
    return here


def cache_dir() -> Path:
    return Path(os.environ.get("XLREPRO_CACHE") or repo_root() / ".cache" / "xlrepro")


def runs_dir() -> Path:
    return Path(os.environ.get("XLREPRO_RUNS") or repo_root() / "runs")
