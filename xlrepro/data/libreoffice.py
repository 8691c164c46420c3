"""Paragraphs of the LibreOffice help, a second offline text per language (beside the Bible).

Upstream: the Debian packages ``libreoffice-help-<pkg>`` (LibreOffice 7.4 here), which install the help as
generated HTML under ``/usr/share/libreoffice/help/<code>/text/<module>/.../<page>.html`` (override the root with
the environment variable ``XLREPRO_LIBREOFFICE_HELP``). Every page exists in every language under the same
relative path, and its paragraphs are ``<p>``/``<h1>``..``<h6>`` elements whose ``id`` (``par_id...``,
``hd_id...``) comes from the help's XML sources: the same (file, para_id) in two languages are translations.

Cleaning (`paragraphs`): only those id'd paragraphs of the page itself are read; sections embedded from another
page (``<div class="embedded">``, copies of that page's paragraphs) are skipped, so that a paragraph belongs to
one file only; so are code samples and, of a platform switch (``class="switchinline"``), every variant but the
default one (the macOS variants are ``hidden``). Markup is stripped and whitespace normalised; paragraphs with
fewer than 3 words (characters for zh/ja), fewer than 3 words with a letter (menu paths such as "Ctrl + F",
icons, symbols), and, outside English, paragraphs left untranslated (the text of the en-US paragraph of the same
file and id: much of the Hindi help is English) are dropped; a text repeated in a language is kept once, at its
first place in canonical order (files sorted by path, paragraphs in page order).

The result is cached as <cache>/libreoffice/help.<lang>.tsv.gz (file, para_id, text; with a JSON sidecar naming
the cache version), so a machine without the packages (an offline GPU machine) reads the cache.
"""
from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import io
import os
import re
import unicodedata
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterable

from xlrepro import paths
from xlrepro.atomic import atomic_open, read_json, write_json
from xlrepro.config import ConfigError, choose

#: Our language code -> the help's folder (the Debian package is libreoffice-help-<folder, lower-cased>).
LANGUAGE_CODES: dict[str, str] = {
    "en": "en-US", "zh": "zh-CN",
    **{lang: lang for lang in ("fr", "es", "de", "ru", "tr", "vi", "hi", "it", "pt", "id", "ja", "ko", "pl", "el")},
}
DEFAULT_ROOT = "/usr/share/libreoffice/help"
ENV_ROOT = "XLREPRO_LIBREOFFICE_HELP"
SUBDIR = "libreoffice"
COLUMNS = ("file", "para_id", "text")
CACHE_VERSION = 1
MIN_WORDS = 3
_CHARACTER_LANGUAGES = frozenset({"zh", "ja"})  # written without spaces: a "word" is a character
_PARAGRAPH_TAGS = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6"})
_PARAGRAPH_ID = re.compile(r"^(?:par|hd)_id")
_SKIPPED_CLASSES = frozenset({"embedded", "bascode", "code", "codeintable", "smathcode"})
_SKIPPED_TAGS = frozenset({"script", "style", "pre", "head", "header", "aside"})
# HTML elements without an end tag: never pushed on the element stack
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                   "wbr"})


def help_root() -> Path:
    """The folder holding the help's language folders: $XLREPRO_LIBREOFFICE_HELP, else the Debian location."""
    return Path(os.environ.get(ENV_ROOT) or DEFAULT_ROOT)


def check_help_language(lang: str) -> str:
    """`lang` if it has a LibreOffice help package, else a ConfigError naming the languages that do."""
    return choose("LibreOffice help language", lang, LANGUAGE_CODES)


def package(lang: str) -> str:
    """The Debian package of `lang`'s help (en -> libreoffice-help-en-us)."""
    return f"libreoffice-help-{LANGUAGE_CODES[check_help_language(lang)].lower()}"


def cache_file(lang: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """<cache>/libreoffice/help.<lang>.tsv.gz."""
    check_help_language(lang)
    root = Path(cache_dir if cache_dir is not None else paths.cache_dir())
    return root / SUBDIR / f"help.{lang}.tsv.gz"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name.replace(".tsv.gz", ".json"))


def file_half(file: str, seed: int) -> int:
    """0 or 1 for a help file (its path relative to the language folder, e.g. "text/shared/main0108.html"), from a
    seeded SHA-256 of the path, as `chapter_half` does for Bible chapters: a file's paragraphs share one half."""
    digest = hashlib.sha256(f"help-half:{seed}:{file}".encode()).digest()
    return digest[0] & 1


# ----------------------------------------------------------------------------------------------- parsing
class _PageParser(HTMLParser):
    """(para_id, raw text) of a help page's own paragraphs. Hand-written over the standard library's HTMLParser
    (no HTML library is a dependency): a stack of open elements, each marked whether it starts a skipped part."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []  # (tag, skips its content)
        self.skipping = 0
        self.current: tuple[str, list[str], int] | None = None  # (para_id, text parts, stack depth)
        self.found: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "br" and self.current is not None:
            self.current[1].append(" ")
        if tag in _VOID:
            return
        classes = set((a.get("class") or "").split())
        hidden = "hidden" in a and not (a.get("id") or "").startswith("default")  # a non-default switch variant
        skip = tag in _SKIPPED_TAGS or bool(classes & _SKIPPED_CLASSES) or hidden
        self.stack.append((tag, skip))
        self.skipping += skip
        pid = a.get("id") or ""
        if (tag in _PARAGRAPH_TAGS and self.current is None and not self.skipping and _PARAGRAPH_ID.match(pid)):
            self.current = (pid, [], len(self.stack))

    def handle_startendtag(self, tag, attrs):
        if tag == "br" and self.current is not None:
            self.current[1].append(" ")

    def handle_endtag(self, tag):
        if not any(t == tag for t, _ in self.stack):
            return  # a stray end tag
        while self.stack:
            if self.current is not None and len(self.stack) == self.current[2]:
                self.found.append((self.current[0], "".join(self.current[1])))
                self.current = None
            t, skip = self.stack.pop()
            self.skipping -= skip
            if t == tag:
                break

    def handle_data(self, data):
        if self.current is not None and not self.skipping:
            self.current[1].append(data)


def page_paragraphs(html: str) -> list[tuple[str, str]]:
    """(para_id, text) of one page's own paragraphs in page order, markup stripped and whitespace normalised
    (NFC, runs of whitespace to one space); before any filtering."""
    parser = _PageParser()
    parser.feed(html)
    parser.close()
    return [(pid, " ".join(unicodedata.normalize("NFC", text).split())) for pid, text in parser.found]


def _words(text: str, lang: str) -> list[str]:
    if lang in _CHARACTER_LANGUAGES:
        return [ch for ch in text if not ch.isspace()]
    return text.split()


def keep_paragraph(text: str, lang: str) -> bool:
    """At least `MIN_WORDS` words (characters for zh/ja), and at least as many with a letter: drops empty and very
    short paragraphs and pure UI symbols ("Ctrl + F", "=", "1/2")."""
    words = _words(text, lang)
    lettered = [w for w in words if any(unicodedata.category(c).startswith("L") for c in w)]
    return len(words) >= MIN_WORDS and len(lettered) >= MIN_WORDS


def _help_files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in (folder / "text").rglob("*.html"))


def _missing(lang: str, folder: Path, cache: Path | None) -> ConfigError:
    where = f"no cache at {cache} and " if cache is not None else ""
    return ConfigError(f"the LibreOffice help of {lang!r} is not available: {where}{folder} does not exist. Install it "
                       f"with `apt-get install {package(lang)}`, or point {ENV_ROOT} at a folder holding "
                       f"{LANGUAGE_CODES[lang]}/text/...")


@functools.lru_cache(maxsize=4)
def _raw_pages(folder: str) -> dict[str, list[tuple[str, str]]]:
    """file -> its page paragraphs, for every page of one language folder (sorted by path)."""
    root = Path(folder)
    return {f: page_paragraphs((root / f).read_text(encoding="utf-8")) for f in _help_files(root)}


def build_paragraphs(lang: str, root: str | os.PathLike | None = None):
    """`lang`'s cleaned paragraphs read from the installed help (no cache); see the module's docstring."""
    import pandas as pd

    check_help_language(lang)
    root = Path(root) if root is not None else help_root()
    folder = root / LANGUAGE_CODES[lang]
    if not (folder / "text").is_dir():
        raise _missing(lang, folder, None)
    english = {}
    if lang != "en":
        en_folder = root / LANGUAGE_CODES["en"]
        if not (en_folder / "text").is_dir():
            raise ConfigError(f"telling untranslated paragraphs of {lang!r} needs the English help: {en_folder} does "
                              f"not exist; `apt-get install {package('en')}` (or set {ENV_ROOT})")
        english = {(f, pid): text for f, paras in _raw_pages(str(en_folder)).items() for pid, text in paras}
    rows, seen = [], set()
    for f, paras in _raw_pages(str(folder)).items():
        for pid, text in paras:
            if text in seen or not keep_paragraph(text, lang) or english.get((f, pid)) == text:
                continue
            seen.add(text)
            rows.append((f, pid, text))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _is_cached(path: Path) -> bool:
    side = _sidecar(path)
    if not (path.exists() and side.exists()):
        return False
    return read_json(side, "delete it to rebuild the LibreOffice help cache").get("cache_version") == CACHE_VERSION


def _read_cache(path: Path):
    import pandas as pd

    return pd.read_csv(path, sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False, dtype=str,
                       compression="gzip")


def _write_cache(path: Path, df, lang: str) -> None:
    # no name (it would be the temp file's) and mtime=0: the same paragraphs give a byte-identical file
    with atomic_open(path, "wb") as raw, \
            gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=9, mtime=0) as gz:
        with io.TextIOWrapper(gz, encoding="utf-8", newline="") as fh:
            fh.write("\t".join(COLUMNS) + "\n")
            for row in df.itertuples(index=False):
                fh.write("\t".join(row) + "\n")  # normalised whitespace: no tab or newline inside a field
    words = int(sum(len(_words(t, lang)) for t in df["text"]))
    write_json(_sidecar(path), {"cache_version": CACHE_VERSION, "lang": lang, "package": package(lang),
                                "files": int(df["file"].nunique()), "paragraphs": len(df), "words": words,
                                "bytes": path.stat().st_size})


def paragraphs(lang: str, cache_dir: str | os.PathLike | None = None, *, force: bool = False):
    """`lang`'s help paragraphs as a DataFrame (file, para_id, text) in canonical order: read from the cache, else
    built from the installed help and cached (`force` rebuilds). Neither there: a ConfigError naming the package
    to install and `XLREPRO_LIBREOFFICE_HELP`."""
    path = cache_file(lang, cache_dir)
    if not force and _is_cached(path):
        return _read_cache(path)
    folder = help_root() / LANGUAGE_CODES[lang]
    if not (folder / "text").is_dir():
        raise _missing(lang, folder, path)
    df = build_paragraphs(lang)
    _write_cache(path, df, lang)
    return df


def prepare_libreoffice(langs: Iterable[str], cache_dir: str | os.PathLike | None = None, *,
                        force: bool = False) -> dict[str, dict]:
    """Build the caches of `langs` (all checked first); print and return paragraphs and words per language."""
    langs = [check_help_language(lang) for lang in langs]
    out = {}
    for lang in langs:
        df = paragraphs(lang, cache_dir, force=force)
        out[lang] = {"files": int(df["file"].nunique()), "paragraphs": len(df),
                     "words": int(sum(len(_words(t, lang)) for t in df["text"]))}
        print(f"libreoffice help {lang}: {out[lang]['paragraphs']} paragraphs, {out[lang]['words']} words "
              f"({out[lang]['files']} files)")
    return out


def main(argv=None) -> int:
    """``python -m xlrepro.data.libreoffice LANG ...``: build the help caches of these languages (`prepare_libreoffice`)
    where the Debian packages are installed, e.g. before `scripts/node_cache.sh` copies them to a machine without."""
    import argparse
    import sys
    p = argparse.ArgumentParser(prog="python -m xlrepro.data.libreoffice", description=main.__doc__.split("\n")[0])
    p.add_argument("languages", nargs="+", help=f"of {', '.join(LANGUAGE_CODES)}")
    p.add_argument("--force", action="store_true", help="rebuild a cache that exists")
    a = p.parse_args(argv)
    try:
        prepare_libreoffice(a.languages, force=a.force)
    except ConfigError as err:
        print(f"xlrepro.data.libreoffice: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
