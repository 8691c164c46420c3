"""Word retrieval as Liu et al. 2020 §3.1.1 (L) define it, with no mapping between the languages.

For each English dictionary word x_i with vector u_i, the target words y_1..y_n of the test dictionary are ranked
by cosine similarity to u_i; rank(y_i) is the rank of the best-ranked gold translation (a word can have several,
as in MUSE's test sets), and MRR = mean_i 1/rank(y_i). Contextual models represent a word by the mean of its
vectors over all its contexts (`xlrepro.papers.liu2020.bert.word_vectors`).

Test dictionaries: the FreeDict / CC-CEDICT pairs (`xlrepro.data.dictionaries`) whose two words are each one
whole mBERT WordPiece token (the static models embed tokens, as in the paper) and occur at least `min_count`
times in the *small* corpus — so that every model, small or big, static or BERT, is scored on the same pairs.
"""
from __future__ import annotations

from collections import Counter
from typing import Mapping, Sequence

import numpy as np

from xlrepro.config import ConfigError


def reciprocal_ranks(src: np.ndarray, tgt: np.ndarray, gold: Sequence[Sequence[int]]) -> np.ndarray:
    """1/rank of the best gold target for each source row.

    src [n, D] (one row per source word), tgt [m, D] (the candidates), gold[i] = rows of tgt that translate
    source i. rank = 1 + the number of candidates strictly more similar than the best gold one (cosine).
    """
    if len(src) != len(gold):
        raise ValueError(f"{len(src)} source vectors but {len(gold)} gold sets")
    if any(len(g) == 0 for g in gold):
        raise ValueError("every source word needs at least one gold target")

    def unit(x):
        x = np.asarray(x, dtype=np.float64)
        n = np.linalg.norm(x, axis=1, keepdims=True)
        return x / np.where(n == 0, 1, n)

    sim = unit(src) @ unit(tgt).T  # [n, m]
    out = np.empty(len(src))
    for i, g in enumerate(gold):
        best = sim[i, list(g)].max()
        out[i] = 1.0 / (1 + int((sim[i] > best + 1e-12).sum()))
    return out


def mrr_with_interval(rr: np.ndarray, *, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
                      ) -> tuple[float, float, float]:
    """(MRR, low, high): the mean of the reciprocal ranks and a percentile... BCa bootstrap interval over
    dictionary words (scipy.stats.bootstrap)."""
    from scipy.stats import bootstrap

    rr = np.asarray(rr, dtype=float)
    if len(rr) < 2 or np.all(rr == rr[0]):
        return float(rr.mean()), float(rr.mean()), float(rr.mean())
    res = bootstrap((rr,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                    random_state=np.random.default_rng(seed), method="percentile")
    return float(rr.mean()), float(res.confidence_interval.low), float(res.confidence_interval.high)


def single_token_words(words, tokenizer) -> set[str]:
    """The words that mBERT's WordPiece keeps as one whole token."""
    words = sorted(set(words))
    encs = tokenizer.encode_batch(words, add_special_tokens=False)
    return {w for w, e in zip(words, encs) if e.tokens == [w]}


def test_dictionary(lang: str, counts: Mapping[str, Counter], tokenizer, *, min_count: int = 5,
                    max_words: int | None = None, dictionary: Mapping[str, set[str]] | None = None
                    ) -> list[tuple[str, str]]:
    """(english, `lang`) pairs: both words one mBERT token, each seen `min_count` times in its language's
    (small) corpus `counts[lang]`; English words by falling frequency, up to `max_words` of them, each with all
    its gold translations. Raises ConfigError naming the languages that do have pairs when none remain."""
    from xlrepro.data.dictionaries import load_dictionary

    if lang == "en" or lang not in counts or "en" not in counts:
        raise ConfigError(f"unknown target language {lang!r}; valid choices: "
                          f"{', '.join(l for l in counts if l != 'en')}")
    d = load_dictionary(lang) if dictionary is None else dictionary
    en_ok = {w for w, c in counts["en"].items() if c >= min_count}
    x_ok = {w for w, c in counts[lang].items() if c >= min_count}
    en_words = single_token_words([w for w in d if w in en_ok], tokenizer)
    x_words = single_token_words([t for w in en_words for t in d[w] if t in x_ok], tokenizer)
    ranked = sorted(en_words, key=lambda w: (-counts["en"][w], w))
    pairs = []
    taken = 0
    for w in ranked:
        golds = sorted(t for t in d[w] if t in x_words)
        if golds:
            pairs += [(w, t) for t in golds]
            taken += 1
            if max_words is not None and taken >= max_words:
                break
    if not pairs:
        raise ConfigError(f"the {lang} dictionary has no pair whose words both occur {min_count} times in the "
                          f"corpus as single mBERT tokens; choose another language or a lower min_count")
    return pairs


def word_retrieval(pairs: Sequence[tuple[str, str]], vector_of) -> tuple[list[str], np.ndarray]:
    """(source words, reciprocal ranks) for a dictionary; `vector_of(words) -> [len(words), D]`."""
    src = list(dict.fromkeys(s for s, _ in pairs))
    tgt = list(dict.fromkeys(t for _, t in pairs))
    col = {t: j for j, t in enumerate(tgt)}
    gold: dict[str, list[int]] = {}
    for s, t in pairs:
        gold.setdefault(s, []).append(col[t])
    return src, reciprocal_ranks(vector_of(src), vector_of(tgt), [gold[s] for s in src])
