"""Liu et al. 2020 on the released mBERT (the paper profile), as package functions: the rows of the Google mBERT in
word retrieval by layer (S, Figures 1-2) and the mean-difference shift (L §4).

* `word_retrieval_by_layer`: each dictionary word's contextual vector at a layer is the mean of that layer's vectors
  of its occurrences in Wikipedia paragraphs (a word's vector in one sentence: the mean of its word pieces), and
  the English words of a MUSE dictionary retrieve their translations by cosine nearest neighbour among the
  dictionary's target words, with no mapping (`retrieval.word_retrieval`); MRR with a bootstrap interval
  (`retrieval.mrr_with_interval`), for every layer (0 = embeddings).
* `mean_difference_shift`: R_L, the mean hidden state of a language's tokens at every layer (`mds.language_means`),
  from that language's Wikipedia paragraphs; the source paragraphs are fed unmasked with alpha * (R_target -
  R_source) added to one layer's output (`mds.mds_hook`), and the masked-LM head's top prediction at every position
  is scored by the convert rate into the target language (`mds.convert_rate`; vocabularies: the word pieces of each
  language's paragraphs, `mds.language_vocabulary`). Wikipedia is not parallel, so the paper's BLEU-1 against a
  translation is not computed. The paragraphs that give the means are not those shifted.

Resources: the encoder ($XLREPRO_MBERT, else the hub id google-bert/bert-base-multilingual-cased; its masked-LM
head is read too), Wikipedia text one wikiextractor folder a language ($XLREPRO_WIKI_DIR/<lang>/), and the MUSE
dictionaries ($XLREPRO_MUSE_DIR/en-<lang>.5000-6500.txt, the test split, or en-<lang>.txt). MUSE's words are
lower-cased, mBERT is cased: a word is matched to its occurrences case-insensitively (`lowercase`).

Sizes of a full run (documented, not downloaded here): mBERT 717 MB; English Wikipedia about 22 GB compressed, of
which the first `max_paragraphs` paragraphs a language are read (default 20,000: tens of megabytes of text); MUSE's
test dictionaries about 1,500 English words a language. Results go to ``runs/liu2020/paper/<encoder>/results/``:
``word_retrieval.csv`` and ``mds.csv`` (long rows).

    paths = resolve_liu_paths(languages=["de", "fr"])
    word_retrieval_by_layer(paths)           # word_retrieval.csv: language, layer, metric (mrr, low, high, words)
    mean_difference_shift(paths, layers=[8]) # mds.csv: direction, layer, alpha, metric convert_rate, value
"""
from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from xlrepro.config import ConfigError, choose
from xlrepro.paths import runs_dir
from xlrepro.resources import locate, mbert_encoder, read_muse_gold, read_wikiextractor

from .mds import check_layer, convert_rate, language_means, language_vocabulary, mds_hook
from .retrieval import mrr_with_interval, word_retrieval

DICTIONARIES = {"test": "en-{lang}.5000-6500.txt", "full": "en-{lang}.txt"}  # MUSE's file names
ALPHAS = (-1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)  # the plan's MDS grid (experiments.yaml, mds.alphas)
RETRIEVAL = "word_retrieval.csv"
MDS = "mds.csv"


@dataclass(frozen=True)
class LiuPaths:
    encoder: str  # a hub id or a folder written by save_pretrained
    wiki: Path  # one wikiextractor folder per language
    muse: Path | None  # the MUSE dictionaries (word retrieval only)
    languages: tuple[str, ...]  # the target languages (English is the source)


def resolve_liu_paths(encoder: str | os.PathLike | None = None, wiki: str | os.PathLike | None = None,
                      muse: str | os.PathLike | None = None, *, languages=None, dictionary: str | None = "test",
                      only: str | None = None) -> LiuPaths:
    """The resources: the arguments where given, else $XLREPRO_MBERT (or the hub id), $XLREPRO_WIKI_DIR and
    $XLREPRO_MUSE_DIR (or the prepared cache). languages: target language folders of the Wikipedia folder (default:
    all but English). dictionary: "test" or "full" MUSE files that must exist for every target language, or None
    (the mean-difference shift needs none). A missing resource raises a one-line ConfigError naming its variable
    and the prepare command (`xlrepro prepare --profile paper --only <only>` where `only` names the caller, else
    its --dry-run)."""
    prepare = f"xlrepro prepare --profile paper {f'--only {only}' if only else '--dry-run'}"
    folder = Path(wiki) if wiki is not None else (Path(os.environ["XLREPRO_WIKI_DIR"]) if os.environ.get(
        "XLREPRO_WIKI_DIR") else locate("wikipedia"))
    if folder is None or not (folder / "en").is_dir():
        where = "$XLREPRO_WIKI_DIR unset, not prepared" if folder is None else f"no en/ in {folder}"
        raise ConfigError(f"the paper profile of Liu et al. needs Wikipedia text, one wikiextractor folder per "
                          f"language, English among them ({where}): set XLREPRO_WIKI_DIR as `{prepare}` "
                          f"describes (wikipedia)")
    present = sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name != "en" and not p.name.startswith("."))
    targets = tuple(dict.fromkeys(choose("target language (a folder of the Wikipedia text)", lang, present)
                                  for lang in (languages or present)))
    if not targets:
        raise ConfigError(f"{folder} has no language folder beside en/")
    dictionaries = None
    if dictionary is not None:
        choose("MUSE dictionary", dictionary, DICTIONARIES)
        dictionaries = Path(muse) if muse is not None else (Path(os.environ["XLREPRO_MUSE_DIR"]) if os.environ.get(
            "XLREPRO_MUSE_DIR") else locate("muse"))
        files = [DICTIONARIES[dictionary].format(lang=lang) for lang in targets]
        missing = files if dictionaries is None else [f for f in files if not (dictionaries / f).is_file()]
        if missing:
            where = "$XLREPRO_MUSE_DIR unset, not prepared" if dictionaries is None else f"not in {dictionaries}"
            raise ConfigError(f"word retrieval needs the MUSE dictionaries {', '.join(missing)} ({where}): set "
                              f"XLREPRO_MUSE_DIR as `{prepare}` describes (muse)")
    return LiuPaths(mbert_encoder(encoder), folder, dictionaries, targets)


def paragraphs(folder: Path, n: int) -> list[str]:
    """The first `n` non-empty paragraphs (lines of document bodies) of a wikiextractor folder, in file order."""
    lines = (line.strip() for doc in read_wikiextractor(folder) for line in doc.text.split("\n"))
    return list(itertools.islice((line for line in lines if line), n))


def _positive(name: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive integer; got {value!r}")
    return value


def _load(encoder: str, masked_lm: bool = False):
    """(model, fast tokenizer) of a hub id or a save_pretrained folder: the BertModel, or the BertForMaskedLM."""
    from xlrepro.resources import load_encoder

    model, tokenizer = load_encoder(encoder)  # checks the path or hub id, one-line errors
    if masked_lm:
        from transformers import AutoModelForMaskedLM

        torch.manual_seed(0)  # a folder without the MLM head (a bare BertModel) gets a fixed random one
        model = AutoModelForMaskedLM.from_pretrained(encoder)
    return model.eval(), tokenizer


def _batches(tokenizer, texts, max_length: int, batch_size: int):
    """(input_ids [B, W], attention_mask [B, W], the batch's encoding, its texts) of ``[CLS] text [SEP]`` cut at
    `max_length` pieces, `batch_size` texts at a time."""
    for start in range(0, len(texts), batch_size):
        chunk = list(texts[start:start + batch_size])
        enc = tokenizer(chunk, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
        yield enc["input_ids"], enc["attention_mask"], enc, chunk


@torch.no_grad()
def contextual_word_vectors(model, tokenizer, texts, words, *, lowercase: bool = True, max_contexts: int = 100,
                            max_length: int = 128, batch_size: int = 32) -> dict[str, torch.Tensor]:
    """{word: [layers + 1, H]}: for each of `words` found in `texts`, the mean over its first `max_contexts`
    occurrences (in reading order) of its vector at every layer, a word's vector in one text being the mean of its
    pieces' states.

    A word is a unit of the tokenizer's pre-tokenizer (BERT's: whitespace and punctuation), read back from the
    text by its character span; with `lowercase` it is compared lower-cased (MUSE's dictionaries are). Words never
    found are missing from the result; a word cut off by `max_length` is not found there. `model` is a BertModel
    (or has `.bert`) on the CPU; `tokenizer` a fast Hugging Face tokenizer."""
    bert = getattr(model, "bert", model)
    wanted = set(words)
    sums: dict[str, torch.Tensor] = {}
    seen: dict[str, int] = {}
    for ids, mask, enc, chunk in _batches(tokenizer, texts, max_length, batch_size):
        hs = torch.stack(bert(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states)
        hs = hs.double()  # [L+1, B, W, H]
        for b, text in enumerate(chunk):
            pieces: dict[int, list[int]] = {}  # word index -> its piece positions
            for pos, w in enumerate(enc.word_ids(b)):
                if w is not None:
                    pieces.setdefault(w, []).append(pos)
            for w, positions in pieces.items():
                span = enc.word_to_chars(b, w)
                word = text[span.start:span.end]
                word = word.lower() if lowercase else word
                if word in wanted and seen.get(word, 0) < max_contexts:
                    vec = hs[:, b, positions].mean(dim=1)  # [L+1, H]
                    sums[word] = vec if word not in sums else sums[word] + vec
                    seen[word] = seen.get(word, 0) + 1
    return {w: (sums[w] / seen[w]).float() for w in sums}


def word_retrieval_by_layer(paths: LiuPaths, *, dictionary: str = "test", max_paragraphs: int = 20_000,
                            max_words: int | None = None, max_contexts: int = 100, lowercase: bool = True,
                            results: str | os.PathLike | None = None) -> Path:
    """S Figures 1-2's Google-mBERT rows: English -> each target language word retrieval MRR at every layer.

    The test pairs are the MUSE pairs (`dictionary`: "test", en-xx.5000-6500.txt, or "full") whose two words both
    occur in the first `max_paragraphs` paragraphs of their language (the first `max_words` English words in the
    dictionary's order, each with all its found translations). Writes ``word_retrieval.csv`` (long rows: experiment
    "mBERT/word-retrieval", seed -1, language, layer, metric "mrr" / "mrr_low" / "mrr_high" (the 95% bootstrap
    interval over words) / "words", value) and returns the results folder (default
    ``runs/liu2020/paper/<encoder>/results``)."""
    choose("MUSE dictionary", dictionary, DICTIONARIES)
    _positive("max_paragraphs", max_paragraphs)
    _positive("max_contexts", max_contexts)
    if max_words is not None:
        _positive("max_words", max_words)
    if paths.muse is None:
        raise ConfigError("word retrieval needs the MUSE dictionaries: resolve the paths with dictionary='test' or "
                          "'full'")
    model, tokenizer = _load(paths.encoder)
    texts = {lang: paragraphs(paths.wiki / lang, max_paragraphs) for lang in ("en", *paths.languages)}
    rows = []
    for lang in paths.languages:
        gold = read_muse_gold(paths.muse / DICTIONARIES[dictionary].format(lang=lang))
        vectors = {"en": _vectors(model, tokenizer, texts["en"], gold, lowercase, max_contexts),
                   lang: _vectors(model, tokenizer, texts[lang], {t for ts in gold.values() for t in ts}, lowercase,
                                  max_contexts)}
        pairs, taken = [], 0
        for source, targets in gold.items():
            found = sorted(t for t in targets if t in vectors[lang])
            if source in vectors["en"] and found:
                pairs += [(source, t) for t in found]
                taken += 1
                if max_words is not None and taken >= max_words:
                    break
        if not pairs:
            raise ConfigError(f"no en-{lang} MUSE pair has both words in the first {max_paragraphs} paragraphs of "
                              f"its language: read more paragraphs (max_paragraphs)")
        depth = next(iter(vectors["en"].values())).shape[0]
        for layer in range(depth):
            src, rr = word_retrieval(pairs, _sided(vectors, lang, layer))
            mrr, low, high = mrr_with_interval(rr)
            rows += [{"experiment": "mBERT/word-retrieval", "seed": -1, "language": lang, "layer": layer,
                      "metric": m, "value": v}
                     for m, v in (("mrr", mrr), ("mrr_low", low), ("mrr_high", high), ("words", float(len(src))))]
    return _write(paths, results, RETRIEVAL, pd.DataFrame(rows), muse=str(paths.muse))


def _vectors(model, tokenizer, texts, words, lowercase, max_contexts):
    return contextual_word_vectors(model, tokenizer, texts, words, lowercase=lowercase, max_contexts=max_contexts)


def _sided(vectors: dict, lang: str, layer: int):
    """`vector_of` for `retrieval.word_retrieval`, which asks for the source (English) words first and the target
    words second: the two sides are kept apart, as a word may be spelt alike in both languages."""
    calls = iter((vectors["en"], vectors[lang]))

    def vector_of(ws):
        side = next(calls)
        return np.stack([side[w][layer].numpy() for w in ws])  # [len(ws), H]
    return vector_of


def mean_difference_shift(paths: LiuPaths, *, source: str = "en", layers=None, alphas=ALPHAS,
                          mean_paragraphs: int = 1000, shifted_paragraphs: int = 200, max_length: int = 128,
                          batch_size: int = 32, results: str | os.PathLike | None = None) -> Path:
    """L §4 on mBERT: the convert rate of the masked-LM's top predictions from `source` into each target language
    of `paths` (or from each into English when `source` is a target), for every layer of `layers` (default: all,
    1-based: the output of that encoder layer) and alpha of `alphas`. The means R come from the first
    `mean_paragraphs` paragraphs of each language, the shifted inputs are the `shifted_paragraphs` source paragraphs
    after them (fewer where the text runs out; none raises a ConfigError). Writes ``mds.csv`` (long rows: experiment "mBERT/mds", seed -1, direction "src-tgt", layer, alpha,
    metric "convert_rate", value) and returns
    the results folder."""
    _positive("mean_paragraphs", mean_paragraphs)
    _positive("shifted_paragraphs", shifted_paragraphs)
    _positive("max_length", max_length)
    _positive("batch_size", batch_size)
    languages = ("en", *paths.languages)
    choose("source language", source, languages)
    alphas = [float(a) for a in alphas]
    if not alphas:
        raise ConfigError("alphas must hold at least one value")
    model, tokenizer = _load(paths.encoder, masked_lm=True)
    bert, depth = model.bert, model.config.num_hidden_layers
    layers = list(range(1, depth + 1)) if layers is None else [check_layer(layer, depth) for layer in layers]
    targets = [lang for lang in languages if lang != source] if source == "en" else ["en"]
    texts = {lang: paragraphs(paths.wiki / lang, mean_paragraphs + (shifted_paragraphs if lang == source else 0))
             for lang in (source, *targets)}
    if len(texts[source]) <= mean_paragraphs:
        raise ConfigError(f"{paths.wiki / source} has {len(texts[source])} paragraphs: {mean_paragraphs} for its mean "
                          f"leave none to shift (lower mean_paragraphs)")
    means, vocab = {}, {}
    for lang, ts in texts.items():
        ts = ts[:mean_paragraphs]
        means[lang] = language_means(bert, ((ids, mask) for ids, mask, _, _ in
                                            _batches(tokenizer, ts, max_length, batch_size)))[0]  # [L+1, H]
        vocab[lang] = language_vocabulary(e.tokens for e in
                                          tokenizer.backend_tokenizer.encode_batch(ts, add_special_tokens=False))
    shifted = texts[source][mean_paragraphs:]
    inverse = {i: t for t, i in tokenizer.get_vocab().items()}
    rows = []
    for tgt in targets:
        for layer in layers:
            shift = means[tgt][layer] - means[source][layer]  # [H]
            for alpha in alphas:
                outputs = []
                with torch.no_grad(), mds_hook(bert, layer, shift, alpha):
                    for ids, mask, _, _ in _batches(tokenizer, shifted, max_length, batch_size):
                        pred = model(input_ids=ids, attention_mask=mask).logits.argmax(-1)  # [B, W]
                        for p, n in zip(pred, mask.sum(1).tolist()):
                            outputs += [inverse[i] for i in p[1:n - 1].tolist()]  # without [CLS] and [SEP]
                rows.append({"experiment": "mBERT/mds", "seed": -1, "direction": f"{source}-{tgt}", "layer": layer,
                             "alpha": alpha, "metric": "convert_rate",
                             "value": convert_rate(outputs, vocab[source], vocab[tgt])})
    return _write(paths, results, MDS, pd.DataFrame(rows))


def _write(paths: LiuPaths, results, name: str, frame: pd.DataFrame, **data: str) -> Path:
    """Write `frame` as `name` into the results folder with a profile.json saying what it ran on."""
    import json

    from xlrepro import atomic
    from xlrepro.results import write_csv
    from xlrepro.runrecord import shown

    folder = Path(results) if results is not None else runs_dir() / "liu2020" / "paper" / Path(paths.encoder).name / "results"
    folder.mkdir(parents=True, exist_ok=True)
    profile = folder / "profile.json"
    known = json.loads(profile.read_text()) if profile.is_file() else {}
    encoder = shown(paths.encoder) if Path(paths.encoder).exists() else paths.encoder
    atomic.write_json(profile, {**known, "profile": "paper", "encoder": encoder, "wikipedia": shown(paths.wiki),
                                **{k: shown(v) for k, v in data.items()}})
    write_csv(frame, folder / name)
    return folder
