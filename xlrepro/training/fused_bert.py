"""The masked-LM loss of M stacked BERT models, written with an explicit model dimension, for torch.compile.

`ModelStack` runs HF's `BertForMaskedLM` over stacked parameters with `torch.func.vmap`. That is exact, but it does
not compile well: vmap's batching rules for `linear` and `layer_norm` cannot take a symbolic sequence length, so
every padded width (8 of them in the Dufter & Schütze corpus) recompiles, at ~45 s each on an H200 — more than
the steps save. This file is the same forward, written for a leading model dimension with batched matrix products
(`baddbmm`) and PyTorch's SDPA, so it traces once with the width as a symbol and Inductor fuses the element-wise
work (dropout, GELU, LayerNorm, residuals, casts) that bounds these memory-bound steps. No library provides a
multi-model BERT, so it is hand-written; `tests/test_fused_bert.py` checks it against HF's model, loss and gradients.

It reads the parameters under HF's names (those of `stack_module_state` over `MaskedPositionsLM`), so a stack can
switch between the two paths and still be exported as ordinary HF models. Semantics follow HF's BERT (post-LN,
exact-erf GELU, dropout after the embeddings, on attention probabilities, after each sub-layer's output projection;
MLM head: dense, GELU, LayerNorm, decoder tied to the word embeddings plus a bias).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import BertConfig

PREFIX = "mlm."


def _linear(x: torch.Tensor, p: dict, name: str) -> torch.Tensor:
    """x [M, N, in] @ W[m]^T + b[m] for every model m; W [M, out, in], b [M, out]."""
    return torch.baddbmm(p[name + ".bias"].unsqueeze(1), x, p[name + ".weight"].transpose(1, 2))


def _layer_norm(x: torch.Tensor, p: dict, name: str, eps: float) -> torch.Tensor:
    """LayerNorm with per-model affine parameters; float32, as autocast runs layer_norm."""
    x = F.layer_norm(x.float(), x.shape[-1:], eps=eps)
    return x * p[name + ".weight"].float().unsqueeze(1) + p[name + ".bias"].float().unsqueeze(1)


def _embed(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Look up ids [M, ...] in each model's own table [M, V, H] (one gather over the flattened tables)."""
    m, v, h = table.shape
    offset = (torch.arange(m, device=ids.device) * v).view(m, *([1] * (ids.dim() - 1)))
    return F.embedding(ids + offset, table.reshape(m * v, h))


def stacked_mlm_losses(params: dict, config: BertConfig, training: bool, input_ids, attention_mask, position_ids,
                       token_type_ids, sel_index, sel_labels) -> torch.Tensor:
    """[M] losses: each model's mean cross-entropy over its own masked positions (as `MaskedPositionsLM`).

    input_ids, position_ids, token_type_ids: [M, B, W]; attention_mask: [M, B, 1, 1, W], boolean (True = attend)
    or additive (0 / large negative); sel_index, sel_labels: [M, C] flat positions and labels (-100 = padding).
    """
    p = {k.removeprefix(PREFIX): v for k, v in params.items()}
    m, b, w = input_ids.shape
    h, heads, eps = config.hidden_size, config.num_attention_heads, config.layer_norm_eps
    drop_hidden = config.hidden_dropout_prob if training else 0.0
    drop_attn = config.attention_probs_dropout_prob if training else 0.0
    e = "bert.embeddings."
    x = (_embed(p[e + "word_embeddings.weight"], input_ids) + _embed(p[e + "token_type_embeddings.weight"], token_type_ids)
         + _embed(p[e + "position_embeddings.weight"], position_ids))
    x = F.dropout(_layer_norm(x.reshape(m, b * w, h), p, e + "LayerNorm", eps), drop_hidden, training)
    attend = attention_mask if attention_mask.dtype == torch.bool else attention_mask > -1.0
    attend = attend.reshape(m * b, 1, 1, w)

    def split_heads(t):  # [M, B*W, H] -> [M*B, heads, W, H/heads]
        return t.reshape(m * b, w, heads, h // heads).transpose(1, 2)

    for i in range(config.num_hidden_layers):
        layer = f"bert.encoder.layer.{i}."
        a = layer + "attention."
        q, k, v = (split_heads(_linear(x, p, a + "self." + n)) for n in ("query", "key", "value"))
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=attend, dropout_p=drop_attn)
        ctx = ctx.transpose(1, 2).reshape(m, b * w, h)
        x = _layer_norm(F.dropout(_linear(ctx, p, a + "output.dense"), drop_hidden, training) + x, p,
                        a + "output.LayerNorm", eps)
        inner = F.gelu(_linear(x, p, layer + "intermediate.dense"))
        x = _layer_norm(F.dropout(_linear(inner, p, layer + "output.dense"), drop_hidden, training) + x, p,
                        layer + "output.LayerNorm", eps)
    # MLM head at the masked positions only
    x = torch.gather(x, 1, sel_index.unsqueeze(-1).expand(-1, -1, h))
    t = "cls.predictions.transform."
    x = _layer_norm(F.gelu(_linear(x, p, t + "dense")), p, t + "LayerNorm", eps)
    logits = torch.baddbmm(p["cls.predictions.bias"].unsqueeze(1), x, p[e + "word_embeddings.weight"].transpose(1, 2))
    logits = logits.float()
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), sel_labels.reshape(-1), ignore_index=-100,
                          reduction="none").view(m, -1)
    valid = (sel_labels != -100).sum(1)
    return nll.sum(1) / valid
