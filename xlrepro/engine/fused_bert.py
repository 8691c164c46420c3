"""The masked-LM loss of M stacked BERT models, written with an explicit model dimension, for torch.compile.

`ModelStack` runs HF's `BertForMaskedLM` over stacked parameters with `torch.func.vmap`. That is exact, but it does
not compile well: vmap's batching rules for `linear` and `layer_norm` cannot take a symbolic sequence length, so
every padded width (8 of them in the Dufter & Schütze corpus) recompiles, at ~45 s each on an H200 — more than
the steps save. This file is the same forward, written for a leading model dimension with batched matrix products
(`baddbmm`), so it traces once with the width as a symbol and Inductor fuses the element-wise work (dropout, GELU,
LayerNorm, residuals, casts) that bounds these memory-bound steps. It is split into three regions (embeddings, one
encoder layer, MLM head) that `compiled_regions` compiles separately, so one compiled layer serves all layers.
No library provides a multi-model BERT, so it is hand-written; `tests/test_fused_bert.py` checks it against HF's
model, loss and gradients.

It reads the parameters under HF's names (those of `stack_module_state` over `MaskedPositionsLM`), so a stack can
switch between the two paths and still be exported as ordinary HF models. Semantics follow HF's BERT (post-LN,
exact-erf GELU, dropout after the embeddings, on attention probabilities, after each sub-layer's output projection;
MLM head: dense, GELU, LayerNorm, decoder tied to the word embeddings plus a bias).
`stacked_hidden_states` and `stacked_mlm_log_probs` are the same forward for evaluation (no dropout): HF's
`hidden_states` of chosen layers and the log-probabilities at masked positions, for all M models at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from transformers import BertConfig

from .noise import EMBEDDINGS, LAYER_BASE, Noise, dropout

PREFIX = "mlm."
# The attention path: "math" or "sdpa" (see `encoder_layer`), or "auto": math for one head, SDPA for several. Measured
# on an H200 (compiled, lab corpus): 50 BERT-small 57.8 ms/step math vs 80.1 SDPA; 5 BERT-base 148 math vs 107 SDPA.
ATTENTION = "auto"


ATTENTIONS = ("math", "sdpa", "auto", "flex")
LINEARS = ("baddbmm", "mm")
# "fp8": the encoder's linear layers in FP8 (`Fp8Linear`), for a stack of one model (the single-model engine the bench
# times against HF); not among the stacks' LINEARS, since torch has no batched scaled product for a model dimension
FP8 = "fp8"
ONE_MODEL_LINEARS = (*LINEARS, FP8)
FP8_MAX = 448.0  # the largest float8_e4m3fn value (torch.finfo(torch.float8_e4m3fn).max)
QKV = ("query", "key", "value")
# the dtype of the residual stream between layers (LayerNorm's outputs); "float32" as autocast leaves it (and HF's
# model); "bfloat16" halves the memory traffic of the residual adds and the LayerNorm inputs (`Levers.residual`)
RESIDUALS = {"float32": None, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class Levers:
    """Speed options of the fused loss, each off by default: the defaults are the engine the Dufter grid trained with,
    and no lever changes a number beyond floating-point rounding except where said. `xlrepro bench` times each one
    against Hugging Face's compiled model rather than assuming it helps; `tests/test_fast_path.py` checks each against
    HF's loss and gradients.

    attention: None (the default, `ATTENTION`), "math", "sdpa", or "flex": `torch.nn.attention.flex_attention` over
        a `BlockMask` (see `document_block_mask`); FlexAttention has no dropout on the attention probabilities, so
        "flex" refuses to train with attention dropout (train it with `attention_probs_dropout_prob=0`).
    fused_qkv: one [3H, H] matrix product for queries, keys and values instead of three [H, H] ones.
    linear: how the encoder's linear layers multiply (see `_project`): "baddbmm" (the default: one batched product
        that starts from the broadcast bias), "mm" (the product without the bias: one model runs `F.linear`, whose
        bias cuBLAS adds in the product's epilogue; a stack runs `bmm` and adds the bias in the element-wise kernel
        that follows) or "fp8" (one model only: FP8 products with a scale per row, `Fp8Linear`; changes numbers
        beyond rounding, so it is a switch with a training check, never a default).
    autotune: compile with Inductor's `max_autotune_gemm`: Triton templates for the matrix products are timed against
        cuBLAS at compile time, and the element-wise work after a product may be fused into it (its epilogue). A
        compile option (the compiled stacks only); compiling takes minutes longer.
    residual: the residual stream between layers (each LayerNorm's output) in "float32" (the default: autocast runs
        LayerNorm in float32 and leaves its output so, as in HF's model) or "bfloat16" (LayerNorm still computes in
        float32; it rounds each LayerNorm's output, and so each residual add, to bf16, which halves the bytes the adds
        and the next LayerNorm read). Changes numbers beyond float32 rounding, so a switch with a training check, never
        a default.
    pad_vocab: the MLM decoder's product runs over the vocabulary padded with zero rows to a multiple of this many
        (1: no padding); the padded columns' logits are dropped before the softmax, so the loss and the gradients of
        the real rows are the same up to rounding (another matrix-product kernel). For a vocabulary whose size is
        not a multiple of 8 (mBERT's 119,547 pieces): cuBLAS then runs the decoder's three products with kernels for
        unaligned operands (CUTLASS's ``align1``), which an H200 profile of the mbert bench case shows taking 13 ms of
        a 48 ms step; Hugging Face's compiled model runs no such kernel in the same profile (Inductor pads the
        unaligned `mm`, `bmm` and `addmm` products of a compiled graph, `torch._inductor.fx_passes.pad_mm`; HF's
        decoder is an `addmm`, ours a `baddbmm`, which that pass leaves alone). Rounding only, but over many
        updates: a switch with a training check before a chapter trains with it, never a default.
    persistent_reductions: Inductor's persistent reductions (one block holds a whole row; on by default). A compile
        option, off for a stack of one BERT-small model: there one kernel of the attention backward (the softmax
        backward fused with the dropout hash) spent minutes in Triton's LLVM and ptxas passes on an H200 (torch 2.11),
        so that the stack seemed to stand still; with them off it compiled in 29 s.
    Two more levers are properties of the inputs, not options: an `attention_mask` of None (no padding: SDPA may pick
    its FlashAttention kernel, which takes no mask), and packed rows with a block-diagonal mask [M, B, 1, W, W]
    (several documents per row, no padding; `pack_documents`)."""
    attention: str | None = None
    fused_qkv: bool = False
    linear: str = "baddbmm"
    autotune: bool = False
    persistent_reductions: bool = True
    residual: str = "float32"
    pad_vocab: int = 1

    def __post_init__(self):
        if self.attention is not None and self.attention not in ATTENTIONS:
            raise ValueError(f"attention={self.attention!r}: valid values are None, {', '.join(map(repr, ATTENTIONS))}")
        if self.linear not in ONE_MODEL_LINEARS:
            raise ValueError(f"linear={self.linear!r}: valid values are {', '.join(map(repr, ONE_MODEL_LINEARS))}")
        _check_residual(self.residual)
        _check_pad_vocab(self.pad_vocab)

    def options(self) -> dict:
        """The keyword arguments of `stacked_mlm_losses` these levers set (none for a default; `autotune` is a
        compile option, see `inductor_options`)."""
        out = {"attention": self.attention, "fused_qkv": self.fused_qkv}
        if self.linear != "baddbmm":
            out["linear"] = self.linear
        if self.residual != "float32":
            out["residual"] = self.residual
        if self.pad_vocab != 1:
            out["pad_vocab"] = self.pad_vocab
        return out


def _check_residual(residual: str) -> None:
    if residual not in RESIDUALS:
        raise ValueError(f"residual={residual!r}: valid values are {', '.join(map(repr, RESIDUALS))}")


def _check_pad_vocab(pad_vocab) -> None:
    if isinstance(pad_vocab, bool) or not isinstance(pad_vocab, int) or pad_vocab < 1:
        raise ValueError(f"pad_vocab={pad_vocab!r}: a whole number of rows >= 1 (1: no padding; 8 or 64 align the "
                         f"decoder's product)")


def inductor_options(levers: "Levers | None") -> dict | None:
    """The Inductor options a compiled stack with these levers passes to `torch.compile` (None: the defaults)."""
    if levers is None:
        return None
    options = {**({"max_autotune_gemm": True} if levers.autotune else {}),
               **({} if levers.persistent_reductions else {"triton.persistent_reductions": False})}
    return options or None


def _resolve_attention(attention: str | None, valid, config) -> str:
    """The attention implementation to run: `attention` (default `ATTENTION`), checked against `valid`; "auto" is
    math for a one-head model and SDPA otherwise."""
    attention = attention or ATTENTION
    if attention not in valid:
        raise ValueError(f"attention={attention!r}: valid values are {', '.join(map(repr, valid))}")
    return ("math" if config.num_attention_heads == 1 else "sdpa") if attention == "auto" else attention


def _fp8_rows(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(t / s in float8_e4m3fn, s as float32 [rows, 1]): one scale per row of a 2-D tensor, its largest magnitude
    mapped to FP8_MAX (a row of zeros keeps a tiny scale, so nothing divides by zero)."""
    t = t.contiguous()  # a row-major first operand, as cuBLASLt's FP8 product needs it
    scale = t.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / FP8_MAX
    return (t.float() / scale).to(torch.float8_e4m3fn), scale


def _check_fp8_shape(*sizes: int) -> None:
    bad = [n for n in sizes if n % 16]
    if bad:  # the FP8 product needs every dimension a multiple of 16 on a GPU: say so rather than fall back
        raise ValueError(f"linear='fp8' needs every dimension of its products a multiple of 16; got {sizes}")


class Fp8Linear(torch.autograd.Function):
    """y = x @ weight^T + bias with the products in FP8 (float8_e4m3fn, one scale per row of each operand:
    `torch._scaled_mm`, cuBLASLt's FP8 GEMM on Hopper), as torchao's "rowwise_with_gw_hp" float8 recipe does: the
    forward product and the input's gradient in FP8, the weight's gradient in bf16. Written here because torchao's
    float8 training converts `nn.Linear` modules, and this engine multiplies parameter tensors functionally.
    x [N, in] (any float dtype), weight [out, in], bias [out] -> y [N, out] in bf16."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        _check_fp8_shape(*x.shape, weight.shape[0])
        x8, sx = _fp8_rows(x)                         # [N, in], [N, 1]
        w8, sw = _fp8_rows(weight)                    # [out, in], [out, 1]
        y = torch._scaled_mm(x8, w8.t(), scale_a=sx, scale_b=sw.t(), out_dtype=torch.bfloat16)  # [N, out]
        ctx.save_for_backward(x, weight)
        ctx.bias_dtype = bias.dtype
        return y + bias.to(y.dtype)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad = grad.contiguous()                      # [N, out]
        g8, sg = _fp8_rows(grad)                      # [N, out], [N, 1]
        wt8, swt = _fp8_rows(weight.t().contiguous())  # [in, out], [in, 1]: a scale per input unit
        grad_x = torch._scaled_mm(g8, wt8.t(), scale_a=sg, scale_b=swt.t(), out_dtype=torch.bfloat16)  # [N, in]
        grad_w = grad.t().to(torch.bfloat16) @ x.to(torch.bfloat16)  # [out, in], in bf16
        return grad_x.to(x.dtype), grad_w.to(weight.dtype), grad.sum(0).to(ctx.bias_dtype)


def _project(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, linear: str = "baddbmm") -> torch.Tensor:
    """x [M, N, in] @ weight[m]^T + bias[m] for every model m; weight [M, out, in], bias [M, out].

    "baddbmm" starts the product from the bias broadcast over the N rows: ATen first copies the bias into the output,
    and cuBLAS then reads it back with a slower kernel. At BERT-base's shapes (H200, torch 2.11; Inductor's autotuning
    log of `python -m xlrepro.probes.base --variants autotune`) the FFN's 32,768 x 768 -> 3,072 product took 0.388 ms as
    baddbmm against 0.222 ms for a plain product of the same size in the backward. "mm" leaves the bias out of the
    batched product: one model runs `F.linear` (cuBLAS adds the bias in the product's epilogue, as in HF's model), a
    stack runs `bmm` and adds the bias afterwards, which Inductor fuses into the element-wise kernel that follows.
    The same sums; only the rounding may differ. The bench measures it (`ours-mm`, `ours-nomask-mm`). "fp8" (one
    model): `Fp8Linear`, the bench's `ours-fp8`."""
    if linear == "baddbmm":
        return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))
    if linear == FP8:  # one model: x [1, N, in]
        if x.shape[0] != 1:
            raise ValueError(f"linear='fp8' runs a stack of one model; this stack has {x.shape[0]}")
        return Fp8Linear.apply(x.squeeze(0), weight.squeeze(0), bias.squeeze(0)).unsqueeze(0)
    if x.shape[0] == 1:  # squeeze, not x[0]: a view's backward is free, select's writes a zero-filled copy
        return F.linear(x.squeeze(0), weight.squeeze(0), bias.squeeze(0)).unsqueeze(0)
    y = torch.bmm(x, weight.transpose(1, 2))
    return y + bias.unsqueeze(1).to(y.dtype)


def _linear(x: torch.Tensor, p: dict, name: str, linear: str = "baddbmm") -> torch.Tensor:
    """x [M, N, in] @ W[m]^T + b[m] for every model m; W [M, out, in], b [M, out] (`_project`)."""
    return _project(x, p[name + ".weight"], p[name + ".bias"], linear)


def _layer_norm(x: torch.Tensor, p: dict, name: str, eps: float, residual: str = "float32") -> torch.Tensor:
    """LayerNorm with per-model affine parameters; computed in float32, as autocast runs layer_norm, and returned in
    the residual stream's dtype (`RESIDUALS`: float32 unless the bfloat16 lever is on)."""
    x = F.layer_norm(x.float(), x.shape[-1:], eps=eps)
    x = x * p[name + ".weight"].float().unsqueeze(1) + p[name + ".bias"].float().unsqueeze(1)
    dtype = RESIDUALS[residual]
    return x if dtype is None else x.to(dtype)


def _embed(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Look up ids [M, ...] in each model's own table [M, V, H] (one gather over the flattened tables)."""
    m, v, h = table.shape
    offset = (torch.arange(m, device=ids.device) * v).view(m, *([1] * (ids.dim() - 1)))
    return F.embedding(ids + offset, table.reshape(m * v, h))


def embed(p: dict, input_ids, token_type_ids, position_ids, eps: float, drop: float, training: bool,
          noise: Noise | None = None, residual: str = "float32") -> torch.Tensor:
    """Embeddings of M models: [M, B, W] ids -> [M, B*W, H] after LayerNorm and dropout."""
    m, b, w = input_ids.shape
    x = _embed(p["word_embeddings.weight"], input_ids) + _embed(p["token_type_embeddings.weight"], token_type_ids)
    x = x + _embed(p["position_embeddings.weight"], position_ids)
    return dropout(_layer_norm(x.reshape(m, b * w, -1), p, "LayerNorm", eps, residual), drop, training, noise,
                   EMBEDDINGS, w)


def encoder_layer(x: torch.Tensor, p: dict, attend: torch.Tensor, heads: int, eps: float, drop_hidden: float,
                  drop_attn: float, training: bool, attention: str = "math", noise: Noise | None = None,
                  stream: torch.Tensor | int = LAYER_BASE, fused_qkv: bool = False,
                  width: int | None = None, linear: str = "baddbmm", residual: str = "float32") -> torch.Tensor:
    """One post-LN BERT layer of M models. x [M, B*W, H]; attend [M*B, 1, 1, W] boolean; p: the layer's parameters
    under their names inside the layer ("attention.self.query.weight", ...). Shapes come from the tensors, so a
    compiled copy serves every layer and every width.

    attention="math" spells attention out (as HF's eager attention), which Inductor fuses; "sdpa" calls PyTorch's
    fused kernels. On the lab corpus (about 34 pieces per sentence, head size 64) the score matrix is smaller than
    the queries; there the fused kernels took 22% of a compiled step, and the spelled-out form was faster
    (the engineering appendix, "Fused, compiled stacks"). With `noise` (each model's own dropout masks, see `noise.py`) attention is
    always spelled out: PyTorch's fused kernels draw their dropout masks from the global generator. `stream` keys
    the layer's dropout masks (a tensor, so that one compiled layer serves every layer).
    Levers (see `Levers`; all off by default): attend may also be [M*B, 1, W, W] (packed documents), None (no
    padding; then `width` = W) or a flex `BlockMask` with attention="flex"; fused_qkv: one matrix product for Q, K, V;
    linear: how the linear layers multiply (`_project`); residual: the dtype of the layer's output and of its inner
    residual stream (`RESIDUALS`)."""
    m, n, h = x.shape
    if attend is None:
        mb, w = n // width * m, width
    else:  # a boolean mask [M*B, 1, 1 or W, W] or a BlockMask (its .shape is (M*B, 1, W, W) too)
        mb, w = attend.shape[0], attend.shape[-1]

    def split_heads(t):  # [M, B*W, H] -> [M*B, heads, W, H/heads]
        return t.reshape(mb, w, heads, h // heads).transpose(1, 2)

    if fused_qkv:  # [M, N, 3H] from one product with the three weight matrices side by side ([M, 3H, H])
        weight = torch.cat([p[f"attention.self.{name}.weight"] for name in QKV], 1)
        bias = torch.cat([p[f"attention.self.{name}.bias"] for name in QKV], 1)
        qkv = _project(x, weight, bias, linear)
        q, k, v = qkv.view(mb, w, 3, heads, h // heads).permute(2, 0, 3, 1, 4)  # each [M*B, heads, W, H/heads]
    else:
        q, k, v = (split_heads(_linear(x, p, "attention.self." + name, linear)) for name in QKV)
    if attention == "flex":
        if training and drop_attn > 0:
            raise ValueError("attention='flex' has no dropout on the attention probabilities: train it with "
                             "attention_probs_dropout_prob=0 or use attention='sdpa'/'math'")
        from torch.nn.attention.flex_attention import flex_attention
        ctx = flex_attention(q, k, v, block_mask=attend)
    elif attention == "sdpa" and not (noise is not None and training and drop_attn > 0):
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=attend, dropout_p=drop_attn)
    else:  # HF's eager attention: scores, mask, float32 softmax, dropout on the probabilities
        scores = torch.matmul(q, k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
        if attend is not None:
            scores = scores.masked_fill(~attend, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        if noise is not None and training:
            probs = noise.dropout_attention(probs, drop_attn, stream, m)
        else:
            probs = F.dropout(probs, drop_attn, training)
        ctx = torch.matmul(probs, v)
    ctx = ctx.transpose(1, 2).reshape(m, n, h)
    x = _layer_norm(dropout(_linear(ctx, p, "attention.output.dense", linear), drop_hidden, training, noise, stream + 1,
                            w) + x, p, "attention.output.LayerNorm", eps, residual)
    inner = F.gelu(_linear(x, p, "intermediate.dense", linear))
    out = dropout(_linear(inner, p, "output.dense", linear), drop_hidden, training, noise, stream + 2, w)
    return _layer_norm(out + x, p, "output.LayerNorm", eps, residual)


def mlm_head_logits(x: torch.Tensor, p: dict, word_embeddings: torch.Tensor, sel_index, eps: float,
                    pad_vocab: int = 1) -> torch.Tensor:
    """[M, C, V] float32 MLM logits at the flat positions sel_index [M, C] of x [M, B*W, H]; the decoder is tied to
    the word embeddings [M, V, H]. pad_vocab: the product runs over V padded to a multiple of it (`Levers`)."""
    h = x.shape[-1]
    x = torch.gather(x, 1, sel_index.unsqueeze(-1).expand(-1, -1, h))
    x = _layer_norm(F.gelu(_linear(x, p, "transform.dense")), p, "transform.LayerNorm", eps)
    v = word_embeddings.shape[1]
    pad = -v % pad_vocab
    if not pad:
        return torch.baddbmm(p["bias"].unsqueeze(1), x, word_embeddings.transpose(1, 2)).float()
    table = F.pad(word_embeddings, (0, 0, 0, pad))  # [M, V + pad, H], zero rows: an aligned product
    bias = F.pad(p["bias"], (0, pad))               # [M, V + pad]
    return torch.baddbmm(bias.unsqueeze(1), x, table.transpose(1, 2))[..., :v].float()  # [M, C, V]


def mlm_head_loss(x: torch.Tensor, p: dict, word_embeddings: torch.Tensor, sel_index, sel_labels, eps: float,
                  pad_vocab: int = 1):
    """[M] mean cross-entropies at the masked positions; the decoder is tied to the word embeddings. A model with no
    masked position in the batch (a tiny batch can draw none) gets loss 0 and zero gradients rather than 0/0 = NaN."""
    logits = mlm_head_logits(x, p, word_embeddings, sel_index, eps, pad_vocab)
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), sel_labels.reshape(-1), ignore_index=-100,
                          reduction="none").view(x.shape[0], -1)
    return nll.sum(1) / (sel_labels != -100).sum(1).clamp_min(1)


@dataclass(frozen=True)
class Regions:
    """The three functions a step runs: eager, or each compiled once (regional compilation, see `compiled_regions`)."""
    embed: Callable = embed
    layer: Callable = encoder_layer
    head: Callable = mlm_head_loss


EAGER = Regions()


def compiled_regions(options: dict | None = None) -> Regions:
    """torch.compile each region separately: the layer is traced and compiled once and serves all 12 layers
    (PyTorch's "regional compilation" recipe), which cuts the cold compile several-fold against compiling the
    unrolled model. Dims that change from step to step (batch x width, the masked capacity) are marked dynamic.
    options: Inductor options for every region (`inductor_options`)."""
    import torch._dynamo as dynamo
    c_embed, c_layer, c_head = (torch.compile(f, options=options) for f in (embed, encoder_layer, mlm_head_loss))

    def dynamic(*pairs):
        for t, dims in pairs:
            for d in dims:
                dynamo.maybe_mark_dynamic(t, d)

    def embed_(p, ids, types, positions, *args, **kwargs):
        dynamic((ids, (1, 2)), (types, (1, 2)), (positions, (1, 2)))
        return c_embed(p, ids, types, positions, *args, **kwargs)

    def layer_(x, p, attend, *args, **kwargs):
        dynamic((x, (1,)))
        if isinstance(attend, torch.Tensor):  # None (no padding) and flex BlockMasks carry no dynamic dims
            dynamic((attend, (0, attend.dim() - 1)))
        return c_layer(x, p, attend, *args, **kwargs)

    def head_(x, p, emb, sel_index, sel_labels, eps, **kwargs):
        dynamic((x, (1,)), (sel_index, (1,)), (sel_labels, (1,)))
        return c_head(x, p, emb, sel_index, sel_labels, eps, **kwargs)

    return Regions(embed_, layer_, head_)


def _strip(params: dict, prefix: str) -> dict:
    return {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)}


def nsp_loss(x: torch.Tensor, p: dict, nsp_labels: torch.Tensor) -> torch.Tensor:
    """[M] mean next-sentence cross-entropies, as HF's `BertForPreTraining`: the pooler (dense, tanh) at each row's
    first piece ([CLS]) of x [M, B*W, H], then the two-way `cls.seq_relationship`; nsp_labels [M, B] (HF's labels:
    0 = the second segment follows the first, 1 = a random one). p: the stacked parameters under HF's names."""
    m, b = nsp_labels.shape
    first = x.reshape(m, b, -1, x.shape[-1])[:, :, 0]  # [M, B, H]
    pooled = torch.tanh(_linear(first, p, "bert.pooler.dense"))
    logits = _linear(pooled, p, "cls.seq_relationship").float()  # [M, B, 2]
    return F.cross_entropy(logits.reshape(m * b, -1), nsp_labels.reshape(-1), reduction="none").view(m, b).mean(1)


def stacked_mlm_losses(params: dict, config: BertConfig, training: bool, input_ids, attention_mask, position_ids,
                       token_type_ids, sel_index, sel_labels, nsp_labels=None, regions: Regions = EAGER,
                       attention: str | None = None, noise: Noise | None = None, fused_qkv: bool = False,
                       linear: str = "baddbmm", residual: str = "float32", pad_vocab: int = 1) -> torch.Tensor:
    """[M] losses: each model's mean cross-entropy over its own masked positions (as `MaskedPositionsLM`), plus,
    with `nsp_labels` [M, B], its mean next-sentence loss (`nsp_loss`; the models are HF `BertForPreTraining`s).

    input_ids, position_ids, token_type_ids: [M, B, W]; attention_mask: [M, B, 1, 1, W], boolean (True = attend)
    or additive (0 / large negative); sel_index, sel_labels: [M, C] flat positions and labels (-100 = padding).
    noise: each model's own dropout masks (`noise.py`); None draws them from PyTorch's generator.
    Levers (`Levers`, off by default): attention_mask may also be [M, B, 1, W, W] (packed documents, see
    `pack_documents`), None (no padding at all), or a flex `BlockMask` over M*B rows with attention="flex";
    fused_qkv computes queries, keys and values with one matrix product; linear: how the encoder's linear layers
    multiply (`_project`: "baddbmm", "mm", or "fp8" for one model); residual: the residual stream's dtype
    (`Levers.residual`); pad_vocab: the decoder's product over the vocabulary padded to a multiple of it
    (`Levers.pad_vocab`).
    """
    attention = _resolve_attention(attention, ATTENTIONS, config)
    p = {k.removeprefix(PREFIX): v for k, v in params.items()}
    m, b, w = input_ids.shape
    eps = config.layer_norm_eps
    drop_hidden = config.hidden_dropout_prob if training else 0.0
    drop_attn = config.attention_probs_dropout_prob if training else 0.0
    _check_residual(residual)
    _check_pad_vocab(pad_vocab)
    stream = {} if residual == "float32" else {"residual": residual}  # the default call stays what the grid compiled
    x = regions.embed(_strip(p, "bert.embeddings."), input_ids, token_type_ids, position_ids, eps, drop_hidden,
                      training, noise=noise, **stream)
    # one stream tensor per layer: a compiled layer sees a tensor, not a constant, and serves every layer
    streams = torch.arange(config.num_hidden_layers, device=input_ids.device) * 4 + LAYER_BASE
    if isinstance(attention_mask, torch.Tensor):
        attend = attention_mask if attention_mask.dtype == torch.bool else attention_mask > -1.0
        attend = attend.reshape(m * b, 1, attend.shape[-2], w)
    else:  # None (no padding) or a flex BlockMask
        attend = attention_mask
    if (attention == "flex") != (attend is not None and not isinstance(attend, torch.Tensor)):
        raise ValueError("attention='flex' takes a BlockMask as attention_mask (document_block_mask), and only it does")
    if linear not in ONE_MODEL_LINEARS:
        raise ValueError(f"linear={linear!r}: valid values are {', '.join(map(repr, ONE_MODEL_LINEARS))}")
    levers = {"fused_qkv": True} if fused_qkv else {}  # the default call stays exactly what the grid compiled
    if linear != "baddbmm":
        levers["linear"] = linear
    levers.update(stream)
    if attend is None:
        levers["width"] = w
    for i in range(config.num_hidden_layers):
        x = regions.layer(x, _strip(p, f"bert.encoder.layer.{i}."), attend, config.num_attention_heads, eps,
                          drop_hidden, drop_attn, training, attention, noise=noise, stream=streams[i], **levers)
    padded = {} if pad_vocab == 1 else {"pad_vocab": pad_vocab}  # the default call stays what the grid compiled
    mlm = regions.head(x, _strip(p, "cls.predictions."), p["bert.embeddings.word_embeddings.weight"], sel_index,
                       sel_labels, eps, **padded)
    return mlm if nsp_labels is None else mlm + nsp_loss(x, p, nsp_labels)


@torch.no_grad()
def stacked_hidden_states(params: dict, config: BertConfig, input_ids, attention_mask, position_ids, token_type_ids,
                          layers=(), through: int | None = None, attention: str | None = None):
    """Evaluation forward of M models (no dropout): HF's `hidden_states[l]` for each l in `layers` (0 = the embeddings'
    output, l = layer l's output), each [M, B, W, H], and the output of layer `through` (default: the largest of
    `layers`; `num_hidden_layers` for the MLM head), [M, B*W, H]. Layers above `through` are not run.

    input_ids, position_ids, token_type_ids: [M, B, W]; attention_mask: [M, B, W] boolean (True = a real piece);
    params: the stacked parameters under `stack_module_state`'s names (with or without the "mlm." prefix)."""
    n = config.num_hidden_layers
    through = max(layers, default=0) if through is None else through
    if not 0 <= through <= n or any(not 0 <= l <= through for l in layers):
        raise ValueError(f"layers {list(layers)} and through={through}: valid layers are 0..{n}, at most `through`")
    attention = _resolve_attention(attention, ("math", "sdpa", "auto"), config)
    p = {k.removeprefix(PREFIX): v for k, v in params.items()}
    m, b, w = input_ids.shape
    eps = config.layer_norm_eps
    x = embed(_strip(p, "bert.embeddings."), input_ids, token_type_ids, position_ids, eps, 0.0, False)
    attend = attention_mask.reshape(m * b, 1, 1, w)
    out = {0: x.view(m, b, w, -1)} if 0 in layers else {}
    for i in range(through):
        x = encoder_layer(x, _strip(p, f"bert.encoder.layer.{i}."), attend, config.num_attention_heads, eps, 0.0, 0.0,
                          False, attention)
        if i + 1 in layers:
            out[i + 1] = x.view(m, b, w, -1)
    return [out[l] for l in layers], x


@torch.no_grad()
def stacked_mlm_log_probs(params: dict, config: BertConfig, x: torch.Tensor, sel_index, sel_labels) -> torch.Tensor:
    """[M, C] natural-log probabilities of sel_labels [M, C] at the flat positions sel_index [M, C] of the last
    layer's output x [M, B*W, H] (positions padded with label -100 give 0)."""
    p = {k.removeprefix(PREFIX): v for k, v in params.items()}
    logits = mlm_head_logits(x, _strip(p, "cls.predictions."), p["bert.embeddings.word_embeddings.weight"], sel_index,
                             config.layer_norm_eps)  # [M, C, V]
    labels = sel_labels.clamp_min(0)
    logp = torch.log_softmax(logits, -1).gather(2, labels.unsqueeze(-1)).squeeze(-1)
    return logp.masked_fill(sel_labels == -100, 0.0)
