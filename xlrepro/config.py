"""Declarative experiment configuration: one YAML file per paper, read into dataclasses.

Notebooks, the CLI and the tests all go through `load_chapter`, so an experiment is defined once.
Every check here fails with a message that names the valid choices.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Iterable, Sequence

import yaml

PROFILES = ("lab", "paper")


class ConfigError(ValueError):
    """A bad parameter: the message says which values are valid."""


def choose(kind: str, value: Any, valid: Iterable[Any]) -> Any:
    """Return `value` if it is one of `valid`, else raise a ConfigError listing them."""
    valid = list(valid)
    if value not in valid:
        raise ConfigError(f"unknown {kind} {value!r}; valid choices: {', '.join(map(str, valid))}")
    return value


def check_profile(profile: str) -> str:
    return choose("profile", profile, PROFILES)


def check_seeds(seeds: Any) -> list[int]:
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds:
        raise ConfigError(f"seeds must be a non-empty list of integers, e.g. [0, 42]; got {seeds!r}")
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise ConfigError(f"seeds must be non-negative integers; got {seeds!r}")
    return list(seeds)


@dataclass(frozen=True)
class ModelSize:
    name: str
    hidden: int
    layers: int
    heads: int
    ffn: int
    lr: float


@dataclass(frozen=True)
class Experiment:
    """One model setting of a paper (a row of its table), identified by the paper's own ID."""

    id: str
    description: str
    size: str = "small"
    epochs: int = 100
    lang_pos: bool = False
    shift_special: bool = False
    no_random: bool = False
    inv_order: bool = False
    no_parallel: bool = False
    untrained: bool = False
    curve: bool = False

    @property
    def mask_probs(self) -> tuple[float, float, float]:
        """(p[mask], p[id], p[rand]) for the masked positions (§2.3 of Dufter & Schütze)."""
        return (0.8, 0.2, 0.0) if self.no_random else (0.8, 0.1, 0.1)


@dataclass(frozen=True)
class TrainingConfig:
    batch_size: int = 256
    warmup_steps: int = 50
    weight_decay: float = 0.01
    adam_eps: float = 1e-6
    max_length: int = 128
    mlm_probability: float = 0.15
    max_grad_norm: float = 1.0
    vocab_per_language: int = 2048
    eval_layers: tuple[int, ...] = (0, 8)
    curve_points: int = 20
    precision: str = "bf16"  # mixed precision of training on every device ("bf16" autocast or "fp32")

    def __post_init__(self):
        choose("precision", self.precision, ("bf16", "fp32"))


@dataclass(frozen=True)
class Chapter:
    name: str
    experiments: dict[str, Experiment]
    sizes: dict[str, ModelSize]
    training: TrainingConfig
    seeds: tuple[int, ...]
    tables: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def experiment(self, exp_id: Any) -> Experiment:
        return self.experiments[choose("model ID", str(exp_id), self.experiments)]

    def table(self, name: str) -> list[Experiment]:
        return [self.experiments[i] for i in self.tables[choose("table", name, self.tables)]]

    def size(self, exp: Experiment) -> ModelSize:
        return self.sizes[exp.size]

    def check_layer(self, exp: Experiment, layer: int) -> int:
        depth = self.size(exp).layers
        if not isinstance(layer, int) or not 0 <= layer <= depth:
            raise ConfigError(f"layer {layer!r} is beyond model {exp.id}: valid layers are 0..{depth}")
        return layer


CHAPTERS = ("dufter2020",)


@lru_cache(maxsize=None)
def load_chapter(name: str = "dufter2020") -> Chapter:
    choose("chapter", name, CHAPTERS)
    text = resources.files("xlrepro.experiments").joinpath(f"{name}.yaml").read_text()
    raw = yaml.safe_load(text)
    defaults = raw.get("defaults", {})
    known = {f.name for f in dataclasses.fields(Experiment)}
    experiments = {}
    for exp_id, spec in raw["experiments"].items():
        merged = {**defaults, **spec}
        unknown = set(merged) - known
        if unknown:
            raise ConfigError(f"{name}.yaml, model {exp_id}: unknown fields {sorted(unknown)}; valid: {sorted(known)}")
        experiments[str(exp_id)] = Experiment(id=str(exp_id), **merged)
    sizes = {k: ModelSize(name=k, **v) for k, v in raw["sizes"].items()}
    train = dict(raw.get("training", {}))
    if "eval_layers" in train:
        train["eval_layers"] = tuple(train["eval_layers"])
    tables = {k: tuple(str(i) for i in v) for k, v in raw.get("tables", {}).items()}
    return Chapter(name=name, experiments=experiments, sizes=sizes, training=TrainingConfig(**train),
                   seeds=tuple(raw["seeds"]), tables=tables)
