"""Natural language inference: XNLI 1.0 (test sets in 15 languages) and MultiNLI (English training data).

XNLI 1.0 (Conneau et al. 2018), https://dl.fbaipublicfiles.com/XNLI/XNLI-1.0.zip: ``XNLI-1.0/xnli.dev.tsv`` and
``xnli.test.tsv``, tab-separated with a header line; the columns this reader uses are ``language``,
``gold_label`` (entailment, neutral, contradiction), ``sentence1`` (the premise) and ``sentence2`` (the
hypothesis); the others (``sentence1_binary_parse``, ``pairID``, ...) are ignored. Sentences hold no tabs but do
hold quotation marks, which are text, not CSV quoting: the file is read with ``csv.QUOTE_NONE``.

MultiNLI 1.0 (Williams et al. 2018), https://cims.nyu.edu/~sbowman/multinli/multinli_1.0.zip:
``multinli_1.0/multinli_1.0_train.jsonl``, one JSON object a line with ``gold_label``, ``sentence1`` and
``sentence2`` among its keys. Pairs whose annotators did not agree carry ``gold_label`` "-" and are dropped, as in
every published use of the data.

Both readers return a DataFrame with the columns of `xlrepro.training.finetune.encode_pairs` (first, second,
label: the index of the gold label in `NLI_LABELS`) plus ``language`` and ``gold_label``.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pandas as pd

from ..config import ConfigError, choose

NLI_LABELS = ("entailment", "neutral", "contradiction")
#: The 15 languages of XNLI 1.0.
XNLI_LANGUAGES = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")
COLUMNS = ["language", "first", "second", "gold_label", "label"]


def _frame(rows: list[tuple[str, str, str, str]], where: str) -> pd.DataFrame:
    for lang, first, second, gold in rows:
        if gold not in NLI_LABELS:
            raise ConfigError(f"{where}: gold_label {gold!r} is not one of {', '.join(NLI_LABELS)}")
    frame = pd.DataFrame(rows, columns=["language", "first", "second", "gold_label"])
    frame["label"] = frame["gold_label"].map(NLI_LABELS.index).astype("int64")
    return frame[COLUMNS]


def read_xnli(path: str | os.PathLike, languages=None) -> pd.DataFrame:
    """The pairs of an XNLI 1.0 ``xnli.dev.tsv`` or ``xnli.test.tsv`` (see the module docstring), in file order;
    `languages` (codes of `XNLI_LANGUAGES`) keeps only those."""
    path = Path(path)
    if languages is not None:
        languages = [choose("XNLI language", lang, XNLI_LANGUAGES) for lang in languages]
    if not path.is_file():
        raise ConfigError(f"XNLI file {path} does not exist: unpack XNLI-1.0.zip "
                          f"(https://dl.fbaipublicfiles.com/XNLI/XNLI-1.0.zip) and set XLREPRO_XNLI_DIR to its folder")
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        need = ("language", "gold_label", "sentence1", "sentence2")
        if header is None or any(c not in header for c in need):
            raise ConfigError(f"{path}: an XNLI file's header names {', '.join(need)}; got {header!r}")
        col = {c: header.index(c) for c in need}
        rows = []
        for lineno, fields in enumerate(reader, 2):
            if len(fields) != len(header):
                raise ConfigError(f"{path}:{lineno}: {len(fields)} tab-separated fields, the header has {len(header)}")
            lang = fields[col["language"]]
            if languages is None or lang in languages:
                rows.append((lang, fields[col["sentence1"]], fields[col["sentence2"]], fields[col["gold_label"]]))
    return _frame(rows, str(path))


def read_multinli(path: str | os.PathLike, max_pairs: int | None = None) -> pd.DataFrame:
    """The pairs of MultiNLI's ``multinli_1.0_train.jsonl`` (or its dev files), language "en", without the pairs
    labelled "-" (no annotator consensus); `max_pairs` keeps the first ones (a smoke run)."""
    path = Path(path)
    if max_pairs is not None and (not isinstance(max_pairs, int) or max_pairs < 1):
        raise ConfigError(f"max_pairs must be None or a positive integer; got {max_pairs!r}")
    if not path.is_file():
        raise ConfigError(f"MultiNLI file {path} does not exist: unpack multinli_1.0.zip "
                          f"(https://cims.nyu.edu/~sbowman/multinli/multinli_1.0.zip) and set XLREPRO_MULTINLI_DIR "
                          f"to its folder")
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                gold, first, second = item["gold_label"], item["sentence1"], item["sentence2"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ConfigError(f"{path}:{lineno}: not a MultiNLI line (a JSON object with gold_label, sentence1, "
                                  f"sentence2): {exc}") from None
            if gold == "-":
                continue
            rows.append(("en", first, second, gold))
            if max_pairs is not None and len(rows) == max_pairs:
                break
    return _frame(rows, str(path))
