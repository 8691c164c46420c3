"""Wikipedia text for pretraining and probing, one language a folder.

Upstream: the dumps at https://dumps.wikimedia.org/<lang>wiki/latest/<lang>wiki-latest-pages-articles.xml.bz2.
Their wiki markup is turned into text by ``wikiextractor`` (https://github.com/attardi/wikiextractor, maintained;
``python -m wikiextractor.WikiExtractor <dump> -o <folder>``), which writes files ``AA/wiki_00``, ``AA/wiki_01``, ...
each holding documents as

    <doc id="12" url="https://en.wikipedia.org/wiki?curid=12" title="Anarchism">
    Anarchism
    <BLANKLINE>
    Anarchism is a political philosophy ...
    </doc>

(the first line of a document is its title). `read_wikiextractor` reads that format; `read_plain_text` reads text
that is already plain, one document a line or one a paragraph (blocks separated by blank lines).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..config import ConfigError, choose

_DOC = re.compile(r'<doc id="(?P<id>[^"]*)" url="(?P<url>[^"]*)" title="(?P<title>[^"]*)">\s*$')
UNITS = ("line", "paragraph")


@dataclass(frozen=True)
class Document:
    id: str
    url: str
    title: str
    text: str  # the body: the title line removed, paragraphs joined by "\n"


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    raise ConfigError(f"Wikipedia text {path} does not exist: extract a dump with wikiextractor "
                      f"(https://github.com/attardi/wikiextractor) and set XLREPRO_WIKI_DIR to the output folder")


def read_wikiextractor(path: str | os.PathLike) -> Iterator[Document]:
    """The documents of a wikiextractor output file, or of every file under a folder of them (in name order).
    Blank lines inside a document are dropped; the first line, the title as wikiextractor writes it, too."""
    for file in _files(Path(path)):
        head, lines = None, []
        with open(file, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                line = line.rstrip("\n")
                if head is None:
                    if not line.strip():
                        continue
                    m = _DOC.match(line)
                    if not m:
                        raise ConfigError(f"{file}:{lineno}: expected a wikiextractor '<doc id=... url=... "
                                          f"title=...>' line; got {line[:60]!r}")
                    head, lines = m, []
                elif line == "</doc>":
                    body = [x for x in lines if x.strip()]
                    if body and body[0].strip() == head["title"]:
                        body = body[1:]
                    yield Document(head["id"], head["url"], head["title"], "\n".join(body))
                    head = None
                else:
                    lines.append(line)
        if head is not None:
            raise ConfigError(f"{file}: document {head['id']} has no closing </doc>")


def read_plain_text(path: str | os.PathLike, unit: str = "line") -> Iterator[str]:
    """Documents of plain text files (a file, or every file under a folder): one a line (`unit="line"`) or one a
    block of lines between blank lines (`unit="paragraph"`, the block's lines joined by a space). Empty ones are
    skipped."""
    choose("unit", unit, UNITS)
    for file in _files(Path(path)):
        with open(file, encoding="utf-8") as fh:
            if unit == "line":
                yield from (line.strip() for line in fh if line.strip())
            else:
                block = []
                for line in fh:
                    if line.strip():
                        block.append(line.strip())
                    elif block:
                        yield " ".join(block)
                        block = []
                if block:
                    yield " ".join(block)
