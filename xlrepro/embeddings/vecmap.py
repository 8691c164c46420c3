"""Unsupervised cross-lingual mapping of static embeddings: VecMap (Artetxe, Labaka & Agirre, ACL 2018).

No maintained PyPI package implements VecMap's *unsupervised* mode (the authors' repository is a script, not a
package; MUSE's adversarial method is a different algorithm), so it is written here after the paper's §3, with
the defaults of the authors' `--unsupervised` preset:

1. Normalisation (§3.1): unit length, mean centring, unit length again.
2. Fully unsupervised initialisation (§3.2): the sorted rows of sqrt(X Xᵀ) and sqrt(Z Zᵀ) of the 4,000 most
   frequent words (the "similarity distributions") are compared across languages; the initial dictionary is
   their CSLS nearest neighbours in both directions.
3. Robust self-learning (§3.3): alternate an orthogonal mapping (Procrustes on the dictionary) and dictionary
   induction by CSLS (k = 10) over the 20,000 most frequent words, forward and backward; *stochastic* induction
   keeps each similarity with probability p, starting at 0.1 and doubling whenever the objective (mean best
   similarity) has not improved by 1e-6 for 50 iterations, until p = 1 has converged.
4. Symmetric re-weighting (§3.4): whitening, orthogonal mapping, re-weighting by s^0.5 on both sides,
   de-whitening (each side with its own whitening).

Rows are assumed ordered by frequency (most frequent first), as fastText and gensim write them.
`tests/test_vecmap.py` checks that it recovers a random rotation of perturbed, shuffled embeddings.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class VecMapConfig:
    """The authors' `--unsupervised` preset."""

    init_vocab: int = 4000          # most frequent words used for the similarity-distribution initialisation
    cutoff: int = 20000             # most frequent words used in dictionary induction
    csls_k: int = 10                # CSLS neighbourhood
    keep_initial: float = 0.1       # stochastic dictionary induction: initial keep probability
    keep_multiplier: float = 2.0
    patience: int = 50              # iterations without improvement before the keep probability grows
    threshold: float = 1e-6         # improvement of the objective that counts
    reweight: float = 0.5           # symmetric re-weighting exponent, each side
    max_iterations: int = 5000      # a safety stop (the preset converges long before on real embeddings)

    def __post_init__(self):
        for name in ("init_vocab", "cutoff", "csls_k", "patience", "max_iterations"):
            if getattr(self, name) < 1:
                raise ValueError(f"VecMapConfig.{name} must be at least 1; got {getattr(self, name)}")
        if not 0 < self.keep_initial <= 1 or self.keep_multiplier <= 1:
            raise ValueError("VecMapConfig needs 0 < keep_initial <= 1 and keep_multiplier > 1; got "
                             f"{self.keep_initial}, {self.keep_multiplier}")


@dataclass
class VecMapResult:
    xw: np.ndarray          # [n_x, d] source embeddings in the shared space
    zw: np.ndarray          # [n_z, d] target embeddings in the shared space
    rotation: np.ndarray    # [d, d] the last orthogonal map W (normalised X @ W ≈ normalised Z) of self-learning
    iterations: int
    objective: float


def normalize(m: np.ndarray) -> np.ndarray:
    """unit, center, unit (VecMap's default for unsupervised mapping). m: [n, d]."""
    m = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    m = m - m.mean(axis=0, keepdims=True)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def _topk_mean(sim: np.ndarray, k: int) -> np.ndarray:
    """[n] mean of the k largest entries of each row of sim [n, m]."""
    k = min(k, sim.shape[1])
    return np.partition(sim, sim.shape[1] - k, axis=1)[:, -k:].mean(axis=1)


def csls(xw: np.ndarray, zw: np.ndarray, k: int = 10) -> np.ndarray:
    """[n_x, n_z] CSLS scores (Conneau et al. 2018): 2 cos(x, z) - r_z(x) - r_x(z), on unit-length rows."""
    sim = xw @ zw.T
    return 2 * sim - _topk_mean(sim, k)[:, None] - _topk_mean(sim.T, k)[None, :]


def _initial_dictionary(x: np.ndarray, z: np.ndarray, cfg: VecMapConfig) -> tuple[np.ndarray, np.ndarray]:
    n = min(len(x), len(z), cfg.init_vocab)

    def sorted_similarity(m):  # sqrt(M Mᵀ) = U S Uᵀ for M = U S Vᵀ; rows sorted, then normalised: [n, n]
        u, s, _ = np.linalg.svd(m[:n], full_matrices=False)
        sim = np.sort((u * s) @ u.T, axis=1)
        return normalize(sim)

    sim = sorted_similarity(x) @ sorted_similarity(z).T  # [n, n]
    sim = sim - _topk_mean(sim, cfg.csls_k)[:, None] / 2 - _topk_mean(sim.T, cfg.csls_k)[None, :] / 2
    src = np.concatenate([np.arange(n), sim.argmax(axis=0)])
    trg = np.concatenate([sim.argmax(axis=1), np.arange(n)])
    return src, trg


def _procrustes(x_rows: np.ndarray, z_rows: np.ndarray) -> np.ndarray:
    """The orthogonal W [d, d] minimising ||x_rows W - z_rows||."""
    u, _, vt = np.linalg.svd(z_rows.T @ x_rows)
    return vt.T @ u.T


def vecmap_unsupervised(x: np.ndarray, z: np.ndarray, config: VecMapConfig | None = None,
                        seed: int = 0, progress: bool = False) -> VecMapResult:
    """Map source embeddings x [n_x, d] and target embeddings z [n_z, d] into one space, without supervision.

    Rows must be ordered by frequency. `seed` drives the stochastic dictionary induction.
    """
    cfg = config or VecMapConfig()
    x, z = np.asarray(x, dtype=np.float64), np.asarray(z, dtype=np.float64)
    if x.ndim != 2 or z.ndim != 2 or x.shape[1] != z.shape[1]:
        raise ValueError(f"x and z must be [n, d] with the same d; got {x.shape} and {z.shape}")
    if min(len(x), len(z)) <= cfg.csls_k:
        raise ValueError(f"need more than csls_k={cfg.csls_k} words on each side; got {len(x)} and {len(z)}")
    rng = np.random.default_rng(seed)
    x, z = normalize(x), normalize(z)
    src, trg = _initial_dictionary(x, z, cfg)
    nx, nz = min(len(x), cfg.cutoff), min(len(z), cfg.cutoff)
    keep, best, last_improvement, it, end = cfg.keep_initial, -np.inf, 1, 1, False
    w = np.eye(x.shape[1])
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(desc="VecMap self-learning", unit="it")
    while True:
        if it - last_improvement > cfg.patience:
            if keep >= 1.0:
                end = True
            keep = min(1.0, cfg.keep_multiplier * keep)
            last_improvement = it
        if end or it > cfg.max_iterations:
            break
        w = _procrustes(x[src], z[trg])
        xw, zw = x[:nx] @ w, z[:nz]
        sim = xw @ zw.T  # [nx, nz]
        knn_fwd = _topk_mean(sim, cfg.csls_k)      # r_z(x): [nx]
        knn_bwd = _topk_mean(sim.T, cfg.csls_k)    # r_x(z): [nz]
        best_fwd, best_bwd = sim.max(axis=1), sim.max(axis=0)
        # CSLS up to a per-query constant (enough for the argmax), with stochastic dropout of similarities
        fwd = np.where(rng.random(sim.shape) < keep, sim - knn_bwd[None, :] / 2, -np.inf)
        bwd = np.where(rng.random(sim.shape) < keep, sim - knn_fwd[:, None] / 2, -np.inf)
        src = np.concatenate([np.arange(nx), bwd.argmax(axis=0)])
        trg = np.concatenate([fwd.argmax(axis=1), np.arange(nz)])
        objective = (best_fwd.mean() + best_bwd.mean()) / 2
        if objective - best >= cfg.threshold:
            last_improvement, best = it, objective
        if bar is not None:
            bar.update(1)
            bar.set_postfix(keep=keep, objective=f"{objective:.4f}")
        it += 1
    if bar is not None:
        bar.close()
    xw, zw = _reweighted_mapping(x, z, src, trg, cfg.reweight)
    return VecMapResult(xw=xw, zw=zw, rotation=w, iterations=it - 1, objective=float(best))


def _reweighted_mapping(x, z, src, trg, reweight: float):
    """§3.4: whitening, orthogonal mapping, re-weighting by s**reweight, de-whitening (each side its own)."""
    def whitening(m):  # (Mᵀ M)^(-1/2): [d, d]
        _, s, vt = np.linalg.svd(m, full_matrices=False)
        return vt.T @ np.diag(1 / s) @ vt

    wx1, wz1 = whitening(x[src]), whitening(z[trg])
    xw, zw = x @ wx1, z @ wz1
    wx2, s, wz2_t = np.linalg.svd(xw[src].T @ zw[trg])
    wz2 = wz2_t.T
    xw, zw = xw @ wx2 * s ** reweight, zw @ wz2 * s ** reweight
    xw = xw @ (wx2.T @ np.linalg.inv(wx1) @ wx2)
    zw = zw @ (wz2.T @ np.linalg.inv(wz1) @ wz2)
    return xw, zw


def nearest_neighbours(xw: np.ndarray, zw: np.ndarray, k: int = 1, csls_k: int = 10) -> np.ndarray:
    """[n_x, k] the k best target rows of each source row by CSLS retrieval (best first)."""
    if k < 1 or k > len(zw):
        raise ValueError(f"k must be between 1 and {len(zw)}; got {k}")
    xu = xw / np.maximum(np.linalg.norm(xw, axis=1, keepdims=True), 1e-12)
    zu = zw / np.maximum(np.linalg.norm(zw, axis=1, keepdims=True), 1e-12)
    scores = csls(xu, zu, csls_k)
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1)
