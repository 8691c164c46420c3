"""The stacked trainer trains each model exactly as if it were trained alone."""
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from xlrepro.engine.stacked import ModelStack, OptimConfig, linear_schedule, select_masked


def tiny(seed, attn, positions=32):
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                     max_position_embeddings=positions, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     attn_implementation=attn)
    return BertForMaskedLM(cfg)


def batch(g, m, b=4, w=8):
    ids = torch.randint(5, 50, (m, b, w), generator=g)
    lengths = torch.randint(4, w + 1, (m, b), generator=g)
    pos = torch.arange(w)
    attend = (pos < lengths[..., None])[:, :, None, None, :]
    labels = torch.where((torch.rand(ids.shape, generator=g) < 0.3) & (pos < lengths[..., None]), ids, -100)
    sel, lab = select_masked(labels, 12)
    return ids, attend, pos.expand(m, b, w), torch.zeros_like(ids), sel, lab


OPT = OptimConfig(lr=1e-2, weight_decay=0.01, eps=1e-6, warmup_steps=2, total_steps=10, max_grad_norm=0.5)


def test_stack_of_two_equals_two_models_trained_alone():
    g = torch.Generator().manual_seed(0)
    steps = [batch(g, 2) for _ in range(3)]
    stack = ModelStack([tiny(1, "eager"), tiny(2, "eager")], OPT, "cpu")
    alone = [ModelStack([tiny(s, "sdpa")], OPT, "cpu") for s in (1, 2)]
    for ids, attend, pos, types, sel, lab in steps:
        additive = torch.where(attend, 0.0, -1e9)
        losses = stack.train_step(ids, additive, pos, types, sel, lab)
        for i, single in enumerate(alone):
            one = single.train_step(ids[i:i + 1], attend[i:i + 1], pos[i:i + 1], types[i:i + 1], sel[i:i + 1],
                                    lab[i:i + 1])
            torch.testing.assert_close(losses[i], one[0], rtol=1e-4, atol=1e-5)
    for i, single in enumerate(alone):
        a, b = stack.export(i).state_dict(), single.export(0).state_dict()
        for k in a:
            torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5, msg=k)
    # and the two models did train differently from their start
    assert not torch.allclose(stack.export(0).bert.embeddings.word_embeddings.weight,
                              tiny(1, "eager").bert.embeddings.word_embeddings.weight)


def test_per_model_clipping_matches_clip_grad_norm():
    g = torch.Generator().manual_seed(1)
    ids, attend, pos, types, sel, lab = batch(g, 2)
    stack = ModelStack([tiny(3, "eager"), tiny(4, "eager")], OPT, "cpu")
    losses = stack._losses(stack.params, stack.buffers, ids, torch.where(attend, 0.0, -1e9), pos, types, sel, lab)
    losses.sum().backward()
    raw = {k: p.grad.clone() for k, p in stack.params.items()}
    stack._clip_per_model()
    for i in range(2):
        grads = [raw[k][i].clone() for k in raw]
        total = torch.sqrt(sum(x.pow(2).sum() for x in grads))
        assert total > OPT.max_grad_norm  # the case where clipping acts
        scale = OPT.max_grad_norm / (total + 1e-6)
        for k, x in zip(raw, grads):
            torch.testing.assert_close(stack.params[k].grad[i], x * scale, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("values", [[3.0], [3.0, 1e-4]])
def test_clipping_by_hand(values):
    # every gradient entry of model i is values[i]: its norm is values[i] * sqrt(n), n = the model's parameter count
    stack = ModelStack([tiny(3 + i, "eager") for i in range(len(values))], OPT, "cpu")
    for p in stack.params.values():
        p.grad = torch.stack([torch.full(p.shape[1:], v) for v in values])
    n = sum(p[0].numel() for p in stack.params.values())
    stack._clip_per_model()
    for i, v in enumerate(values):
        norm = v * n ** 0.5
        want = v * min(1.0, OPT.max_grad_norm / (norm + 1e-6))  # torch.nn.utils.clip_grad_norm_'s rule
        assert (norm > OPT.max_grad_norm) == (i == 0)  # model 0 is clipped, model 1 is not
        for p in stack.params.values():
            torch.testing.assert_close(p.grad[i], torch.full(p.shape[1:], want), rtol=1e-5, atol=0)


def test_linear_schedule():
    f = linear_schedule(warmup=2, total=10)
    assert [f(s) for s in (0, 1, 2, 6, 10, 12)] == [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]


def test_state_round_trip():
    g = torch.Generator().manual_seed(2)
    steps = [batch(g, 2) for _ in range(4)]
    run = lambda st, bs: [st.train_step(i, torch.where(a, 0.0, -1e9), p, t, s, l) for i, a, p, t, s, l in bs]
    a = ModelStack([tiny(5, "eager"), tiny(6, "eager")], OPT, "cpu")
    run(a, steps)
    b = ModelStack([tiny(5, "eager"), tiny(6, "eager")], OPT, "cpu")
    run(b, steps[:2])
    c = ModelStack([tiny(7, "eager"), tiny(8, "eager")], OPT, "cpu")
    c.load_state_dict(b.state_dict())  # resume from a checkpoint
    run(c, steps[2:])
    assert c.step_count == 4
    for k in a.params:
        torch.testing.assert_close(a.params[k], c.params[k], rtol=1e-5, atol=1e-6)


def test_a_failed_compiled_step_is_run_again_eagerly_and_the_stack_stays_eager():
    """Should a compiled step fail (here after its backward has already written gradients), the step runs again on
    the eager path of the same loss with clean gradients: losses and weights equal a twin that never failed."""
    import pytest
    g = torch.Generator().manual_seed(3)
    steps = [batch(g, 2) for _ in range(2)]
    twin = ModelStack([tiny(1, "eager"), tiny(2, "eager")], OPT, "cpu", seeds=[1, 2])
    failing = ModelStack([tiny(1, "eager"), tiny(2, "eager")], OPT, "cpu", seeds=[1, 2])
    calls = []

    def broken(p, b, *inputs):  # an Inductor stride check failing in the backward, after some gradients were written
        failing._eager_losses(p, b, *inputs).sum().backward()
        calls.append(1)
        raise AssertionError("expected size 3==3, stride 401408==573440 at dim=0")

    failing.compiled, failing._losses = "regional", broken
    for ids, attend, pos, types, sel, lab in steps:
        additive = torch.where(attend, 0.0, -1e9)
        expected = twin.train_step(ids, additive, pos, types, sel, lab)
        if not calls:
            with pytest.warns(UserWarning, match="compiled step failed .*continues eagerly"):
                got = failing.train_step(ids, additive, pos, types, sel, lab)
        else:
            got = failing.train_step(ids, additive, pos, types, sel, lab)
        torch.testing.assert_close(got, expected)
    assert calls == [1] and failing.compiled is None  # the broken path was tried once only
    # the failure is recorded (for the timing record): at step 0, with the error's first line
    assert failing.fallbacks == [{"step": 0, "error": "AssertionError: expected size 3==3, stride 401408==573440 "
                                                      "at dim=0"}]
    assert twin.fallbacks == []
    for k in twin.params:
        torch.testing.assert_close(failing.params[k], twin.params[k], msg=k)
    # without compilation a failure is the caller's to see
    eager = ModelStack([tiny(1, "eager")], OPT, "cpu", seeds=[1])
    eager._losses = broken
    with pytest.raises(AssertionError, match="stride"):
        eager.train_step(*(x[:1] for x in steps[0][:1]), torch.where(steps[0][1][:1], 0.0, -1e9),
                         *(x[:1] for x in steps[0][2:]))


@pytest.mark.parametrize("inductor_runs", [
    False,
    # torch.compile builds C++ kernels: about 30 s with an empty compile cache, 4 s with a warm one
    pytest.param(True, marks=pytest.mark.slow)], ids=["options", "inductor"])
def test_a_compiled_stack_compiles_without_padding_and_leaves_the_global_settings(monkeypatch, inductor_runs):
    """Padded strides of unaligned hidden sizes failed Inductor's own checks when the width changed (single-head
    stacks on H200s): a compiled stack passes both kinds of padding off to its own torch.compile; no stack changes
    Inductor's or Dynamo's process-wide settings. Without `inductor_runs`, torch.compile records its options and
    hands each region back uncompiled: the options and the settings are checked the same way, Inductor's own use of
    the options is not."""
    import torch._dynamo as dynamo
    import torch._inductor.config as inductor

    from xlrepro.engine import stacked
    from xlrepro.engine.fused_bert import Levers
    seen, compiled = [], []
    real = stacked.compiled_regions
    monkeypatch.setattr(stacked, "compiled_regions", lambda options: seen.append(options) or real(options))
    if not inductor_runs:
        monkeypatch.setattr(torch, "compile", lambda f, options=None: compiled.append(options) or f)
    limit = dynamo.config.recompile_limit
    # Inductor's own patch, not monkeypatch: undoing monkeypatch.setattr deletes a config module's entry, which broke
    # every later compile in the process
    with inductor.patch(comprehensive_padding=True, shape_padding=True):
        for kwargs in ({}, {"compile": "regional"},
                       {"compile": "regional", "levers": Levers(persistent_reductions=False)}):
            stack = ModelStack([tiny(1, "eager")], OPT, "cpu", seeds=[1], **kwargs)
            g = torch.Generator().manual_seed(0)
            stack.train_step(*batch(g, 1))
            assert inductor.comprehensive_padding and inductor.shape_padding
            assert dynamo.config.recompile_limit == limit
    assert hasattr(inductor, "comprehensive_padding") and hasattr(inductor, "shape_padding")
    assert seen == [{"comprehensive_padding": False, "shape_padding": False},
                    {"comprehensive_padding": False, "shape_padding": False, "triton.persistent_reductions": False}]
    if not inductor_runs:  # the embeddings, the layer and the head of each compiled stack
        assert compiled == [seen[0]] * 3 + [seen[1]] * 3


def test_the_engine_is_named_or_inferred_and_a_wrong_one_names_the_valid_ones():
    assert ModelStack([tiny(1, "eager")], OPT, "cpu").engine == "hf"
    assert ModelStack([tiny(1, "eager")], OPT, "cpu", seeds=[1]).engine == "fused"
    assert ModelStack([tiny(1, "eager")], OPT, "cpu", engine="fused").engine == "fused"  # PyTorch's generator
    with pytest.raises(ValueError, match="valid values are hf, fused"):
        ModelStack([tiny(1, "eager")], OPT, "cpu", engine="vmap")
    with pytest.raises(ValueError, match="seeds need engine='fused'"):
        ModelStack([tiny(1, "eager")], OPT, "cpu", seeds=[1], engine="hf")
