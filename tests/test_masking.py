"""MLM masking probabilities (statistically, fixed seed) and the masked-position selection."""
import torch

from xlrepro.engine.masking import mask_tokens
from xlrepro.engine.stacked import masked_capacity, select_masked


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


# ---------------------------------------------------------------- knn-replace: a 4th replacement probability
def knn_run(probs, neighbours, n=200_000, generator_seed=0):
    g = torch.Generator().manual_seed(generator_seed)
    ids = torch.randint(10, 100, (2, n), generator=g)
    maskable = torch.ones_like(ids, dtype=torch.bool)
    mask_id = torch.full_like(ids, 4)
    p = torch.tensor(probs).view(1, 1, -1)
    inputs, labels = mask_tokens(ids, maskable, mask_id, p, vocab_size=200, mlm_probability=0.15, generator=g,
                                 neighbours=neighbours)
    return ids, inputs, labels


def test_knn_only_replaces_every_selected_piece_by_its_neighbour():
    table = (torch.arange(200) + 100) % 200  # piece i's neighbour is i + 100 (the other "language")
    ids, inputs, labels = knn_run((0.0, 0.0, 0.0, 1.0), table, n=20_000)
    sel = labels != -100
    assert torch.equal(inputs[sel], ids[sel] + 100)
    assert torch.equal(inputs[~sel], ids[~sel])


def test_knn_replace_rates_are_the_papers():
    table = (torch.arange(200) + 100) % 200
    ids, inputs, labels = knn_run((0.5, 0.1, 0.1, 0.3), table)
    sel = labels != -100
    n = sel.sum()
    assert abs(((inputs == 4) & sel).sum() / n - 0.5) < 0.01
    assert abs(((inputs == ids + 100) & sel).sum() / n - (0.3 + 0.1 / 200)) < 0.01  # knn, plus random hits
    assert abs(((inputs == ids) & sel).sum() / n - (0.1 + 0.1 / 200)) < 0.01


def test_zero_knn_probability_is_the_three_probability_path():
    table = torch.zeros(200, dtype=torch.long)  # would turn every knn-replaced piece into 0
    _, three, lab3 = knn_run((0.8, 0.1, 0.1), None, n=50_000)
    _, four, lab4 = knn_run((0.8, 0.1, 0.1, 0.0), table, n=50_000)
    assert torch.equal(three, four) and torch.equal(lab3, lab4)


def test_one_of_k_neighbours_is_drawn_uniformly():
    table = torch.stack([(torch.arange(200) + j) % 200 for j in (101, 102, 103, 104, 105)], dim=1)  # [V, 5]
    ids, inputs, labels = knn_run((0.0, 0.0, 0.0, 1.0), table)
    sel = labels != -100
    offset = (inputs[sel] - ids[sel]) % 200
    assert set(offset.unique().tolist()) == {101, 102, 103, 104, 105}
    shares = torch.bincount(offset - 101).float() / sel.sum()
    assert (shares - 0.2).abs().max() < 0.01


def test_per_model_tables_and_keyed_draws_do_not_depend_on_the_stack():
    from xlrepro.engine.noise import Noise

    ids = torch.randint(10, 100, (1, 64, 16), generator=torch.Generator().manual_seed(1))  # [M=1, B, W]
    table = torch.stack([(torch.arange(200) + j) % 200 for j in (1, 2, 3)], dim=1)  # [V, 3]
    probs = torch.tensor([0.0, 0.0, 0.0, 1.0]).view(1, 1, 1, 4)
    kw = dict(vocab_size=200, mlm_probability=0.5)
    rows = torch.arange(64)
    alone, lab = mask_tokens(ids, torch.ones_like(ids, dtype=torch.bool), torch.full_like(ids, 4), probs,
                             noise=Noise(torch.tensor([7]), torch.tensor(0), rows), neighbours=table, **kw)
    # model seed 7 second in a stack of two, the first with another table ([M, V, k])
    ids2 = torch.cat([ids, ids])
    tables = torch.stack([table.flip(1), table])
    stacked, lab2 = mask_tokens(ids2, torch.ones_like(ids2, dtype=torch.bool), torch.full_like(ids2, 4),
                                probs.expand(2, 1, 1, 4), noise=Noise(torch.tensor([3, 7]), torch.tensor(0), rows),
                                neighbours=tables, **kw)
    assert torch.equal(stacked[1], alone[0]) and torch.equal(lab2[1], lab[0])
    sel = lab[0] != -100
    assert set((alone[0] - ids[0])[sel].unique().tolist()) == {1, 2, 3}


def test_knn_arguments_are_checked():
    import pytest

    with pytest.raises(ValueError, match="need a neighbour table"):
        knn_run((0.5, 0.1, 0.1, 0.3), None, n=100)
    with pytest.raises(ValueError, match="3 .* or 4"):
        knn_run((0.5, 0.1, 0.1, 0.2, 0.1), torch.arange(200), n=100)
    with pytest.raises(ValueError, match=r"\[M, V, k\]"):
        knn_run((0.0, 0.0, 0.0, 1.0), torch.zeros(3, 200, 2, dtype=torch.long), n=100)
