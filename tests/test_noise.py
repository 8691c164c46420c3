"""A model's random numbers are its own: counter-based draws, and a model trained alone equals it in a stack."""
import json

import pytest
import torch

from xlrepro.engine.noise import Noise, from_bits32, mix32, mix32_reference, to_bits32, uniform, uniform_int64


def test_hash_matches_the_plain_python_reference():
    xs = [0, 1, 2, 12345, 2**31 - 1, 2**31, 2**32 - 1, 0xDEADBEEF]
    got = mix32(torch.tensor(xs, dtype=torch.int64)).tolist()
    assert got == [mix32_reference(x) for x in xs]
    assert mix32_reference(0) == 0 and mix32_reference(1) != 1  # 0 is the hash's fixed point; others move


def test_uniform_draws_are_uniform_and_keyed():
    keys = torch.tensor([1, 2], dtype=torch.int64)
    u = uniform(keys, torch.arange(200_000).unsqueeze(0))  # [2, 200000]
    assert u.min() >= 0 and u.max() < 1
    for row in u:
        counts = torch.histc(row, bins=10, min=0, max=1)
        assert (counts - 20_000).abs().max() < 800  # ~5.7 sigma of a binomial(200000, 0.1)
    assert (u[0] == u[1]).float().mean() < 1e-3  # two models' streams differ
    assert abs(torch.corrcoef(u)[0, 1]) < 0.01


def noise(seeds, rows, step=0):
    return Noise(torch.tensor(seeds), torch.tensor(step), torch.tensor(rows))


def test_draws_do_not_depend_on_the_stack_the_width_or_the_rank():
    alone = noise([7], [0, 1, 2, 3]).uniform_tokens(1, 6)  # [1, 4, 6]
    stacked = noise([3, 7, 9], [0, 1, 2, 3]).uniform_tokens(1, 10)  # other models, wider padding
    assert torch.equal(stacked[1, :, :6], alone[0])
    rank1 = noise([7], [1, 3]).uniform_tokens(1, 6)  # data parallel: rank 1 of 2 holds rows 1 and 3
    assert torch.equal(rank1[0], alone[0, [1, 3]])
    assert not torch.equal(noise([7], [0, 1, 2, 3], step=1).uniform_tokens(1, 6), alone)  # a new step, new draws
    assert not torch.equal(noise([7], [0, 1, 2, 3]).uniform_tokens(2, 6), alone)  # another stream


def test_dropout_keeps_the_expected_share_and_scales():
    x = torch.ones(2, 3 * 8, 64)  # [M, B*W, H]
    y = noise([1, 2], [0, 1, 2]).dropout_hidden(x, 0.1, 5, width=8)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.9) < 0.02
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.9))
    probs = torch.ones(2 * 3, 2, 8, 8)  # [M*B, heads, W, W]
    a = noise([1, 2], [0, 1, 2]).dropout_attention(probs, 0.5, 6, m=2)
    b = noise([2], [0, 1, 2]).dropout_attention(probs[3:], 0.5, 6, m=1)
    assert torch.equal(a[3:], b)  # model 2's masks, alone or second in a stack


@pytest.mark.parametrize("precision", ["fp32"])
def test_a_model_alone_and_in_a_stack_of_three_see_the_same_masks_and_end_equal(tmp_path, monkeypatch, precision):
    from dataclasses import replace

    import xlrepro.engine.masking as masking
    from xlrepro.papers.dufter2020.config import load_chapter
    from xlrepro.papers.dufter2020 import grid

    chapter = load_chapter("dufter2020")
    # curve_points 2: the curve models are evaluated at steps 0, 10 and 20 of the 20 rather than at every other step
    # (the evaluations took most of the time; the masks are compared at every step either way)
    monkeypatch.setattr(grid, "load_chapter", lambda name: replace(
        chapter, training=replace(chapter.training, precision=precision, curve_points=2)))
    seen: dict[str, list] = {}
    original = masking.mask_tokens

    def recording(ids, *args, noise=None, **kwargs):
        inputs, labels = original(ids, *args, noise=noise, **kwargs)
        seeds = noise.seeds.tolist()
        for i, s in enumerate(seeds):  # record model (0, seed 0)'s selected positions, without padding columns
            if s == 0 and ids.shape[0] in (1, 3):
                seen.setdefault(f"stack{ids.shape[0]}", []).append((labels[i] != -100).nonzero().tolist())
        return inputs, labels

    monkeypatch.setattr(grid, "mask_tokens", recording)
    run = dict(device="cpu", progress=False, epochs=2, max_sentences=40, batch_size=8)
    assert grid.run_grid("dufter2020", ["0"], [0], root=tmp_path / "alone", **run)
    # (0, 0) beside (1, 42) and (4, 3): other transforms, other seeds, other lengths
    stack = grid.grid_members(grid.load_chapter("dufter2020"), ["0", "1", "4"], [0], profile="lab", epochs=2,
                              max_sentences=40, batch_size=8)
    stack[1] = grid.grid_members(grid.load_chapter("dufter2020"), ["1"], [42], epochs=2, max_sentences=40,
                                 batch_size=8)[0]
    stack[2] = grid.grid_members(grid.load_chapter("dufter2020"), ["4"], [3], epochs=2, max_sentences=40,
                                 batch_size=8)[0]
    lab = grid.load_lab("lab")
    assert grid.StackRun(grid.load_chapter("dufter2020"), stack, lab, tmp_path / "stacked", "cpu", 2, 40,
                         batch_size=8).run(progress=False)
    assert len(seen["stack1"]) == len(seen["stack3"]) == 2 * (80 // 8)
    assert seen["stack1"] == seen["stack3"]  # the same masked positions at every step
    folder = lambda root: grid.member_dir(root, stack[0])
    alone = json.loads((folder(tmp_path / "alone") / "metrics.json").read_text())["metrics"]
    stacked = json.loads((folder(tmp_path / "stacked") / "metrics.json").read_text())["metrics"]
    assert alone.keys() == stacked.keys()
    for k in alone:
        assert stacked[k] == pytest.approx(alone[k], rel=1e-4, abs=1e-5), k


@pytest.mark.slow  # torch.compile builds C++ kernels: 93 s with an empty compile cache on 2 cores (10 s warm)
def test_compiled_stack_with_own_noise_compiles_once_and_equals_the_eager_stack():
    """Dropout on (tiny BERTs with dropout 0.1): compiled region by region, the masks are the same numbers."""
    import torch._dynamo as dynamo
    from transformers import BertConfig, BertForMaskedLM

    from xlrepro.engine.stacked import ModelStack, OptimConfig

    from .test_fused_bert import batch

    def tiny(seed):
        torch.manual_seed(seed)
        return BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                          intermediate_size=32, max_position_embeddings=64))

    opt = OptimConfig(lr=1e-2, weight_decay=0.01, eps=1e-6, warmup_steps=2, total_steps=10, max_grad_norm=0.5)
    dynamo.reset()
    dynamo.utils.counters.clear()
    compiled = ModelStack([tiny(1), tiny(2)], opt, "cpu", compile="regional", seeds=[5, 6], bf16=False)
    eager = ModelStack([tiny(1), tiny(2)], opt, "cpu", seeds=[5, 6], bf16=False)
    g = torch.Generator().manual_seed(0)
    for w in (12, 20, 12):
        ids, attend, pos, types, sel, lab, _ = batch(g, 2, w=w)
        torch.testing.assert_close(compiled.train_step(ids, attend, pos, types, sel, lab),
                                   eager.train_step(ids, attend, pos, types, sel, lab), rtol=1e-4, atol=1e-5)
    assert dynamo.utils.counters["stats"]["unique_graphs"] == 3  # embeddings, one layer for both layers, head


def test_int32_hash_has_the_uint32_bits():
    # edge values of the uint32 range, stored as int32 bit patterns, against the plain-Python hash
    xs = [0, 1, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xDEADBEEF, 0xFFFFFFFE, 0xFFFFFFFF, 123456789]
    bits = to_bits32(torch.tensor(xs, dtype=torch.int64))
    assert bits.dtype == torch.int32 and bits.tolist()[:4] == [0, 1, 2**31 - 1, -(2**31)]
    assert from_bits32(mix32(bits)).tolist() == [mix32_reference(x) for x in xs]


def test_uniform_int32_equals_the_int64_form():
    # coordinates past 2**31 and 2**32 wrap the same way in both forms; int32 coordinates give the same draws
    keys = torch.tensor([0, 7, 2**31, 2**32 - 1], dtype=torch.int64)  # keys are uint32 values (`stream_key`)
    index = torch.tensor([0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 5, 3 * 2**31 + 11], dtype=torch.int64)
    want = uniform_int64(keys, index.unsqueeze(0))  # [4, 8]
    assert torch.equal(uniform(keys, index.unsqueeze(0)), want)
    assert torch.equal(uniform(keys, to_bits32(index).unsqueeze(0)), want)
    # one draw by hand: h = mix(mix(key ^ i) ^ key), its top 24 bits over 2**24
    k, i = 2**32 - 1, 2**31
    h = mix32_reference(mix32_reference(k ^ i) ^ k)
    assert want[3, 3].item() == (h >> 8) / 2**24
