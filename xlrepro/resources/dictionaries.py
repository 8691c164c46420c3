"""MUSE bilingual dictionaries (Conneau et al. 2018, "Word Translation Without Parallel Data").

Upstream: https://github.com/facebookresearch/MUSE, files such as
https://dl.fbaipublicfiles.com/arrival/dictionaries/en-de.txt (full), ``en-de.0-5000.txt`` (train) and
``en-de.5000-6500.txt`` (test): one pair a line, ``source target`` separated by whitespace (a space or a tab). A
source word with several translations has one line per translation; for evaluation they form one gold set (a
retrieval is correct if it finds any of them). The line parser is `xlrepro.data.dictionaries.read_muse`, the one the
lab's dictionaries use.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..config import ConfigError
from ..data.dictionaries import read_muse

__all__ = ["read_muse", "read_muse_gold"]


def read_muse_gold(path: str | os.PathLike) -> dict[str, set[str]]:
    """{source word: the set of its gold translations} of a MUSE dictionary file, in first-seen order of sources."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"MUSE dictionary {path} does not exist: download it from "
                          f"https://dl.fbaipublicfiles.com/arrival/dictionaries/ and set XLREPRO_MUSE_DIR to its folder")
    try:
        pairs = read_muse(path)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    gold: dict[str, set[str]] = {}
    for source, target in pairs:
        gold.setdefault(source, set()).add(target)
    return gold
