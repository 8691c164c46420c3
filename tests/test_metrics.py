"""Known-answer tests for xlrepro.evaluation.metrics (Dufter & Schütze 2020 multilinguality metrics)."""

import math

import pytest
import torch

from xlrepro.evaluation.metrics import (
    alignment_prf,
    corpus_alignment_f1,
    cosine_similarity_matrix,
    identity_gold,
    inverted_gold,
    mean_pool,
    multilinguality_score,
    mutual_argmax_alignment,
    perplexity,
    retrieval_precision,
)

torch.set_num_threads(1)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _naive_retrieval(q: torch.Tensor, t: torch.Tensor) -> float:
    """Independent reference: full matrix via F.cosine_similarity broadcasting, both directions."""
    r = torch.nn.functional.cosine_similarity(q[:, None, :], t[None, :, :], dim=-1)
    idx = torch.arange(q.shape[0])
    fwd = (r.argmax(dim=1) == idx).sum().item()
    bwd = (r.argmax(dim=0) == idx).sum().item()
    return (fwd + bwd) / (2 * q.shape[0])


# --- cosine similarity -------------------------------------------------------------------------------------------


def test_cosine_matrix_known_values():
    a = torch.tensor([[1.0, 0.0], [3.0, 4.0]])
    b = torch.tensor([[2.0, 0.0], [0.0, 5.0], [-1.0, 0.0]])
    expected = torch.tensor([[1.0, 0.0, -1.0], [0.6, 0.8, -0.6]])
    got = cosine_similarity_matrix(a, b)
    assert got.shape == (2, 3)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected)


def test_cosine_matrix_zero_rows_give_zero_not_nan():
    a = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    b = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    got = cosine_similarity_matrix(a, b)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, torch.tensor([[0.0, 0.0], [math.sqrt(0.5), 0.0]]))


def test_cosine_matrix_rejects_dim_mismatch():
    with pytest.raises(ValueError):
        cosine_similarity_matrix(torch.zeros(2, 3), torch.zeros(2, 4))


# --- retrieval precision (ρ and τ) -------------------------------------------------------------------------------


def test_retrieval_near_copies_is_perfect():
    q = torch.randn(50, 32, generator=_gen(0))
    t = q + 1e-3 * torch.randn(50, 32, generator=_gen(1))
    assert retrieval_precision(q, t) == 1.0


def test_retrieval_swapped_rows_counts_exactly_the_swapped_ones():
    m = 40
    q = torch.randn(m, 16, generator=_gen(2))
    t = q + 1e-3 * torch.randn(m, 16, generator=_gen(3))
    t[[0, 1]] = t[[1, 0]]  # rows 0 and 1 now wrong in both directions
    assert retrieval_precision(q, t) == pytest.approx((m - 2) / m)


def test_retrieval_directions_differ_and_both_count():
    # Forward: q0->t0 right, q1->t0 wrong (1/2). Backward: t0->q0 right, t1->q1 right (2/2). Mean = 3/4.
    q = torch.tensor([[1.0, 0.0], [1.0, 0.2]])
    t = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert retrieval_precision(q, t) == pytest.approx(0.75)
    assert retrieval_precision(t, q) == pytest.approx(0.75)


@pytest.mark.parametrize("chunk", [1, 3, 37, 4096])
def test_retrieval_chunked_equals_unchunked_and_reference(chunk):
    m = 37
    q = torch.randn(m, 8, generator=_gen(4))
    t = q + 0.9 * torch.randn(m, 8, generator=_gen(5))  # noisy: precision strictly between 0 and 1
    ref = _naive_retrieval(q, t)
    assert 0.0 < ref < 1.0
    assert retrieval_precision(q, t, chunk=chunk) == pytest.approx(ref)
    assert retrieval_precision(q, t, chunk=chunk) == retrieval_precision(q, t, chunk=m)


def test_retrieval_ties_use_first_index():
    # All similarities equal: every argmax is 0, so only i = 0 is right in each direction -> 1/2.
    q = torch.ones(2, 3)
    t = torch.ones(2, 3)
    assert retrieval_precision(q, t) == pytest.approx(0.5)


def test_retrieval_zero_rows_no_nan():
    q = torch.randn(5, 4, generator=_gen(6))
    t = q.clone()
    q[3] = 0.0
    t[1] = 0.0
    rho = retrieval_precision(q, t)
    assert math.isfinite(rho)
    # Rows 1 and 3 have an all-zero similarity row/column and are retrieved as index 0 -> wrong in both directions.
    assert rho == pytest.approx(3 / 5)


def test_retrieval_rejects_bad_input():
    with pytest.raises(ValueError):
        retrieval_precision(torch.zeros(3, 2), torch.zeros(4, 2))
    with pytest.raises(ValueError):
        retrieval_precision(torch.zeros(3, 2), torch.zeros(3, 2), chunk=0)
    with pytest.raises(ValueError):
        retrieval_precision(torch.zeros(0, 2), torch.zeros(0, 2))


# --- mean pooling ------------------------------------------------------------------------------------------------


def test_mean_pool_ignores_masked_positions():
    hidden = torch.tensor(
        [
            [[1.0, 2.0], [3.0, 4.0], [1e6, -1e6]],
            [[float("nan"), 0.0], [5.0, 6.0], [7.0, 8.0]],
        ]
    )
    keep = torch.tensor([[True, True, False], [False, True, True]])
    got = mean_pool(hidden, keep)
    torch.testing.assert_close(got, torch.tensor([[2.0, 3.0], [6.0, 7.0]]))


def test_mean_pool_empty_row_is_zero_not_nan():
    hidden = torch.ones(2, 3, 4)
    keep = torch.tensor([[False, False, False], [True, False, False]])
    got = mean_pool(hidden, keep)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, torch.tensor([[0.0] * 4, [1.0] * 4]))


# --- mutual-argmax alignment -------------------------------------------------------------------------------------


def test_mutual_argmax_square_with_non_mutual_pairs():
    s = torch.tensor(
        [
            [0.9, 0.8, 0.1],
            [0.7, 0.6, 0.2],  # row 1 points to column 0, but column 0 points back to row 0: not aligned
            [0.1, 0.3, 0.5],
        ]
    )
    assert mutual_argmax_alignment(s) == {(0, 0), (2, 2)}


def test_mutual_argmax_rectangular_orientation():
    # Rows are English (i), columns Fake-English (j); the transpose would give {(0, 0), (2, 1)}.
    s = torch.tensor([[0.9, 0.1, 0.2], [0.3, 0.2, 0.8]])
    assert mutual_argmax_alignment(s) == {(0, 0), (1, 2)}


def test_mutual_argmax_empty():
    assert mutual_argmax_alignment(torch.zeros(0, 3)) == set()


# --- precision / recall / F1 and gold alignments -----------------------------------------------------------------


def test_alignment_prf_known_values():
    pred = {(0, 0), (1, 1), (2, 3)}
    gold = {(0, 0), (1, 1), (2, 2), (3, 3)}
    p, r, f1 = alignment_prf(pred, gold)
    assert p == pytest.approx(2 / 3)
    assert r == pytest.approx(1 / 2)
    assert f1 == pytest.approx(4 / 7)


def test_alignment_prf_empty_sets_are_zero():
    assert alignment_prf(set(), {(0, 0)}) == (0.0, 0.0, 0.0)
    assert alignment_prf({(0, 1)}, set()) == (0.0, 0.0, 0.0)
    assert alignment_prf({(0, 1)}, {(0, 0)}) == (0.0, 0.0, 0.0)


def test_gold_alignments():
    assert identity_gold(3) == {(0, 0), (1, 1), (2, 2)}
    assert inverted_gold(4) == {(0, 3), (1, 2), (2, 1), (3, 0)}
    assert inverted_gold(0) == set()


# --- corpus alignment F1 -----------------------------------------------------------------------------------------


def _corpus():
    e1 = torch.randn(5, 16, generator=_gen(7))
    f1 = e1 + 1e-3 * torch.randn(5, 16, generator=_gen(8))  # aligned as identity: 5/5 correct
    e2 = torch.randn(3, 16, generator=_gen(9))
    f2 = e2.flip(0)  # reversed: predicted anti-diagonal, only the middle (1, 1) is on the identity
    return [(e1, f1), (e2, f2)]


def test_corpus_alignment_f1_is_micro_averaged():
    # Micro: tp = 5 + 1, |P| = |G| = 8 -> F1 = 0.75. Macro over sentences would give (1 + 1/3) / 2 = 0.667.
    assert corpus_alignment_f1(_corpus()) == pytest.approx(0.75)


def test_corpus_alignment_f1_inverted_gold():
    reversed_pairs = [(e, e.flip(0) + 1e-3) for e, _ in _corpus()]
    assert corpus_alignment_f1(iter(reversed_pairs), inverted=True) == pytest.approx(1.0)
    # Against the identity gold only odd-length middles match: sentence lengths 5 and 3 -> tp = 2, |P| = |G| = 8.
    assert corpus_alignment_f1(reversed_pairs, inverted=False) == pytest.approx(2 / 8)


def test_corpus_alignment_f1_rejects_length_mismatch():
    with pytest.raises(ValueError):
        corpus_alignment_f1([(torch.zeros(3, 2), torch.zeros(4, 2))])


# --- perplexity and multilinguality score ------------------------------------------------------------------------


def test_perplexity_uniform_is_vocab_size():
    v = 2048
    lp = torch.full((100,), -math.log(v))
    assert perplexity(lp) == pytest.approx(v, rel=1e-5)


def test_perplexity_known_mixture():
    # exp(-(log 0.5 + log 0.125) / 2) = sqrt(2 * 8) = 4
    lp = torch.log(torch.tensor([0.5, 0.125]))
    assert perplexity(lp) == pytest.approx(4.0, rel=1e-6)


def test_multilinguality_score_is_mean_of_four():
    assert multilinguality_score(0.2, 0.4, 0.6, 0.9) == pytest.approx(0.525)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    q = torch.randn(37, 8, generator=_gen(10))
    t = q + 0.9 * torch.randn(37, 8, generator=_gen(11))
    assert retrieval_precision(q.cuda(), t.cuda(), chunk=5) == pytest.approx(retrieval_precision(q, t))
    pairs = _corpus()
    assert corpus_alignment_f1([(e.cuda(), f.cuda()) for e, f in pairs]) == pytest.approx(corpus_alignment_f1(pairs))
    hidden = torch.randn(2, 3, 4, generator=_gen(12))
    keep = torch.tensor([[True, False, True], [False, True, True]])
    torch.testing.assert_close(mean_pool(hidden.cuda(), keep.cuda()).cpu(), mean_pool(hidden, keep))
