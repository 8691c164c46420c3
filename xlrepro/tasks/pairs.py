"""The sentence-pair tasks that zero-shot fine-tuning can use, behind one small interface.

    task = pair_task("paraphrase")          # or "sections" (the default everywhere)
    train = task.pairs("en", "train", max_pairs=1000)
    test = task.pairs("fr", "test", keys=task.parallel_keys(["en", "fr"], "test"))
    n_labels = len(task.labels)

Both tasks return DataFrames with the columns first, second and label (what `finetune.encode_pairs` reads), from the
same chapter splits. A caller that records a run's configuration adds the task to it only when it is not
`DEFAULT_PAIR_TASK`, so that the section task's run keys stay what they were before the paraphrase task existed
(`run_config_task`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..data.multilingual import LANGUAGES as BIBLE_LANGUAGES

PAIR_TASKS: tuple[str, ...] = ("sections", "paraphrase")
DEFAULT_PAIR_TASK = "sections"


def check_pair_task(name: str) -> str:
    """Return `name` if it is a pair task, else raise ValueError naming the valid ones."""
    if name not in PAIR_TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(PAIR_TASKS)}")
    return name


@dataclass(frozen=True)
class PairTask:
    """One pair task: its name, label names and the languages it has data for."""

    name: str
    labels: tuple[str, ...]
    languages: tuple[str, ...]

    def check_language(self, lang: str) -> str:
        if lang not in self.languages:
            raise ValueError(f"language {lang!r} has no data for the {self.name} task; "
                             f"valid languages: {', '.join(self.languages)}")
        return lang

    def pairs(self, lang: str, split: str, cache_dir: str | os.PathLike | None = None,
              max_pairs: int | None = None, seed: int = 0, *, keys: Iterable | None = None):
        """Labelled pairs (first, second, label, and the key columns) of one language and split."""
        self.check_language(lang)
        if self.name == "sections":
            from .sections import verse_pairs
            return verse_pairs(lang, split, cache_dir, max_pairs, seed, keys=keys)
        from .paraphrase import paraphrase_pairs
        return paraphrase_pairs(lang, split, cache_dir, max_pairs, seed, keys=keys)

    def parallel_keys(self, langs: Sequence[str], split: str, cache_dir: str | os.PathLike | None = None) -> list:
        """The keys present in every one of `langs` (test sets that are translations of each other)."""
        for lang in langs:
            self.check_language(lang)
        if self.name == "sections":
            from .sections import parallel_keys
        else:
            from .paraphrase import parallel_keys
        return parallel_keys(langs, split, cache_dir)


def pair_task(name: str = DEFAULT_PAIR_TASK) -> PairTask:
    """The PairTask called `name` (one of `PAIR_TASKS`)."""
    check_pair_task(name)
    if name == "sections":
        from .sections import SECTIONS
        return PairTask("sections", SECTIONS, BIBLE_LANGUAGES)
    from .paraphrase import LABELS, LANGUAGES
    return PairTask("paraphrase", LABELS, LANGUAGES)


def run_config_task(name: str) -> dict:
    """What a run's configuration records of the task: nothing for the default (old run keys stay valid),
    {"task": name} otherwise."""
    check_pair_task(name)
    return {} if name == DEFAULT_PAIR_TASK else {"task": name}
