"""The plan of the transfer experiments (`experiments.yaml`) and the mini-mBERT encoder each of its models names.

Read by `transfer` (the fine-tuning runs) and `published` (the published run's settings), so that neither imports
the other.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from xlrepro.config import choose

RECIPE_KEYS = ("batch_size", "epochs", "warmup", "beta2", "weight_decay", "dropout", "max_length")
PROBE_KEYS = ("train_per_language", "test_per_language")
PAPER_KEYS = ("lr_grid",)


@dataclass
class TransferPlan:
    """The schema of `experiments.yaml`."""

    train_language: str = field(metadata={"help": "the language fine-tuned on (zero-shot source)"})
    seeds: list[int] = field(metadata={"help": "fine-tuning seeds"})
    lr_grid: list[float] = field(metadata={"help": "learning rates searched on English dev (seed 0)"})
    recipe: dict = field(metadata={"help": "FinetuneConfig settings but lr and seed", "keys": RECIPE_KEYS})
    freeze_fractions: list[float] = field(metadata={"help": "frozen depth as fractions of the encoder's layers"})
    feature_lr: float = field(metadata={"help": "learning rate of the feature-based variant"})
    probe: dict = field(metadata={"help": "language-ID probe: sentences per language", "keys": PROBE_KEYS})
    models: dict[str, dict] = field(default_factory=dict, metadata={
        "help": "encoder name -> MiniMBertConfig settings (+ max_sentences_per_language)"})
    in_language_seeds: list[int] = field(default_factory=lambda: [0], metadata={
        "help": "fine-tuning seeds of the in-language upper bound (one run per language and seed)"})
    paper: dict = field(default_factory=lambda: {"lr_grid": [2.0e-5, 3.0e-5, 5.0e-5]}, metadata={
        "help": "the paper profile (mBERT on MultiNLI/XNLI, `xnli.py`): its learning-rate grid", "keys": PAPER_KEYS})

    def freeze_levels(self, depth: int) -> list[int]:
        """Frozen layer counts for a model of `depth` layers (0, 1/4, 1/2, 3/4 of it)."""
        return sorted({int(round(f * depth)) for f in self.freeze_fractions})


def load_plan(raw: dict | None = None) -> TransferPlan:
    """The plan of `xlrepro/papers/wu2019/experiments.yaml` (or of `raw`, its parsed form); unknown keys at any
    level raise ConfigError naming the valid ones."""
    from xlrepro.config import ModelSize, check_keys, from_dict, load_yaml
    from xlrepro.training.mini_mbert import MiniMBertConfig

    plan = load_yaml(__package__, TransferPlan) if raw is None else from_dict(TransferPlan, raw, "wu2019/experiments.yaml")
    valid = [f.name for f in dataclasses.fields(MiniMBertConfig)] + ["max_sentences_per_language"]
    for name, spec in plan.models.items():
        check_keys(f"wu2019/experiments.yaml.models.{name}", spec or {}, valid)
        if isinstance((spec or {}).get("size"), dict):
            check_keys(f"wu2019/experiments.yaml.models.{name}.size", spec["size"],
                       [f.name for f in dataclasses.fields(ModelSize)])
    return plan


def mini_mbert_for(plan: TransferPlan, model: str = "lab"):
    """(MiniMBertConfig, max_sentences_per_language) of a plan's encoder: "lab" (published) or "smoke" (CI)."""
    from xlrepro.config import ModelSize
    from xlrepro.training.mini_mbert import MiniMBertConfig

    choose("model", model, list(plan.models))
    spec = dict(plan.models[model] or {})
    max_sentences = spec.pop("max_sentences_per_language", None)
    if isinstance(spec.get("size"), dict):
        spec["size"] = ModelSize(**spec["size"])
    return MiniMBertConfig(**spec), max_sentences
