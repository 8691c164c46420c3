"""Named-entity recognition data in IOB format (CoNLL 2002, CoNLL 2003, WikiANN) and its entity-level F1.

Upstream formats, one token a line and a blank line between sentences; the token is the first field and its tag
the last, fields separated by whitespace; ``-DOCSTART-`` lines mark documents and are not sentences:

* CoNLL 2002 (Tjong Kim Sang 2002; Spanish and Dutch), https://www.clips.uantwerpen.be/conll2002/ner/:
  ``esp.train``, ``esp.testa``, ``esp.testb`` ("token tag"; Dutch ``ned.*`` "token POS tag"), ISO-8859-1 text.
* CoNLL 2003 (Tjong Kim Sang & De Meulder 2003; English and German), https://www.clips.uantwerpen.be/conll2003/ner/:
  ``eng.train``, ``eng.testa``, ``eng.testb`` ("token POS chunk tag"); the text itself comes from Reuters RCV1
  (English) and the Frankfurter Rundschau (German) under their licences and must be built locally.
* WikiANN (Pan et al. 2017) in the train/dev/test splits of Rahimi et al. 2019
  (https://github.com/afshinrahimi/mmner): "lang:token<TAB>tag", the token prefixed with its language code,
  which `read_iob(..., language_prefix=True)` strips.

Tags are IOB1 (CoNLL 2003: "I-" begins an entity unless it follows one of the same type; "B-" only between two
adjacent entities of one type) or IOB2 (CoNLL 2002, WikiANN: every entity begins with "B-"). `to_iob2` rewrites
IOB1 as IOB2, so that a model trained on one file and tested on another sees one tag set; `entity_f1` scores with
`seqeval`, which reads entities the way the CoNLL shared tasks' ``conlleval`` script does.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError

DOCSTART = "-DOCSTART-"


@dataclass(frozen=True)
class TaggedSentence:
    tokens: tuple[str, ...]
    tags: tuple[str, ...]


def read_iob(path: str | os.PathLike, *, encoding: str = "utf-8", language_prefix: bool = False) -> list[TaggedSentence]:
    """The sentences of an IOB file (see the module docstring): per sentence its tokens and tags.

    encoding: "utf-8" (WikiANN, CoNLL 2003) or "latin-1" (the CoNLL 2002 files as distributed).
    language_prefix: strip the "xx:" language code before each token (WikiANN in Rahimi et al.'s splits)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"NER file {path} does not exist: set XLREPRO_CONLL_DIR or XLREPRO_WIKIANN_DIR to the folder "
                          f"that holds the IOB files (see `xlrepro prepare --profile paper --dry-run`)")
    sentences, tokens, tags = [], [], []

    def close():
        if tokens:
            sentences.append(TaggedSentence(tuple(tokens), tuple(tags)))
            tokens.clear()
            tags.clear()

    with open(path, encoding=encoding) as fh:
        for lineno, line in enumerate(fh, 1):
            fields = line.split()
            if not fields:
                close()
                continue
            if fields[0] == DOCSTART:
                close()
                continue
            if len(fields) < 2:
                raise ConfigError(f"{path}:{lineno}: an IOB line is 'token ... tag'; got {line.rstrip()!r}")
            token, tag = fields[0], fields[-1]
            if not (tag == "O" or tag[:2] in ("B-", "I-") and len(tag) > 2):
                raise ConfigError(f"{path}:{lineno}: tag {tag!r} is not O, B-<type> or I-<type>")
            if language_prefix:
                code, sep, rest = token.partition(":")
                if not sep or not rest:
                    raise ConfigError(f"{path}:{lineno}: a WikiANN token is 'lang:token'; got {token!r}")
                token = rest
            tokens.append(token)
            tags.append(tag)
    close()
    return sentences


def to_iob2(tags) -> tuple[str, ...]:
    """IOB1 (or IOB2) tags as IOB2: an "I-X" that does not continue an entity of type X (after "O", or after a tag
    of another type) becomes "B-X"; IOB2 input is returned unchanged."""
    out = []
    for i, tag in enumerate(tags):
        if tag.startswith("I-"):
            previous = out[i - 1] if i else "O"
            if previous == "O" or previous[2:] != tag[2:]:
                tag = "B-" + tag[2:]
        out.append(tag)
    return tuple(out)


def entity_f1(gold: list[list[str]], predicted: list[list[str]]) -> float:
    """Entity-level micro F1 of predicted tag sequences against the gold ones (`seqeval.metrics.f1_score`, the
    conlleval reading: an entity counts only where its type and both ends match)."""
    from seqeval.metrics import f1_score

    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    for i, (g, p) in enumerate(zip(gold, predicted)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i}: {len(g)} gold tags but {len(p)} predicted")
    return float(f1_score([list(g) for g in gold], [list(p) for p in predicted]))
