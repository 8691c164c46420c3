"""Verse adjacency: a sentence-pair task that neither verse of a pair can decide alone.

The section task (`xlrepro.tasks.sections`) labels a pair by the section of its book, which either verse tells by
itself. So a pair whose two verses are in different languages (K et al.'s Table 11: premise in one language,
hypothesis in another) can be classified from its easier side alone, and a drop on such pairs says nothing about
reading the two languages together. This task asks instead whether the second verse follows the first:

* every pair (v, v+1) of `verse_pairs` (one chapter, consecutive one-verse spans) is a positive, label
  ``next_verse``;
* for each positive, a negative keeps its first verse and takes the second verse of another pair of the same
  section (`SECTIONS`) from another chapter, label ``other_chapter``. The partners are a rotation by half of the
  section's pairs in canonical order (`negative_partners`), so they come from far in the section, and the genre that
  the section task reads cannot tell a negative from a positive. Where one chapter holds more than half of a
  section's pairs (a small subsample), that section is rotated with the next one, so some partners cross sections;
  on the full English train, dev and test splits none does.

Each first verse and each second verse appear exactly once in each class, so any classifier that reads one side only
scores exactly 50 % (the task card's single-side rows check it), and both classes are equally frequent (the
majority baseline is 50 %). The pairs depend on the keys only (the rotation is over the keys in canonical order),
so with the same keys (`parallel_keys`) every language gets translations of the same pairs, and a pair can take its
first verse from one language and its second from another. Not in any of the papers: the project's stand-in for
Table 11's mixed pairs, declared before its runs.
"""
from __future__ import annotations

import os
from typing import Iterable

import numpy as np

from .sections import verse_pairs

LABELS: tuple[str, ...] = ("other_chapter", "next_verse")


def negative_partners(sections, chapters) -> np.ndarray:
    """For pairs in canonical order with their section labels and (book, chapter) keys: the index of each pair's
    negative partner, a permutation that maps every pair to a pair of the same section and another chapter. Within
    a section of m pairs the partner is m // 2 places on (cyclically), so it comes from far in the section. A
    section where that lands in the same chapter for some pair (one chapter holds more than half of its pairs) is
    rotated together with the next section instead; ValueError where even all the pairs together cannot avoid it."""
    sections, chapters = list(sections), [tuple(c) for c in chapters]
    n = len(sections)
    if len(chapters) != n:
        raise ValueError(f"negative_partners needs one chapter per pair; got {n} sections and {len(chapters)} chapters")
    if n < 2:
        raise ValueError(f"the adjacency task needs pairs from at least two chapters; got {n} pairs")
    groups: list[list[int]] = []
    for i, s in enumerate(sections):
        if groups and sections[groups[-1][0]] == s and groups[-1][-1] == i - 1:
            groups[-1].append(i)
        else:
            groups.append([i])

    def collides(group: list[int]) -> bool:
        m = len(group)
        return any(chapters[group[k]] == chapters[group[(k + m // 2) % m]] for k in range(m))

    merged: list[list[int]] = []
    pending: list[int] = []
    for g in groups:
        pending = pending + g
        if not collides(pending):
            merged.append(pending)
            pending = []
    if pending:  # the last sections could not stand alone: rotate them with the group before them
        pending = (merged.pop() if merged else []) + pending
        if collides(pending):
            raise ValueError("the adjacency task cannot pair every verse with one from another chapter: one chapter "
                             "holds more than half of the pairs")
        merged.append(pending)
    partner = np.empty(n, dtype=np.int64)
    for g in merged:
        m = len(g)
        for k, i in enumerate(g):
            partner[i] = g[(k + m // 2) % m]
    return partner


def adjacency_pairs(lang: str, split: str, cache_dir: str | os.PathLike | None = None,
                    max_pairs: int | None = None, seed: int = 0, *, keys: Iterable | None = None):
    """The adjacency pairs of one language and split: for each pair of `verse_pairs` (same arguments: `max_pairs`
    and `keys` choose the positives), its positive then its negative, as a DataFrame with the columns book, chapter,
    verse (of the first verse), first, second and label (index into `LABELS`): twice as many rows as positives."""
    import pandas as pd

    pos = verse_pairs(lang, split, cache_dir, max_pairs, seed, keys=keys)
    partner = negative_partners(pos["label"], zip(pos["book"], pos["chapter"]))
    neg = pos.assign(second=pos["second"].to_numpy()[partner])
    both = pd.concat([pos.assign(label=1), neg.assign(label=0)], keys=[0, 1], names=["_kind", "_row"])
    both = both.reset_index().sort_values(["_row", "_kind"])
    return both[["book", "chapter", "verse", "first", "second", "label"]].reset_index(drop=True).astype(
        {"label": "int64"})


def jaccard(first_docs, second_docs) -> np.ndarray:
    """The word-set overlap of each pair: |A ∩ B| / |A ∪ B| of the two verses' token lists (0 where both are empty).
    Written here: a one-line set operation that no library call saves."""
    out = []
    for a, b in zip(first_docs, second_docs, strict=True):
        a, b = set(a), set(b)
        out.append(len(a & b) / len(a | b) if a | b else 0.0)
    return np.asarray(out, dtype=float)


def best_threshold(scores, labels) -> float:
    """The threshold t that makes ``score > t`` most accurate for `labels` (1: next verse) on these pairs, among the
    midpoints between consecutive distinct scores and below the lowest (ties: the lowest t). A one-feature decision
    stump, fitted on train pairs only."""
    scores, labels = np.asarray(scores, float), np.asarray(labels)
    values = np.unique(scores)
    candidates = np.concatenate([[values[0] - 1.0], (values[:-1] + values[1:]) / 2]) if len(values) else [0.0]
    accuracy = [float(((scores > t) == (labels == 1)).mean()) for t in candidates]
    return float(candidates[int(np.argmax(accuracy))])
