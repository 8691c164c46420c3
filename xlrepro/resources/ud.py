"""Universal Dependencies treebanks (``.conllu``), read with the `conllu` package.

Upstream: https://universaldependencies.org (releases on LINDAT, e.g. ``ud-treebanks-v2.2.tgz``, the release Wu &
Dredze used): one file per treebank and split, e.g. ``UD_Spanish-GSD/es_gsd-ud-train.conllu``. CoNLL-U: comment
lines ``# sent_id = ...`` / ``# text = ...``, then one line a word with ten tab-separated fields (ID FORM LEMMA UPOS
XPOS FEATS HEAD DEPREL DEPS MISC), a blank line after each sentence. A multi-word token (ID ``1-2``, e.g. Spanish
"al" = "a" + "el") spans the syntactic words that follow it, and an empty node (ID ``4.1``, enhanced dependencies
only) has no head: both are left out of the words, their parts of speech and their heads.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError


@dataclass(frozen=True)
class Sentence:
    """The syntactic words of one sentence; heads are 1-based word numbers, 0 the root."""
    sent_id: str | None
    text: str | None
    forms: tuple[str, ...]
    upos: tuple[str, ...]
    heads: tuple[int, ...]
    deprels: tuple[str, ...]


def read_conllu(path: str | os.PathLike) -> list[Sentence]:
    """The sentences of a ``.conllu`` file, words only (no multi-word token lines, no empty nodes)."""
    import conllu

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"treebank file {path} does not exist: unpack a Universal Dependencies release "
                          f"(https://universaldependencies.org) and set XLREPRO_UD_DIR to its folder")
    sentences = []
    with open(path, encoding="utf-8") as fh:
        for tokens in conllu.parse_incr(fh):
            words = [t for t in tokens if isinstance(t["id"], int)]  # ranges and empty nodes have tuple ids
            for w in words:
                if not isinstance(w["head"], int):
                    raise ConfigError(f"{path}: sentence {tokens.metadata.get('sent_id')}: word {w['id']} "
                                      f"({w['form']!r}) has no head")
            sentences.append(Sentence(tokens.metadata.get("sent_id"), tokens.metadata.get("text"),
                                      tuple(w["form"] for w in words), tuple(w["upos"] for w in words),
                                      tuple(w["head"] for w in words), tuple(w["deprel"] for w in words)))
    return sentences
