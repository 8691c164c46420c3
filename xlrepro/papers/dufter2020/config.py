"""Dufter & Schütze's experiments: the schema of `experiments.yaml` and the loaded chapter.

Notebooks, the CLI and the tests all go through `load_chapter`, so an experiment is defined once.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from ...config import ConfigError, ModelSize, check_keys, choose, from_dict, load_yaml

PAPER = "dufter2020"


@dataclass(frozen=True)
class Experiment:
    """One model setting of a paper (a row of its table), identified by the paper's own ID."""

    id: str = field(metadata={"help": "the paper's model ID, e.g. '0', '21b'"})
    description: str = field(metadata={"help": "the paper's row label, e.g. 'lang-pos;shift-special'"})
    size: str = field(default="small", metadata={"help": "a key of `sizes`"})
    epochs: int = field(default=100, metadata={"help": "training epochs"})
    lang_pos: bool = field(default=False, metadata={"help": "second-language positions start at max_length"})
    shift_special: bool = field(default=False, metadata={"help": "special tokens are shifted as well"})
    no_random: bool = field(default=False, metadata={"help": "masked positions never get a random token"})
    inv_order: bool = field(default=False, metadata={"help": "second-language word pieces reversed"})
    no_parallel: bool = field(default=False, metadata={"help": "no sentence in both languages"})
    untrained: bool = field(default=False, metadata={"help": "evaluate the initialised model without training"})
    curve: bool = field(default=False, metadata={"help": "evaluate checkpoints during training (Figure 6)"})
    knn_replace: bool = field(default=False, metadata={
        "help": "knn-replace (§4): masked pieces become a cross-lingual nearest neighbour with p[knn] = 0.3, "
                "(p[mask], p[id], p[rand], p[knn]) = (0.5, 0.1, 0.1, 0.3); needs the prepared neighbour table"})
    knn_k: int = field(default=1, metadata={
        "help": "knn-replace: draw one of the k nearest neighbours (1 for Fake-English, 5 on real languages)"})

    def __post_init__(self):
        if self.knn_replace and self.no_random:
            raise ConfigError(f"model {self.id}: knn_replace and no_random are separate masking schemes; set one")
        if not isinstance(self.knn_k, int) or self.knn_k < 1:
            raise ConfigError(f"model {self.id}: knn_k must be a positive integer; got {self.knn_k!r}")

    @property
    def mask_probs(self) -> tuple[float, float, float, float]:
        """(p[mask], p[id], p[rand], p[knn]) for the masked positions (§2.3 and §4 of Dufter & Schütze)."""
        if self.knn_replace:
            return (0.5, 0.1, 0.1, 0.3)
        return (0.8, 0.2, 0.0, 0.0) if self.no_random else (0.8, 0.1, 0.1, 0.0)

    def key_fields(self) -> dict:
        """The fields that enter a run's key. Fields added after the published runs (knn-replace) enter only when
        they differ from their default, so that every earlier run keeps its key."""
        d = {k: v for k, v in asdict(self).items() if k != "description"}
        for k, default in ADDED_LATER.items():
            if d[k] == default:
                del d[k]
        return d


# Experiment fields added after the published grid, with the default that leaves a run's key unchanged.
ADDED_LATER = {"knn_replace": False, "knn_k": 1}


@dataclass(frozen=True)
class TrainingConfig:
    batch_size: int = field(default=256, metadata={"help": "sentences per batch"})
    warmup_steps: int = field(default=50, metadata={"help": "linear warm-up steps"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay"})
    adam_eps: float = field(default=1e-6, metadata={"help": "AdamW epsilon"})
    max_length: int = field(default=128, metadata={"help": "word pieces per sentence, [CLS] and [SEP] included"})
    mlm_probability: float = field(default=0.15, metadata={"help": "share of positions masked"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient clipping norm"})
    eval_layers: tuple[int, ...] = field(default=(0, 8), metadata={"help": "layers the metrics are reported for"})
    curve_points: int = field(default=20, metadata={"help": "checkpoints evaluated for the curves"})
    precision: str = field(default="bf16", metadata={
        "help": "mixed precision of training, on every device: bf16 (autocast) or fp32 (part of a run's key)"})

    def __post_init__(self):
        choose("precision", self.precision, ("bf16", "fp32"))


@dataclass(frozen=True)
class ChapterFile:
    """The top level of `experiments.yaml`."""

    chapter: str = field(metadata={"help": "the paper's name"})
    seeds: tuple[int, ...] = field(metadata={"help": "the paper's seeds"})
    sizes: dict[str, dict] = field(metadata={"help": "model sizes: name -> ModelSize fields but `name`"})
    experiments: dict[str, dict] = field(metadata={"help": "model ID -> Experiment fields (`defaults` fill in)"})
    training: TrainingConfig = field(default_factory=TrainingConfig, metadata={"help": "the training recipe"})
    defaults: dict[str, Any] = field(default_factory=dict, metadata={"help": "Experiment fields every model shares",
                                                                    "keys": Experiment})
    tables: dict[str, tuple[str, ...]] = field(default_factory=dict,
                                               metadata={"help": "table name -> model IDs, in the paper's order"})
    table3: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "§5.1, Table 3 on real languages: `real_languages.Table3Config` fields (checked there)"})
    table3_pilot: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "Table 3's pretraining pilot: `real_languages.Table3Pilot` fields (checked there)"})


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


CHAPTERS = (PAPER,)


def build_chapter(spec: ChapterFile, where: str = "experiments.yaml") -> Chapter:
    """A Chapter from the parsed YAML: defaults merged into each model, every level's keys checked."""
    sizes = {k: from_dict(ModelSize, {**check_keys(f"{where}.sizes.{k}", v, ["hidden", "layers", "heads", "ffn", "lr"]),
                                      "name": k}, f"{where}.sizes.{k}") for k, v in spec.sizes.items()}
    experiments = {}
    for exp_id, exp in spec.experiments.items():
        e = from_dict(Experiment, {**spec.defaults, **(exp or {}), "id": str(exp_id)}, f"{where}.experiments.{exp_id}")
        choose(f"size of model {exp_id}", e.size, sizes)
        experiments[str(exp_id)] = e
    for table, ids in spec.tables.items():
        for i in ids:
            choose(f"model ID in table {table}", i, experiments)
    return Chapter(name=spec.chapter, experiments=experiments, sizes=sizes, training=spec.training,
                   seeds=tuple(spec.seeds), tables=dict(spec.tables))


@lru_cache(maxsize=None)
def load_chapter(name: str = PAPER) -> Chapter:
    choose("chapter", name, CHAPTERS)
    return build_chapter(load_yaml(__package__, ChapterFile), f"{name}/experiments.yaml")
