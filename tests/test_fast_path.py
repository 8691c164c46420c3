"""Each speed lever of the fused loss (`fused_bert.Levers`, packing) gives HF's BertForMaskedLM loss and gradients.

The reference is always HF's own model on the same documents padded the ordinary way (`labels=`, mean cross-entropy
over the labelled pieces); the fused loss runs through `ModelStack(levers=...)` as the benchmark does.
"""
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from xlrepro.engine.fused_bert import Levers, stacked_mlm_losses
from xlrepro.engine.packing import document_block_mask, document_mask, first_fit, pack_documents
from xlrepro.engine.stacked import ModelStack, OptimConfig

torch.set_num_threads(1)
OPT = OptimConfig(lr=1e-2, weight_decay=0.01, eps=1e-6, warmup_steps=2, total_steps=10, max_grad_norm=1e9)
VOCAB = 50


def hf(seed=0, heads=2):
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=heads,
                     intermediate_size=32, max_position_embeddings=32, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return BertForMaskedLM(cfg).eval()


def documents(g, lengths):
    docs = [torch.randint(5, VOCAB, (n,), generator=g) for n in lengths]
    masked = [torch.rand(n, generator=g) < 0.4 for n in lengths]
    for m in masked:
        m[0] = True  # at least one labelled piece per document
    return docs, masked


def hf_loss_and_grads(model, docs, masked):
    """HF's loss over the documents padded to the longest one, and its gradients by parameter name."""
    width = max(len(d) for d in docs)
    ids = torch.zeros(len(docs), width, dtype=torch.long)
    attend = torch.zeros(len(docs), width, dtype=torch.long)
    labels = torch.full((len(docs), width), -100)
    for i, (d, m) in enumerate(zip(docs, masked)):
        ids[i, :len(d)], attend[i, :len(d)] = d, 1
        labels[i, :len(d)] = torch.where(m, d, -100)
    model.zero_grad()
    loss = model(input_ids=ids, attention_mask=attend, labels=labels).loss
    loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters()}


def fused_loss_and_grads(model, inputs, levers, bf16=None):
    stack = ModelStack([model], OPT, "cpu", levers=levers, bf16=bf16)
    stack.base.eval()
    loss = stack._losses(stack.params, stack.buffers, *inputs)
    loss.sum().backward()
    return loss.detach()[0], {k.removeprefix("mlm."): p.grad[0] for k, p in stack.params.items()}


def assert_same_gradients(ours, ref):
    shared = [k for k in ref if k in ours]
    assert len(shared) >= len(ref) - 1  # HF lists the tied decoder bias once more, as cls.predictions.decoder.bias
    for k in shared:
        torch.testing.assert_close(ours[k], ref[k], rtol=1e-4, atol=1e-6, msg=k)


def padded_inputs(docs, masked, width, mask=True):
    """The fused loss's inputs for one model: rows padded to `width`, the key mask (or None), the masked pieces."""
    b = len(docs)
    ids = torch.zeros(1, b, width, dtype=torch.long)
    real = torch.zeros(1, b, width, dtype=torch.bool)
    labels = torch.full((1, b, width), -100)
    for i, (d, m) in enumerate(zip(docs, masked)):
        ids[0, i, :len(d)], real[0, i, :len(d)] = d, True
        labels[0, i, :len(d)] = torch.where(m, d, -100)
    sel = (labels.reshape(1, -1) != -100).nonzero()[:, 1][None]
    positions = torch.arange(width).expand(1, b, width)
    attend = real[:, :, None, None, :] if mask else None
    return ids, attend, positions, torch.zeros_like(ids), sel, labels.reshape(1, -1).gather(1, sel)


def packed_inputs(docs, masked, width, flex=False):
    packed = pack_documents(docs, width)
    flat_labels = torch.cat([torch.where(m, d, -100) for d, m in zip(docs, masked)])
    chosen = flat_labels != -100
    sel, lab = packed.index[chosen][None], flat_labels[chosen][None]
    ids, pos, doc = packed.ids[None], packed.positions[None], packed.documents[None]
    mask = document_block_mask(packed.documents, block_size=width) if flex else document_mask(doc)
    return ids, mask, pos, torch.zeros_like(ids), sel, lab


def test_first_fit_packs_by_hand():
    assert first_fit([5, 3, 4, 2, 6], 8) == [[4, 3], [0, 1], [2]]  # 6+2, 5+3, 4
    with pytest.raises(ValueError, match="1..8 pieces"):
        first_fit([9], 8)


def test_pack_documents_lays_out_rows_and_positions():
    docs = [torch.tensor([11, 12, 13]), torch.tensor([21, 22]), torch.tensor([31, 32, 33, 34])]
    p = pack_documents(docs, 5)  # rows: [doc 2 (4 pieces)], [doc 0 (3), doc 1 (2)]
    assert p.ids.tolist() == [[31, 32, 33, 34, 0], [11, 12, 13, 21, 22]]
    assert p.positions.tolist() == [[0, 1, 2, 3, 0], [0, 1, 2, 0, 1]]
    assert p.documents.tolist() == [[2, 2, 2, 2, -1], [0, 0, 0, 1, 1]]
    assert p.ids.reshape(-1)[p.index].tolist() == [11, 12, 13, 21, 22, 31, 32, 33, 34]
    mask = document_mask(p.documents)[1, 0]  # row 1: a 3x3 block and a 2x2 block
    assert mask.int().tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 0, 0], [0, 0, 0, 1, 1], [0, 0, 0, 1, 1]]


@pytest.mark.parametrize("levers", [Levers(attention="math"), Levers(attention="sdpa"),
                                    Levers(attention="sdpa", fused_qkv=True), Levers(attention="math", fused_qkv=True)])
def test_padded_batch_with_each_lever_equals_hf(levers):
    g = torch.Generator().manual_seed(0)
    docs, masked = documents(g, [7, 3, 5, 8])
    ref_loss, ref_grads = hf_loss_and_grads(hf(1), docs, masked)
    loss, grads = fused_loss_and_grads(hf(1), padded_inputs(docs, masked, 8), levers)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-5)
    assert_same_gradients(grads, ref_grads)


@pytest.mark.parametrize("fused_qkv", [False, True])
def test_no_mask_on_full_rows_equals_hf(fused_qkv):
    g = torch.Generator().manual_seed(1)
    docs, masked = documents(g, [6, 6, 6])
    ref_loss, ref_grads = hf_loss_and_grads(hf(2), docs, masked)
    loss, grads = fused_loss_and_grads(hf(2), padded_inputs(docs, masked, 6, mask=False),
                                       Levers(attention="sdpa", fused_qkv=fused_qkv))
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-5)
    assert_same_gradients(grads, ref_grads)


@pytest.mark.parametrize("attention, fused_qkv", [("sdpa", False), ("math", False), ("sdpa", True)])
def test_packed_documents_equal_hf_on_the_documents_padded(attention, fused_qkv):
    g = torch.Generator().manual_seed(2)
    docs, masked = documents(g, [5, 2, 7, 3, 4, 1])
    inputs = packed_inputs(docs, masked, 8)
    assert inputs[0].shape[1] == 3  # 22 pieces in 3 rows of 8, against 6 rows of 7 padded
    ref_loss, ref_grads = hf_loss_and_grads(hf(3), docs, masked)
    loss, grads = fused_loss_and_grads(hf(3), inputs, Levers(attention=attention, fused_qkv=fused_qkv))
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-5)
    assert_same_gradients(grads, ref_grads)


def test_a_document_does_not_see_its_row_neighbours():
    g = torch.Generator().manual_seed(3)
    docs, masked = documents(g, [4, 4])
    inputs = packed_inputs(docs, masked, 8)  # both documents in one row
    model = hf(4)
    stack = ModelStack([model], OPT, "cpu", levers=Levers(attention="sdpa"))
    stack.base.eval()
    only_first = (inputs[4][:, :1], inputs[5][:, :1])  # the loss of document 0's first labelled piece
    before = stack._losses(stack.params, stack.buffers, *inputs[:4], *only_first)
    changed = inputs[0].clone()
    changed[0, 0, 4:] = (changed[0, 0, 4:] + 1 - 5) % (VOCAB - 5) + 5  # other pieces in document 1
    after = stack._losses(stack.params, stack.buffers, changed, *inputs[1:4], *only_first)
    torch.testing.assert_close(after, before, rtol=0, atol=0)


@pytest.mark.parametrize("fused_qkv", [False, True])
def test_flex_attention_on_packed_documents_equals_hf_forward(fused_qkv):
    """FlexAttention has no backward on the CPU: here the loss only (the gradients are those of SDPA's packed path
    above, which takes the same mask as a tensor); the benchmark times it on the GPU."""
    g = torch.Generator().manual_seed(5)
    docs, masked = documents(g, [5, 2, 7, 3, 4, 1])
    ref_loss, _ = hf_loss_and_grads(hf(6), docs, masked)
    stack = ModelStack([hf(6)], OPT, "cpu", levers=Levers(attention="flex", fused_qkv=fused_qkv))
    stack.base.eval()
    with torch.no_grad():
        loss = stack._losses(stack.params, stack.buffers, *packed_inputs(docs, masked, 8, flex=True))
    torch.testing.assert_close(loss[0], ref_loss, rtol=1e-5, atol=1e-5)


def test_levers_are_checked():
    with pytest.raises(ValueError, match="valid values are None, 'math', 'sdpa', 'auto', 'flex'"):
        Levers(attention="flash")
    model = hf(7)
    g = torch.Generator().manual_seed(6)
    docs, masked = documents(g, [3, 3])
    stack = ModelStack([model], OPT, "cpu", levers=Levers(attention="flex"))
    with pytest.raises(ValueError, match="takes a BlockMask"):  # flex with a tensor mask
        stack._losses(stack.params, stack.buffers, *padded_inputs(docs, masked, 3))
    p = {k: v for k, v in stack.params.items()}
    cfg = model.config
    cfg.attention_probs_dropout_prob = 0.1
    with pytest.raises(ValueError, match="no dropout on the attention probabilities"):
        stacked_mlm_losses(p, cfg, True, *packed_inputs(docs, masked, 8, flex=True), attention="flex")


@pytest.mark.slow
@pytest.mark.parametrize("mask, levers", [("none", Levers(attention="sdpa", fused_qkv=True)),
                                          ("packed", Levers(attention="sdpa")), ("padded", Levers())])
def test_compiled_levers_equal_the_eager_ones(mask, levers):
    """Regional torch.compile (what the benchmark times on the GPU) takes each lever's inputs and gives the eager
    loss and gradients (on the CPU: about 30 s per case)."""
    g = torch.Generator().manual_seed(8)
    docs, masked = documents(g, [6, 6, 6] if mask == "none" else [5, 2, 7, 3, 4, 1])
    inputs = {"none": lambda: padded_inputs(docs, masked, 6, mask=False), "packed": lambda: packed_inputs(docs, masked, 8),
              "padded": lambda: padded_inputs(docs, masked, 7)}[mask]()
    loss, grads = fused_loss_and_grads(hf(9), inputs, levers)
    stack = ModelStack([hf(9)], OPT, "cpu", compile="regional", levers=levers)
    stack.base.eval()
    compiled = stack._losses(stack.params, stack.buffers, *inputs)
    compiled.sum().backward()
    torch.testing.assert_close(compiled.detach()[0], loss, rtol=1e-5, atol=1e-5)
    assert_same_gradients({k.removeprefix("mlm."): p.grad[0] for k, p in stack.params.items()}, grads)


@pytest.mark.parametrize("fused_qkv", [False, True])
def test_bias_outside_the_product_equals_hf_for_one_model(fused_qkv):
    # linear="mm", one model: F.linear, the bias in the product's epilogue
    g = torch.Generator().manual_seed(7)
    docs, masked = documents(g, [7, 3, 5, 8])
    ref_loss, ref_grads = hf_loss_and_grads(hf(1), docs, masked)
    loss, grads = fused_loss_and_grads(hf(1), padded_inputs(docs, masked, 8), Levers(fused_qkv=fused_qkv, linear="mm"))
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-5)
    assert_same_gradients(grads, ref_grads)


def test_bias_outside_the_product_equals_hf_for_each_model_of_a_stack():
    # linear="mm", two models: bmm, then the bias added; each model's loss and gradients are its own HF model's
    g = torch.Generator().manual_seed(8)
    docs, masked = documents(g, [6, 4, 5])
    refs = [hf_loss_and_grads(hf(seed), docs, masked) for seed in (1, 2)]
    one = padded_inputs(docs, masked, 6)
    inputs = tuple(t.expand(2, *t.shape[1:]) for t in one)
    stack = ModelStack([hf(1), hf(2)], OPT, "cpu", levers=Levers(linear="mm"))
    stack.base.eval()
    loss = stack._losses(stack.params, stack.buffers, *inputs)
    loss.sum().backward()
    for i, (ref_loss, ref_grads) in enumerate(refs):
        torch.testing.assert_close(loss[i].detach(), ref_loss, rtol=1e-5, atol=1e-5)
        assert_same_gradients({k.removeprefix("mlm."): p.grad[i] for k, p in stack.params.items()}, ref_grads)


def test_linear_lever_names_the_valid_choices():
    with pytest.raises(ValueError, match="'baddbmm', 'mm', 'fp8'"):
        Levers(linear="addmm")


def test_autotune_is_a_compile_option_of_every_region(monkeypatch):
    from xlrepro.engine.fused_bert import compiled_regions, inductor_options
    seen = []
    monkeypatch.setattr(torch, "compile", lambda f, options=None: seen.append(options) or f)
    compiled_regions(inductor_options(Levers(autotune=True)))
    assert seen == [{"max_autotune_gemm": True}] * 3  # embeddings, the layer, the head
    seen.clear()
    compiled_regions(inductor_options(Levers(linear="mm")))
    assert seen == [None] * 3  # Inductor's defaults
    assert "autotune" not in Levers(autotune=True).options()  # not an argument of the loss


def test_fp8_rows_scale_each_row_to_the_fp8_range():
    from xlrepro.engine.fused_bert import FP8_MAX, _fp8_rows
    q, scale = _fp8_rows(torch.tensor([[896.0, 2.0, -448.0], [0.0, 0.0, 0.0]]))
    assert FP8_MAX == torch.finfo(torch.float8_e4m3fn).max
    assert scale[0].item() == 2.0 and scale[1].item() > 0  # a row of zeros keeps a tiny scale
    assert q.dtype == torch.float8_e4m3fn and q.float()[0].tolist() == [448.0, 1.0, -224.0]  # exact in e4m3
    assert (q.float()[1] == 0).all()


def test_fp8_linear_is_close_to_hf_for_one_model_and_refuses_what_it_cannot_run():
    """FP8 products (3 mantissa bits, a scale per row; the weight gradient in bf16) change the numbers: the loss
    within 2 % of HF's but not equal to it, every encoder gradient pointing the same way (cosine above 0.99; the key
    bias's, zero in exact arithmetic since softmax ignores it, is rounding on both sides). A stack of two
    models, or a product with a dimension not a multiple of 16, is refused rather than run another way."""
    g = torch.Generator().manual_seed(7)
    docs, masked = documents(g, [7, 3, 5, 8])
    ref_loss, ref_grads = hf_loss_and_grads(hf(1), docs, masked)
    loss, grads = fused_loss_and_grads(hf(1), padded_inputs(docs, masked, 8), Levers(linear="fp8"))
    assert abs(loss - ref_loss) / ref_loss < 0.02 and loss != ref_loss
    for k in (k for k in ref_grads if k in grads and "encoder" in k and not k.endswith("key.bias")):  # that one's is 0
        cos = torch.nn.functional.cosine_similarity(grads[k].flatten(), ref_grads[k].flatten(), dim=0)
        assert cos > 0.99, (k, cos.item())
    with pytest.raises(ValueError, match="multiple of 16"):  # 4 rows of width 9: 36 tokens
        fused_loss_and_grads(hf(1), padded_inputs(docs, masked, 9), Levers(linear="fp8"))
    with pytest.raises(ValueError, match="stack of one model; got 2 models"):  # refused before any step
        ModelStack([hf(1), hf(2)], OPT, "cpu", levers=Levers(linear="fp8"))
    from xlrepro.engine.fused_bert import _project
    x = torch.randn(2, 16, 16)  # the loss itself refuses a model dimension above one too
    with pytest.raises(ValueError, match="stack of one model"):
        _project(x, torch.randn(2, 16, 16), torch.randn(2, 16), "fp8")


def test_bf16_residual_stream_rounds_each_layer_output_and_residual_add():
    """residual="bfloat16" (a speed switch with a training check, never a default): under autocast each LayerNorm
    still computes in float32, and its output, the residual stream, is rounded to bf16 (so are the residual adds
    that read it): a layer hands the next one bf16 where the default hands float32, and the loss asks it of the
    embeddings and of every layer. The numbers change beyond float32 rounding but stay close: the loss within 1 % of
    the float32 stream's, not equal to it, and every encoder gradient pointing the same way (cosine above 0.99). An
    unknown dtype is refused, naming the valid ones."""
    from xlrepro.engine.fused_bert import EAGER, Regions, encoder_layer
    g = torch.Generator().manual_seed(3)
    docs, masked = documents(g, [7, 3, 5, 8])
    inputs = padded_inputs(docs, masked, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref_loss, ref_grads = fused_loss_and_grads(hf(1), inputs, Levers(), bf16=True)
        loss, grads = fused_loss_and_grads(hf(1), inputs, Levers(residual="bfloat16"), bf16=True)
        p = {k.removeprefix("bert.encoder.layer.0."): v.unsqueeze(0) for k, v in hf(1).state_dict().items()
             if k.startswith("bert.encoder.layer.0.")}
        x = torch.randn(1, 4 * 8, 16)
        attend = torch.ones(4, 1, 1, 8, dtype=torch.bool)
        out = {r: encoder_layer(x, p, attend, 2, 1e-12, 0.0, 0.0, False, residual=r) for r in ("float32", "bfloat16")}
    assert out["float32"].dtype == torch.float32 and out["bfloat16"].dtype == torch.bfloat16
    torch.testing.assert_close(out["bfloat16"].float(), out["float32"], rtol=1e-2, atol=1e-2)
    assert abs(loss - ref_loss) / ref_loss < 0.01 and loss != ref_loss
    for k in (k for k in ref_grads if "encoder" in k and not k.endswith("key.bias")):  # that one's is 0 (softmax)
        cos = torch.nn.functional.cosine_similarity(grads[k].flatten().float(), ref_grads[k].flatten().float(), dim=0)
        assert cos > 0.99, (k, cos.item())
    assert Levers(residual="bfloat16").options()["residual"] == "bfloat16" and "residual" not in Levers().options()
    asked = []  # the residual dtype each region call was given (none: the default, float32)

    def spy(region):
        def call(*args, **kwargs):
            asked.append(kwargs.get("residual"))
            return region(*args, **kwargs)
        return call
    model = hf(1)
    params = {f"mlm.{k}": v.unsqueeze(0) for k, v in model.state_dict().items()}
    for residual, expected in (("bfloat16", "bfloat16"), ("float32", None)):
        asked.clear()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            stacked_mlm_losses(params, model.config, False, *inputs, regions=Regions(spy(EAGER.embed),
                               spy(EAGER.layer), EAGER.head), residual=residual)
        assert asked == [expected] * (1 + model.config.num_hidden_layers)  # the embeddings, then every layer
    with pytest.raises(ValueError, match="'float32', 'bfloat16'"):
        Levers(residual="float16")
    with pytest.raises(ValueError, match="'float32', 'bfloat16'"):
        stacked_mlm_losses({}, hf(1).config, False, *inputs, residual="fp16")
    with pytest.raises(ValueError, match="runs without autocast"):  # a CPU stack: float32 products, no bf16 stream
        ModelStack([hf(1)], OPT, "cpu", levers=Levers(residual="bfloat16"))


def test_padded_vocabulary_gives_hf_loss_and_gradients_over_an_aligned_product(monkeypatch):
    """pad_vocab=64 (a speed switch with a training check, never a default): the decoder's product runs over the
    50-piece vocabulary padded with zero rows to 64, whose extra logits are dropped before the softmax, so the loss
    and every gradient are HF's (the tied embeddings' gradient has exactly the vocabulary's 50 rows). The default
    multiplies the 50 rows as they are, and asks the head region nothing new; a padding that is no whole number of
    rows >= 1 is refused."""
    from xlrepro.engine import fused_bert
    from xlrepro.engine.fused_bert import EAGER, Regions
    g = torch.Generator().manual_seed(5)
    docs, masked = documents(g, [6, 4, 8])
    inputs = padded_inputs(docs, masked, 8)
    ref_loss, ref_grads = hf_loss_and_grads(hf(2), docs, masked)
    widths = []  # the decoder table's rows in each product of the head
    baddbmm = torch.baddbmm

    def spy(bias, x, table, **kwargs):
        if table.shape[-1] in (VOCAB, 64):  # [M, H, V']: the decoder's product, not the transform's
            widths.append(table.shape[-1])
        return baddbmm(bias, x, table, **kwargs)
    monkeypatch.setattr(fused_bert.torch, "baddbmm", spy)
    loss, grads = fused_loss_and_grads(hf(2), inputs, Levers(pad_vocab=64))
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
    assert_same_gradients(grads, ref_grads)
    assert grads["bert.embeddings.word_embeddings.weight"].shape[0] == VOCAB
    assert widths == [64]
    widths.clear()
    fused_loss_and_grads(hf(2), inputs, Levers())
    assert widths == [VOCAB]
    assert Levers(pad_vocab=64).options()["pad_vocab"] == 64 and "pad_vocab" not in Levers().options()
    asked = []

    def head(*args, **kwargs):
        asked.append(kwargs.get("pad_vocab"))
        return EAGER.head(*args, **kwargs)
    model = hf(2)
    params = {f"mlm.{k}": v.unsqueeze(0) for k, v in model.state_dict().items()}
    for pad, expected in ((8, 8), (1, None)):
        stacked_mlm_losses(params, model.config, False, *inputs, regions=Regions(EAGER.embed, EAGER.layer, head),
                           pad_vocab=pad)
        assert asked.pop() == expected
    for bad in (0, -8, 2.5, True):
        with pytest.raises(ValueError, match="whole number of rows >= 1"):
            Levers(pad_vocab=bad)
    with pytest.raises(ValueError, match="whole number of rows >= 1"):
        stacked_mlm_losses(params, model.config, False, *inputs, pad_vocab=0)
