"""Fine-tuning a pretrained BERT on a sentence-pair classification task (Wu & Dredze 2019's recipe).

The recipe of their code (shijie-wu/crosslingual-nlp, see ANCHORS.md): the [CLS] vector feeds the classifier;
AdamW with beta2 0.99 and no weight decay on biases and LayerNorm weights; the learning rate rises linearly over
the first 10% of the steps and then decays linearly to 0; hyper-parameters are selected on English dev.

Two ways of using the encoder, as in their Q2 (Figure 1):
  * `freeze=n`: the embeddings and transformer layers 1..n are frozen, the rest is fine-tuned
    (`freeze=None` fine-tunes everything; `freeze=0` freezes the embeddings only);
  * `feature_based=True`: the whole encoder is frozen; a learned softmax-weighted mix of all layers' hidden states
    (embeddings included), max-pooled over the tokens, feeds the classifier. The paper puts a 2-layer BiLSTM
    between the mix and the max-pooling; we leave it out (a small classifier on frozen features, as our issue asks)
    and say so in the chapter.

    model, history = finetune(FinetuneConfig(lr=2e-4), encoder, tokenizer, train_pairs, dev_pairs, device="cuda")
    accuracy, macro_f1 = evaluate(model, encode_pairs(tokenizer, test_pairs), device="cuda")
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..config import ConfigError
from ..data.collate import pad_batch
from ..engine.finetune import FinetuneConfig, finetune_loop
from ..engine.finetune import autocast as _autocast


class PairClassifier(nn.Module):
    """A BERT encoder and a classification head on the [CLS] vector (dense + tanh + linear, like HF's pooler and
    classifier; both are new, since the encoder was pretrained with MLM only)."""

    def __init__(self, encoder: nn.Module, n_labels: int, dropout: float = 0.1, feature_based: bool = False):
        super().__init__()
        self.encoder = encoder
        hidden = encoder.config.hidden_size
        self.feature_based = feature_based
        # Language-specific positions (Dufter & Schütze's lang-pos): a language's positions start at this offset.
        self.position_offset = 0
        if feature_based:  # one weight per hidden state (embeddings + every layer), softmax-normalised
            self.mix = nn.Parameter(torch.zeros(encoder.config.num_hidden_layers + 1))
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.Tanh(), nn.Dropout(dropout),
                                  nn.Linear(hidden, n_labels))

    def forward(self, input_ids, attention_mask, token_type_ids):
        position_ids = None
        if self.position_offset:  # [1, W]
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)[None] + self.position_offset
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                           position_ids=position_ids, output_hidden_states=self.feature_based)
        if self.feature_based:
            hidden = torch.stack(out.hidden_states)  # [L+1, B, W, H]
            mixed = (torch.softmax(self.mix, 0)[:, None, None, None].to(hidden.dtype) * hidden).sum(0)
            pad = ~attention_mask.bool()[..., None]
            features = mixed.masked_fill(pad, torch.finfo(mixed.dtype).min).amax(1)  # max over real tokens
        else:
            features = out.last_hidden_state[:, 0]
        return self.head(features)


def freeze_encoder(encoder: nn.Module, freeze: int | None, feature_based: bool = False) -> None:
    """Switch off gradients of the embeddings and layers 1..freeze (all of them when feature_based)."""
    layers = encoder.encoder.layer
    if freeze is not None and freeze > len(layers):
        raise ConfigError(f"freeze={freeze} is beyond the model's depth; valid: 0..{len(layers)} or None")
    frozen = [encoder.embeddings, *layers[:freeze]] if freeze is not None else []
    if feature_based:
        frozen = [encoder]
    for module in frozen:
        for p in module.parameters():
            p.requires_grad_(False)


@dataclass
class EncodedPairs:
    """Token ids of verse pairs ([CLS] first [SEP] second [SEP]), their segment ids and labels."""
    ids: list[np.ndarray]
    types: list[np.ndarray]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


def encode_pairs(tokenizer, pairs, max_length: int = 128) -> EncodedPairs:
    """Encode a `verse_pairs` DataFrame (columns first, second, label) with a `tokenizers.Tokenizer` whose
    post-processor adds [CLS]/[SEP] (BertProcessing). Longer pairs are cut longest-first to `max_length`."""
    tok = copy.deepcopy(tokenizer)  # truncation is tokenizer state: leave the caller's unchanged
    tok.no_padding()
    tok.enable_truncation(max_length, strategy="longest_first")
    enc = tok.encode_batch(list(zip(pairs["first"].tolist(), pairs["second"].tolist())))
    return EncodedPairs([np.asarray(e.ids, np.int64) for e in enc], [np.asarray(e.type_ids, np.int64) for e in enc],
                        pairs["label"].to_numpy(np.int64))


def _batch(data: EncodedPairs, rows, device, pad_id: int = 0):
    ids, lengths = pad_batch([data.ids[i] for i in rows], pad_id)
    types, _ = pad_batch([data.types[i] for i in rows], 0)
    mask = (np.arange(ids.shape[1]) < lengths[:, None]).astype(np.int64)
    t = lambda a: torch.from_numpy(a).to(device, non_blocking=True)  # noqa: E731
    return t(ids), t(mask), t(types), t(data.labels[np.asarray(rows)])


@torch.no_grad()
def predict(model: PairClassifier, data: EncodedPairs, device="cpu", batch_size: int = 256) -> np.ndarray:
    """Predicted labels, in the order of `data` (batched by length to pad little)."""
    device = torch.device(device)
    model.eval()
    order = np.argsort([len(x) for x in data.ids], kind="stable")
    pred = np.empty(len(data), np.int64)
    for k in range(0, len(order), batch_size):
        rows = order[k:k + batch_size]
        ids, mask, types, _ = _batch(data, rows, device)
        with _autocast(device):
            pred[rows] = model(ids, mask, types).argmax(-1).cpu().numpy()
    return pred


def macro_f1(gold: np.ndarray, pred: np.ndarray, n_labels: int) -> float:
    """Mean over the labels of F1 (a label that is neither gold nor predicted counts as F1 = 0, as in sklearn's
    default). Written out here so that fine-tuning does not import scikit-learn."""
    scores = []
    for c in range(n_labels):
        tp = int(((pred == c) & (gold == c)).sum())
        denom = int((pred == c).sum() + (gold == c).sum())
        scores.append(2 * tp / denom if denom else 0.0)
    return float(np.mean(scores))


def evaluate(model: PairClassifier, data: EncodedPairs, device="cpu", n_labels: int | None = None) -> tuple[float, float]:
    """(accuracy, macro-F1) on `data`."""
    pred = predict(model, data, device)
    n_labels = n_labels or model.head[-1].out_features
    return float((pred == data.labels).mean()), macro_f1(data.labels, pred, n_labels)


def build_model(config: FinetuneConfig, encoder: nn.Module, n_labels: int) -> PairClassifier:
    """A fresh classifier around a copy of `encoder` (a BertModel, or a BertForMaskedLM whose .bert is used),
    with the config's layers frozen. The head's initial weights depend on config.seed."""
    encoder = copy.deepcopy(getattr(encoder, "bert", encoder))
    torch.manual_seed(config.seed)
    model = PairClassifier(encoder, n_labels, config.dropout, config.feature_based)
    freeze_encoder(model.encoder, config.freeze, config.feature_based)
    return model


def finetune(config: FinetuneConfig, encoder: nn.Module, train: EncodedPairs, n_labels: int, *,
             dev: EncodedPairs | None = None, device="cpu", progress: bool = True) -> tuple[PairClassifier, dict]:
    """Fine-tune a copy of `encoder` on `train` with the [CLS] head (the engine's `finetune_loop`); returns the model
    and a history (loss per epoch, dev accuracy per epoch when `dev` is given, seconds, steps)."""
    device = torch.device(device)
    model = build_model(config, encoder, n_labels).to(device)

    def batch(rows):
        ids, mask, types, labels = _batch(train, rows, device)
        return (ids, mask, types), labels

    def dev_accuracy(model, history):
        if dev is None:
            return None
        history["dev_accuracy"].append(evaluate(model, dev, device, n_labels)[0])
        return f"{history['dev_accuracy'][-1]:.3f}"

    history = finetune_loop(model, config, len(train), batch,
                            lambda logits, labels: nn.functional.cross_entropy(logits.float(), labels),
                            device=device, progress=progress, history_keys=("dev_accuracy",), on_epoch=dev_accuracy,
                            desc=f"fine-tune {config.mode} lr={config.lr:g} seed={config.seed}")
    return model.eval(), history
