"""MLDoc (Schwenk & Li 2018): four-class classification of Reuters news documents in eight languages.

Upstream: https://github.com/facebookresearch/MLDoc. The repository holds no text, only the scripts and the
document ids; the files are built locally from Reuters RCV1 (English) and RCV2 (the other languages), which are
licensed through NIST (https://trec.nist.gov/data/reuters/reuters.html). The built files, e.g.
``english.train.1000``, ``english.dev``, ``german.test``, hold one document a line: ``LABEL<TAB>text``, the label
one of the four top-level RCV1 topics below.
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ..config import ConfigError

MLDOC_LABELS = ("CCAT", "ECAT", "GCAT", "MCAT")  # corporate, economics, government, markets
MLDOC_LANGUAGES = {"en": "english", "de": "german", "es": "spanish", "fr": "french", "it": "italian",
                   "ja": "japanese", "ru": "russian", "zh": "chinese"}


def read_mldoc(path: str | os.PathLike) -> pd.DataFrame:
    """The documents of one MLDoc file: columns text, gold_label (CCAT, ...) and label (its index in
    `MLDOC_LABELS`)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"MLDoc file {path} does not exist: build it with the facebookresearch/MLDoc scripts from "
                          f"a licensed RCV1/RCV2 copy and set XLREPRO_MLDOC_DIR to its folder")
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            label, sep, text = line.partition("\t")
            if not sep or label not in MLDOC_LABELS:
                raise ConfigError(f"{path}:{lineno}: an MLDoc line is 'LABEL<TAB>text' with LABEL one of "
                                  f"{', '.join(MLDOC_LABELS)}; got {line[:60]!r}")
            rows.append((text, label, MLDOC_LABELS.index(label)))
    return pd.DataFrame(rows, columns=["text", "gold_label", "label"])
