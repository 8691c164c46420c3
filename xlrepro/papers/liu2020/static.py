"""Static (non-contextual) embeddings of Liu et al. 2020: Word2Vec (gensim) and GloVe, 768-d, trained jointly on
the concatenated monolingual corpora (no cross-lingual signal), over mBERT WordPiece tokens.

Word2Vec is gensim's with its defaults (CBOW, window 5, 5 negatives, min_count 5, 5 epochs), the paper's
"default", and vector_size 768. GloVe: no maintained GloVe package installs on Python 3.11 here (glove-python's
last release is a 2016 Cython build; mittens holds the full V x V matrix in memory), so `train_glove` is a short
torch implementation of Pennington et al.'s objective (weighted least squares on log co-occurrences, AdaGrad,
x_max 100, alpha 3/4, 1/d-weighted symmetric windows, W + W~ as the vectors), cross-checked against mittens on a
small corpus in the tests. On a CPU one pass over the small corpus's 7.5M co-occurrences at 768-d takes
minutes, so the GloVe runs belong to the GPU run (`xlrepro train liu2020 --part static --device cuda`).

Each run is cached in ``runs/liu2020/lab/static/<run key>/`` (`xlrepro.runkeys`): config.json, vectors.npy
([V, 768] float32), vocab.txt and training.json (written last); a second call with the same config loads it.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from xlrepro import atomic
from xlrepro.config import ConfigError, choose
from xlrepro.engine.models import device_name

MODELS = ("word2vec", "glove")


@dataclass(frozen=True)
class StaticConfig:
    model: str = "word2vec"
    size: str = "small"  # corpus size: small | big
    dim: int = 768
    window: int = 5  # Word2Vec's max window; GloVe's symmetric window
    min_count: int = 5
    epochs: int = 5  # Word2Vec (gensim default 5); GloVe: AdaGrad passes
    seed: int = 0
    workers: int = 2  # Word2Vec threads (changes results: gensim is only reproducible with 1 worker)
    x_max: float = 100.0  # GloVe
    glove_alpha: float = 0.75  # GloVe
    lr: float = 0.05  # GloVe AdaGrad learning rate (the reference implementation's eta)
    max_chapters: int | None = None  # smoke runs: the first chapters only
    languages: tuple[str, ...] = ()  # () = all of corpora.LANGUAGES

    def __post_init__(self):
        from .corpora import SIZES, check_languages
        choose("model", self.model, MODELS)
        choose("size", self.size, SIZES)
        for name in ("dim", "window", "min_count", "epochs", "workers"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a positive integer; got {v!r}")
        if self.languages:
            object.__setattr__(self, "languages", check_languages(self.languages))

    def key(self) -> str:
        from xlrepro.runkeys import run_key
        return run_key(asdict(self))


@dataclass
class Embeddings:
    """Vectors [V, D] and their tokens; `vector(token)`; `index` token -> row."""
    tokens: list[str]
    vectors: np.ndarray

    def __post_init__(self):
        self.index = {t: i for i, t in enumerate(self.tokens)}

    def __contains__(self, token: str) -> bool:
        return token in self.index

    def rows(self, tokens: Sequence[str]) -> np.ndarray:
        return self.vectors[[self.index[t] for t in tokens]]


def run_dir(config: StaticConfig, root: str | os.PathLike | None = None) -> Path:
    from xlrepro.paths import runs_dir
    return Path(root or runs_dir() / "liu2020" / "lab" / "static") / config.key()


def sentences(corpus: Mapping[str, list[list[str]]]) -> list[list[str]]:
    """Every chapter stream of every language, one list (the joint, unsupervised training data)."""
    return [s for streams in corpus.values() for s in streams]


def train_word2vec(sents: list[list[str]], config: StaticConfig) -> Embeddings:
    from gensim.models import Word2Vec

    # gensim truncates a "sentence" at 10,000 tokens; the longest chapter stream has about 4,000
    model = Word2Vec(sents, vector_size=config.dim, window=config.window, min_count=config.min_count,
                     epochs=config.epochs, seed=config.seed, workers=config.workers)
    return Embeddings(list(model.wv.index_to_key), model.wv.vectors.astype(np.float32))


def cooccurrence(sents: list[list[str]], window: int, min_count: int):
    """(tokens, X) with X a symmetric scipy CSR [V, V] of GloVe's 1/d-weighted counts within `window` tokens,
    over tokens seen at least `min_count` times (others are dropped before windowing, as GloVe's vocab_count)."""
    from collections import Counter

    import scipy.sparse as sp

    counts = Counter(t for s in sents for t in s)
    tokens = sorted((t for t, c in counts.items() if c >= min_count), key=lambda t: (-counts[t], t))
    index = {t: i for i, t in enumerate(tokens)}
    V = len(tokens)
    X = sp.csr_matrix((V, V), dtype=np.float64)
    ids = [np.array([index[t] for t in s if t in index], dtype=np.int64) for s in sents]
    for d in range(1, window + 1):
        left = np.concatenate([a[:-d] for a in ids if len(a) > d] or [np.zeros(0, np.int64)])
        right = np.concatenate([a[d:] for a in ids if len(a) > d] or [np.zeros(0, np.int64)])
        part = sp.coo_matrix((np.full(len(left), 1.0 / d), (left, right)), shape=(V, V)).tocsr()
        X = X + part + part.T
    return tokens, X.tocoo()


def train_glove(sents: list[list[str]], config: StaticConfig, progress: bool = False, device="cpu") -> Embeddings:
    """GloVe by hand (see the module docstring for why): J = sum_ij f(X_ij) (w_i·w~_j + b_i + b~_j − log X_ij)²,
    f(x) = min(1, (x/x_max)^alpha), AdaGrad over shuffled non-zeros; returns W + W~."""
    import torch
    from tqdm.auto import tqdm

    tokens, X = cooccurrence(sents, config.window, config.min_count)
    V, D = len(tokens), config.dim
    g = torch.Generator().manual_seed(config.seed)
    dev = torch.device(device)
    rows, cols = torch.from_numpy(X.row).to(dev), torch.from_numpy(X.col).to(dev)  # [N]
    logx = torch.from_numpy(np.log(X.data)).float().to(dev)
    fx = torch.from_numpy(np.minimum(1.0, (X.data / config.x_max) ** config.glove_alpha)).float().to(dev)
    # the reference initialisation: uniform in (-0.5, 0.5) / D (drawn on the CPU: the same on any device)
    W, Wt = [((torch.rand(V, D, generator=g) - 0.5) / D).to(dev) for _ in range(2)]
    b, bt = torch.zeros(V, device=dev), torch.zeros(V, device=dev)
    params = [W, Wt, b, bt]
    sq = [torch.ones_like(p) for p in params]  # AdaGrad accumulators start at 1, as in glove.c
    batch = 65_536
    losses = []
    for _ in tqdm(range(config.epochs), desc="GloVe", disable=not progress):
        order = torch.randperm(len(rows), generator=g).to(dev)
        total = 0.0
        for s in range(0, len(order), batch):
            k = order[s:s + batch]
            i, j = rows[k], cols[k]
            wi, wj = W[i], Wt[j]  # [B, D]
            diff = (wi * wj).sum(1) + b[i] + bt[j] - logx[k]  # [B]
            total += float((fx[k] * diff ** 2).sum()) / 2
            gdiff = fx[k] * diff  # [B]
            grads = [gdiff[:, None] * wj, gdiff[:, None] * wi, gdiff, gdiff]
            for p, acc, idx, gr in zip(params, sq, (i, j, i, j), grads):
                # sparse AdaGrad: rows hit twice in a batch get both updates (index_add_)
                step = config.lr * gr / acc[idx].sqrt()
                p.index_add_(0, idx, -step)
                acc.index_add_(0, idx, gr ** 2)
        losses.append(total / len(rows))
    emb = Embeddings(tokens, (W + Wt).cpu().numpy().astype(np.float32))
    emb.losses = losses
    return emb


def train_static(config: StaticConfig, corpus: Mapping[str, list[list[str]]] | None = None, *,
                 root: str | os.PathLike | None = None, progress: bool = False, device: str = "cpu") -> Embeddings:
    """Train (or load the cached) embeddings of `config`; `corpus` defaults to `corpora.tokenized_corpus`."""
    from xlrepro.runkeys import write_config

    folder = run_dir(config, root)
    if (folder / "training.json").exists():
        return load_static(folder)
    if corpus is None:
        from .corpora import LANGUAGES, tokenized_corpus
        corpus = tokenized_corpus(config.size, config.languages or LANGUAGES, max_chapters=config.max_chapters)
    write_config(folder, asdict(config))
    t0 = time.time()
    sents = sentences(corpus)
    emb = train_word2vec(sents, config) if config.model == "word2vec" else train_glove(sents, config, progress, device)
    with atomic.atomic_path(folder / "vectors.npy") as tmp:
        with open(tmp, "wb") as f:
            np.save(f, emb.vectors)
    with atomic.atomic_open(folder / "vocab.txt") as f:
        f.write("\n".join(emb.tokens) + "\n")
    atomic.write_json(folder / "training.json", {
        "seconds": time.time() - t0, "tokens": sum(map(len, sents)), "types": len(emb.tokens),
        "languages": list(corpus), "device": device_name(device) if config.model == "glove" else "cpu", **({"glove_loss": emb.losses} if hasattr(emb, "losses") else {})})
    return emb


def load_static(folder: str | os.PathLike) -> Embeddings:
    folder = Path(folder)
    if not (folder / "training.json").exists():
        raise FileNotFoundError(f"no finished static run in {folder}")
    tokens = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    return Embeddings(tokens, np.load(folder / "vectors.npy"))


def training_record(config: StaticConfig, root: str | os.PathLike | None = None) -> dict:
    return json.loads((run_dir(config, root) / "training.json").read_text())
