"""Static word embeddings with gensim's fastText (Bojanowski et al. 2017), one space per language."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class FastTextConfig:
    """fastText's own defaults for skip-gram (those of the `fasttext skipgram` command), dim 300 as in
    Dufter & Schütze's appendix A.3; `min_count` 1 so that every piece of a small vocabulary gets its own vector."""

    dim: int = 300
    epochs: int = 5
    window: int = 5
    negative: int = 5
    min_count: int = 1
    min_n: int = 3
    max_n: int = 6
    alpha: float = 0.05

    def __post_init__(self):
        for name, v in asdict(self).items():
            if v <= 0 and not (name in ("min_n", "max_n") and v == 0):
                raise ValueError(f"FastTextConfig.{name} must be positive; got {v}")


def train_fasttext(sentences: list[list[str]], config: FastTextConfig | None = None, seed: int = 0,
                   vocabulary: list[str] | None = None) -> tuple[list[str], np.ndarray]:
    """Train skip-gram fastText on tokenised sentences; return (words, vectors [n, dim]) ordered by frequency.

    With `vocabulary`, the rows are every word of the corpus (most frequent first) followed by the words of
    `vocabulary` the corpus lacks, whose vectors fastText builds from their character n-grams.
    One worker thread, so that a seed gives the same vectors on every run.
    """
    from gensim.models import FastText

    cfg = config or FastTextConfig()
    if not sentences:
        raise ValueError("no sentences to train fastText on")
    model = FastText(sentences=sentences, sg=1, vector_size=cfg.dim, window=cfg.window, negative=cfg.negative,
                     min_count=cfg.min_count, min_n=cfg.min_n, max_n=cfg.max_n, alpha=cfg.alpha, epochs=cfg.epochs,
                     workers=1, seed=seed)
    words = list(model.wv.index_to_key)  # gensim sorts its vocabulary by frequency
    if vocabulary is not None:
        seen = set(words)
        words += [w for w in vocabulary if w not in seen]
    return words, np.stack([model.wv[w] for w in words]).astype(np.float32)
