"""The prepared English/Fake-English lab data of Dufter & Schütze: sentences, vocabulary and word-piece ids.

Prepared once into a compact cache (a few MB) that later chapters and offline GPU nodes reuse.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from xlrepro.atomic import CorruptFile, read_json, write_bytes
from xlrepro.config import check_profile
from xlrepro.data.bible import DEV_EDITION, DEV_SENTENCES, LAB_CLAUSES, TRAIN_EDITION, load_english
from xlrepro.paths import cache_dir
from xlrepro.tokenization import train_wordpiece

from .fake_english import FakeEnglish

MAX_LENGTH = 128
VOCAB_PER_LANGUAGE = 2048
# What the prepared corpus is made of: part of every run's key, and checked against the cache when it is loaded,
# so a change here never reuses a cache or a run made from another corpus.
CORPUS = {"version": 2, "train_edition": TRAIN_EDITION, "dev_edition": DEV_EDITION, "dev_sentences": DEV_SENTENCES,
          "split": "punkt+clauses" if LAB_CLAUSES else "punkt", "vocab_per_language": VOCAB_PER_LANGUAGE,
          "max_length": MAX_LENGTH}


@dataclass
class LabData:
    fe: FakeEnglish
    train_sentences: list[str]
    dev_sentences: list[str]
    train_pieces: list[np.ndarray]  # English word-piece ids, no specials, at most MAX_LENGTH - 2
    dev_pieces: list[np.ndarray]
    source: str
    eval_vocab: int | None = None  # evaluate word translation on the first n pieces only (smoke runs)

    def subset(self, n: int | None) -> "LabData":
        """The first n train and dev sentences and n vocabulary pieces for evaluation (smoke runs).

        The tokenizer and the model's vocabulary stay the full corpus's."""
        if n is None:
            return self
        return LabData(self.fe, self.train_sentences[:n], self.dev_sentences[:n], self.train_pieces[:n],
                       self.dev_pieces[:n], self.source, eval_vocab=n)


def lab_cache(profile: str = "lab", root: Path | None = None) -> Path:
    return Path(root or cache_dir()) / "dufter2020" / check_profile(profile)


def prepare_lab(profile: str = "lab", root: Path | None = None, pbc_dir=None) -> Path:
    """Read the corpora, train the 2,048-piece WordPiece vocabulary, and write the cache.

    A cache already prepared for these corpus settings is kept as it is: its vocabulary is the one its runs and its
    knn-replace table were made with (caches prepared before vocabularies were trained deterministically have ids a
    new training would not reproduce). Delete the folder to prepare it afresh."""
    folder = lab_cache(profile, root)
    if (folder / "tokenizer.json").exists() and (folder / "corpus.json").exists() and \
            read_json(folder / "corpus.json", _fix(profile)).get("corpus") == CORPUS:
        return folder
    corpora = load_english(profile, pbc_dir)
    tok = train_wordpiece(corpora.train, VOCAB_PER_LANGUAGE)
    write_bytes(folder / "tokenizer.json", tok.to_str().encode())
    write_bytes(folder / "corpus.json", json.dumps(
        {"source": corpora.source, "corpus": CORPUS, "train": corpora.train, "dev": corpora.dev},
        ensure_ascii=False).encode())
    return folder


def _fix(profile: str) -> str:
    return f"delete it and run `xlrepro prepare --profile {profile}` to rebuild it"


def load_lab(profile: str = "lab", root: Path | None = None, prepare: bool = True) -> LabData:
    folder = lab_cache(profile, root)
    corpus = read_json(folder / "corpus.json", _fix(profile)) if (folder / "corpus.json").exists() else None
    if corpus is None or corpus.get("corpus") != CORPUS:  # missing, or prepared with other settings
        if not prepare:
            raise FileNotFoundError(f"no prepared data for these corpus settings in the cache; run "
                                    f"`xlrepro prepare --profile {profile}`")
        prepare_lab(profile, root)
        corpus = read_json(folder / "corpus.json", _fix(profile))
    try:
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as err:  # tokenizers raises its own Exception for a file it cannot parse
        raise CorruptFile(f"{folder / 'tokenizer.json'} is corrupt ({err}); {_fix(profile)}") from None
    fe = FakeEnglish(tokenizer, shift=VOCAB_PER_LANGUAGE)
    return LabData(fe=fe, train_sentences=corpus["train"], dev_sentences=corpus["dev"],
                   train_pieces=fe.encode(corpus["train"], MAX_LENGTH - 2),
                   dev_pieces=fe.encode(corpus["dev"], MAX_LENGTH - 2), source=corpus["source"])
