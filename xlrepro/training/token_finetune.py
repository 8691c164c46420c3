"""Fine-tuning a pretrained BERT on token classification (the NER stand-in): a linear head on every word's first
word piece, as BERT's NER recipe (Devlin et al. 2019, §5.3) and HF's `BertForTokenClassification` do; the other
pieces and the specials carry the label -100 and are not scored. The optimiser and schedule are the pair task's
(`finetune.FinetuneConfig`: AdamW, no decay on biases and LayerNorm, linear warm-up and decay).

K et al. put a BiLSTM-CRF on frozen BERT features for NER; we fine-tune the whole encoder with a linear head
instead (the same head as the pair task's fine-tuning, one recipe for both tasks).

    data = EncodedTokens(ids, labels)            # per verse: [CLS] pieces [SEP] ids, label ids (-100 off words)
    model, history = finetune_tokens(cfg, encoder, data, n_labels=7, device="cuda")
    tags = predict_tokens(model, data, device)   # per verse, the predicted label id of each labelled position
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..data.collate import pad_batch
from ..engine.finetune import FinetuneConfig, finetune_loop
from ..engine.finetune import autocast as _autocast

IGNORE = -100


@dataclass
class EncodedTokens:
    """Per sequence: input ids [L] and labels [L] (a label id at each word's first piece, IGNORE elsewhere)."""
    ids: list[np.ndarray]
    labels: list[np.ndarray]

    def __post_init__(self):
        if len(self.ids) != len(self.labels):
            raise ValueError(f"{len(self.ids)} id sequences but {len(self.labels)} label sequences")
        for i, (x, y) in enumerate(zip(self.ids, self.labels)):
            if len(x) != len(y):
                raise ValueError(f"sequence {i}: {len(x)} ids but {len(y)} labels")

    def __len__(self) -> int:
        return len(self.ids)


class TokenClassifier(nn.Module):
    """A BERT encoder and a dropout + linear head on every position's last hidden state."""

    def __init__(self, encoder: nn.Module, n_labels: int, dropout: float = 0.1):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(encoder.config.hidden_size, n_labels))

    def forward(self, input_ids, attention_mask):  # [B, W] -> logits [B, W, n_labels]
        return self.head(self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state)


def _batch(data: EncodedTokens, rows, device, pad_id: int):
    ids, lengths = pad_batch([data.ids[i] for i in rows], pad_id)
    labels, _ = pad_batch([data.labels[i] for i in rows], IGNORE)
    mask = (np.arange(ids.shape[1]) < lengths[:, None]).astype(np.int64)
    t = lambda a: torch.from_numpy(a).to(device, non_blocking=True)  # noqa: E731
    return t(ids), t(mask), t(labels)


def finetune_tokens(config: FinetuneConfig, encoder: nn.Module, train: EncodedTokens, n_labels: int, *,
                    pad_id: int = 0, device="cpu", progress: bool = True) -> tuple[TokenClassifier, dict]:
    """Fine-tune a copy of `encoder` (all of it: `config.freeze`/`feature_based` must be off) on `train`."""
    from ..config import ConfigError
    if config.freeze is not None or config.feature_based:
        raise ConfigError("token fine-tuning trains the whole encoder: leave freeze None and feature_based off")
    if len(train) == 0:
        raise ValueError("finetune_tokens needs at least one training sequence")
    device = torch.device(device)
    torch.manual_seed(config.seed)
    model = TokenClassifier(copy.deepcopy(getattr(encoder, "bert", encoder)), n_labels, config.dropout).to(device)

    def batch(rows):
        ids, mask, labels = _batch(train, rows, device, pad_id)
        return (ids, mask), labels

    def loss(logits, labels):  # logits [B, W, n_labels], labels [B, W]
        return nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE)

    history = finetune_loop(model, config, len(train), batch, loss, device=device, progress=progress,
                            desc=f"fine-tune tokens seed={config.seed}")
    return model.eval(), history


@torch.no_grad()
def predict_tokens(model: TokenClassifier, data: EncodedTokens, device="cpu", pad_id: int = 0,
                   batch_size: int = 256) -> list[np.ndarray]:
    """Per sequence, the predicted label ids at its labelled positions (those whose label is not IGNORE)."""
    device = torch.device(device)
    model.eval()
    out: list = [None] * len(data)
    order = np.argsort([len(x) for x in data.ids], kind="stable")
    for k in range(0, len(order), batch_size):
        rows = order[k:k + batch_size]
        ids, mask, labels = _batch(data, rows, device, pad_id)
        with _autocast(device):
            pred = model(ids, mask).argmax(-1).cpu().numpy()  # [B, W]
        keep = labels.cpu().numpy() != IGNORE
        for j, r in enumerate(rows):
            out[r] = pred[j][keep[j]]
    return out
