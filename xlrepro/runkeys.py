"""Run identity: every cached run lives under a key that is a hash of its fully resolved configuration.

A run's folder is named by `run_key(config)`, and the config is saved beside its results (`config.json`), so a
changed setting (a learning rate, the corpus, the number of steps, an option of the engine that changes numbers)
never reads back an old result, and the same configuration always finds its run again.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from .atomic import write_json

KEY_LENGTH = 16  # hex digits of sha256: 64 bits, collisions are not a concern at this scale


def canonical(value: Any) -> Any:
    """JSON-ready form with a stable order: dataclasses become dicts, tuples lists, floats keep their repr."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    raise TypeError(f"cannot key a value of type {type(value).__name__}: {value!r}")


def run_key(config: Mapping[str, Any]) -> str:
    """A short hash of the configuration (independent of the order of its keys)."""
    text = json.dumps(canonical(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


def write_config(folder: str | Path, config: Mapping[str, Any], recorded: Mapping[str, Any] | None = None) -> Path:
    """Save the resolved configuration beside a run's results (atomically).

    `recorded`: facts about the run that are not part of its key (so that runs made before they were recorded keep
    their keys), saved under "recorded" to be checked when the run is read back (e.g. its vocabulary's fingerprint)."""
    path = Path(folder) / "config.json"
    write_json(path, {"key": run_key(config), "config": canonical(config),
                      **({"recorded": canonical(recorded)} if recorded else {})})
    return path
