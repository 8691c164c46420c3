"""The fine-tuning loop: one pretrained encoder with a task head, trained for some epochs, read top to bottom.

Every fine-tuning in the book follows one recipe (Wu & Dredze's code, shijie-wu/crosslingual-nlp): AdamW with
beta2 0.99 and no weight decay on biases and LayerNorm weights, the learning rate rising linearly over the first
10% of the steps and then decaying linearly to 0 (`optimizer_and_schedule`), bf16 autocast on a GPU, each epoch a
fresh permutation drawn by a generator seeded with `config.seed`. What differs between tasks is the head, plugged
in as three things:

    model                     nn.Module: the encoder with the head (e.g. a [CLS] classifier, a per-token tagger)
    batch(rows) -> (inputs, labels)   the padded batch of the training examples `rows`, on the device
    loss(logits, labels) -> scalar    the head's loss

    history = finetune_loop(model, config, len(train), batch, loss, device=device)

`training/finetune.py` (sentence pairs, [CLS] head) and `training/token_finetune.py` (a tag per word) are the
heads of the book's tasks.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from ..config import ConfigError
from .stacked import NO_DECAY  # biases and LayerNorm weights: no weight decay


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


def autocast(device: torch.device):
    """bf16 autocast on a GPU; nothing on the CPU."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else torch.autocast("cpu", enabled=False)


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


def finetune_loop(model: nn.Module, config: FinetuneConfig, n_train: int, batch: Callable, loss: Callable, *,
                  device="cpu", progress: bool = True, desc: str = "fine-tune", history_keys: tuple[str, ...] = (),
                  on_epoch: Callable[[nn.Module, dict], str | None] | None = None) -> dict:
    """Fine-tune `model` (in place) for config.epochs passes over `n_train` examples; returns its history.

    batch(rows) -> (inputs, labels): the examples `rows` (a slice of the epoch's permutation) as the model's
    positional inputs and the labels; loss(logits, labels): the head's scalar loss. history: "loss" (mean training
    loss of each epoch; one device-to-host read an epoch), the keys of `history_keys` (lists that `on_epoch` fills),
    "steps" and "seconds". on_epoch(model, history) runs after every epoch (e.g. a dev evaluation) and may return a
    text for the progress bar.
    """
    if n_train < 1:
        raise ValueError("fine-tuning needs at least one training example")
    from ..progress import progress as progress_bar

    device = torch.device(device)
    optim, schedule, steps_per_epoch, total = optimizer_and_schedule(config, model, n_train, device)
    gen = torch.Generator().manual_seed(config.seed)
    history = {"loss": [], **{k: [] for k in history_keys}, "steps": total}
    t0 = time.time()
    bar = progress_bar(total=total, disable=not progress, desc=desc)
    for _ in range(config.epochs):
        model.train()
        order = torch.randperm(n_train, generator=gen).numpy()  # this epoch's order of the examples
        losses = torch.zeros((), device=device)
        for k in range(0, len(order), config.batch_size):
            inputs, labels = batch(order[k:k + config.batch_size])  # e.g. ids [B, W], mask [B, W], ...
            with autocast(device):
                logits = model(*inputs)  # [B, n_labels] or [B, W, n_labels]
            step_loss = loss(logits, labels)
            step_loss.backward()
            optim.step()
            schedule.step()
            optim.zero_grad(set_to_none=True)
            losses += step_loss.detach()
            bar.update(1)
        history["loss"].append(float(losses) / steps_per_epoch)  # one sync per epoch, not per step
        if on_epoch is not None:
            shown = on_epoch(model, history)
            if shown is not None:
                bar.set_postfix(dev=shown)
    bar.close()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    history["seconds"] = time.time() - t0
    return history
