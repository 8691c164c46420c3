"""VecMap (unsupervised) recovers a rotation it was never told about (known answer: the rotation and the pairing)."""
import numpy as np
import pytest
from scipy.stats import special_ortho_group

from xlrepro.embeddings.vecmap import VecMapConfig, csls, nearest_neighbours, normalize, vecmap_unsupervised


def structured(n=400, d=24, seed=0):
    """Embeddings with the anisotropy of real ones: a decaying spectrum and a few clusters. [n, d]"""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)) * np.geomspace(3, 0.3, d)
    return x + 2 * rng.standard_normal((8, d))[rng.integers(0, 8, n)]


def test_recovers_a_rotation_of_perturbed_shuffled_embeddings():
    rng = np.random.default_rng(1)
    x = structured()
    r = special_ortho_group.rvs(x.shape[1], random_state=2)  # the hidden rotation
    perm = rng.permutation(len(x))                            # target row i is source row perm[i]
    z = (x @ r + 0.05 * rng.standard_normal(x.shape))[perm]
    res = vecmap_unsupervised(x, z, seed=0)
    gold = np.argsort(perm)                                   # source row j sits at target row gold[j]
    nn = nearest_neighbours(res.xw, res.zw, k=1)[:, 0]
    assert (nn == gold).mean() >= 0.98
    # the orthogonal map of self-learning is the rotation itself (normalisation commutes with it)
    assert np.abs(res.rotation - r).max() < 0.05


def test_unrelated_spaces_are_not_mapped():
    """The negative control: two independent spaces give chance-level translation, so the test above can fail."""
    x, z = structured(seed=0), structured(seed=5)
    res = vecmap_unsupervised(x, z, seed=0, config=VecMapConfig(patience=5))
    nn = nearest_neighbours(res.xw, res.zw, k=1)[:, 0]
    assert (nn == np.arange(len(x))).mean() < 0.05


def test_csls_and_neighbours_on_a_hand_made_case():
    # two source and three target unit vectors; target 2 is a hub near both sources
    x = np.array([[1.0, 0.0], [0.0, 1.0]])
    z = normalize_rows(np.array([[1.0, 0.05], [0.05, 1.0], [1.0, 1.0]]))
    s = csls(x, z, k=1)
    assert s.shape == (2, 3)
    assert nearest_neighbours(x, z, k=1, csls_k=1)[:, 0].tolist() == [0, 1]
    assert nearest_neighbours(x, z, k=3, csls_k=1)[0].tolist()[0] == 0
    with pytest.raises(ValueError, match="between 1 and 3"):
        nearest_neighbours(x, z, k=4)


def normalize_rows(m):
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_normalize_is_unit_centred_unit():
    m = normalize(np.random.default_rng(0).standard_normal((50, 4)) + 3)
    assert np.allclose(np.linalg.norm(m, axis=1), 1)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="same d"):
        vecmap_unsupervised(np.zeros((20, 3)), np.zeros((20, 4)))
    with pytest.raises(ValueError, match="keep_initial"):
        VecMapConfig(keep_initial=0)
