"""Liu et al. 2020's data-size design on Wikipedia text the user provides (the paper profile of S §2.3 / L §3.2,
Figures 1-2 of S): static embeddings (Word2Vec, GloVe) and BERTs trained on a "small" and a "big" Wikipedia sample
per language, then English -> target word retrieval against MUSE's test dictionaries, static against contextual at
equal data.

* `wiki_corpora`: per language, the documents of its wikiextractor folder (`xlrepro.resources.read_wikiextractor`)
  cut into sentences (blingfire's `text_to_sentences`, the sentence splitter of the package that rebuilds mBERT's
  vocabulary) and tokenized with mBERT's cased WordPiece (`xlrepro.data.mbert_vocab`, as the paper tokenizes the
  data of all three models). The first `pool` x big units of text (in file order) are read; their documents are put
  in a seeded order, and "big" is that order cut at `sizes["big"]` units, "small" the same order cut at
  `sizes["small"]`: small is a prefix of big (nested), and both hold exactly their size in every language (the last
  document is cut). The unit is the paper's, sentences (200k small, 1000k big per language), or WordPiece tokens.
* `train_static`: the lab's Word2Vec (gensim) and GloVe trainers (`static.train_static`) on a size's documents,
  one document one stream (as the lab's chapters; cut at gensim's 10,000-token limit).
* `train_bert`: the lab's BERT pre-training (`bert.pretrain_bert`, the engine's sampled MLM) on rows made as the
  lab makes them (`bert.rows_for`: a document's sentences packed whole into rows of 510 pieces for window 512, its
  stream cut into 18-piece rows for window 20), mBERT's vocabulary.
* `data_size_retrieval`: trains what is missing and writes ``data_size_retrieval.csv`` (long rows: experiment
  word2vec-small, glove-big, bert-small-w512, ...; seed -1; language; layer, -1 for static vectors, 0 = embeddings
  to L for a BERT; metric mrr, mrr_low, mrr_high (95 % bootstrap interval over words), words; value) and the
  corpus card (experiments corpus-small / corpus-big, metrics documents, sentences, tokens). The test pairs are
  the lab's (`retrieval.test_dictionary`): MUSE pairs whose two words are single mBERT tokens seen `min_count`
  times in the *small* sample, so every model, small or big, is scored on the same pairs. MUSE's words are
  lower-cased and mBERT cased: each MUSE word stands for its most frequent cased form in the small sample.
  A BERT's word vector is the mean of its hidden states over the word's occurrences in the small sample
  (`bert.word_vectors`).

Every trained model is cached under ``runs/liu2020/paper/wiki/`` by a run key (`xlrepro.runkeys.run_key`) of its
configuration and the fingerprint of the tokens it was trained on, so a second call reuses it.

    paths = resolve_wiki_paths(languages=["de", "fr"])
    data_size_retrieval(paths)                                 # the paper's sizes: 200k / 1000k sentences
    data_size_retrieval(paths, sizes={"small": 2, "big": 4})   # a tiny run

Resources: $XLREPRO_WIKI_DIR (one wikiextractor folder per language, English among them) and $XLREPRO_MUSE_DIR
(en-<lang>.5000-6500.txt, or en-<lang>.txt with dictionary="full"); `xlrepro prepare --profile paper --only
liu2020/paper_wiki.data_size_retrieval` names them.
"""
from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from xlrepro.config import ConfigError, choose

from .bert import WINDOWS, BertRunConfig
from .paper import DICTIONARIES, LiuPaths, resolve_liu_paths
from .static import MODELS, StaticConfig

PAPER_SIZES = {"small": 200_000, "big": 1_000_000}  # sentences per language (S §2.3, L §3.2)
UNITS = ("sentences", "tokens")
EXPERIMENT_MODELS = (*MODELS, "bert")
RESULTS = "data_size_retrieval.csv"
STATIC_LAYER = -1  # static vectors have no layers
SEED = -1  # a trained model's MRR on a fixed dictionary (`lab.SEED`); the sample's seed is in the JSON beside
GENSIM_MAX_SENTENCE = 10_000  # gensim cuts longer "sentences" there
ONLY = "liu2020/paper_wiki.data_size_retrieval"


def resolve_wiki_paths(wiki: str | os.PathLike | None = None, muse: str | os.PathLike | None = None, *,
                       languages=None, dictionary: str = "test") -> LiuPaths:
    """The Wikipedia folders and MUSE dictionaries (`paper.resolve_liu_paths`; the encoder is not used here): the
    arguments where given, else $XLREPRO_WIKI_DIR and $XLREPRO_MUSE_DIR. A missing one raises a one-line
    ConfigError naming its variable and the prepare command of this function."""
    return resolve_liu_paths(wiki=wiki, muse=muse, languages=languages, dictionary=dictionary, only=ONLY,
                             encoder="")


# --- settings -----------------------------------------------------------------------------------------------------
def check_sizes(sizes) -> dict[str, int]:
    """{"small": n, "big": m}, positive integers with n <= m (small is nested in big)."""
    if not isinstance(sizes, Mapping) or set(sizes) != {"small", "big"}:
        got = sorted(sizes) if isinstance(sizes, Mapping) else sizes
        raise ConfigError(f"sizes must be a mapping of exactly small and big; got {got!r}; valid choices: small, big")
    out = {}
    for name in ("small", "big"):
        v = sizes[name]
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"sizes[{name!r}] must be a positive integer; got {v!r}")
        out[name] = v
    if out["small"] > out["big"]:
        raise ConfigError(f"the small sample must not exceed the big one (small is nested in big); got "
                          f"small {out['small']} > big {out['big']}")
    return out


@dataclass(frozen=True)
class SampleSettings:
    """How the two samples are drawn: `sizes` per language in `unit`s; `seed` orders the documents; `pool`: the
    first pool x big units of each language's text (file order) are the documents sampled from."""
    sizes: tuple[tuple[str, int], ...] = tuple(PAPER_SIZES.items())
    unit: str = "sentences"
    seed: int = 0
    pool: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "sizes", tuple(check_sizes(dict(self.sizes)).items()))
        choose("unit", self.unit, UNITS)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ConfigError(f"seed must be an integer; got {self.seed!r}")
        if not isinstance(self.pool, (int, float)) or isinstance(self.pool, bool) or self.pool < 1:
            raise ConfigError(f"pool must be a number >= 1 (the text read, in multiples of the big size); got "
                              f"{self.pool!r}")

    def size(self, name: str) -> int:
        return dict(self.sizes)[choose("size", name, ("small", "big"))]


@dataclass
class WikiCorpora:
    """The two samples: documents[size][language] = [document: [sentence: WordPiece tokens]]; fingerprints[size]:
    a sha256 of the sample's tokens (what a trained model's run key holds)."""
    settings: SampleSettings
    languages: tuple[str, ...]  # English first
    documents: dict[str, dict[str, list[list[list[str]]]]]
    fingerprints: dict[str, str]

    def streams(self, size: str) -> dict[str, list[list[str]]]:
        """{language: [a document's tokens]} of one sample."""
        choose("size", size, self.documents)
        return {lang: [[t for s in doc for t in s] for doc in docs] for lang, docs in self.documents[size].items()}

    def card(self) -> list[dict]:
        """Long rows of documents, sentences and tokens per sample and language."""
        rows = []
        for size, by_lang in self.documents.items():
            for lang, docs in by_lang.items():
                counts = {"documents": len(docs), "sentences": sum(map(len, docs)),
                          "tokens": sum(len(s) for d in docs for s in d)}
                rows += [{"experiment": f"corpus-{size}", "seed": SEED, "language": lang,
                          "layer": STATIC_LAYER, "metric": m, "value": float(v)} for m, v in counts.items()]
        return rows


def _languages(paths: LiuPaths, languages) -> tuple[str, ...]:
    valid = ("en", *paths.languages)
    if languages is None:
        return valid
    if isinstance(languages, str) or not languages:
        raise ConfigError(f"languages must be a non-empty list; got {languages!r}; valid choices: {', '.join(valid)}")
    chosen = [choose("language (a folder of the Wikipedia text)", lang, valid) for lang in languages]
    return tuple(dict.fromkeys(["en", *chosen]))  # English is the source of every retrieval


def _order(seed: int, lang: str, n: int) -> np.ndarray:
    digest = hashlib.sha256(f"liu-wiki:{seed}:{lang}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big")).permutation(n)


def _cut(docs: Sequence[list[list[str]]], limit: int, unit: str) -> list[list[list[str]]]:
    """The documents in order until `limit` units: the last document (and, for tokens, its last sentence) cut."""
    out, total = [], 0
    for doc in docs:
        kept = []
        for sent in doc:
            need = limit - total
            if need <= 0:
                break
            if unit == "tokens" and len(sent) > need:
                sent = sent[:need]
            kept.append(sent)
            total += 1 if unit == "sentences" else len(sent)
        if kept:
            out.append(kept)
        if total >= limit:
            break
    return out


def wiki_corpora(paths: LiuPaths, sizes: Mapping[str, int] | None = None, languages=None, *, unit: str = "sentences",
                 seed: int = 0, pool: float = 1.0) -> WikiCorpora:
    """The nested small and big samples of every language (see the module docstring). sizes: {"small": n, "big":
    m} in `unit`s per language (default the paper's 200k / 1000k sentences); languages: English and the target
    languages of `paths` (default all; English is always added). A language whose text holds fewer than the big
    size raises a ConfigError."""
    from blingfire import text_to_sentences

    from xlrepro.data.mbert_vocab import mbert_tokenizer
    from xlrepro.resources import read_wikiextractor

    from .corpora import ascii_quotes

    settings = SampleSettings(tuple(check_sizes(PAPER_SIZES if sizes is None else sizes).items()), unit, seed, pool)
    langs = _languages(paths, languages)
    tok = mbert_tokenizer()
    big, small = settings.size("big"), settings.size("small")
    budget = int(np.ceil(settings.pool * big))
    documents: dict[str, dict] = {"small": {}, "big": {}}
    for lang in langs:
        read, total = [], 0
        for doc in read_wikiextractor(paths.wiki / lang):
            sents = [s for line in doc.text.split("\n") if line.strip()
                     for s in text_to_sentences(ascii_quotes(line)).split("\n") if s.strip()]
            tokens = [e.tokens for e in tok.encode_batch(sents, add_special_tokens=False)]
            tokens = [t for t in tokens if t]
            if tokens:
                read.append(tokens)
                total += len(tokens) if unit == "sentences" else sum(map(len, tokens))
            if total >= budget:
                break
        if total < big:
            raise ConfigError(f"{paths.wiki / lang} holds {total} {unit}, fewer than the big sample's {big}: "
                              f"give more text or smaller sizes")
        ordered = [read[i] for i in _order(seed, lang, len(read))]
        documents["big"][lang] = _cut(ordered, big, unit)
        documents["small"][lang] = _cut(ordered, small, unit)
    fingerprints = {}
    for size, by_lang in documents.items():
        h = hashlib.sha256()
        for lang, docs in by_lang.items():
            h.update(f"\x00{lang}\x00".encode())
            for d in docs:
                h.update("\x02".join("\x01".join(s) for s in d).encode() + b"\x03")
        fingerprints[size] = h.hexdigest()
    return WikiCorpora(settings, langs, documents, fingerprints)


# --- training (the lab's trainers) --------------------------------------------------------------------------------
def _root(kind: str, key: dict, root) -> Path:
    from xlrepro.paths import runs_dir
    from xlrepro.runkeys import run_key

    return Path(root or runs_dir() / "liu2020" / "paper" / "wiki" / kind) / run_key(key)


def _check(value, kind: type, name: str):
    if not isinstance(value, kind):
        raise ConfigError(f"{name} must be a {kind.__name__}; got {type(value).__name__}")
    return value


def static_folder(corpora: WikiCorpora, config: StaticConfig, root: str | os.PathLike | None = None) -> Path:
    """Where `train_static` keeps the run of `config` on `corpora` (its training.json there when finished)."""
    from .static import run_dir

    return run_dir(config, _root("static", {"corpus": corpora.fingerprints[config.size]}, root))


def train_static(corpora: WikiCorpora, config: StaticConfig, *, root: str | os.PathLike | None = None,
                 progress: bool = False, device: str = "cpu"):
    """Word2Vec or GloVe (`config.model`) on the sample `config.size`, all languages jointly (the lab's
    `static.train_static`), cached by run key; returns its `Embeddings`."""
    from .bert import slice_stream
    from .static import train_static as lab_train_static

    _check(corpora, WikiCorpora, "corpora")
    _check(config, StaticConfig, "config")
    streams = {lang: [piece for s in ss for piece in slice_stream(s, GENSIM_MAX_SENTENCE)]
               for lang, ss in corpora.streams(config.size).items()}
    folder = static_folder(corpora, config, root)
    return lab_train_static(config, streams, root=folder.parent, progress=progress, device=device)


def bert_rows(corpora: WikiCorpora, size: str, window: int):
    """(ids [N, W] int32 with [CLS] ... [SEP] and padding, lengths [N], each language's first row and N): the rows
    of the sample `size` at `window` (`bert.rows_for`: documents as the lab's chapters, sentences as its verses)."""
    import torch

    from xlrepro.data.collate import pad_batch
    from xlrepro.data.mbert_vocab import mbert_tokenizer

    from .bert import rows_for

    choose("window", window, WINDOWS)
    tok = mbert_tokenizer()
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    rows, starts = [], []
    for lang, docs in corpora.documents[choose("size", size, corpora.documents)].items():
        starts.append(len(rows))
        ids = [[[tok.token_to_id(t) for t in s] for s in doc] for doc in docs]
        rows += [[cls, *r, sep] for r in rows_for(ids, window)]
    ids, lengths = pad_batch(rows, tok.token_to_id("[PAD]"), dtype=np.int32)
    return torch.from_numpy(ids), torch.from_numpy(lengths), np.array(starts + [len(rows)])


def bert_folder(corpora: WikiCorpora, config: BertRunConfig, root: str | os.PathLike | None = None) -> Path:
    """Where `train_bert` keeps the run of `config` on `corpora`."""
    key = {"corpus": corpora.fingerprints[config.size], "config": config.as_dict(), "languages": corpora.languages}
    return config.folder(_root("bert", key, root))


def train_bert(corpora: WikiCorpora, config: BertRunConfig, *, root: str | os.PathLike | None = None,
               device: str = "cpu", progress: bool = False, time_limit: float | None = None) -> Path:
    """The BERT of `config` (its size names the sample, its window the rows) by the lab's `bert.pretrain_bert`,
    cached by run key; returns its folder (model.safetensors and training.json there when finished)."""
    from .bert import pretrain_bert

    _check(corpora, WikiCorpora, "corpora")
    _check(config, BertRunConfig, "config")
    folder = bert_folder(corpora, config, root)
    if (folder / "training.json").exists():
        return folder
    return pretrain_bert(config, device=device, root=folder.parent, time_limit=time_limit, progress=progress,
                         languages=corpora.languages, rows=bert_rows(corpora, config.size, config.window))


# --- word retrieval -----------------------------------------------------------------------------------------------
def cased_dictionary(gold: Mapping[str, set[str]], source: Counter, target: Counter) -> dict[str, set[str]]:
    """MUSE's lower-cased pairs in the corpus's casing: each word becomes its most frequent cased form in the
    counts (ties: the first in sorted order); words never seen are dropped."""
    def forms(counts: Counter) -> dict[str, str]:
        best: dict[str, str] = {}
        for t in sorted(counts):
            low = t.lower()
            if low not in best or counts[t] > counts[best[low]]:
                best[low] = t
        return best

    src, tgt = forms(source), forms(target)
    out: dict[str, set[str]] = {}
    for word, translations in gold.items():
        found = {tgt[t.lower()] for t in translations if t.lower() in tgt}
        if word.lower() in src and found:
            out.setdefault(src[word.lower()], set()).update(found)
    return out


def retrieval_pairs(paths: LiuPaths, corpora: WikiCorpora, *, dictionary: str = "test", min_count: int = 5,
               max_words: int | None = 1500) -> dict[str, list[tuple[str, str]]]:
    """{target language: (English, target) pairs}: the lab's `retrieval.test_dictionary` on the MUSE dictionary
    (in the corpus's casing, `cased_dictionary`) and the small sample's counts."""
    from xlrepro.data.mbert_vocab import mbert_tokenizer
    from xlrepro.resources import read_muse_gold

    from .lab import corpus_counts
    from .retrieval import test_dictionary

    counts = corpus_counts(corpora.streams("small"))
    tok = mbert_tokenizer()
    out = {}
    for lang in corpora.languages[1:]:
        gold = read_muse_gold(paths.muse / DICTIONARIES[dictionary].format(lang=lang))
        cased = cased_dictionary(gold, counts["en"], counts[lang])
        out[lang] = test_dictionary(lang, counts, tok, min_count=min_count, max_words=max_words, dictionary=cased)
    return out


@dataclass(frozen=True)
class Bootstrap:
    """The MRR interval (`lab.mrr_rows` reads plan.bootstrap)."""
    confidence: float = 0.95
    n_resamples: int = 2000


@dataclass(frozen=True)
class _Plan:
    bootstrap: Bootstrap


def data_size_retrieval(paths: LiuPaths, *, sizes: Mapping[str, int] | None = None, languages=None,
                        unit: str = "sentences", seed: int = 0, pool: float = 1.0, dictionary: str = "test",
                        models: Sequence[str] = EXPERIMENT_MODELS, windows: Sequence[int] = (512,),
                        static: StaticConfig | None = None, bert: BertRunConfig | None = None, min_count: int = 5,
                        max_words: int | None = 1500, max_contexts: int = 200, context_window: int = 128,
                        device: str = "cpu", root: str | os.PathLike | None = None,
                        results: str | os.PathLike | None = None, progress: bool = False) -> Path:
    """S Figures 1-2 on Wikipedia: every model of `models` (word2vec, glove, bert) trained on the small and the
    big sample (BERT at each window of `windows`: 512, the paper's, and 20, S Fig 3), scored by word retrieval
    MRR. static / bert: the settings of every run (their model and size, or size and window, are set here; the
    defaults are the lab's: 768-d vectors, window 5, min_count 5; BERT-base, 2000 steps of 32,768 token slots).
    Writes ``data_size_retrieval.csv`` (module docstring) into `results` (default runs/liu2020/paper/) and returns
    its path. Every argument is checked before anything is read or trained."""
    from dataclasses import asdict

    import pandas as pd

    from xlrepro import atomic
    from xlrepro.results import write_csv
    from xlrepro.runrecord import shown

    from .bert import load_bert, word_vectors
    from .lab import bert_retrieval, static_retrieval

    # the checks, before any work
    _check(paths, LiuPaths, "paths")
    settings = SampleSettings(tuple(check_sizes(PAPER_SIZES if sizes is None else sizes).items()), unit, seed, pool)
    langs = _languages(paths, languages)
    choose("MUSE dictionary", dictionary, DICTIONARIES)
    if paths.muse is None:
        raise ConfigError(f"word retrieval needs the MUSE dictionaries: resolve the paths with dictionary='test' or "
                          f"'full' (set XLREPRO_MUSE_DIR; `xlrepro prepare --profile paper --only {ONLY}`)")
    missing = [DICTIONARIES[dictionary].format(lang=lang) for lang in langs[1:]
               if not (paths.muse / DICTIONARIES[dictionary].format(lang=lang)).is_file()]
    if missing:
        raise ConfigError(f"word retrieval needs the MUSE dictionaries {', '.join(missing)} (not in {paths.muse}): "
                          f"set XLREPRO_MUSE_DIR (`xlrepro prepare --profile paper --only {ONLY}`)")
    if isinstance(models, str) or not models:
        raise ConfigError(f"models must be a non-empty list; valid choices: {', '.join(EXPERIMENT_MODELS)}")
    models = [choose("model", m, EXPERIMENT_MODELS) for m in dict.fromkeys(models)]
    if isinstance(windows, (str, int)) or not windows:
        raise ConfigError(f"windows must be a non-empty list; valid choices: {', '.join(map(str, WINDOWS))}")
    windows = [choose("window", w, WINDOWS) for w in dict.fromkeys(windows)]
    static = _check(static if static is not None else StaticConfig(), StaticConfig, "static")
    bert = _check(bert if bert is not None else BertRunConfig(), BertRunConfig, "bert")
    for name, v in (("min_count", min_count), ("max_contexts", max_contexts), ("context_window", context_window),
                    *((("max_words", max_words),) if max_words is not None else ())):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"{name} must be a positive integer; got {v!r}")
    if context_window < 3:
        raise ConfigError(f"context_window must be >= 3 ([CLS], a piece, [SEP]); got {context_window}")
    if any(m in MODELS for m in models) and static.min_count > min_count:
        raise ConfigError(f"static.min_count ({static.min_count}) must not exceed min_count ({min_count}): the "
                          "static vocabulary must hold every dictionary word")
    import torch
    device = str(torch.device(device))

    corpora = wiki_corpora(paths, dict(settings.sizes), langs, unit=unit, seed=seed, pool=pool)
    pairs = retrieval_pairs(paths, corpora, dictionary=dictionary, min_count=min_count, max_words=max_words)
    plan = _Plan(Bootstrap())
    frames = [pd.DataFrame(corpora.card())]
    for size in ("small", "big"):
        for model in models:
            if model in MODELS:
                emb = train_static(corpora, replace(static, model=model, size=size), root=root, progress=progress,
                                   device=device)
                frames.append(static_retrieval(f"{model}-{size}", emb, pairs, plan).assign(layer=STATIC_LAYER))
                continue
            from xlrepro.data.mbert_vocab import mbert_tokenizer
            tok = mbert_tokenizer()
            small = corpora.streams("small")
            streams = {lang: [[tok.token_to_id(t) for t in s] for s in small[lang]] for lang in corpora.languages}
            words = {"en": {tok.token_to_id(s) for p in pairs.values() for s, _ in p}}
            words.update({lang: {tok.token_to_id(t) for _, t in p} for lang, p in pairs.items()})
            for window in windows:
                config = BertRunConfig(**{**asdict(bert), "model": bert.model, "size": size, "window": window})
                folder = train_bert(corpora, config, root=root, device=device, progress=progress)
                model_, _ = load_bert(folder)
                vectors = word_vectors(model_.bert.to(device), streams, words, window=context_window,
                                       max_contexts=max_contexts, device=device)
                frames.append(bert_retrieval(f"bert-{size}-w{window}", vectors, pairs, tok, plan))
    frame = pd.concat(frames, ignore_index=True)
    frame["seed"] = frame["seed"].astype(int)
    frame["layer"] = frame["layer"].astype(int)
    frame = frame[["experiment", "seed", "language", "layer", "metric", "value"]]
    from xlrepro.paths import runs_dir
    out = Path(results) if results is not None else runs_dir() / "liu2020" / "paper"
    atomic.write_json(out / RESULTS.replace(".csv", ".json"), {
        "profile": "paper", "wikipedia": shown(paths.wiki), "muse": shown(paths.muse), "dictionary": dictionary,
        "sample": {"sizes": dict(settings.sizes), "unit": unit, "seed": seed, "pool": pool},
        "fingerprints": corpora.fingerprints, "pairs": {lang: len(p) for lang, p in pairs.items()}})
    return write_csv(frame, out / RESULTS)
