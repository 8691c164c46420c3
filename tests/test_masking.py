"""MLM masking probabilities (statistically, fixed seed) and the masked-position selection."""
import torch

from xlrepro.masking import mask_tokens
from xlrepro.training.stacked import masked_capacity, select_masked


def run(probs, n=400_000, shifted_mask=False):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(10, 100, (2, n), generator=g)
    maskable = torch.ones_like(ids, dtype=torch.bool)
    maskable[:, :1000] = False  # e.g. [CLS]/[SEP]/[PAD]
    mask_id = torch.full_like(ids, 4 + (100 if shifted_mask else 0))
    p = torch.tensor(probs).view(1, 1, 3).expand(2, 1, 3)
    inputs, labels = mask_tokens(ids, maskable, mask_id, p, vocab_size=200, mlm_probability=0.15, generator=g)
    return ids, maskable, mask_id, inputs, labels


def test_default_replacement_rates():
    ids, maskable, mask_id, inputs, labels = run((0.8, 0.1, 0.1))
    sel = labels != -100
    assert not sel[~maskable].any()
    assert abs(sel[maskable].float().mean() - 0.15) < 0.003
    assert torch.equal(labels[sel], ids[sel])
    to_mask = (inputs == mask_id) & sel
    same = (inputs == ids) & sel
    assert abs(to_mask.sum() / sel.sum() - 0.8) < 0.01
    # kept: 10% plus random draws that hit the same token (1/200 of 10%)
    assert abs(same.sum() / sel.sum() - (0.1 + 0.1 / 200)) < 0.01
    assert torch.equal(inputs[~sel], ids[~sel])


def test_no_random_never_draws_random_tokens():
    ids, maskable, mask_id, inputs, labels = run((0.8, 0.2, 0.0))
    sel = labels != -100
    assert ((inputs == mask_id) | (inputs == ids))[sel].all()
    assert abs(((inputs == ids) & sel).sum() / sel.sum() - 0.2) < 0.01


def test_shifted_mask_token_is_used():
    ids, maskable, mask_id, inputs, labels = run((1.0, 0.0, 0.0), n=20_000, shifted_mask=True)
    sel = labels != -100
    assert (inputs[sel] == 104).all()


def test_select_masked_pads_with_ignored_labels():
    labels = torch.full((2, 10), -100)
    labels[0, [1, 7]] = torch.tensor([11, 17])
    labels[1, 4] = 14
    index, picked = select_masked(labels, 3)
    assert index[0, :2].tolist() == [1, 7] and picked[0].tolist() == [11, 17, -100]
    assert index[1, 0].item() == 4 and picked[1].tolist() == [14, -100, -100]
    assert masked_capacity(1000, 0.15) > 150 + 8 * 12
