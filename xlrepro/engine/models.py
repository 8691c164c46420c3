"""BERT models of the lab: HF `BertForMaskedLM` (MLM), or `BertForPreTraining` (MLM and NSP), sized by the chapter's
declared sizes."""
from __future__ import annotations

import torch
from transformers import BertConfig, BertForMaskedLM, BertForPreTraining

from ..config import ModelSize

# Room for language-specific positions: the second language's are max_length..2*max_length-1. Models without lang-pos never use the
# upper half, which therefore stays at its initial values (weight decay only shrinks it) and changes no output.
POSITION_SLOTS = 256


def bert_config(size: ModelSize, vocab_size: int, attn: str = "sdpa", positions: int = POSITION_SLOTS) -> BertConfig:
    return BertConfig(vocab_size=vocab_size, hidden_size=size.hidden, num_hidden_layers=size.layers,
                      num_attention_heads=size.heads, intermediate_size=size.ffn,
                      max_position_embeddings=positions, type_vocab_size=2, attn_implementation=attn)


def init_model(size: ModelSize, vocab_size: int, seed: int, attn: str = "sdpa",
               positions: int = POSITION_SLOTS, nsp: bool = False) -> BertForMaskedLM | BertForPreTraining:
    """A freshly initialised model; the seed fixes the initial weights (HF's BERT initialisation). nsp: HF's
    `BertForPreTraining` (the same encoder and MLM head, plus the pooler and the next-sentence head)."""
    torch.manual_seed(seed)
    return (BertForPreTraining if nsp else BertForMaskedLM)(bert_config(size, vocab_size, attn, positions))


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def device_name(device) -> str:
    """The accelerator's name for reports ("NVIDIA H200"), or "cpu"."""
    device = torch.device(device)
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
