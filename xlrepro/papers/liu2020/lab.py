"""Measurements of the Liu et al. 2020 chapters as long results frames (`xlrepro.results` contract).

Experiments are named "<model>-<size>" (word2vec-small, glove-big, bert-big-w512, ...) and
"word2vec-small-w<window>" for S Fig 4. MRR rows carry seed -1: a trained model's MRR on a fixed dictionary has
no seed noise to average (one training seed per model, as the paper); its uncertainty over dictionary words is the
bootstrap interval, stored as the metrics mrr_low / mrr_high beside mrr.
"""
from __future__ import annotations

from collections import Counter
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .corpora import LANGUAGES
from .plan import Plan

SEED = -1  # xlrepro.claims.DETERMINISTIC_SEED


def corpus_counts(corpus: Mapping[str, list[list[str]]]) -> dict[str, Counter]:
    return {lang: Counter(t for s in streams for t in s) for lang, streams in corpus.items()}


def test_dictionaries(plan: Plan, counts: Mapping[str, Counter], tokenizer, langs: Sequence[str] | None = None
                      ) -> tuple[dict[str, list[tuple[str, str]]], pd.DataFrame]:
    """The test dictionary of every target language that has one, and a table of why the others have none."""
    from xlrepro.config import ConfigError
    from xlrepro.data.dictionaries import DictionaryNotFound

    from .retrieval import test_dictionary

    out, rows = {}, []
    for lang in (langs or [l for l in counts if l != "en"]):
        try:
            pairs = test_dictionary(lang, counts, tokenizer, min_count=plan.dictionary.min_count,
                                    max_words=plan.dictionary.max_words)
        except (DictionaryNotFound, ConfigError) as e:
            rows.append({"language": lang, "pairs": 0, "source_words": 0, "target_words": 0, "note": str(e)})
            continue
        out[lang] = pairs
        rows.append({"language": lang, "pairs": len(pairs), "source_words": len({s for s, _ in pairs}),
                     "target_words": len({t for _, t in pairs}), "note": ""})
    return out, pd.DataFrame(rows)


def dictionary_frame(table: pd.DataFrame) -> pd.DataFrame:
    long = table.melt(id_vars=["language"], value_vars=["pairs", "source_words", "target_words"],
                      var_name="metric", value_name="value")
    return long.assign(experiment="dictionary", seed=SEED)[["experiment", "seed", "metric", "value", "language"]]


def mrr_rows(experiment: str, lang: str, rr: np.ndarray, plan: Plan, layer: int | None = None) -> list[dict]:
    from .retrieval import mrr_with_interval

    m, lo, hi = mrr_with_interval(rr, confidence=plan.bootstrap.confidence, n_resamples=plan.bootstrap.n_resamples)
    base = {"experiment": experiment, "seed": SEED, "language": lang, **({"layer": layer} if layer is not None else {})}
    return [{**base, "metric": k, "value": v} for k, v in (("mrr", m), ("mrr_low", lo), ("mrr_high", hi),
                                                             ("words", len(rr)))]


def static_retrieval(experiment: str, emb, dictionaries: Mapping[str, list[tuple[str, str]]], plan: Plan
                     ) -> pd.DataFrame:
    """MRR (with bootstrap interval) of static embeddings for every dictionary."""
    from .retrieval import word_retrieval

    rows = []
    for lang, pairs in dictionaries.items():
        missing = sorted({w for p in pairs for w in p if w not in emb})
        if missing:
            raise KeyError(f"{experiment} has no vector for {missing[:5]} ({len(missing)} words): its vocabulary "
                           "must cover the dictionary (trained with min_count <= the dictionary's)")
        _, rr = word_retrieval(pairs, emb.rows)
        rows += mrr_rows(experiment, lang, rr, plan)
    return pd.DataFrame(rows)


def static_name(run) -> str:
    return f"{run.model}-{run.size}" + ("" if run.window in (5, 10) else f"-w{run.window}")


def bert_retrieval(experiment: str, vectors: Mapping[str, Mapping[int, "torch.Tensor"]],  # noqa: F821
                   dictionaries: Mapping[str, list[tuple[str, str]]], tokenizer, plan: Plan) -> pd.DataFrame:
    """MRR at every layer from `bert.word_vectors` output (token id -> [L+1, H])."""
    from .retrieval import word_retrieval

    rows = []
    for lang, pairs in dictionaries.items():
        src_vec, tgt_vec = vectors["en"], vectors[lang]
        n_layers = next(iter(src_vec.values())).shape[0]
        for layer in range(n_layers):
            def vec(words, lang_vec=None):
                return np.stack([lang_vec[tokenizer.token_to_id(w)][layer].numpy() for w in words])
            src = list(dict.fromkeys(s for s, _ in pairs))
            table = {**{w: src_vec[tokenizer.token_to_id(w)] for w in src},
                     **{t: tgt_vec[tokenizer.token_to_id(t)] for _, t in pairs}}
            _, rr = word_retrieval(pairs, lambda ws: np.stack([table[w][layer].numpy() for w in ws]))
            rows += mrr_rows(experiment, lang, rr, plan, layer=layer)
    return pd.DataFrame(rows)


def cached_dictionaries(plan: Plan, counts: Mapping[str, Counter], tokenizer, langs: Sequence[str] | None = None,
                        root=None, key_extra: Mapping | None = None):
    """`test_dictionaries`, cached as JSON under runs/liu2020/lab/dictionaries/<key>.json (reading 300k German
    pairs takes a minute)."""
    from pathlib import Path

    from xlrepro import atomic
    from xlrepro.paths import runs_dir
    from xlrepro.runkeys import run_key

    langs = list(langs or [l for l in counts if l != "en"])
    key = run_key({"dictionary": vars(plan.dictionary), "langs": langs,
                   "corpus_tokens": {l: sum(counts[l].values()) for l in counts}, **(key_extra or {})})
    path = Path(root or runs_dir() / "liu2020" / "lab" / "dictionaries") / f"{key}.json"
    try:
        raw = atomic.read_json(path, "") if path.exists() else None
    except atomic.CorruptFile:  # a truncated write: computed again below
        raw = None
    if raw is not None:
        return {l: [tuple(p) for p in ps] for l, ps in raw["pairs"].items()}, pd.DataFrame(raw["table"])
    d, table = test_dictionaries(plan, counts, tokenizer, langs)
    atomic.write_json(path, {"pairs": d, "table": table.to_dict("records")})
    return d, table
