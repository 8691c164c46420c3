"""The batched GPU alignment equals the readable one-sentence reference (metrics.mutual_argmax_alignment)."""
import torch

from xlrepro.evaluation.metrics import alignment_prf, identity_gold, inverted_gold, mutual_argmax_alignment
from xlrepro.papers.dufter2020.multilinguality import _content_mask, batched_alignment_counts


def padded(sentences, width):
    out = torch.zeros(len(sentences), width, sentences[0].shape[1])
    for b, s in enumerate(sentences):
        out[b, 1:1 + len(s)] = s  # position 0 is [CLS]
    return out


def test_batched_counts_equal_reference_on_random_vectors():
    g = torch.Generator().manual_seed(0)
    lengths = [3, 7, 5, 1]
    en = [torch.randn(n, 6, generator=g) for n in lengths]
    fake = [e + 0.9 * torch.randn(e.shape, generator=g) for e in en]
    width = max(lengths) + 3
    keep = _content_mask(torch.tensor([n + 2 for n in lengths]), width)
    for inverted in (False, True):
        fk = [f.flip(0) if inverted else f for f in fake]
        correct, predicted, gold = batched_alignment_counts(padded(en, width), padded(fk, width), keep, inverted)
        ref = [0, 0, 0]
        for e, f in zip(en, fk):
            sim = torch.nn.functional.normalize(e, dim=1) @ torch.nn.functional.normalize(f, dim=1).T
            pred = mutual_argmax_alignment(sim)
            g_set = inverted_gold(len(e)) if inverted else identity_gold(len(e))
            ref[0] += len(pred & g_set)
            ref[1] += len(pred)
            ref[2] += len(g_set)
        assert (correct, predicted, gold) == tuple(ref)
        assert 0 < correct < gold  # noisy enough that the case is not trivial


def test_inverted_copy_is_perfectly_aligned_only_against_the_antidiagonal():
    g = torch.Generator().manual_seed(1)
    e = torch.randn(5, 8, generator=g)
    keep = _content_mask(torch.tensor([7]), 9)
    en, fake = padded([e], 9), padded([e.flip(0)], 9)
    assert batched_alignment_counts(en, fake, keep, inverted=True) == (5, 5, 5)
    assert batched_alignment_counts(en, fake, keep, inverted=False)[0] == 1  # only the middle piece
    assert alignment_prf({(0, 0)}, identity_gold(2)) == (1.0, 0.5, 2 / 3)
