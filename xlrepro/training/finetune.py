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
import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..config import ConfigError
from ..data.collate import pad_batch
from ..engine.stacked import NO_DECAY  # biases and LayerNorm weights: no weight decay, as in their code


@dataclass(frozen=True)
class FinetuneConfig:
    lr: float = 2e-4
    batch_size: int = 32
    epochs: int = 3
    warmup: float = 0.1  # share of the steps with a rising learning rate
    beta2: float = 0.99
    weight_decay: float = 0.01
    dropout: float = 0.1  # of the classifier head
    freeze: int | None = None  # None: fine-tune all; n >= 0: embeddings + layers 1..n frozen
    feature_based: bool = False
    max_length: int = 128  # word pieces of a pair, [CLS] and [SEP]s included
    seed: int = 0

    def __post_init__(self):
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise ConfigError(f"lr must be a positive number; got {self.lr!r}")
        for name in ("batch_size", "epochs", "max_length"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a positive integer; got {v!r}")
        if self.freeze is not None and (not isinstance(self.freeze, int) or self.freeze < 0):
            raise ConfigError(f"freeze must be None (fine-tune all) or a layer count >= 0; got {self.freeze!r}")
        if self.feature_based and self.freeze is not None:
            raise ConfigError("feature_based freezes the whole encoder: leave freeze at None")
        if not 0 <= self.warmup < 1:
            raise ConfigError(f"warmup is a share of the steps in [0, 1); got {self.warmup}")

    @property
    def mode(self) -> str:
        """'all', 'freeze-n' or 'feature-based': the names of Wu & Dredze's Figure 1."""
        if self.feature_based:
            return "feature-based"
        return "all" if self.freeze is None else f"freeze-{self.freeze}"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


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


def _autocast(device: torch.device):
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else torch.autocast("cpu", enabled=False)


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
    default). Written out here because scikit-learn is not otherwise a dependency."""
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


def optimizer_and_schedule(config: FinetuneConfig, model: nn.Module, n_train: int, device: torch.device):
    """The fine-tuning recipe's optimiser: AdamW over the trainable parameters (no decay on biases and LayerNorm),
    fused on CUDA, with linear warm-up and decay over config.epochs passes of `n_train` examples.
    Returns (optimizer, schedule, steps per epoch, total steps)."""
    from transformers import get_linear_schedule_with_warmup

    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [p for n, p in params if not n.endswith(NO_DECAY)], "weight_decay": config.weight_decay},
              {"params": [p for n, p in params if n.endswith(NO_DECAY)], "weight_decay": 0.0}]
    optim = torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, config.beta2), fused=device.type == "cuda")
    steps_per_epoch = math.ceil(n_train / config.batch_size)
    total = steps_per_epoch * config.epochs
    schedule = get_linear_schedule_with_warmup(optim, math.ceil(config.warmup * total), total)
    return optim, schedule, steps_per_epoch, total


def finetune(config: FinetuneConfig, encoder: nn.Module, train: EncodedPairs, n_labels: int, *,
             dev: EncodedPairs | None = None, device="cpu", progress: bool = True) -> tuple[PairClassifier, dict]:
    """Fine-tune a copy of `encoder` on `train`; returns the model and a history (loss per epoch, dev accuracy per
    epoch when `dev` is given, seconds, steps). Batches are drawn by a generator seeded with config.seed."""
    from ..progress import progress as progress_bar

    device = torch.device(device)
    model = build_model(config, encoder, n_labels).to(device)
    optim, schedule, steps_per_epoch, total = optimizer_and_schedule(config, model, len(train), device)
    gen = torch.Generator().manual_seed(config.seed)
    history = {"loss": [], "dev_accuracy": [], "steps": total}
    t0 = time.time()
    bar = progress_bar(total=total, disable=not progress, desc=f"fine-tune {config.mode} lr={config.lr:g} seed={config.seed}")
    for _ in range(config.epochs):
        model.train()
        order = torch.randperm(len(train), generator=gen).numpy()
        losses = torch.zeros((), device=device)
        for k in range(0, len(order), config.batch_size):
            ids, mask, types, labels = _batch(train, order[k:k + config.batch_size], device)
            with _autocast(device):
                logits = model(ids, mask, types)
            loss = nn.functional.cross_entropy(logits.float(), labels)
            loss.backward()
            optim.step()
            schedule.step()
            optim.zero_grad(set_to_none=True)
            losses += loss.detach()
            bar.update(1)
        history["loss"].append(float(losses) / steps_per_epoch)  # one sync per epoch, not per step
        if dev is not None:
            history["dev_accuracy"].append(evaluate(model, dev, device, n_labels)[0])
            bar.set_postfix(dev=f"{history['dev_accuracy'][-1]:.3f}")
    bar.close()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    history["seconds"] = time.time() - t0
    return model.eval(), history
