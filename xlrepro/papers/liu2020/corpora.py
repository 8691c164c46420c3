"""The two pretraining corpora of Liu et al. 2020 on the lab's Bible: "small" and "big" at the paper's 1:5 ratio.

The paper trains on 200k ("small") and 1000k ("big") Wikipedia sentences per language. Here both come from the
Bible's training chapters (`xlrepro.data.multilingual`, the same chapters in every language): "big" = every
training chapter present in all 11 languages, "small" = a seeded 20 % of those chapters, so small is nested in big
and the two sizes differ by 1:5 in chapters (and, chapters being parallel, about 1:5 in tokens in every language).
A chapter's verses are joined into one stream: the unit that BERT's windows and Word2Vec's contexts slide over.

Tokenization is mBERT's cased WordPiece (`xlrepro.data.mbert_vocab`), as the paper does for all three models;
curly quotes are mapped to ASCII first, because mBERT's vocabulary has no piece for them (they become [UNK]).
"""
from __future__ import annotations

import hashlib
import os
from typing import Iterable, Sequence

from xlrepro.config import ConfigError, choose

#: The 11 XNLI languages the Bible has (the paper's 15 less el, bg, th, ur).
LANGUAGES: tuple[str, ...] = ("en", "fr", "es", "de", "ru", "tr", "ar", "vi", "zh", "hi", "sw")
SIZES: tuple[str, ...] = ("small", "big")
SMALL_FRACTION = 0.2  # the paper's 200k : 1000k
SMALL_SEED = 2020

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
                         "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
                         "\u00ab": '"', "\u00bb": '"'})


def check_languages(langs: Iterable[str]) -> tuple[str, ...]:
    langs = tuple(langs)
    if not langs:
        raise ConfigError(f"no languages given; valid choices: {', '.join(LANGUAGES)}")
    for lang in langs:
        choose("language", lang, LANGUAGES)
    return langs


def ascii_quotes(text: str) -> str:
    """Curly/angle quotes -> ' and " (mBERT's WordPiece maps the curly ones to [UNK])."""
    return text.translate(_QUOTES)


def _in_small(book: int, chapter: int, seed: int, fraction: float) -> bool:
    digest = hashlib.sha256(f"liu-small:{seed}:{book}:{chapter}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64 < fraction


def corpus_chapters(size: str, *, langs: Sequence[str] = LANGUAGES, seed: int = SMALL_SEED,
                    fraction: float = SMALL_FRACTION, cache_dir: str | os.PathLike | None = None
                    ) -> list[tuple[int, int]]:
    """(book, chapter) of the corpus `size`, in canonical order: training chapters with text in every language
    of `langs`; "small" keeps the chapters whose seeded hash falls under `fraction` (so small ⊂ big)."""
    from xlrepro.data.multilingual import load_verses

    choose("size", size, SIZES)
    langs = check_languages(langs)
    if not 0 < fraction <= 1:
        raise ConfigError(f"fraction must be in (0, 1]; got {fraction}")
    common = None
    for lang in langs:
        chapters = set(map(tuple, load_verses(lang, "train", cache_dir)[["book", "chapter"]]
                           .drop_duplicates().to_numpy().tolist()))
        common = chapters if common is None else common & chapters
    chapters = sorted(common)
    if size == "small":
        chapters = [c for c in chapters if _in_small(*c, seed, fraction)]
    return chapters


def chapter_verses(lang: str, chapters: Sequence[tuple[int, int]],
                   cache_dir: str | os.PathLike | None = None) -> list[list[str]]:
    """Each chapter's verse texts (same order as `chapters`), quotes made ASCII."""
    from xlrepro.data.multilingual import load_verses

    check_languages([lang])
    df = load_verses(lang, "train", cache_dir)
    by = {k: [ascii_quotes(t) for t in g["text"]] for k, g in df.groupby(["book", "chapter"], sort=False)}
    missing = [c for c in chapters if tuple(c) not in by]
    if missing:
        raise ConfigError(f"{lang} has no training text for chapters {missing[:5]}; corpus_chapters lists "
                          "the chapters every language has")
    return [by[tuple(c)] for c in chapters]


def chapter_streams(lang: str, chapters: Sequence[tuple[int, int]],
                    cache_dir: str | os.PathLike | None = None) -> list[str]:
    """One text per chapter: its verses joined by spaces."""
    return [" ".join(v) for v in chapter_verses(lang, chapters, cache_dir)]


def tokenize_streams(texts: Sequence[str], tokenizer) -> list[list[str]]:
    """mBERT WordPiece tokens of each text (no [CLS]/[SEP]); `tokenizer` a `tokenizers` BertWordPiece tokenizer."""
    return [e.tokens for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]


def tokenized_verses(size: str, langs: Sequence[str] = LANGUAGES, *, tokenizer=None,
                     cache_dir: str | os.PathLike | None = None, max_chapters: int | None = None
                     ) -> dict[str, list[list[list[str]]]]:
    """{language: [chapter: [verse: WordPiece tokens]]} of the corpus `size` (for smoke runs: the first
    `max_chapters` chapters of small, and for big those and 4 times as many more, so that small stays nested). WordPiece splits at whitespace, so a chapter's verses concatenated are exactly the
    tokens of its stream."""
    from xlrepro.data.mbert_vocab import mbert_tokenizer

    langs = check_languages(langs)
    tokenizer = tokenizer or mbert_tokenizer()
    chapters = corpus_chapters(size, langs=langs, cache_dir=cache_dir)
    if max_chapters is not None:  # smoke runs: `max_chapters` small chapters, and 5 times as many for big (nested)
        small = corpus_chapters("small", langs=langs, cache_dir=cache_dir)[:max_chapters]
        rest = [c for c in chapters if c not in set(small)][:4 * max_chapters] if size == "big" else []
        chapters = sorted(small + rest)
    out = {}
    for lang in langs:
        verses = chapter_verses(lang, chapters, cache_dir)
        flat = tokenize_streams([v for ch in verses for v in ch], tokenizer)
        it = iter(flat)
        out[lang] = [[next(it) for _ in ch] for ch in verses]
    return out


def tokenized_corpus(size: str, langs: Sequence[str] = LANGUAGES, *, tokenizer=None,
                     cache_dir: str | os.PathLike | None = None, max_chapters: int | None = None
                     ) -> dict[str, list[list[str]]]:
    """{language: [chapter stream as WordPiece tokens]} of the corpus `size`."""
    verses = tokenized_verses(size, langs, tokenizer=tokenizer, cache_dir=cache_dir, max_chapters=max_chapters)
    return {lang: [[t for v in ch for t in v] for ch in chs] for lang, chs in verses.items()}


def corpus_card(corpus: dict[str, list[list[str]]]) -> "pd.DataFrame":  # noqa: F821
    """Per language: chapters, WordPiece tokens, [UNK] share, token types."""
    import pandas as pd

    rows = []
    for lang, streams in corpus.items():
        n = sum(map(len, streams))
        unk = sum(s.count("[UNK]") for s in streams)
        rows.append({"language": lang, "chapters": len(streams), "tokens": n,
                     "unk_share": unk / max(n, 1), "types": len({t for s in streams for t in s})})
    return pd.DataFrame(rows).set_index("language")
