"""Where the prepared data cache and training runs live (override with XLREPRO_CACHE / XLREPRO_RUNS)."""
from __future__ import annotations

import os
from pathlib import Path


def repo_root(start: str | os.PathLike | None = None) -> Path:
    """The book's root: $XLREPRO_ROOT if set, else the nearest folder at or above `start` (default:
    the current working dir) that holds ``_toc.yml`` or ``pyproject.toml``, else `start` itself.

    A ``_toc.yml`` inside a folder named ``book`` (the book's sources next to ``book/results``)
    counts as its parent's marker, so running from ``book/`` does not give ``book/book/results``.
    """
    env = os.environ.get("XLREPRO_ROOT")
    if env:
        return Path(env).expanduser().resolve()
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
        if (folder / "_toc.yml").is_file():
            if folder.name == "book" and (folder / "results").is_dir():
                return folder.parent
            return folder
    return here


def cache_dir() -> Path:
    return Path(os.environ.get("XLREPRO_CACHE") or repo_root() / ".cache" / "xlrepro")


def runs_dir() -> Path:
    return Path(os.environ.get("XLREPRO_RUNS") or repo_root() / "runs")
