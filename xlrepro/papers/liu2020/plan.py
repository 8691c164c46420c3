"""The plan of the Liu et al. 2020 chapters: ``experiments.yaml`` as typed dataclasses (unknown keys are errors)."""
from __future__ import annotations

from dataclasses import dataclass, field

from xlrepro.config import load_yaml


@dataclass(frozen=True)
class StaticRun:
    model: str = field(metadata={"help": "word2vec | glove"})
    size: str = field(metadata={"help": "corpus size: small | big"})
    window: int = field(metadata={"help": "context window (Word2Vec: maximum; GloVe: symmetric)"})
    epochs: int = field(default=5, metadata={"help": "training passes"})


@dataclass(frozen=True)
class DictionaryPlan:
    min_count: int = field(metadata={"help": "occurrences of both words in the small corpus"})
    max_words: int = field(metadata={"help": "English words per language at most"})


@dataclass(frozen=True)
class BootstrapPlan:
    confidence: float = field(metadata={"help": "interval level"})
    n_resamples: int = field(metadata={"help": "bootstrap resamples (scipy.stats.bootstrap)"})


@dataclass(frozen=True)
class BertPlan:
    steps: int = field(metadata={"help": "optimizer steps of every model"})
    tokens_per_step: int = field(metadata={"help": "token slots per step (rows x window)"})
    lr: float = field(metadata={"help": "peak learning rate"})
    warmup: float = field(metadata={"help": "share of steps with rising learning rate"})
    seed: int = field(metadata={"help": "initialisation and masking seed"})
    compile: bool = field(default=False, metadata={"help": "fused, compiled engine with SDPA (GPU) instead of HF's model"})
    hidden: int = field(default=768, metadata={"help": "hidden width (the paper's: 768)"})
    layers: int = field(default=12, metadata={"help": "transformer layers (the paper's: 12)"})
    heads: int = field(default=12, metadata={"help": "attention heads (the paper's: 12)"})
    ffn: int = field(default=3072, metadata={"help": "feed-forward width (the paper's: 3072)"})

    def __post_init__(self):
        from xlrepro.config import ConfigError
        if self.hidden % self.heads:
            raise ConfigError(f"bert: hidden ({self.hidden}) must be a multiple of heads ({self.heads})")


@dataclass(frozen=True)
class ContextPlan:
    max_contexts: int = field(metadata={"help": "occurrences averaged per word at most"})
    window: int = field(metadata={"help": "pieces per reading window"})


@dataclass(frozen=True)
class MdsPlan:
    alphas: tuple[float, ...] = field(metadata={"help": "shift weights"})
    directions: tuple[str, ...] = field(metadata={"help": "'src-tgt' language pairs"})
    stand_ins: dict = field(metadata={"help": "our language -> the paper's language it stands in for"})
    sentences: int = field(metadata={"help": "test verses per direction"})


@dataclass(frozen=True)
class TransferPlan:
    seeds: tuple[int, ...] = field(metadata={"help": "fine-tuning seeds"})
    lstm_hidden: int = field(metadata={"help": "static encoder: BiLSTM width per direction"})
    epochs: int = field(metadata={"help": "static encoder: epochs"})
    lr: float = field(metadata={"help": "static encoder: Adam learning rate"})
    batch_size: int = field(metadata={"help": "static encoder and BERT fine-tuning: batch size"})
    bert_lr: float = field(default=3e-5, metadata={"help": "BERT fine-tuning: peak learning rate"})
    bert_epochs: int = field(default=2, metadata={"help": "BERT fine-tuning: epochs"})
    max_train_pairs: int = field(default=8000, metadata={"help": "English train pairs at most"})
    max_dev_pairs: int = field(default=500, metadata={"help": "dev pairs per language at most (Table 4's alpha)"})
    max_test_pairs: int = field(default=1000, metadata={"help": "test pairs per language at most"})
    max_tokens: int = field(default=64, metadata={"help": "static encoder: pieces per verse at most"})


@dataclass(frozen=True)
class EvaluatePlan:
    language_sentences: int = field(metadata={"help": "dev verses per language: half for the means, half for "
                                                      "nearest-mean language identification"})


@dataclass(frozen=True)
class Plan:
    static: tuple[StaticRun, ...] = field(metadata={"help": "the static embedding runs"})
    dictionary: DictionaryPlan = field(metadata={"help": "test dictionaries"})
    bootstrap: BootstrapPlan = field(metadata={"help": "MRR intervals"})
    bert: BertPlan = field(metadata={"help": "the four BERTs"})
    contexts: ContextPlan = field(metadata={"help": "BERT word vectors"})
    mds: MdsPlan = field(metadata={"help": "L §4"})
    transfer: TransferPlan = field(metadata={"help": "zero-shot transfer"})
    evaluate: EvaluatePlan = field(metadata={"help": "caps of the GPU evaluation"})


def load_plan() -> Plan:
    return load_yaml("xlrepro.papers.liu2020", Plan)


def static_config(run: StaticRun, **overrides):
    from .static import StaticConfig
    return StaticConfig(**{"model": run.model, "size": run.size, "window": run.window, "epochs": run.epochs,
                           **overrides})
