"""The typed plan of K et al. (2020): experiments.yaml -> `Plan`, every experiment resolved to one `Cell` recipe.

An experiment names its pre-training languages (source first; "enfake" is Fake-English), the language it is
fine-tuned on, the languages it is tested on, and what it changes against the base B-BERT: word-order
permutation, a unigram-frequency target corpus, NSP, language-id separators, tokenization, or the shape (layers,
heads, and either an explicit hidden width or a share of the base's parameter count, solved for the width).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

from xlrepro.config import ConfigError, ModelSize, check_seeds, choose, load_yaml

from .data import FAKE, TEXTS, TOKENIZATIONS, check_corpus_language

FAKE_WAYS = ("unicode", "id")
# the XNLI stand-in (xlrepro.tasks.sections), the NER stand-in (xlrepro.tasks.entities) and Table 11's pair task that
# needs both verses (xlrepro.tasks.adjacency)
TASKS = ("sections", "ner", "adjacency")
PROFILES = ("lab", "alltext", "alltext2x", "alltext4x", "alltext8x", "smoke")


@dataclass(frozen=True)
class Experiment:
    pretrain: tuple[str, ...] = field(metadata={"help": "pre-training languages, source first (enfake = Fake-English)"})
    finetune: str = field(metadata={"help": "the language fine-tuned on (a pre-training language)"})
    test: tuple[str, ...] = field(metadata={"help": "languages tested zero-shot (pre-training languages)"})
    table: tuple[str, ...] = field(default=(), metadata={"help": "the paper's tables this experiment serves"})
    fake: str = field(default="unicode", metadata={"help": "Fake-English by Unicode shift (paper) or by id shift"})
    permute: float = field(default=0.0, metadata={"help": "share p: int((L-1)p) transpositions per line, all sides"})
    unigram: bool = field(default=False, metadata={"help": "target corpora sampled from their unigram distribution"})
    nsp: bool = field(default=False, metadata={"help": "next-sentence prediction on (50% random second lines)"})
    single: bool = field(default=False, metadata={
        "help": "no NSP, but trained as the NSP cells are (HF's BertForPreTraining, one seed at a time): a control "
                "that tells that trainer from the NSP objective"})
    langid: bool = field(default=False, metadata={"help": "[SEP-<lang>] separators instead of [SEP]"})
    tokenization: str = field(default="wordpiece", metadata={"help": "wordpiece, char or word"})
    layers: int | None = field(default=None, metadata={"help": "depth (None: the base's)"})
    heads: int | None = field(default=None, metadata={"help": "attention heads (None: the base's)"})
    hidden: int | None = field(default=None, metadata={"help": "hidden width (None: the base's or solved)"})
    parameters: float | None = field(default=None, metadata={
        "help": "share of the base's parameter count; the hidden width (a multiple of heads) is solved for it"})
    tasks: tuple[str, ...] = field(default=("sections",), metadata={
        "help": "fine-tuning tasks: sections (XNLI stand-in), ner (NER stand-in: English and Fake-English only), "
                "adjacency (does the second verse follow the first: Table 11's stand-in, which one verse alone "
                "cannot decide)"})
    linear: str = field(default="", metadata={
        "help": "how the encoder's linear layers multiply in pre-training (`xlrepro.engine.fused_bert.Levers`): "
                "empty for the stacks' default (one batched product from the bias), mm, or fp8 (FP8 products, a "
                "stack of one model); in the run key only when set, and such a cell trains alone in its stack. "
                "For the training check of the engine's FP8 switch (bench.py states its criterion)"})
    retrain: int = field(default=0, metadata={
        "help": "a re-run of the same recipe with the same seeds (the same data order, initialisation and masks; "
                "GPU nondeterminism aside), keyed apart from the cell it repeats (in the run key only when set): "
                "Table 11's adjacency cells retrain the base B-BERT, whose weights were not kept. Its results are "
                "never pooled with the cell's as more seeds"})

    def __post_init__(self):
        for task in self.tasks:
            choose("task", task, TASKS)
        if self.linear:
            from xlrepro.engine.fused_bert import ONE_MODEL_LINEARS
            choose("linear", self.linear, [x for x in ONE_MODEL_LINEARS if x != "baddbmm"])
        if not isinstance(self.retrain, int) or isinstance(self.retrain, bool) or self.retrain < 0:
            raise ConfigError(f"retrain is a count of re-runs, an integer >= 0; got {self.retrain!r}")
        if "sections" not in self.tasks:
            raise ConfigError(f"tasks must include sections (the cell's own results); got {list(self.tasks)}")
        if "ner" in self.tasks:
            from xlrepro.tasks.entities import LABELLED_LANGUAGES
            choose("fine-tuning language of the ner task", self.finetune, LABELLED_LANGUAGES)
        if not self.pretrain:
            raise ConfigError("pretrain needs at least one language")
        for lang in self.pretrain:
            check_corpus_language(lang)
        if len(set(self.pretrain)) != len(self.pretrain):
            raise ConfigError(f"pretrain languages repeat: {self.pretrain}")
        choose("fine-tuning language", self.finetune, self.pretrain)
        for lang in self.test:
            choose("test language", lang, self.pretrain)
        choose("fake", self.fake, FAKE_WAYS)
        choose("tokenization", self.tokenization, TOKENIZATIONS)
        if not 0 <= self.permute <= 1:
            raise ConfigError(f"permute is a share in [0, 1]; got {self.permute}")
        if self.fake == "id" and (FAKE not in self.pretrain or "en" in self.pretrain):
            raise ConfigError("fake: id shifts English ids: it needs enfake and no en among the pretrain languages")
        if self.hidden is not None and self.parameters is not None:
            raise ConfigError("give hidden or parameters, not both")
        if self.nsp and self.single:
            raise ConfigError("nsp cells train one seed at a time already: single is for the no-NSP control; drop it")

    @property
    def alone(self) -> bool:
        """Trained one seed at a time by HF's BertForPreTraining (NSP cells and their control), not in a stack, at a
        profile without `Pretrain.nsp_stack` (`bbert.Cell.alone` says it for a cell)."""
        return self.nsp or self.single


@dataclass(frozen=True)
class Pretrain:
    steps: int = field(metadata={"help": "optimiser steps per model"})
    batch_size: int = field(metadata={"help": "sentence pairs per step"})
    max_length: int = field(default=128, metadata={"help": "word pieces of a pair, specials included"})
    warmup: float = field(default=0.01, metadata={"help": "share of the steps with a rising learning rate"})
    mlm_probability: float = field(default=0.15, metadata={"help": "share of words masked (whole-word masking)"})
    alpha: float = field(default=0.7, metadata={"help": "language sampling exponent (their 0.7)"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay"})
    vocab_size: int = field(default=10_000, metadata={"help": "word pieces of a joint vocabulary (their script's 10k)"})
    word_vocab_size: int = field(default=20_000, metadata={"help": "words of a word-level vocabulary"})
    max_lines: int | None = field(default=None, metadata={"help": "lines per language (None: all; smoke runs)"})
    embedding_rows: int | None = field(default=None, metadata={
        "help": "rows of every model's word-embedding table and output layer: the vocabulary padded with rows that no "
                "input uses (as BERT's [unused] pieces), so that cells with different vocabularies share a stack "
                "(None: the vocabulary's own size)"})
    text: str = field(default="bible", metadata={
        "help": "what each side reads from its chapter half: bible (one edition per language) or all (every Bible "
                "edition of the language and its LibreOffice help paragraphs, `data.corpus`)"})
    length_bins: int = field(default=1, metadata={
        "help": "length-grouped batches: each step draws its pairs from one of this many length quantiles of every "
                "language (the quantile shared by all models at a step), so a stack pads little (1: no grouping)"})
    snapshots: tuple[float, ...] = field(default=(), metadata={
        "help": "shares of the steps (each in (0, 1)) at which every model's weights are also saved and evaluated "
                "zero-shot like the final model, for the learning curve of transfer (changes no number: the training "
                "is the same; left out of the run key)"})
    nsp_stack: bool = field(default=False, metadata={
        "help": "NSP cells (and their control) pre-train in the fused stack, NSP head included, beside the other "
                "NSP cells of their shape, rather than one seed at a time with HF's BertForPreTraining (False); "
                "the base cells then share their trainer with NSP, so the control repeats the base. Changes "
                "the NSP cells' numbers (other masks, dropout and kernels): in their run key when set"})

    def __post_init__(self):
        if self.embedding_rows is not None and self.embedding_rows < 1:
            raise ConfigError(f"embedding_rows must be a positive row count or None; got {self.embedding_rows}")
        if self.length_bins < 1:
            raise ConfigError(f"length_bins must be >= 1 (1: no grouping); got {self.length_bins}")
        if self.text not in TEXTS:
            raise ConfigError(f"text must be one of {', '.join(TEXTS)}; got {self.text!r}")
        if any(not 0 < f < 1 for f in self.snapshots) or list(self.snapshots) != sorted(set(self.snapshots)):
            raise ConfigError(f"snapshots must be increasing shares of the steps, each in (0, 1); got {self.snapshots}")

    @property
    def snapshot_steps(self) -> tuple[int, ...]:
        """The steps after which the snapshots are saved: round(share x steps), those in 1 .. steps - 1, once each."""
        return tuple(sorted({n for f in self.snapshots if 0 < (n := round(f * self.steps)) < self.steps}))


@dataclass(frozen=True)
class Finetune:
    lr: float = field(metadata={"help": "peak learning rate"})
    epochs: int = field(metadata={"help": "passes over the source train pairs"})
    batch_size: int = field(default=32, metadata={"help": "pairs per step (theirs: 32)"})
    max_train_pairs: int | None = field(default=None, metadata={"help": "None: every train pair"})
    max_test_pairs: int | None = field(default=None, metadata={"help": "None: every parallel test pair"})


@dataclass(frozen=True)
class Profile:
    size: ModelSize = field(metadata={"help": "the base B-BERT"})
    pretrain: Pretrain = field(metadata={"help": "pre-training recipe"})
    finetune: Finetune = field(metadata={"help": "fine-tuning recipe (the section task)"})
    # Optional[...], not "Finetune | None": from_dict converts typing.Union members, not types.UnionType ones
    ner: Optional[Finetune] = field(default=None, metadata={
        "help": "fine-tuning recipe of the NER stand-in (max_*_pairs count verses); None: the section task's"})
    left_out: dict[str, str] = field(default_factory=dict, metadata={
        "help": "part -> why: parts this profile does not run. Their experiments (those no other part needs) are "
                "left out of its runs and chapters, and a claim that reads one is inconclusive (not_run)"})


@dataclass(frozen=True)
class Plan:
    seeds: tuple[int, ...] = field(metadata={"help": "seeds of every cell (pre-training and fine-tuning)"})
    half_seed: int = field(metadata={"help": "seed of the source/target chapter halves"})
    profiles: dict[str, Profile] = field(metadata={"help": "lab (the GPU run), alltext (its pilot on all the offline text), alltext2x, alltext4x and alltext8x (the same with twice, four and eight times the steps) and smoke (CI)", "keys": list(PROFILES)})
    experiments: dict[str, Experiment] = field(metadata={"help": "experiment name -> declaration"})
    parts: dict[str, tuple[str, ...]] = field(metadata={"help": "part name -> experiments, in order"})

    def __post_init__(self):
        check_seeds(list(self.seeds))
        for part, names in self.parts.items():
            for name in names:
                choose(f"experiment of part {part}", name, self.experiments)
        for profile, p in self.profiles.items():
            for part in p.left_out:
                choose(f"part left out at profile {profile}", part, self.parts)


@lru_cache(maxsize=1)
def load_plan() -> Plan:
    return load_yaml(__package__, Plan)


def check_part(plan: Plan, part: str) -> str:
    """A part name, "all", or part names joined by commas ("t4,t5,t6": their cells run as one plan, so cells of one
    shape from several tables share stacks). Each name is checked."""
    names = part.split(",")
    if len(names) > 1 and "all" in names:
        raise ConfigError(f"'all' cannot be combined with other parts; got {part!r}")
    for name in names:
        choose("part", name, [*plan.parts, "all"])
    return part


def experiments_of(plan: Plan, part: str, profile: str | None = None) -> list[str]:
    """The experiments of `part` (see `check_part`), in order, each once. With `profile`, those it runs: "all"
    drops the parts it leaves out (`Profile.left_out`), and naming such a part is an error that gives the reason."""
    check_part(plan, part)
    names = list(plan.parts) if part == "all" else part.split(",")
    if profile is not None:
        skipped = plan.profiles[profile].left_out
        named = [p for p in names if p in skipped] if part != "all" else []
        if named:
            raise ConfigError(f"profile {profile} does not run part {', '.join(named)} ("
                              + "; ".join(f"{p}: {skipped[p]}" for p in named) + "); its parts: "
                              + ", ".join(p for p in plan.parts if p not in skipped))
        names = [p for p in names if p not in skipped]
    return list(dict.fromkeys(n for p in names for n in plan.parts[p]))


def not_run(plan: Plan, parts, profile: str) -> dict[str, str]:
    """experiment -> why, for the experiments of `parts` that `profile` does not run: those of its left-out parts
    (`Profile.left_out`) that none of the other parts needs."""
    skipped = plan.profiles[profile].left_out
    kept = {n for p in parts if p not in skipped for n in plan.parts[p]}
    return {n: f"part {p} is left out at profile {profile}: {skipped[p]}"
            for p in parts if p in skipped for n in plan.parts[p] if n not in kept}


# ----------------------------------------------------------------------------------------------- shapes
def parameter_count(hidden: int, layers: int, heads: int, vocab_size: int, positions: int = 128) -> int:
    """Parameters of HF's BertForMaskedLM of that shape (FFN 4x hidden, tied decoder, no pooler), in closed form
    (instantiating the model in a search is slow; tests/test_k2020.py checks the formula against HF's count).
    `heads` does not change the count; it is an argument so that every shape is named the same way."""
    h, f, v = hidden, 4 * hidden, vocab_size
    embeddings = v * h + positions * h + 2 * h + 2 * h  # words, positions, 2 token types, LayerNorm
    layer = 4 * (h * h + h) + 2 * h + (h * f + f) + (f * h + h) + 2 * h  # q k v o, LN, FFN in/out, LN
    head = h * h + h + 2 * h + v  # transform, LayerNorm, decoder bias (its weight is the embeddings')
    return embeddings + layers * layer + head


def check_shape(hidden: int, layers: int, heads: int) -> None:
    if layers < 1 or heads < 1 or hidden < 1:
        raise ConfigError(f"layers, heads and hidden must be positive; got {layers}, {heads}, {hidden}")
    if hidden % heads:
        valid = [h for h in range(1, hidden + 1) if hidden % h == 0]
        raise ConfigError(f"{heads} heads do not divide hidden {hidden}; valid head counts: "
                          f"{', '.join(map(str, valid))}")


def solve_hidden(target: float, layers: int, heads: int, vocab_size: int, positions: int = 128) -> int:
    """The multiple of `heads` whose parameter count is closest to `target` (counts grow with the width)."""
    lo, hi = 1, 1
    while parameter_count(hi * heads, layers, heads, vocab_size, positions) < target:
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # binary search for the first multiple at or above the target
        mid = (lo + hi) // 2
        if parameter_count(mid * heads, layers, heads, vocab_size, positions) < target:
            lo = mid
        else:
            hi = mid
    return min((lo * heads, hi * heads),
               key=lambda h: abs(parameter_count(h, layers, heads, vocab_size, positions) - target))


def model_size(profile: Profile, exp: Experiment) -> ModelSize:
    """The experiment's shape: the base's, with its layers/heads, and its hidden width given or solved."""
    base = profile.size
    layers = exp.layers or base.layers
    heads = exp.heads or base.heads
    vocab, positions = profile.pretrain.vocab_size, profile.pretrain.max_length
    if exp.hidden is not None:
        hidden = exp.hidden
    elif exp.parameters is not None or (layers, heads) != (base.layers, base.heads):
        share = 1.0 if exp.parameters is None else exp.parameters
        target = share * parameter_count(base.hidden, base.layers, base.heads, vocab, positions)
        hidden = solve_hidden(target, layers, heads, vocab, positions)
    else:
        hidden = base.hidden
    check_shape(hidden, layers, heads)
    return dataclasses.replace(base, name=f"L{layers}H{heads}d{hidden}", hidden=hidden, layers=layers, heads=heads,
                               ffn=4 * hidden)


def shape_table(plan: Plan, profile: str = "lab"):
    """One row per experiment: its shape, parameters (M) and share of the base's."""
    import pandas as pd
    prof = plan.profiles[choose("profile", profile, plan.profiles)]
    p = prof.pretrain
    base = parameter_count(prof.size.hidden, prof.size.layers, prof.size.heads, p.vocab_size, p.max_length)
    rows = []
    for name, exp in plan.experiments.items():
        s = model_size(prof, exp)
        n = parameter_count(s.hidden, s.layers, s.heads, p.vocab_size, p.max_length)
        rows.append({"experiment": name, "layers": s.layers, "heads": s.heads, "hidden": s.hidden,
                     "parameters_m": round(n / 1e6, 2), "share_of_base": round(n / base, 4)})
    return pd.DataFrame(rows)


def stack_groups(plan: Plan, names, profile: str = "lab") -> dict[str, list[str]]:
    """Experiments grouped by model shape (each group one stack per experiment: data differ, shapes match)."""
    prof = plan.profiles[profile]
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(model_size(prof, plan.experiments[n]).name, []).append(n)
    return groups


# ----------------------------------------------------------------------------------------------- the GPU plan
# Speeds the project measured (H200, fused and compiled stacks, CUDA graphs, batch 128 x ~40 pieces): BERT-small
# (256 wide, 4 layers) ~3 ms per model-step in a stack of 16; BERT-base (768 x 12) ~24 ms (20-29). `step_ms` turns
# them into achieved FLOP/s, a power law in the width through the two points (narrower models run further below
# peak: they are bound by memory and launches), and applies it to a cell's FLOPs per step.
# (The pilot measured 19.2 ms per model-step for each of two stacks of six 192 x 12 B-BERTs side by side on one H200,
# about 9.6 GPU-ms per model-step, against the 14.2 ms these references give: the estimate is kept, on the safe side.)
REFERENCE_STEPS = ({"hidden": 256, "layers": 4, "width": 40, "rows": 4096, "ms": 3.0},
                   {"hidden": 768, "layers": 12, "width": 40, "rows": 4096, "ms": 24.0})
# Mean padded width of a step (pieces per pair, specials included), measured on the CPU from the lab pair tables:
# 15 models x 128 pairs, 8 length bins (without the bins every step pads to 128).
PADDED_WIDTH = {"wordpiece": 76, "word": 72, "char": 128}
# memory-bound steps: H100 has 3.35 TB/s against the H200's 4.8. Measured on the K et al. runs (H200s, then H100s;
# median ms per model-step of each shape timed on both): H100/H200 ratios 0.7 to 2.0 by shape, median 1.27. The
# spread is mostly what shared the GPU (stack sizes, evaluations beside), not the card.
H100_SLOWDOWN = 1.3
GPUS = ("H100", "H200")  # the cards the estimates know
# NSP cells: HF's BertForPreTraining in bf16, one model at a time. Measured on 4 x H200 (beside two training and
# four evaluation workers per GPU): 49.3-54.0 ms per step, 197-216 s per model; it was 15 ms by assumption before.
NSP_STEP_MS = 52.0
# GPU seconds of one (cell, seed)'s fine-tuning. The pilot (H200, two evaluations side by side, the GPU 12-14 % busy)
# measured 78-85 s for the section task and 73-84 s for the NER stand-in; Tables 3-6's run (4 x H200, six evaluations
# per GPU beside two training workers) 13-149 s (mean 59) and 58-84 s (mean 69) of wall time for the fine-tuning
# alone, about a sixth of that in GPU time. Counted here: 20 and 15 GPU-seconds, evaluation included (on the safe side).
FINETUNE_SECONDS = 20.0  # one fine-tuning + evaluation of the section task
NER_FINETUNE_SECONDS = 15.0  # one fine-tuning + evaluation of the NER stand-in
# the adjacency task's fine-tuning against the section task's until measured: twice its pairs (each positive and its
# negative)
ADJACENCY_COST = 2
STACK_OVERHEAD_SECONDS = 45.0  # per stack: compile (15-30 s), a graph capture per width, tables onto the GPU


def step_flops(hidden: int, layers: int, width: int, rows: int, batch: int = 128, mlm: float = 0.15) -> float:
    """Forward + backward FLOPs of one model-step: 3 x forward; per token and layer 24 h^2 (Q, K, V, O and the 4h FFN)
    + 4 W h (attention scores and mix); the MLM head (transform and the `rows`-way output) at the masked tokens."""
    per_token = layers * (24 * hidden ** 2 + 4 * width * hidden) + mlm * (2 * hidden ** 2 + 2 * hidden * rows)
    return 3 * batch * width * per_token


def step_ms(hidden: int, layers: int, width: int, rows: int, batch: int = 128, gpu: str = "H200") -> float:
    """Estimated ms per model-step in a compiled stack (see REFERENCE_STEPS)."""
    a, b = ({**r, "rate": step_flops(r["hidden"], r["layers"], r["width"], r["rows"]) / r["ms"]}
            for r in REFERENCE_STEPS)
    k = math.log(b["rate"] / a["rate"]) / math.log(b["hidden"] / a["hidden"])
    rate = a["rate"] * (hidden / a["hidden"]) ** k
    return step_flops(hidden, layers, width, rows, batch) / rate * (H100_SLOWDOWN if gpu == "H100" else 1.0)


# seconds: no evaluation starts with less than this left of the time limit (an evaluation, both tasks, is not
# resumable; measured 166-188 s with two side by side on one H200, 135-150 s with six side by side, 217-235 s for
# a base model with four evaluations and two training stacks on one H100)
EVAL_MARGIN = 240
# Once fine-tuning has been measured, an evaluation is estimated cell by cell (`stacks.eval_seconds`): the median
# fine-tuning of each of its tasks x EVAL_SLACK, plus EVAL_TESTING_SECONDS (data and testing). On four H200s a base
# model's two tasks took 146-170 s against 140-180 s of fine-tuning; the slack covers an H100 and busier neighbours.
EVAL_SLACK = 1.25
EVAL_TESTING_SECONDS = 20
# A cell not yet evaluated takes the median of every cell measured (mostly 12 layers) scaled to its depth L as
# FINETUNE_FIXED_SHARE + (1 - FINETUNE_FIXED_SHARE) * L / 12: the section task's medians measured 13 s at 1 layer,
# 36 s at 4, 44 s at 6, about 72 s at 12 and 147 s at 24.
FINETUNE_FIXED_SHARE = 0.1


def gpu_plan(plan: Plan, parts=None, profile: str = "lab", gpu: str = "H100", gpus: int = 4,
             workers_per_gpu: int = 2) -> "pd.DataFrame":
    """GPU minutes per part, in the given order, each cell counted in the first part that needs it: pre-training
    (stacked cells at `step_ms`, NSP cells at NSP_STEP_MS, a fixed cost per stack) and fine-tuning (every seed; the
    NER stand-in's and the adjacency task's, at twice the section task's pairs, too where declared),
    with the wall minutes on `gpus` GPUs. Estimates, to be replaced by the timings the first GPU call records."""
    import pandas as pd

    from xlrepro.engine.planner import share_slots
    prof = plan.profiles[profile]
    p = prof.pretrain
    rows_ = p.embedding_rows or p.vocab_size
    parts = list(parts or plan.parts)
    seen: set = set()
    out, total = [], 0.0
    for part in parts:
        names = [n for n in experiments_of(plan, part) if n not in seen]
        seen |= set(names)
        shapes: dict = {}
        pre = nsp = 0.0
        for n in names:
            exp, size = plan.experiments[n], model_size(prof, plan.experiments[n])
            if exp.alone and not p.nsp_stack:
                nsp += len(plan.seeds) * p.steps * NSP_STEP_MS / 1000
                continue
            ms = step_ms(size.hidden, size.layers, PADDED_WIDTH[exp.tokenization], rows_, p.batch_size, gpu)
            pre += len(plan.seeds) * p.steps * ms / 1000
            shapes[size.name] = shapes.get(size.name, 0) + len(plan.seeds)
        sizes = list(shapes.values())
        stacks = sum(math.ceil(m / cap) for m, cap in zip(sizes, share_slots(sizes, gpus * workers_per_gpu, 16)))
        pre_min = (pre + nsp + stacks * STACK_OVERHEAD_SECONDS) / 60
        ner_min = sum("ner" in plan.experiments[n].tasks for n in names) * len(plan.seeds) * NER_FINETUNE_SECONDS / 60
        adjacency = sum("adjacency" in plan.experiments[n].tasks for n in names) * len(plan.seeds)
        adj_min = adjacency * ADJACENCY_COST * FINETUNE_SECONDS / 60
        ft_min = len(names) * len(plan.seeds) * FINETUNE_SECONDS / 60 + ner_min + adj_min
        total += pre_min + ft_min
        out.append({"part": part, "new experiments": len(names), "models": len(names) * len(plan.seeds),
                    "stacks": stacks, "pretrain GPU-min": round(pre_min, 1), "finetune GPU-min": round(ft_min, 1),
                    "of which NER": round(ner_min, 1),
                    "GPU-min": round(pre_min + ft_min, 1), "cumulative GPU-min": round(total, 1),
                    f"wall min on {gpus} GPUs": round((pre_min + ft_min) / gpus, 1)})
    return pd.DataFrame(out)
