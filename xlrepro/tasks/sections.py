"""Verse-pair section classification: an offline stand-in for XNLI on the 22-language Bible.

An example is a pair of consecutive verses of one chapter (verse v and v+1: a sentence pair, as
in XNLI); its label is the canonical section of the book the chapter belongs to. Train on the
English train chapters, select on English dev, test on every language's test chapters (zero-shot
transfer); the majority baseline and an in-language supervised model bound the zero-shot numbers
(the task card of docs/section_task.md: those and lexical baselines applied zero-shot, per test language).

Why these six sections (`SECTIONS`):

* They are the canonical divisions of the (Protestant, KJV-ordered) canon that every edition here
  shares: law (Torah/Pentateuch, books 1-5), history (Joshua..Esther, 6-17), wisdom/poetry
  (Job..Song of Songs, 18-22), prophets (Isaiah..Malachi, 23-39), gospels and Acts (narrative of
  the New Testament, 40-44), letters and Revelation (Romans..Revelation, 45-66). The labels are a
  property of the book, not of any translation, so the label of a pair is the same in every
  language and the test sets are translations of each other.
* The classes differ in genre (legal/narrative/poetic/oracular/epistolary), which shows in word
  choice and style across languages, while neighbouring classes stay confusable (law vs history:
  both narrative in Genesis/Exodus; gospels vs history; prophets vs wisdom: both poetry), so the
  task is neither trivial nor hopeless. Two verses instead of one give some context.
* Six classes, not the finer Protestant division (major vs minor prophets, Pauline vs general
  letters, Revelation alone): those finer classes would be tiny (the minor prophets have 67
  chapters, Revelation 22, of 1,189) and separated mostly by book identity rather than genre.
  Revelation goes with the letters (it opens as a letter to seven churches, Rev 1:4 and chapters
  2-3) rather than standing alone as a 22-chapter class.

Class sizes, measured on the English (WEB) train split with `verse_pairs("en", "train")`
(24,237 pairs from 968 chapters; docs/section_task.md has every split):

    law 4,703 (19.4%)   history 5,445 (22.5%)   wisdom 3,727 (15.4%)
    prophets 4,266 (17.6%)   gospels_acts 3,845 (15.9%)   letters_revelation 2,251 (9.3%)

Roughly balanced: no class is tiny, the largest (history, the majority class) is 2.4 times the
smallest (letters_revelation: short chapters, 108 train chapters but 9.3% of the pairs). The
chapter split is a hash of (book, chapter), not stratified by section, so the shares move between
splits (English test: history 25.4%, letters_revelation 15.3%, gospels_acts 11.7%): the
majority baseline on English test is 25.4%. Report macro-F1 next to accuracy.

Subsampling (`max_pairs`) is uniform: the pairs with the smallest seeded SHA-256 hash of their
(book, chapter, verse) key are kept. The choice depends on the key only, never on the language or
the text, so from the same candidate keys every language gets the same pairs, and a smaller
`max_pairs` gives a subset of a larger one. Pass `keys=parallel_keys(langs, split)` to make the
candidate keys the same in every language.
"""
from __future__ import annotations

import hashlib
import os
from collections import Counter
from typing import Iterable, Sequence

from ..data.multilingual import LANGUAGES, SPLITS, check_language, load_verses

SECTIONS: tuple[str, ...] = (
    "law", "history", "wisdom", "prophets", "gospels_acts", "letters_revelation",
)

_SECTION_BOOKS: dict[str, range] = {
    "law": range(1, 6),                   # Genesis .. Deuteronomy
    "history": range(6, 18),              # Joshua .. Esther
    "wisdom": range(18, 23),              # Job .. Song of Songs
    "prophets": range(23, 40),            # Isaiah .. Malachi
    "gospels_acts": range(40, 45),        # Matthew .. Acts
    "letters_revelation": range(45, 67),  # Romans .. Revelation
}

#: KJV book number (1 Genesis .. 66 Revelation) -> section name.
BOOK_SECTION: dict[int, str] = {b: s for s in SECTIONS for b in _SECTION_BOOKS[s]}

PAIR_COLUMNS = ("book", "chapter", "verse", "first", "second", "label")

Key = tuple[int, int, int]  # (book, chapter, verse of the first verse of the pair)


def check_split(split: str) -> str:
    """Return `split` if it is train, dev or test, else raise ValueError naming them."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    return split


def section_label(book: int) -> int:
    """Index into `SECTIONS` of a book's section."""
    try:
        return SECTIONS.index(BOOK_SECTION[int(book)])
    except KeyError:
        raise ValueError(f"unknown book number {book!r}; books are 1..66 (KJV order)") from None


def _all_pairs(lang: str, split: str, cache_dir):
    """Every pair of consecutive one-verse spans (v, v+1) of one chapter, unlabelled."""
    df = load_verses(lang, split, cache_dir)
    df = df[df["span"] == 1][["book", "chapter", "verse", "text"]]
    nxt = df.assign(verse=df["verse"] - 1).rename(columns={"text": "second"})
    pairs = df.rename(columns={"text": "first"}).merge(nxt, on=["book", "chapter", "verse"], how="inner")
    pairs = pairs.sort_values(["book", "chapter", "verse"]).reset_index(drop=True)
    return pairs.astype({"book": "int64", "chapter": "int64", "verse": "int64"})


def pair_keys(lang: str, split: str, cache_dir: str | os.PathLike | None = None) -> list[Key]:
    """The (book, chapter, verse) keys of `lang`'s pairs in `split`, in canonical order."""
    check_language(lang)
    check_split(split)
    p = _all_pairs(lang, split, cache_dir)
    return list(zip(p["book"].tolist(), p["chapter"].tolist(), p["verse"].tolist()))


def parallel_keys(langs: Sequence[str], split: str,
                  cache_dir: str | os.PathLike | None = None) -> list[Key]:
    """Keys of the pairs that exist (both verses, one-verse spans) in every one of `langs`,
    in canonical order: pass them as `verse_pairs(..., keys=...)` to get translated test sets."""
    return common_keys(langs, split, lambda lang: pair_keys(lang, split, cache_dir))


def common_keys(langs: Sequence[str], split: str, keys_of) -> list[Key]:
    """The keys that `keys_of(lang)` gives for every one of `langs`, in canonical order (a pair task's test keys
    shared by all languages, so that its test sets are translations of each other)."""
    langs = [check_language(lang) for lang in langs]
    check_split(split)
    if not langs:
        raise ValueError("parallel_keys needs at least one language")
    common: set[Key] | None = None
    for lang in langs:
        keys = set(keys_of(lang))
        common = keys if common is None else common & keys
    return sorted(common)


def _key_hash(seed: int, key: Key) -> int:
    b, c, v = key
    return int.from_bytes(hashlib.sha256(f"{seed}:{b}:{c}:{v}".encode()).digest()[:7], "big")  # < 2**56: stays int64


def verse_pairs(lang: str, split: str, cache_dir: str | os.PathLike | None = None,
                max_pairs: int | None = None, seed: int = 0, *,
                keys: Iterable[Key] | None = None):
    """Labelled verse pairs of one language and split as a DataFrame with columns
    book, chapter, verse (of the first verse), first, second (the texts of verses v and v+1 of
    the chapter) and label (index into `SECTIONS`), in canonical order.

    A pair is kept only where both verses are in this language's cleaned text as one-verse spans
    (`span == 1`): pairs across a missing or merged verse are skipped. `keys` restricts the pairs
    to those (book, chapter, verse) keys (e.g. `parallel_keys`). `max_pairs` keeps a uniform,
    deterministic subsample: the `max_pairs` keys with the smallest SHA-256 hash of
    (seed, book, chapter, verse), so every language gets the same keys from the same candidates.
    """
    check_language(lang)
    check_split(split)
    if max_pairs is not None and max_pairs < 0:
        raise ValueError(f"max_pairs must be >= 0 or None; got {max_pairs!r}")
    pairs = _all_pairs(lang, split, cache_dir)
    if keys is not None:
        wanted = {tuple(int(x) for x in k) for k in keys}
        mask = [k in wanted for k in zip(pairs["book"], pairs["chapter"], pairs["verse"])]
        pairs = pairs[mask]
    if max_pairs is not None and len(pairs) > max_pairs:
        h = [_key_hash(seed, k) for k in zip(pairs["book"], pairs["chapter"], pairs["verse"])]
        keep = pairs.assign(_h=h).nsmallest(max_pairs, "_h").index
        pairs = pairs.loc[sorted(keep)]
    pairs = pairs.assign(label=[section_label(b) for b in pairs["book"]])
    return pairs[list(PAIR_COLUMNS)].reset_index(drop=True).astype({"label": "int64"})


def majority_class(train_labels: Iterable[int]) -> int:
    """The most frequent label (ties: the smallest label)."""
    counts = Counter(train_labels)
    if not counts:
        raise ValueError("majority_class needs at least one training label")
    top = max(counts.values())
    return min(label for label, n in counts.items() if n == top)


def majority_baseline(train_labels: Iterable[int], test_labels: Iterable[int]) -> float:
    """Accuracy on `test_labels` of always predicting the most frequent label of `train_labels`."""
    majority = majority_class(train_labels)
    test = list(test_labels)
    if not test:
        raise ValueError("majority_baseline needs at least one test label")
    return sum(1 for y in test if y == majority) / len(test)


def task_card(langs: Sequence[str] = LANGUAGES, cache_dir: str | os.PathLike | None = None, *,
              train_lang: str = "en", parallel: bool = False):
    """One row per (language, split): `pairs`, the share of each section (columns named after
    `SECTIONS`), and `majority_acc`: the accuracy on that split of always predicting the majority
    class of `train_lang`'s train pairs (the zero-shot training set; the row to report is test).

    With `parallel`, every language is restricted to the keys of `parallel_keys(langs, split)`.
    """
    import pandas as pd

    langs = [check_language(lang) for lang in langs]
    check_language(train_lang)
    majority = majority_class(verse_pairs(train_lang, "train", cache_dir)["label"])
    rows = []
    for split in SPLITS:
        keys = parallel_keys(langs, split, cache_dir) if parallel else None
        for lang in langs:
            labels = verse_pairs(lang, split, cache_dir, keys=keys)["label"]
            n = len(labels)
            counts = Counter(labels.tolist())
            row = {"lang": lang, "split": split, "pairs": n}
            row.update({s: counts.get(i, 0) / n if n else float("nan") for i, s in enumerate(SECTIONS)})
            row["majority"] = SECTIONS[majority]
            row["majority_acc"] = counts.get(majority, 0) / n if n else float("nan")
            rows.append(row)
    return pd.DataFrame(rows).set_index(["lang", "split"])
