"""The fused multi-model BERT loss equals HF's BertForMaskedLM, model by model, and compiles once for all widths."""
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from xlrepro.engine.fused_bert import stacked_mlm_losses
from xlrepro.engine.stacked import ModelStack, OptimConfig, masked_capacity, select_masked

from .test_stacked import tiny as tiny_bert

torch.set_num_threads(1)
OPT = OptimConfig(lr=1e-2, weight_decay=0.01, eps=1e-6, warmup_steps=2, total_steps=10, max_grad_norm=0.5)


def tiny(seed, attn="eager"):
    return tiny_bert(seed, attn, positions=64)  # lang-pos-like positions reach 32 + width


def batch(g, m, b=4, w=8):
    """Inputs of one step with ragged lengths, lang-pos-like position/segment ids, and the masked positions."""
    ids = torch.randint(5, 50, (m, b, w), generator=g)
    lengths = torch.randint(3, w + 1, (m, b), generator=g)
    pos = torch.arange(w)
    real = pos < lengths[..., None]
    types = torch.randint(0, 2, (m, b, 1), generator=g).expand(m, b, w)
    positions = pos + 32 * types
    labels = torch.where((torch.rand(ids.shape, generator=g) < 0.3) & real, ids, -100)
    labels[..., 1] = ids[..., 1]  # at least one masked piece per model
    sel, lab = select_masked(labels, masked_capacity(b * w, 0.3))
    attend = real[:, :, None, None, :]
    return ids, attend, positions, types, sel, lab, labels


def stack_of(models):
    return ModelStack(models, OPT, "cpu", compile=False)


@pytest.mark.parametrize("additive, attention", [(True, "math"), (False, "math"), (False, "sdpa")])
def test_fused_loss_equals_each_hf_model(additive, attention):
    g = torch.Generator().manual_seed(0)
    models = [tiny(s) for s in (1, 2, 3)]
    ids, attend, pos, types, sel, lab, labels = batch(g, 3)
    mask = torch.where(attend, 0.0, -1e9) if additive else attend
    stack = stack_of(models)
    fused = stacked_mlm_losses(stack.params, stack.template.config, False, ids, mask, pos, types, sel, lab,
                               attention=attention)
    for i, model in enumerate(models):  # HF's own loss: mean cross-entropy over the labelled positions
        model.eval()
        ref = model(input_ids=ids[i], attention_mask=attend[i, :, 0, 0].long(), position_ids=pos[i],
                    token_type_ids=types[i], labels=labels[i]).loss
        torch.testing.assert_close(fused[i], ref, rtol=1e-5, atol=1e-5)


def test_fused_gradients_equal_the_vmap_path():
    g = torch.Generator().manual_seed(1)
    ids, attend, pos, types, sel, lab, _ = batch(g, 2)
    mask = torch.where(attend, 0.0, -1e9)
    a, b = stack_of([tiny(4), tiny(5)]), stack_of([tiny(4), tiny(5)])
    a.base.eval(), b.base.eval()
    stacked_mlm_losses(a.params, a.template.config, False, ids, mask, pos, types, sel, lab).sum().backward()
    b._losses(b.params, b.buffers, ids, mask, pos, types, sel, lab).sum().backward()
    for k in a.params:
        torch.testing.assert_close(a.params[k].grad, b.params[k].grad, rtol=1e-4, atol=1e-6, msg=k)


def test_a_model_with_no_masked_piece_gets_loss_zero_and_zero_gradients():
    g = torch.Generator().manual_seed(2)
    ids, attend, pos, types, sel, lab, _ = batch(g, 2)
    lab = lab.clone()
    lab[1] = -100  # model 1 drew no masked piece in this batch
    stack = stack_of([tiny(6), tiny(7)])
    stack.base.eval()
    losses = stacked_mlm_losses(stack.params, stack.template.config, False, ids, attend, pos, types, sel, lab)
    assert losses[1].item() == 0.0 and torch.isfinite(losses[0]) and losses[0].item() > 0
    losses.sum().backward()
    grads = [g for g in (p.grad for p in stack.params.values()) if g is not None]
    assert all(torch.isfinite(g).all() for g in grads)
    assert all((g[1] == 0).all() for g in grads)  # nothing flows into the model without a masked piece


def test_models_do_not_see_each_other():
    g = torch.Generator().manual_seed(2)
    ids, attend, pos, types, sel, lab, _ = batch(g, 2)
    stack = stack_of([tiny(6), tiny(7)])
    before = stacked_mlm_losses(stack.params, stack.template.config, False, ids, attend, pos, types, sel, lab)
    with torch.no_grad():
        for p in stack.params.values():
            p[1].add_(0.5)  # change model 1 only
    after = stacked_mlm_losses(stack.params, stack.template.config, False, ids, attend, pos, types, sel, lab)
    assert after[0] == before[0] and abs(float((after[1] - before[1]).detach())) > 1e-3


def test_dropout_is_on_in_training_only():
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                     max_position_embeddings=64, hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
    stack = stack_of([BertForMaskedLM(cfg)])
    ids, attend, pos, types, sel, lab, _ = batch(torch.Generator().manual_seed(3), 1)
    run = lambda training: stacked_mlm_losses(stack.params, cfg, training, ids, attend, pos, types, sel, lab)
    assert run(False) == run(False)
    assert run(True) != run(True)


@pytest.mark.slow  # torch.compile builds C++ kernels: 40 s on a fresh 2-core CPU
@pytest.mark.parametrize("mode, graphs, nsp", [("regional", 3, False), ("full", 1, False), ("regional", 3, True)])
def test_compiled_stack_compiles_once_and_trains_like_the_eager_stack(mode, graphs, nsp):
    """Regional: one graph each for the embeddings, a layer (shared by both layers) and the head; full: one graph.
    Either way no width compiles again. With NSP (BertForPreTraining models, NSP labels) the regional stack still
    compiles its three regions once (the pooler and the NSP head run between them, eagerly)."""
    import torch._dynamo as dynamo
    dynamo.reset()
    dynamo.utils.counters.clear()
    g = torch.Generator().manual_seed(4)
    models = (lambda: pretraining_models((8, 9))) if nsp else (lambda: [tiny(8), tiny(9)])
    compiled = ModelStack(models(), OPT, "cpu", compile=mode)
    eager = stack_of(models())
    assert compiled.template.config.num_hidden_layers == 2
    for w in (12, 20, 28, 12):  # padded widths change from step to step, as in training
        ids, attend, pos, types, sel, lab, _ = batch(g, 2, w=w)
        mask = torch.where(attend, 0.0, -1e9)
        extra = (torch.randint(0, 2, (2, 4), generator=g),) if nsp else ()  # NSP labels [M, B]
        torch.testing.assert_close(compiled.train_step(ids, mask, pos, types, sel, lab, *extra),
                                   eager.train_step(ids, mask, pos, types, sel, lab, *extra), rtol=1e-4, atol=1e-5)
    assert dynamo.utils.counters["stats"]["unique_graphs"] == graphs
    for k in ("bert.encoder.layer.1.output.dense.weight", "cls.predictions.bias"):
        torch.testing.assert_close(compiled.export(1).state_dict()[k], eager.export(1).state_dict()[k],
                                   rtol=1e-4, atol=1e-5)


def test_attention_paths_have_the_same_gradients_and_bad_names_fail():
    g = torch.Generator().manual_seed(5)
    ids, attend, pos, types, sel, lab, _ = batch(g, 2)
    grads = []
    for attention in ("math", "sdpa"):
        stack = stack_of([tiny(4), tiny(5)])
        stacked_mlm_losses(stack.params, stack.template.config, False, ids, attend, pos, types, sel, lab,
                           attention=attention).sum().backward()
        grads.append({k: v.grad for k, v in stack.params.items()})
    for k in grads[0]:
        torch.testing.assert_close(grads[0][k], grads[1][k], rtol=1e-4, atol=1e-6, msg=k)
    with pytest.raises(ValueError, match="'math', 'sdpa', 'auto'"):
        stacked_mlm_losses(stack.params, stack.template.config, False, ids, attend, pos, types, sel, lab,
                           attention="flash")


def test_compile_switch_names_the_valid_values(monkeypatch):
    from xlrepro.engine.stacked import compile_mode
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert compile_mode(True, "cuda") == "regional" and compile_mode(True, "cpu") is None
    assert compile_mode("full", "cuda") == "full" and compile_mode(None, "cuda") is None
    assert compile_mode("none", "cuda") is None
    with pytest.raises(ValueError, match="none, regional, full"):
        compile_mode("yes", "cuda")
    with pytest.raises(ValueError, match="'regional', 'full'"):
        ModelStack([tiny(1)], OPT, "cpu", compile="fast")


def pretraining_models(seeds):
    """BertForPreTraining (MLM + NSP heads) of the tiny shape, dropout off."""
    from transformers import BertForPreTraining
    out = []
    for s in seeds:
        torch.manual_seed(s)
        out.append(BertForPreTraining(tiny(0).config))
    return out


def test_the_nsp_loss_is_hf_bert_for_pretrainings_own_model_by_model():
    """MLM + NSP of a stack of BertForPreTraining models, fused and on HF's path, equals each model's own HF loss
    (labels and next_sentence_label); without NSP labels the same stack gives the MLM loss alone."""
    g = torch.Generator().manual_seed(5)
    models = pretraining_models((11, 12))
    ids, attend, pos, types, sel, lab, labels = batch(g, 2)
    nsp = torch.tensor([[0, 1, 1, 0], [1, 1, 0, 0]])
    stack = stack_of(models)
    stack.base.eval()
    fused = stacked_mlm_losses(stack.params, stack.template.config, False, ids, attend, pos, types, sel, lab, nsp)
    on_hf = stack._losses(stack.params, stack.buffers, ids, attend, pos, types, sel, lab, nsp)
    mlm_only = stacked_mlm_losses(stack.params, stack.template.config, False, ids, attend, pos, types, sel, lab)
    for i, model in enumerate(models):
        model.eval()
        kwargs = dict(input_ids=ids[i], attention_mask=attend[i, :, 0, 0].long(), position_ids=pos[i],
                      token_type_ids=types[i], labels=labels[i])
        ref = model(**kwargs, next_sentence_label=nsp[i]).loss
        torch.testing.assert_close(fused[i], ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(on_hf[i], ref, rtol=1e-5, atol=1e-5)
        out = model(**kwargs)
        mlm = torch.nn.functional.cross_entropy(out.prediction_logits.reshape(-1, 50), labels[i].reshape(-1))
        torch.testing.assert_close(mlm_only[i], mlm, rtol=1e-5, atol=1e-5)
        assert (fused[i] - mlm_only[i]).item() > 0.1  # the NSP term is there (two classes: about ln 2)


def test_a_stack_trains_the_nsp_head_only_with_nsp_labels():
    g = torch.Generator().manual_seed(6)
    ids, attend, pos, types, sel, lab, _ = batch(g, 2)
    nsp = torch.tensor([[0, 1, 1, 0], [1, 1, 0, 0]])
    head = "mlm.cls.seq_relationship.weight"
    with_nsp, without = stack_of(pretraining_models((1, 2))), stack_of(pretraining_models((1, 2)))
    start = with_nsp.params[head].detach().clone()
    for _ in range(2):  # the first step's learning rate is 0 (warm-up)
        with_nsp.train_step(ids, attend, pos, types, sel, lab, nsp)
        without.train_step(ids, attend, pos, types, sel, lab)
    assert not torch.equal(with_nsp.params[head], start)  # the NSP head learnt
    torch.testing.assert_close(without.params[head], start, rtol=0, atol=0)  # no NSP labels: it keeps its weights
    exported = with_nsp.export(1)
    assert type(exported).__name__ == "BertForPreTraining"
    torch.testing.assert_close(exported.cls.seq_relationship.weight, with_nsp.params[head][1])
