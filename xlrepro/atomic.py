"""Atomic file writes and file locks: the project's one implementation of both.

A reader (or an interrupted run) never sees a half-written file: every write goes to a uniquely named
temp file next to the target, is fsync'ed and then os.replace'd onto it. `locked` serialises a
read-modify-write of a shared file between processes (e.g. parallel `--shard` runs).
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def _fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable where the platform allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a unique temporary path next to `path`; on success it replaces `path`, on error it is removed
    and an existing `path` is left untouched. `suffix` ends the temp name (some writers need ".ipynb")."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(fd)
    os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)  # mkstemp's 0600 would stick
    try:
        yield Path(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator:
    """`open(temp)` in text ("w", UTF-8, no newline translation) or binary ("wb") mode, written atomically
    onto `path` (see `atomic_path`)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open mode {mode!r}; valid modes: w, wb")
    text = {"encoding": "utf-8", "newline": ""} if mode == "w" else {}
    with atomic_path(path) as tmp, open(tmp, mode, **text) as f:
        yield f


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb") as f:
        f.write(data)


def write_json(path: str | os.PathLike, obj) -> None:
    write_bytes(path, json.dumps(obj, indent=1, ensure_ascii=False).encode())


class LockHeld(RuntimeError):
    """`locked(..., wait=False)` found the lock held by another process."""


class CorruptFile(ValueError):
    """A prepared file that does not parse (a truncated write, a full disk): the message names it and the fix."""


def read_json(path: str | os.PathLike, fix: str):
    """The JSON document in `path`; one that does not parse raises CorruptFile naming the file and `fix` (e.g.
    "delete it and run `xlrepro prepare`")."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except ValueError as err:
        raise CorruptFile(f"{path} is corrupt (not valid JSON: {err}; a truncated write?); {fix}") from None


@contextmanager
def locked(path: str | os.PathLike, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive lock for `path` (fcntl.flock on a ".<name>.lock" file next to it) between
    processes; it is released when the block ends, also when a process dies. Without `wait`, a lock another
    process holds raises LockHeld at once."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise LockHeld(f"{path} is locked by another process") from None
        yield
    finally:
        os.close(fd)  # closing releases the lock
