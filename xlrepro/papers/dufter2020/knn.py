"""knn-replace (Dufter & Schütze §4, appendix A.3): the neighbour table of the English/Fake-English lab.

fastText skip-gram vectors (dim 300) are trained on the training text of each language separately (English word
pieces; Fake-English is the same text in shifted pieces, trained as a corpus of its own with its own seed), then
Fake-English is mapped into the English space by unsupervised VecMap (`xlrepro.embeddings.vecmap`). A masked piece
that is knn-replaced becomes its nearest neighbour in the other language (CSLS retrieval; k = 1 for Fake-English,
one of the 5 nearest at random on real languages).

Trained on word pieces, not words: the model replaces word pieces, so the table is over the model's vocabulary.
Because Fake-English is English shifted, the true translation of every piece is known (the identity): the
prepared artifact records the mapping's precision against it.

The table is a prepared artifact (`xlrepro prepare`), cached beside the lab data as
``<cache>/dufter2020/<profile>/knn/<spec key>/neighbours.npy`` ([V] int64 over the doubled vocabulary) with a
``knn.json`` manifest; it needs gensim only to build it, so an offline node can use a carried cache.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from xlrepro import atomic
from xlrepro.embeddings.static import FastTextConfig
from xlrepro.embeddings.vecmap import VecMapConfig
from xlrepro.runkeys import run_key
from xlrepro.tokenization import vocab_fingerprint

from .lab import CORPUS, LabData, lab_cache, load_lab

# Everything that determines the table: part of the key of every knn-replace run (with the corpus).
FASTTEXT = FastTextConfig()
SEEDS = {"en": 1, "fake": 2}       # each language's fastText is its own model
VECMAP = VecMapConfig()
VECMAP_SEED = 0
CSLS_K = 10
# Smoke runs (a shrunk corpus, `max_sentences`) get a shrunk table, keyed apart: tiny vectors, short self-learning.
SMOKE_FASTTEXT = FastTextConfig(dim=16, epochs=1)
SMOKE_VECMAP = VecMapConfig(patience=2, max_iterations=10)


def _settings(max_sentences: int | None) -> tuple[FastTextConfig, VecMapConfig]:
    return (FASTTEXT, VECMAP) if max_sentences is None else (SMOKE_FASTTEXT, SMOKE_VECMAP)


def spec(k: int = 1, max_sentences: int | None = None) -> dict:
    """The settings of the neighbour table with k neighbours per piece (and the corpus it is built from)."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k (neighbours per piece) must be a positive integer; got {k!r}")
    fasttext, vecmap = _settings(max_sentences)
    return {"embeddings": {"tool": "gensim-fasttext-skipgram", **asdict(fasttext), "seeds": SEEDS,
                           "units": "word pieces of the training text",
                           "unseen_pieces": "n-gram vectors" if max_sentences is None else "stay themselves"},
            "mapping": {"tool": "vecmap-unsupervised", **asdict(vecmap), "seed": VECMAP_SEED},
            "retrieval": {"csls_k": CSLS_K, "k": k}, "corpus": CORPUS, "max_sentences": max_sentences}


def knn_folder(profile: str = "lab", k: int = 1, root: Path | None = None, max_sentences: int | None = None) -> Path:
    return lab_cache(profile, root) / "knn" / run_key(spec(k, max_sentences))


def _piece_sentences(lab: LabData) -> list[list[str]]:
    vocab = lab.fe.tokenizer.get_vocab()
    inv = {i: t for t, i in vocab.items()}
    return [[inv[int(i)] for i in s] for s in lab.train_pieces if len(s)]


def build_table(lab: LabData, k: int = 1, progress: bool = False, max_sentences: int | None = None
                ) -> tuple[np.ndarray, dict]:
    """Train both fastText spaces, map them, and return (neighbours [2 * shift, k], report)."""
    fasttext, vecmap = _settings(max_sentences)
    lab = lab.subset(max_sentences)
    from xlrepro.embeddings.static import train_fasttext
    from xlrepro.embeddings.vecmap import nearest_neighbours, vecmap_unsupervised

    fe = lab.fe
    vocab = fe.tokenizer.get_vocab()  # piece -> English id
    pieces = [t for t, i in sorted(vocab.items(), key=lambda kv: kv[1]) if i not in set(fe.special_ids.tolist())]
    sentences = _piece_sentences(lab)
    # every piece of the vocabulary (unseen ones from their n-grams); a smoke table only the pieces it has seen
    vocabulary = pieces if max_sentences is None else None
    words_en, vec_en = train_fasttext(sentences, fasttext, seed=SEEDS["en"], vocabulary=vocabulary)
    words_fake, vec_fake = train_fasttext(sentences, fasttext, seed=SEEDS["fake"], vocabulary=vocabulary)
    res = vecmap_unsupervised(vec_fake, vec_en, vecmap, seed=VECMAP_SEED, progress=progress)  # Fake-English -> English
    id_en = np.array([vocab[w] for w in words_en])      # row -> English id
    id_fake = np.array([vocab[w] for w in words_fake])  # row -> English id of the shifted piece
    fake_to_en = nearest_neighbours(res.xw, res.zw, k=k, csls_k=CSLS_K)  # [n_fake, k] rows of English
    en_to_fake = nearest_neighbours(res.zw, res.xw, k=k, csls_k=CSLS_K)  # [n_en, k] rows of Fake-English
    table = np.repeat(np.arange(fe.vocab_size, dtype=np.int64)[:, None], k, axis=1)  # specials: themselves
    table[id_en] = id_fake[en_to_fake] + fe.shift
    table[id_fake + fe.shift] = id_en[fake_to_en]
    # known answer: piece i's translation is piece i (Fake-English is shifted English)
    p_en = float((id_fake[en_to_fake[:, 0]] == id_en).mean())
    p_fake = float((id_en[fake_to_en[:, 0]] == id_fake).mean())
    n_freq = min(1000, len(id_en))
    report = {"pieces": len(id_en), "precision_en_to_fake": p_en, "precision_fake_to_en": p_fake,
              "precision": (p_en + p_fake) / 2,
              "precision_top1000_en_to_fake": float((id_fake[en_to_fake[:n_freq, 0]] == id_en[:n_freq]).mean()),
              "vecmap_iterations": res.iterations, "vecmap_objective": res.objective}
    return table, report


def prepare_knn(profile: str = "lab", k: int = 1, root: Path | None = None, progress: bool = True,
                max_sentences: int | None = None) -> Path:
    """Build the table once (a few minutes on one CPU core for the lab corpus); later calls find it cached."""
    folder = knn_folder(profile, k, root, max_sentences)
    if (folder / "neighbours.npy").exists() and (folder / "knn.json").exists():
        return folder
    lab = load_lab(profile, root)
    table, report = build_table(lab, k, progress, max_sentences)
    atomic.write_bytes(folder / "neighbours.npy", _npy_bytes(table))
    # the table holds token ids: the vocabulary it was built on is recorded (not in its key) and checked on loading
    atomic.write_json(folder / "knn.json", {"spec": spec(k, max_sentences), "report": report,
                                            "shape": list(table.shape),
                                            "vocabulary": vocab_fingerprint(lab.fe.tokenizer)})
    return folder


def _npy_bytes(a: np.ndarray) -> bytes:
    import io
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


_FIX = "delete its folder and run `xlrepro prepare` to rebuild the neighbour table"


def load_neighbours(profile: str = "lab", k: int = 1, root: Path | None = None, prepare: bool = True,
                    max_sentences: int | None = None) -> np.ndarray:
    """[2 * shift, k] the neighbour table (prepared first when missing and `prepare`)."""
    folder = knn_folder(profile, k, root, max_sentences)
    if not (folder / "neighbours.npy").exists():
        if not prepare:
            raise FileNotFoundError(f"no knn-replace neighbour table in the cache for profile {profile!r}, k={k}; "
                                    f"run `xlrepro prepare` (it needs gensim)")
        prepare_knn(profile, k, root, progress=False, max_sentences=max_sentences)
    recorded = atomic.read_json(folder / "knn.json", _FIX).get("vocabulary") if (folder / "knn.json").exists() \
        else None
    if recorded is not None:  # tables made before vocabularies were fingerprinted carry none
        from tokenizers import Tokenizer
        current = vocab_fingerprint(Tokenizer.from_file(str(lab_cache(profile, root) / "tokenizer.json")))
        if current != recorded:
            raise RuntimeError(f"the knn-replace table {folder.name} was built on vocabulary {recorded}, but the "
                               f"cache's tokenizer is vocabulary {current}; delete {folder} to rebuild it")
    return np.load(folder / "neighbours.npy")


def knn_report(profile: str = "lab", k: int = 1, root: Path | None = None, max_sentences: int | None = None) -> dict:
    """The prepared table's manifest: its settings and the mapping's precision against the identity."""
    return atomic.read_json(knn_folder(profile, k, root, max_sentences) / "knn.json", _FIX)
