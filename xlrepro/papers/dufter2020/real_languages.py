"""Dufter & Schütze §5.1, Table 3: the modifications on real languages (English, German, Hindi).

A BERT-base-shaped model (12 layers; the width is scaled down: `experiments.yaml`, section
`table3`) is pretrained on the Bible in English, German and Hindi with a WordPiece vocabulary per language, as in
§5.1 (20k each there; sized to the Bible here). The vocabularies are laid end to end: language L's piece i is row
``offset[L] + i`` of one embedding table, rounded up to a multiple of 8 (unused rows, as BERT's [unused] pieces).
Every model of Table 3 uses the same table, so models 0, 3, 8 and 30 share a stack without further padding.

The modifications carry over from the English/Fake-English lab:
  * shift-special: each language keeps its own [CLS]/[SEP]/[MASK]/[PAD]/[UNK] (its own block's rows 0-4); without
    it every language uses English's.
  * lang-pos: language L's positions start at ``L * max_length`` (token types stay 0: fine-tuning uses them for the
    pair's segments).
  * inv-order: German only (model 3 "inv-order[DEU]"); the German pieces between specials are reversed, in
    pretraining and in the zero-shot evaluation (the model has only ever seen German reversed).
  * no-random: as in the lab.
  * knn-replace (model 30): p = (0.5, 0.1, 0.1, 0.3); a German or Hindi piece becomes one of its 5 nearest English
    pieces, an English piece one of its 5 nearest German or 5 nearest Hindi pieces (drawn uniformly from the 10).
    fastText per language on its training pieces, mapped into English by unsupervised VecMap per pair
    (`xlrepro.embeddings`), CSLS retrieval.

Fine-tuning follows the paper's recipe (3 epochs, batch 32, lr 2e-5; or a rate chosen on English dev from
`finetune.lr_grid`) on the lab's verse-pair section task
(`xlrepro.tasks.sections`, the offline stand-in for XNLI): train on English, zero-shot on German and Hindi test pairs
(the same verse keys in every language). Weights stay on the training machine; only metrics come back.

CLI: ``python -m xlrepro.papers.dufter2020.real_languages [--prepare] [--shard I/N] [--device D] [--time-limit S]
[--smoke]``; ``xlrepro train dufter2020 --part table3`` runs it.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from xlrepro import atomic
from xlrepro.config import ConfigError, ModelSize, from_dict, load_yaml
from xlrepro.paths import runs_dir
from xlrepro.runkeys import run_key, write_config
from xlrepro.tokenization import SPECIAL_TOKENS, train_wordpiece, vocab_fingerprint

from .config import ChapterFile, Experiment, load_chapter

N_SPECIAL = len(SPECIAL_TOKENS)  # [PAD] [UNK] [CLS] [SEP] [MASK] take ids 0..4 of every trained vocabulary
PAD, UNK, CLS, SEP, MASK = range(N_SPECIAL)
ENGINE = "table3-v1"
LOSS_EVERY = 50  # pretraining steps between two records of the members' MLM loss
CURVES_CSV = "table3_pretraining.csv"  # the members' pretraining loss curves, beside table3.csv
PILOT_CURVES_CSV = "table3_pilot_curves.csv"  # the pilot's curves, beside table3_pilot.csv


@dataclass(frozen=True)
class FinetuneRecipe:
    lr: float = field(default=2e-5, metadata={"help": "the paper's fine-tuning learning rate"})
    batch_size: int = field(default=32, metadata={"help": "pairs per batch"})
    epochs: int = field(default=3, metadata={"help": "epochs over the English training pairs"})
    max_pairs: int | None = field(default=None, metadata={"help": "English training pairs (None: all)"})
    test_pairs: int | None = field(default=None, metadata={"help": "test pairs per language (None: all)"})
    lr_grid: tuple[float, ...] = field(default=(), metadata={
        "help": "learning rates to choose from: each is fine-tuned on English and scored on English dev, and the best "
                "one's model is the run's (German and Hindi never enter the choice); empty: `lr` alone"})


@dataclass(frozen=True)
class Table3Config:
    languages: tuple[str, ...] = field(default=("en", "de", "hi"), metadata={"help": "first is the source language"})
    vocab_size: int = field(default=6000, metadata={"help": "WordPiece vocabulary per language"})
    size: dict = field(default_factory=dict, metadata={"help": "ModelSize fields but name",
                                                       "keys": ["hidden", "layers", "heads", "ffn", "lr"]})
    epochs: int = field(default=40, metadata={"help": "pretraining epochs over the three Bibles"})
    batch_size: int = field(default=256, metadata={"help": "pretraining sentences per batch"})
    models: tuple[str, ...] = field(default=("0", "3", "8", "30"), metadata={"help": "Table 3's model IDs"})
    seeds: tuple[int, ...] = field(default=(0, 42, 43), metadata={"help": "seeds per model"})
    inv_order_language: str = field(default="de", metadata={"help": "the language inv-order reverses"})
    knn_k: int = field(default=5, metadata={"help": "knn-replace draws one of the k nearest neighbours"})
    group_by_length: bool = field(default=False, metadata={
        "help": "pretraining batches of verses of similar length (HF's `get_length_grouped_indices`: each model's "
                "shuffled order cut into mega-batches of 50 batches, each sorted by length), so that far less of a "
                "batch is padding; changes the data order, hence part of the run's key"})
    finetune: FinetuneRecipe = field(default_factory=FinetuneRecipe, metadata={"help": "fine-tuning recipe"})
    warmup_steps: int | None = field(default=None, metadata={
        "help": "pretraining warm-up steps (None: the chapter's training.warmup_steps)"})

    def __post_init__(self):
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise ConfigError(f"warmup_steps must be 0 or more (or None); got {self.warmup_steps}")
        if self.inv_order_language not in self.languages[1:]:
            raise ConfigError(f"inv_order_language must be a target language {list(self.languages[1:])}; "
                              f"got {self.inv_order_language!r}")
        if self.vocab_size <= N_SPECIAL:
            raise ConfigError(f"vocab_size must exceed the {N_SPECIAL} special tokens; got {self.vocab_size}")

    def pretrain_warmup(self) -> int:
        """The pretraining's warm-up steps: `warmup_steps`, or the chapter's training.warmup_steps where it is None."""
        return load_chapter().training.warmup_steps if self.warmup_steps is None else self.warmup_steps

    def model_size(self) -> ModelSize:
        return ModelSize(name="table3", **self.size)


# Smoke runs: a handful of sentences, a tiny model, one epoch (the chapter's warm-up: the real run's is longer than
# a smoke run); keyed apart from the real run.
SMOKE = dict(vocab_size=300, size=dict(hidden=32, layers=2, heads=2, ffn=64, lr=1e-3), epochs=1, batch_size=16,
             warmup_steps=None,
             finetune=dict(lr=2e-5, batch_size=32, epochs=1, max_pairs=64, test_pairs=48))
SMOKE_SENTENCES = 256


def load_config(smoke: bool = False) -> Table3Config:
    raw = load_yaml("xlrepro.papers.dufter2020", ChapterFile).table3
    if smoke:
        raw = {**raw, **SMOKE}
    return from_dict(Table3Config, raw, "dufter2020/experiments.yaml.table3")


def table3_experiment(exp_id: str, cfg: Table3Config) -> Experiment:
    """The lab's experiment with Table 3's knn k (one of the 5 nearest on real languages)."""
    exp = load_chapter().experiment(exp_id)
    return replace(exp, knn_k=cfg.knn_k) if exp.knn_replace else exp


# ------------------------------------------------------------------ vocabulary laid end to end
@dataclass
class Vocabularies:
    languages: tuple[str, ...]
    sizes: tuple[int, ...]

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)

    @property
    def rows(self) -> int:
        """Embedding rows: the vocabularies end to end, padded to a multiple of 8 (unused rows)."""
        return int(math.ceil(sum(self.sizes) / 8) * 8)

    def to_model(self, ids: np.ndarray, lang: int, shift_special: bool, inv_order: bool) -> np.ndarray:
        """A language's own ids [W] ([CLS] a [SEP] (b [SEP])) -> rows of the joint table, reversed between specials
        under inv-order; specials become English's unless shift-special."""
        ids = np.asarray(ids, np.int64).copy()
        special = ids < N_SPECIAL
        if inv_order:
            bounds = np.flatnonzero(special)
            for a, b in zip(bounds[:-1], bounds[1:]):
                ids[a + 1:b] = ids[a + 1:b][::-1]
        shift = ~special | shift_special
        return np.where(shift, ids + self.offsets[lang], ids)


def _with_specials(tok):
    from tokenizers.processors import BertProcessing
    tok.post_processor = BertProcessing(("[SEP]", SEP), ("[CLS]", CLS))
    return tok


# ------------------------------------------------------------------ prepared data (tokenizers, corpora, knn)
def prepared_dir(cfg: Table3Config, smoke: bool, root: Path | None = None) -> Path:
    spec = {"languages": cfg.languages, "vocab_size": cfg.vocab_size, "smoke": smoke}
    return Path(root or runs_dir() / "dufter2020-table3") / "prepared" / run_key(spec)


def _train_texts(lang: str, smoke: bool) -> list[str]:
    from xlrepro.data.multilingual import load_verses
    texts = load_verses(lang, "train")["text"].tolist()
    return texts[:SMOKE_SENTENCES] if smoke else texts


def prepare(cfg: Table3Config, smoke: bool = False, root: Path | None = None, progress: bool = True) -> Path:
    """Tokenizers per language and the knn table (needs gensim); cached, so every shard reads the same files."""
    from tokenizers import Tokenizer
    folder = prepared_dir(cfg, smoke, root)
    if (folder / "knn.json").exists():
        return folder
    toks = {}
    for lang in cfg.languages:
        path = folder / f"tokenizer-{lang}.json"
        if not path.exists():
            tok = train_wordpiece(_train_texts(lang, smoke), cfg.vocab_size)
            atomic.write_bytes(path, tok.to_str().encode())
        toks[lang] = Tokenizer.from_file(str(path))
    table, report = build_knn(cfg, toks, smoke)
    buf = __import__("io").BytesIO()
    np.save(buf, table)
    atomic.write_bytes(folder / "neighbours.npy", buf.getvalue())
    atomic.write_json(folder / "knn.json", {**report, "vocabularies": {l: vocab_fingerprint(t) for l, t in toks.items()}})
    return folder


def load_prepared(cfg: Table3Config, smoke: bool = False, root: Path | None = None):
    from tokenizers import Tokenizer
    folder = prepare(cfg, smoke, root, progress=False)
    toks = {l: _with_specials(Tokenizer.from_file(str(folder / f"tokenizer-{l}.json"))) for l in cfg.languages}
    vocab = Vocabularies(cfg.languages, tuple(t.get_vocab_size() for t in toks.values()))
    return toks, vocab, np.load(folder / "neighbours.npy")


def build_knn(cfg: Table3Config, toks: dict, smoke: bool) -> tuple[np.ndarray, dict]:
    """[rows, 2k] neighbour table over the joint vocabulary (rows of other languages; specials stay themselves)."""
    from xlrepro.embeddings.vecmap import nearest_neighbours, vecmap_unsupervised
    from xlrepro.embeddings.static import train_fasttext
    from .knn import CSLS_K, FASTTEXT, SMOKE_FASTTEXT, SMOKE_VECMAP, VECMAP, VECMAP_SEED
    fasttext, vecmap = (SMOKE_FASTTEXT, SMOKE_VECMAP) if smoke else (FASTTEXT, VECMAP)
    vocab = Vocabularies(cfg.languages, tuple(t.get_vocab_size() for t in toks.values()))
    k = cfg.knn_k
    table = np.repeat(np.arange(vocab.rows, dtype=np.int64)[:, None], 2 * k, axis=1)
    spaces = {}
    for li, lang in enumerate(cfg.languages):
        tok = toks[lang]
        sentences = [e.tokens for e in tok.encode_batch(_train_texts(lang, smoke), add_special_tokens=False)]
        words, vec = train_fasttext(sentences, fasttext, seed=li + 1)
        rows = np.array([tok.token_to_id(w) for w in words]) + vocab.offsets[li]  # fastText row -> joint row
        keep = rows >= vocab.offsets[li] + N_SPECIAL
        spaces[lang] = (rows[keep], vec[keep])
    src = cfg.languages[0]
    report = {"k": k, "pairs": {}}
    for_src = []
    for lang in cfg.languages[1:]:
        res = vecmap_unsupervised(spaces[lang][1], spaces[src][1], vecmap, seed=VECMAP_SEED)  # lang -> English
        to_en = nearest_neighbours(res.xw, res.zw, k=k, csls_k=CSLS_K)    # [n_lang, k] English rows
        from_en = nearest_neighbours(res.zw, res.xw, k=k, csls_k=CSLS_K)  # [n_en, k] rows of lang
        table[spaces[lang][0]] = np.tile(spaces[src][0][to_en], 2)  # uniform over the k English neighbours
        for_src.append(spaces[lang][0][from_en])
        report["pairs"][lang] = {"pieces": len(spaces[lang][0]), "vecmap_iterations": res.iterations,
                                 "vecmap_objective": res.objective}
    # English: k German and k Hindi neighbours, one of the 2k drawn uniformly
    table[spaces[src][0]] = np.concatenate(for_src, axis=1)[:, :2 * k] if len(for_src) == 2 else np.tile(for_src[0], 2)
    return table, report


# ------------------------------------------------------------------ pretraining sets
@dataclass
class PretrainSet:
    ids: np.ndarray      # [N, W] joint rows, padded
    lengths: np.ndarray  # [N] with [CLS] and [SEP]
    lang: np.ndarray     # [N] language index

    def __len__(self) -> int:
        return len(self.lengths)


def pretrain_set(cfg: Table3Config, exp: Experiment, toks: dict, vocab: Vocabularies, smoke: bool,
                 max_length: int) -> PretrainSet:
    from xlrepro.data.collate import pad_batch
    rows, langs = [], []
    for li, lang in enumerate(cfg.languages):
        tok = toks[lang]
        tok.enable_truncation(max_length)
        inv = exp.inv_order and lang == cfg.inv_order_language
        for e in tok.encode_batch(_train_texts(lang, smoke)):
            rows.append(vocab.to_model(e.ids, li, exp.shift_special, inv))
            langs.append(li)
        tok.no_truncation()
    ids, lengths = pad_batch(rows, PAD)
    return PretrainSet(ids, lengths, np.array(langs))


def member_config(cfg: Table3Config, exp: Experiment, seed: int, smoke: bool) -> dict:
    training = asdict(load_chapter().training)
    table3 = asdict(cfg)
    if table3["warmup_steps"] is None:  # the chapter's warm-up: keys as before the field existed
        del table3["warmup_steps"]
    return {"chapter": "dufter2020-table3", "engine": ENGINE, "smoke": smoke, "experiment": exp.key_fields(),
            "table3": table3, "training": training, "seed": seed}


def stack_key(member_keys: Sequence[str]) -> str:
    """The name of a stack's folder under ``<root>/stacks``: the run key of its members' run keys, in order."""
    return run_key({"members": list(member_keys)})


def epoch_order(lengths: np.ndarray, seed: int, epoch: int, batch_size: int, group_by_length: bool) -> np.ndarray:
    """One model's pretraining order of the sentences for one epoch (a permutation of range(len(lengths))), seeded
    by (seed, epoch) alone: a shuffle, or with `group_by_length` HF's length-grouped shuffle (mega-batches of 50
    batches, each sorted by decreasing length, the longest batch first). Models of one stack at the same step then
    sit at the same place of their mega-batches, so their batches have similar widths."""
    if not group_by_length:
        return np.random.default_rng([seed, epoch]).permutation(len(lengths))
    from transformers.trainer_pt_utils import get_length_grouped_indices
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, epoch]).generate_state(1)[0]))
    return np.asarray(get_length_grouped_indices(lengths.tolist(), batch_size, generator=generator), dtype=np.int64)


# ------------------------------------------------------------------ one stack: pretrain, fine-tune, evaluate
class Table3Stack:
    def __init__(self, cfg: Table3Config, members: list[tuple[str, int]], root: Path, device: str = "cpu",
                 smoke: bool = False, compile: str | None = None, graphs: bool = True, prepared: Path | None = None):
        """compile ("regional" or None) and graphs (CUDA graphs, one per padded width) are speed switches of the
        pretraining stack (`ModelStack`): they change no number beyond floating-point rounding, so no run key.
        `prepared`: the folder whose prepared tokenizers and knn table the stack reads (default `root`)."""
        self.cfg, self.root, self.smoke = cfg, Path(root), smoke
        self.device = torch.device(device)
        self.compile, self.graphs = compile, graphs and self.device.type == "cuda"
        self.train_cfg = load_chapter().training
        self.max_length = self.train_cfg.max_length
        self.members = [(table3_experiment(e, cfg), s) for e, s in members]
        self.configs = [member_config(cfg, e, s, smoke) for e, s in self.members]
        self.toks, self.vocab, self.neighbours = load_prepared(cfg, smoke, Path(prepared or self.root))
        self.sets = {e.id: pretrain_set(cfg, e, self.toks, self.vocab, smoke, self.max_length) for e, _ in self.members}
        self.folder = self.root / "stacks" / stack_key([run_key(c) for c in self.configs])

    def member_dir(self, i: int) -> Path:
        e, s = self.members[i]
        return self.root / e.id / str(s) / run_key(self.configs[i])

    def done(self, i: int) -> bool:
        return (self.member_dir(i) / "metrics.json").exists()

    # pretraining ------------------------------------------------------------
    def _device_data(self):
        exps = list(self.sets)
        width = max(s.ids.shape[1] for s in self.sets.values())
        n = len(next(iter(self.sets.values())))
        ids = torch.zeros((len(exps), n, width), dtype=torch.int64)
        for k, e in enumerate(exps):
            ids[k, :, :self.sets[e].ids.shape[1]] = torch.as_tensor(self.sets[e].ids)
        dev = self.device
        n_probs = 4 if any(e.knn_replace for e, _ in self.members) else 3
        return dict(
            ids=ids.to(dev), exp_of=torch.tensor([exps.index(e.id) for e, _ in self.members], device=dev),
            lengths=torch.stack([torch.as_tensor(self.sets[e].lengths) for e in exps]).to(dev),
            lang=torch.stack([torch.as_tensor(self.sets[e].lang) for e in exps]).to(dev),
            lang_pos=torch.tensor([e.lang_pos for e, _ in self.members], device=dev),
            shift_special=torch.tensor([e.shift_special for e, _ in self.members], device=dev),
            probs=torch.tensor([e.mask_probs[:n_probs] for e, _ in self.members], device=dev).view(-1, 1, 1, n_probs),
            neighbours=torch.as_tensor(self.neighbours, device=dev) if n_probs == 4 else None,
            offsets=torch.as_tensor(self.vocab.offsets, device=dev))

    def _batch(self, d, rows: torch.Tensor, width: int):
        from xlrepro.engine.masking import mask_tokens
        from xlrepro.engine.stacked import masked_capacity, select_masked
        e = d["exp_of"][:, None]
        ids = d["ids"][e, rows, :width]  # [M, B, W]
        lengths = d["lengths"][e, rows]  # [M, B]
        lang = d["lang"][e, rows]        # [M, B]
        pos = torch.arange(width, device=self.device)
        content = (pos >= 1) & (pos[None, None, :] < (lengths - 1)[..., None])
        position_ids = pos + (lang * d["lang_pos"][:, None])[..., None] * self.max_length  # [M, B, W]
        mask_id = (MASK + d["offsets"][lang] * d["shift_special"][:, None])[..., None].expand_as(ids)
        inputs, labels = mask_tokens(ids, content, mask_id, d["probs"], self.vocab.rows, self.train_cfg.mlm_probability,
                                     noise=self.noise, neighbours=d["neighbours"])
        sel_index, sel_labels = select_masked(labels, masked_capacity(rows.shape[1] * (width - 2),
                                                                      self.train_cfg.mlm_probability))
        attend = (pos[None, None, :] < lengths[..., None])[:, :, None, None, :]
        return inputs, torch.where(attend, 0.0, -1e9), position_ids, torch.zeros_like(ids), sel_index, sel_labels

    def pretrain(self, time_limit: float | None, progress: bool = True):
        """Returns the trained ModelStack, or None when stopped by the time limit (checkpointed)."""
        from xlrepro.engine.models import init_model
        from xlrepro.engine.pretrain import new_stack, pretrain_loop
        from xlrepro.engine.stacked import OptimConfig
        t0 = time.time()
        self.widths = []  # the padded width of each step of this process (for the timing record)
        size, tc = self.cfg.model_size(), self.train_cfg
        positions = len(self.cfg.languages) * self.max_length
        models = [init_model(size, self.vocab.rows, s, attn="eager", positions=positions) for _, s in self.members]
        n = len(next(iter(self.sets.values())))
        steps_per_epoch = n // self.cfg.batch_size
        total = steps_per_epoch * self.cfg.epochs
        optim = OptimConfig(lr=size.lr, weight_decay=tc.weight_decay, eps=tc.adam_eps,
                            warmup_steps=self.cfg.pretrain_warmup(),
                            total_steps=total, max_grad_norm=tc.max_grad_norm)
        stack = new_stack(models, optim, self.device, engine="fused", seeds=[s for _, s in self.members],
                          rows=torch.arange(self.cfg.batch_size), compile=self.compile, graphs=self.graphs,
                          bf16=tc.precision == "bf16" and self.device.type == "cuda")
        self.noise = stack.noise
        ckpt = self.folder / "checkpoint.pt"
        d = self._device_data()
        lengths = [self.sets[e.id].lengths for e, _ in self.members]
        B = self.cfg.batch_size
        d["rows"] = torch.zeros((len(self.members), B), dtype=torch.int64, device=self.device)  # read by the graphs
        orders = {}  # epoch -> each model's own data order (its seed, the epoch)

        def batch(step: int):
            epoch, within = divmod(step, steps_per_epoch)
            if epoch not in orders:
                orders.clear()
                orders[epoch] = [epoch_order(l, s, epoch, B, self.cfg.group_by_length)
                                 for l, (_, s) in zip(lengths, self.members)]
            rows = np.stack([o[within * B:(within + 1) * B] for o in orders[epoch]])  # [M, B]: the batch is a slice
            width = min(int(math.ceil(max(l[r].max() for l, r in zip(lengths, rows)) / 8) * 8), d["ids"].shape[2])
            r = torch.as_tensor(rows)
            if self.device.type == "cuda":  # an asynchronous copy: a pageable one would wait for the previous step
                r = r.pin_memory()
            d["rows"].copy_(r, non_blocking=True)
            self.widths.append(width)
            return (lambda: self._batch(d, d["rows"], width)), (width if self.graphs else None)

        def record_loss(curve: dict, step: int, losses: torch.Tensor):
            if (step + 1) % LOSS_EVERY == 0 or step + 1 == total:  # [M] -> host every LOSS_EVERY steps
                curve[str(step + 1)] = [round(float(x), 4) for x in losses.float().cpu()]
            return None

        loss_path = self.folder / "pretrain_loss.json"  # MLM loss of each member every LOSS_EVERY steps (resumed)
        save_curve = lambda stack, curve: atomic.write_json(loss_path, {"members": self._member_names(), "loss": curve})
        curve = json.loads(loss_path.read_text())["loss"] if loss_path.exists() and ckpt.exists() else {}
        done = pretrain_loop(stack, batch, steps=total, checkpoint=ckpt, time_limit=time_limit, t0=t0,
                             progress=progress, desc="table3 pretrain", curve=curve, record_loss=record_loss,
                             on_save=save_curve, checkpoint_seconds=120)
        if done is None:
            self._write_timing(t0, stack.step_count, total)
            return None
        save_curve(stack, done[1])
        self._write_timing(t0, stack.step_count, total)
        self.steps = total
        return stack

    def _member_names(self) -> list[str]:
        return [f"{e.id}/{s}" for e, s in self.members]

    def _device_name(self) -> str:
        """The GPU's name (e.g. "NVIDIA H200") for the records, else the device as torch names it."""
        return torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else str(self.device)

    def _write_timing(self, t0: float, step: int, total: int) -> None:
        """Append this process's pretraining speed to the stack's timing.json (one entry per process)."""
        path = self.folder / "timing.json"
        runs = json.loads(path.read_text()) if path.exists() else []
        n = len(self.widths)
        runs.append({"device": self._device_name(),
                     "models": len(self.members), "steps": n, "seconds": round(time.time() - t0, 1),
                     "steps_per_second": round(n / max(time.time() - t0, 1e-9), 3),
                     "mean_width": round(float(np.mean(self.widths)), 1) if n else None, "reached_step": step,
                     "total_steps": total, "compile": self.compile or "none", "graphs": self.graphs,
                     "group_by_length": self.cfg.group_by_length})
        atomic.write_json(path, runs)

    # fine-tuning -------------------------------------------------------------
    def encoded(self, exp: Experiment, lang: str, split: str, max_pairs: int | None, keys=None):
        from xlrepro.tasks.sections import verse_pairs
        from xlrepro.training.finetune import EncodedPairs, encode_pairs
        li = self.cfg.languages.index(lang)
        pairs = verse_pairs(lang, split, max_pairs=max_pairs, keys=keys)
        enc = encode_pairs(self.toks[lang], pairs, self.max_length)
        inv = exp.inv_order and lang == self.cfg.inv_order_language
        return EncodedPairs([self.vocab.to_model(x, li, exp.shift_special, inv) for x in enc.ids], enc.types,
                            enc.labels)

    def finetune_member(self, i: int, model, progress: bool = True, deadline: float | None = None) -> dict | None:
        """Fine-tune member i's pretrained encoder `model` on English and test it in every language: the metrics.json
        fields. With `lr_grid`, once per rate, each rate's results kept in its own file (`finetune-lr<rate>.json`,
        so that a call cut between two rates resumes); the rate best on English dev is the run's (German and Hindi
        never enter the choice). None when `deadline` (time.time()) passed before every rate was done."""
        from xlrepro.tasks.sections import SECTIONS, majority_baseline, parallel_keys
        from xlrepro.training.finetune import FinetuneConfig, evaluate, finetune
        exp, seed = self.members[i]
        ft = self.cfg.finetune
        source = self.cfg.languages[0]
        train = self.encoded(exp, source, "train", ft.max_pairs)
        dev = self.encoded(exp, source, "dev", ft.test_pairs) if ft.lr_grid else None
        keys = parallel_keys(list(self.cfg.languages), "test")
        tried = []
        for lr in ft.lr_grid or (ft.lr,):
            path = self.member_dir(i) / f"finetune-lr{lr:g}.json"
            if ft.lr_grid and path.exists():
                tried.append(json.loads(path.read_text()))
                continue
            if deadline is not None and time.time() > deadline:
                return None
            config = FinetuneConfig(lr=lr, batch_size=ft.batch_size, epochs=ft.epochs, seed=seed,
                                    max_length=self.max_length)
            clf, history = finetune(config, model, train, len(SECTIONS), device=self.device, progress=progress)
            res = {"finetune": config.to_json(), "finetune_seconds": history["seconds"], "accuracy": {},
                   "macro_f1": {}, "majority": {}}
            if dev is not None:
                clf.position_offset = 0  # the source language's positions
                res["dev_accuracy"], _ = evaluate(clf, dev, self.device, len(SECTIONS))
            for li, lang in enumerate(self.cfg.languages):
                test = self.encoded(exp, lang, "test", ft.test_pairs, keys=keys)
                clf.position_offset = li * self.max_length if exp.lang_pos else 0
                acc, f1 = evaluate(clf, test, self.device, len(SECTIONS))
                res["accuracy"][lang], res["macro_f1"][lang] = acc, f1
                res["majority"][lang] = majority_baseline(train.labels, test.labels)
            if ft.lr_grid:
                atomic.write_json(path, res)
            tried.append(res)
        if not ft.lr_grid:
            return tried[0]
        # max keeps the first of equals: a tie goes to the grid's earlier rate
        best = max(tried, key=lambda r: r["dev_accuracy"])
        out = {k: v for k, v in best.items() if k != "dev_accuracy"}
        out["finetune_seconds"] = sum(r["finetune_seconds"] for r in tried)
        out["lr_selection"] = {"dev_accuracy": {f"{r['finetune']['lr']:g}": r["dev_accuracy"] for r in tried},
                               "language": source, "lr": best["finetune"]["lr"]}
        return out

    def run(self, time_limit: float | None = None, progress: bool = True, part: tuple[int, int] = (0, 1),
            pretrain_only: bool = False) -> bool:
        """Pretrain the stack (resumably) unless its models are saved, then fine-tune and test the members not done.
        `part` (J, K): fine-tune only members i with i % K == J, so that K processes share a GPU's fine-tuning (each
        fine-tuning keeps a GPU about a fifth busy); it needs the stack pretrained (`pretrain_only`) first.
        `time_limit` counts from when the launching command began where one set it (`run_table3`: the engine's
        `launched_at`), so that a child's start-up counts against it too."""
        from xlrepro.engine.queue import launched_at
        t0 = launched_at()
        todo = [i for i in range(len(self.members)) if not self.done(i) and i % part[1] == part[0]]
        if not todo and not pretrain_only:
            return True
        from safetensors.torch import load_model, save_model
        from xlrepro.engine.models import init_model
        saved = all((self.member_dir(i) / "model.safetensors").exists() for i in range(len(self.members))
                    if not self.done(i))
        if not saved:
            if part != (0, 1):
                raise ConfigError(f"fine-tuning part {part[0]}/{part[1]} needs this shard pretrained first: run it "
                                  "with --pretrain-only")
            left = None if time_limit is None else time_limit - (time.time() - t0)
            if left is not None and left <= 0:
                return False
            stack = self.pretrain(left, progress)
            if stack is None:
                return False
            for i in range(len(self.members)):
                write_config(self.member_dir(i), self.configs[i])
                with atomic.atomic_path(self.member_dir(i) / "model.safetensors") as tmp:
                    save_model(stack.export(i).float().cpu(), str(tmp))
            (self.folder / "checkpoint.pt").unlink(missing_ok=True)
        if pretrain_only:
            return True
        positions = len(self.cfg.languages) * self.max_length
        for i in todo:
            if time_limit is not None and time.time() - t0 > time_limit:
                return False
            model = init_model(self.cfg.model_size(), self.vocab.rows, 0, positions=positions)
            load_model(model, str(self.member_dir(i) / "model.safetensors"))
            metrics = self.finetune_member(i, model, progress, deadline=None if time_limit is None else t0 + time_limit)
            if metrics is None:
                return False
            e, s = self.members[i]
            atomic.write_json(self.member_dir(i) / "metrics.json", {
                "experiment": e.id, "seed": s, **metrics, "device": self._device_name(),
                "vocabularies": {l: vocab_fingerprint(t) for l, t in self.toks.items()}})
        return True


@dataclass(frozen=True)
class PilotVariant:
    name: str = field(metadata={"help": "the variant's name (its run folder: <run folder>/pilot/<name>)"})
    lr: float = field(metadata={"help": "peak pretraining learning rate"})
    warmup_steps: int | None = field(default=None, metadata={
        "help": "pretraining warm-up steps (None: the chapter's training.warmup_steps)"})


@dataclass(frozen=True)
class Table3Pilot:
    """Table 3's pretraining pilot: the models pretrained (one seed) under each variant of the pretraining recipe,
    in the declared order; the first variant under which every model passes the gate (final MLM loss `margin` nats
    below the unigram entropy of the pieces given the language) is the recipe of Table 3's next run."""
    models: tuple[str, ...] = field(default=("0", "30"), metadata={"help": "Table 3's model IDs to pretrain"})
    seed: int = field(default=0, metadata={"help": "the one seed"})
    margin: float = field(default=2.0, metadata={"help": "nats below the unigram entropy given the language"})
    variants: tuple[PilotVariant, ...] = field(default=(), metadata={"help": "the recipes tried, in order"})

    def __post_init__(self):
        names = [v.name for v in self.variants]
        if not names or len(set(names)) != len(names):
            raise ConfigError(f"the pilot needs variants with distinct names; got {names}")
        bad = [n for n in names if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", n)]
        if bad:  # each names a folder
            raise ConfigError(f"pilot variant names are folder names (letters, digits, '.', '_', '-'); got {bad}")
        if any(v.lr <= 0 or (v.warmup_steps is not None and v.warmup_steps < 0) for v in self.variants):
            raise ConfigError("every pilot variant needs lr > 0 and warmup_steps >= 0 (or none)")


# The commit that declared the pilot (experiments.yaml `table3_pilot`), before any of its runs.
PILOT_DECLARED_AT = "fcf35c1"


def load_pilot() -> Table3Pilot:
    raw = load_yaml("xlrepro.papers.dufter2020", ChapterFile).table3_pilot
    return from_dict(Table3Pilot, raw, "dufter2020/experiments.yaml.table3_pilot")


def pilot_config(cfg: Table3Config, variant: PilotVariant) -> Table3Config:
    """Table 3's configuration with the variant's pretraining rate and warm-up."""
    return replace(cfg, size={**cfg.size, "lr": variant.lr}, warmup_steps=variant.warmup_steps)


def recipe_config(cfg: Table3Config, name: str | None, pilot: Table3Pilot | None = None) -> Table3Config:
    """Table 3's configuration pretrained under the pilot's variant `name` (its rate and warm-up in place of
    `size.lr` and `warmup_steps`; the run keys follow), or `cfg` itself for None. An unknown name is refused with the
    declared ones."""
    if name is None:
        return cfg
    pilot = pilot or load_pilot()
    by_name = {v.name: v for v in pilot.variants}
    if name not in by_name:
        raise ConfigError(f"--recipe must name one of the pilot's variants (experiments.yaml table3_pilot): "
                          f"{', '.join(by_name)}; got {name!r}")
    return pilot_config(cfg, by_name[name])


def pilot_root(root: Path, variant: PilotVariant) -> Path:
    return Path(root) / "pilot" / variant.name


def run_pilot(pilot: Table3Pilot, cfg: Table3Config, root: Path, device: str = "cpu", smoke: bool = False,
              time_limit: float | None = None, compile: str | None = None, graphs: bool = True,
              progress: bool = True) -> bool:
    """Pretrain the pilot's models under each variant, one stack per variant, one after the other (resumable: each
    stack checkpoints, a finished one is skipped). Each variant has its own folder (`pilot_root`) and shares the
    run folder's prepared tokenizers and knn table. True when every variant is done."""
    from xlrepro.engine.queue import launched_at
    t0 = launched_at()
    for v in pilot.variants:
        if time_limit is not None and time.time() - t0 >= time_limit:
            return False
        stack = Table3Stack(pilot_config(cfg, v), [(m, pilot.seed) for m in pilot.models], pilot_root(root, v),
                            device, smoke, compile=compile, graphs=graphs, prepared=root)
        # `run` counts its limit from `launched_at()` too: the launching command's start, or, without one, now
        limit = None if time_limit is None else time_limit - (launched_at() - t0)
        if not stack.run(limit, progress, pretrain_only=True):
            return False
    return True


def collect_pilot(pilot: Table3Pilot, cfg: Table3Config, root: Path, smoke: bool = False
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(results, curves) of the pilot's pretrained variants in the results format, experiment "<model>@<variant>":
    pretrain_loss (`final_loss`), unigram_entropy and unigram_entropy_joint, and pretrain_gpu_seconds (the member's
    share of its stack's GPU time, timing.json; language "all"); the curves as `pretraining_curves`. A variant whose
    stack has not finished (`pilot_finished`) has no rows."""
    rows, curves, levels = [], [], {}
    for v in pilot.variants:
        folder = pilot_finished(pilot, cfg, root, v, smoke)
        if folder is None:
            continue
        c = pretraining_curves(pilot_root(root, v), [folder / "pretrain_loss.json"])
        curves.append(c.assign(experiment=c.experiment + "@" + v.name))
        seconds = member_gpu_seconds(root, [folder])
        for (e, seed), g in c.groupby(["experiment", "seed"], sort=False):
            share = seconds.get(f"{e}/{seed}")
            if e not in levels:
                levels[e] = unigram_entropies(cfg, table3_experiment(e, cfg), smoke, root)
            for metric, value in (("pretrain_loss", final_loss(g.value)), ("unigram_entropy", levels[e][1]),
                                  ("unigram_entropy_joint", levels[e][0]),
                                  *((("pretrain_gpu_seconds", round(share, 1)),) if share is not None else ())):
                rows.append({"experiment": f"{e}@{v.name}", "seed": int(seed), "metric": metric, "language": "all",
                             "value": value})
    columns = ["experiment", "seed", "metric", "step", "value"]
    return (pd.DataFrame(rows, columns=["experiment", "seed", "metric", "language", "value"]),
            pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(columns=columns))


def pilot_finished(pilot: Table3Pilot, cfg: Table3Config, root: Path, variant: PilotVariant,
                   smoke: bool = False) -> Path | None:
    """The stack folder of `variant` (keyed by its members' configurations, as `Table3Stack` keys it) when its
    pretraining finished (every member's model saved, or, where only the records were kept, its timing record at
    the last step; and no checkpoint left), else None: a stopped or checkpointed stack's loss record is not a final
    one."""
    configs = [member_config(pilot_config(cfg, variant), table3_experiment(m, cfg), pilot.seed, smoke)
               for m in pilot.models]
    base = pilot_root(root, variant)
    folder = base / "stacks" / stack_key([run_key(c) for c in configs])
    saved = all((base / m / str(pilot.seed) / run_key(c) / "model.safetensors").exists()
                for m, c in zip(pilot.models, configs))
    timing = folder / "timing.json"
    last = json.loads(timing.read_text())[-1:] if timing.exists() else []
    reached = bool(last) and last[0].get("total_steps") is not None and \
        last[0].get("reached_step") == last[0]["total_steps"]
    done = (saved or reached) and (folder / "pretrain_loss.json").exists() and not (folder / "checkpoint.pt").exists()
    return folder if done else None


# pilot_choice's outcomes
PILOT_CHOSEN, PILOT_NONE_PASSED, PILOT_NOT_RUN = "chosen", "none passed", "not run"


def pilot_choice(pilot: Table3Pilot, results: pd.DataFrame) -> tuple[pd.DataFrame, str | None, str]:
    """The gate per model and variant (variant, model, loss, level, passed: loss at least `margin` below the level
    given the language), the chosen variant and the outcome: PILOT_CHOSEN (the first variant, in the declared order,
    whose every model passed), PILOT_NONE_PASSED (every variant judged, none passed), or PILOT_NOT_RUN (a variant
    that might still pass has no results yet, so nothing after it is chosen before it is)."""
    wide = results.pivot_table(index="experiment", columns="metric", values="value") if len(results) else \
        pd.DataFrame()
    rows = []
    for v in pilot.variants:
        names = [f"{m}@{v.name}" for m in pilot.models]
        if not set(names) <= set(wide.index):
            return pd.DataFrame(rows, columns=["variant", "model", "loss", "level", "passed"]), None, PILOT_NOT_RUN
        ok = []
        for m, n in zip(pilot.models, names):
            loss, level = float(wide.loc[n, "pretrain_loss"]), float(wide.loc[n, "unigram_entropy"])
            ok.append(loss <= level - pilot.margin)
            rows.append({"variant": v.name, "model": m, "loss": loss, "level": level, "passed": ok[-1]})
        if all(ok):
            return pd.DataFrame(rows, columns=["variant", "model", "loss", "level", "passed"]), v.name, PILOT_CHOSEN
    return pd.DataFrame(rows, columns=["variant", "model", "loss", "level", "passed"]), None, PILOT_NONE_PASSED


def members_of(cfg: Table3Config) -> list[tuple[str, int]]:
    return [(e, s) for e in cfg.models for s in cfg.seeds]


def shard_stacks(cfg: Table3Config, shards: int) -> list[list[tuple[str, int]]]:
    """The models cut into `shards` stacks of about equal size (every Table 3 model has one shape)."""
    members = members_of(cfg)
    if not 1 <= shards <= len(members):
        raise ConfigError(f"shards must be between 1 and {len(members)}; got {shards}")
    return [members[k::shards] for k in range(shards)]


@dataclass(frozen=True)
class Job:
    """One child process of `run_table3`: shard `shard` of `shards`, pretrained (`part` None) or fine-tuned
    (`--finetune-part part[0]/part[1]`), on GPU `gpu`."""
    shard: int
    shards: int
    gpu: int
    part: tuple[int, int] | None = None

    def argv(self) -> list[str]:
        return ["--shard", f"{self.shard}/{self.shards}"] + (
            ["--pretrain-only"] if self.part is None else ["--finetune-part", f"{self.part[0]}/{self.part[1]}"])

    @property
    def name(self) -> str:
        return f"shard{self.shard}-" + ("pretrain" if self.part is None else f"finetune{self.part[0]}")


def plan_table3(cfg: Table3Config, shards: int, gpus: int) -> tuple[list[Job], list[Job]]:
    """The pretraining jobs (shard k on GPU k % gpus; a GPU's shards one after the other) and the fine-tuning jobs
    (one per member: `--finetune-part j/<the shard's members>`, dealt to the GPUs in turn, shard after shard)."""
    if gpus < 1:
        raise ConfigError(f"gpus must be 1 or more; got {gpus}")
    stacks = shard_stacks(cfg, shards)
    pretrain = [Job(k, shards, k % gpus) for k in range(shards)]
    finetune = [Job(k, shards, i % gpus, (j, len(stack)))
                for i, (k, j, stack) in enumerate((k, j, st) for k, st in enumerate(stacks) for j in range(len(st)))]
    return pretrain, finetune


def run_table3(shards: int = 2, gpus: int = 1, processes: int = 6, time_limit: float | None = None,
               extra: Sequence[str] = (), logs: Path | None = None, run: Callable | None = None) -> bool:
    """Table 3 on `gpus` GPUs in child processes of this module: every shard pretrained (each GPU its shards one
    after the other, the GPUs side by side; `--pretrain-only`, resumable), then every member fine-tuned, at most
    `processes` at once per GPU (a fine-tuning keeps a GPU about a fifth busy; each member's rates run one after the
    other in its process, resuming from their files). Each child sees one GPU (the i-th of this process's
    CUDA_VISIBLE_DEVICES, or GPU i), gets the CPU cores shared out and the time limit counted from this call's start
    (the engine's LAUNCHED_AT; none starts with under 30 s left), and
    writes its output to ``<logs>/<job>.log`` (default: the run folder's ``logs``). True when every job finished.
    `extra`: more options for every child (--device, --no-graphs, --root, --smoke). Interrupted (Ctrl-C, SIGTERM), it
    starts nothing more and stops the running children. `run(job, seconds_left, log, env)` -> exit status replaces
    the child process (tests).

    Hand-written because the jobs are whole processes with a GPU each (CUDA_VISIBLE_DEVICES), which the engine's
    queue (`xlrepro.engine.queue`, ranks of one torchrun launch) does not start."""
    import subprocess
    import sys
    import threading
    from concurrent.futures import ThreadPoolExecutor

    if processes < 1:
        raise ConfigError(f"processes must be 1 or more; got {processes}")
    smoke = "--smoke" in extra
    pretrain, finetune = plan_table3(load_config(smoke), shards, gpus)
    from xlrepro.engine.queue import LAUNCHED_AT
    start, started = time.monotonic(), time.time()
    root = Path(extra[list(extra).index("--root") + 1]) if "--root" in extra else run_root(smoke)
    logs = Path(logs or root / "logs")
    logs.mkdir(parents=True, exist_ok=True)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = visible.split(",") if visible else [str(g) for g in range(gpus)]
    if len(devices) < gpus:
        raise ConfigError(f"{gpus} GPUs asked, but CUDA_VISIBLE_DEVICES names {len(devices)}: {visible}")
    threads = str(max(1, (os.cpu_count() or 1) // (gpus * processes)))
    stop, lock, live = threading.Event(), threading.Lock(), []

    def left() -> float | None:
        return None if time_limit is None else time_limit - (time.monotonic() - start)

    def child(job: Job) -> int:
        rest = left()
        if stop.is_set() or (rest is not None and rest < 30):
            return 3  # interrupted, or no time left to start it: a later run resumes
        log = logs / f"{job.name}.log"
        # the children's time limit counts from this call's start (LAUNCHED_AT), their start-up included
        env = {**os.environ, "OMP_NUM_THREADS": threads, LAUNCHED_AT: repr(started)}
        if "cpu" not in extra:
            env["CUDA_VISIBLE_DEVICES"] = devices[job.gpu]
        limit = [] if time_limit is None else ["--time-limit", f"{time_limit:g}"]
        if run is not None:
            code = run(job, rest, log, env)
        else:
            with open(log, "a") as out:
                with lock:
                    if stop.is_set():
                        return 3
                    proc = subprocess.Popen([sys.executable, "-m", __name__, *job.argv(), *limit, *extra], env=env,
                                            stdout=out, stderr=subprocess.STDOUT)
                    live.append(proc)
                code = proc.wait()
                with lock:
                    live.remove(proc)
        where = "" if "cpu" in extra else f" on GPU {devices[job.gpu]}"
        print(f"table3 {job.name}{where}: {'done' if code == 0 else f'stopped ({code})'}; log {log}", flush=True)
        return code

    def phase(jobs: list[Job], width: int) -> dict[Job, int]:
        """Every job run, the GPUs side by side, at most `width` at once on each: job -> exit status."""
        def on_gpu(g: int) -> list[tuple[Job, int]]:
            mine = [j for j in jobs if j.gpu == g]
            with ThreadPoolExecutor(max_workers=width) as pool:
                return list(zip(mine, pool.map(child, mine)))
        with ThreadPoolExecutor(max_workers=gpus) as pool:
            return dict(pair for pairs in pool.map(on_gpu, range(gpus)) for pair in pairs)

    def body() -> bool:
        pre = phase(pretrain, 1)  # each GPU pretrains its shards one after the other
        ready = {j.shard for j, c in pre.items() if c == 0}
        todo = [j for j in finetune if j.shard in ready]
        post = phase(todo, processes)
        return len(ready) == shards and len(todo) == len(finetune) and not any({**pre, **post}.values())

    # The jobs run in a thread of their own, so that an interruption of this one (Ctrl-C, SIGTERM: a deadline)
    # reaches the children at once: nothing more starts and the running ones are stopped.
    outcome: dict = {}

    def work() -> None:
        try:
            outcome["done"] = body()
        except BaseException as err:  # handed to the calling thread below
            outcome["error"] = err

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.5)
    except BaseException:
        stop.set()
        with lock:
            running = list(live)
        for proc in running:
            proc.terminate()
        for proc in running:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        worker.join(60)
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["done"]


def run_root(smoke: bool) -> Path:
    return runs_dir() / "dufter2020-table3" / ("smoke" if smoke else "lab")


def member_key(cfg: Table3Config, name: str, smoke: bool = False) -> str:
    """The run key of member "<experiment>/<seed>" under `cfg` (its folder's name, as `Table3Stack` names it)."""
    experiment, seed = name.rsplit("/", 1)
    return run_key(member_config(cfg, table3_experiment(experiment, cfg), int(seed), smoke))


def stacks_of(root: Path, cfg: Table3Config, smoke: bool = False) -> list[Path]:
    """The stack folders under `root` pretrained under `cfg` (the folder named by its members' run keys under it, as
    `Table3Stack` names it); another recipe's stacks in the same folder are left out."""
    folders = []
    for f in sorted(Path(root).glob("stacks/*/pretrain_loss.json")):
        members = json.loads(f.read_text())["members"]
        if f.parent.name == stack_key([member_key(cfg, m, smoke) for m in members]):
            folders.append(f.parent)
    return folders


def run_curves(root: Path, cfg: Table3Config, smoke: bool = False) -> pd.DataFrame:
    """`pretraining_curves` of the stacks pretrained under `cfg` (`stacks_of`)."""
    return pretraining_curves(root, [f / "pretrain_loss.json" for f in stacks_of(root, cfg, smoke)])


def collect(root: Path, cfg: Table3Config | None = None, smoke: bool = False) -> pd.DataFrame:
    """table3.csv in the results format: experiment, seed, metric, language, value. Metrics: accuracy, macro_f1 and
    majority per language; finetune_lr, the run's fine-tuning rate, and with a rate grid dev_accuracy@<rate>, each
    rate's English dev accuracy (language: the source language); finetune_seconds (all its rates). Of the
    pretraining (language "all"): pretrain_loss, the final MLM loss (`final_loss`); unigram_entropy and
    unigram_entropy_joint, the level of a model that learned the pieces' frequencies alone (`unigram_entropies`); and
    pretrain_gpu_seconds, the member's share of its stack's GPU time (timing.json). Only the runs of `cfg` (their
    folders named by its run keys: `member_key`, `stacks_of`) are read; another recipe's in the same folder are not."""
    cfg = cfg or load_config(smoke)
    stacks = stacks_of(root, cfg, smoke)
    curves = pretraining_curves(root, [f / "pretrain_loss.json" for f in stacks])
    stack_seconds = member_gpu_seconds(root, stacks)  # member name -> its share of its stack's pretraining seconds
    levels = {}  # experiment -> (joint, given the language), computed once per experiment
    rows = []
    for f in sorted(Path(root).glob("*/*/*/metrics.json")):
        m = json.loads(f.read_text())
        if f.parent.name != member_key(cfg, f"{m['experiment']}/{m['seed']}", smoke):
            continue  # another recipe's run
        row = lambda metric, lang, v: rows.append({"experiment": m["experiment"], "seed": m["seed"], "metric": metric,
                                                   "language": lang, "value": v})
        for metric in ("accuracy", "macro_f1", "majority"):
            for lang, v in m[metric].items():
                row(metric, lang, v)
        source = next(iter(m["accuracy"]))
        row("finetune_lr", source, m["finetune"]["lr"])
        for lr, v in (m.get("lr_selection") or {}).get("dev_accuracy", {}).items():
            row(f"dev_accuracy@{lr}", source, v)
        row("finetune_seconds", source, m["finetune_seconds"])
        curve = curves[(curves.experiment == m["experiment"]) & (curves.seed == m["seed"])]
        if len(curve):
            row("pretrain_loss", "all", final_loss(curve.value))
        if m["experiment"] not in levels:
            levels[m["experiment"]] = unigram_entropies(cfg, table3_experiment(m["experiment"], cfg), smoke, root)
        row("unigram_entropy", "all", levels[m["experiment"]][1])
        row("unigram_entropy_joint", "all", levels[m["experiment"]][0])
        name = f"{m['experiment']}/{m['seed']}"
        if name in stack_seconds:
            row("pretrain_gpu_seconds", "all", round(stack_seconds[name], 1))
    return pd.DataFrame(rows, columns=["experiment", "seed", "metric", "language", "value"])


def member_gpu_seconds(root: Path, stacks: Sequence[Path]) -> dict[str, float]:
    """{"<experiment>/<seed>": its share of its stack's pretraining GPU-seconds} for the `stacks` (folders) with a
    timing record (timing.json, its calls' seconds summed, shared equally among pretrain_loss.json's members). A run
    pretrained in two of them is refused: which stack is meant is unknown."""
    out = {}
    for folder in stacks:
        timing = Path(folder) / "timing.json"
        if not timing.exists():
            continue
        members = json.loads((Path(folder) / "pretrain_loss.json").read_text())["members"]
        twice = sorted(set(members) & set(out))
        if twice:  # one run pretrained in two stacks (stacked differently)
            raise ConfigError(f"{root}: runs {', '.join(twice)} were pretrained in two stacks (the second: "
                              f"{Path(folder).name}); collect from a folder that holds one run of each")
        seconds = sum(r["seconds"] for r in json.loads(timing.read_text()))
        out.update({name: seconds / len(members) for name in members})
    return out


# A pretraining's final MLM loss: the mean of the last FINAL_LOSS_FRACTION of its records (one every LOSS_EVERY
# steps), so that no single batch decides it.
FINAL_LOSS_FRACTION = 0.1


def final_loss(losses: Sequence[float]) -> float:
    """The mean of the last FINAL_LOSS_FRACTION of `losses` (in step order), at least one record."""
    losses = list(losses)
    if not losses:
        raise ValueError("no loss records")
    return float(np.mean(losses[-max(1, math.ceil(FINAL_LOSS_FRACTION * len(losses))):]))


def pretraining_curves(root: Path, files: Sequence[Path] | None = None) -> pd.DataFrame:
    """Every member's recorded pretraining MLM loss (stacks/*/pretrain_loss.json, or the `files` given) in the
    results format, one row per record, in step order: experiment, seed, metric (mlm_loss), step, value."""
    rows = []
    for f in sorted(Path(root).glob("stacks/*/pretrain_loss.json")) if files is None else files:
        record = json.loads(f.read_text())
        for step, losses in record["loss"].items():
            for name, loss in zip(record["members"], losses):
                experiment, seed = name.rsplit("/", 1)
                rows.append({"experiment": experiment, "seed": int(seed), "metric": "mlm_loss", "step": int(step),
                             "value": float(loss)})
    out = pd.DataFrame(rows, columns=["experiment", "seed", "metric", "step", "value"])
    twice = out[out.duplicated(["experiment", "seed", "step"], keep=False)]
    if len(twice):  # two pretrainings of one run in the folder: their curves would be mixed
        names = sorted({f"{e}/{s}" for e, s in zip(twice.experiment, twice.seed)})
        raise ConfigError(f"{root}: runs {', '.join(names)} have two pretraining curves; collect from a folder that "
                          "holds one run of each")
    return out.sort_values(["experiment", "seed", "step"], kind="stable").reset_index(drop=True)


def unigram_entropies(cfg: Table3Config, exp: Experiment, smoke: bool = False, root: Path | None = None
                      ) -> tuple[float, float]:
    """(joint, given the language): the entropy in nats of the pieces the pretraining predicts (every piece between
    [CLS] and [SEP] of the training verses) under their unigram distribution over the joint vocabulary, and the
    languages' own unigram entropies weighted by their shares of the pieces. An MLM loss at the joint value is what
    a model that learned the pieces' frequencies and nothing else reaches; one below the second uses more than which
    language a verse is in. (scipy.stats.entropy normalises the counts.)"""
    from scipy.stats import entropy
    toks, vocab, _ = load_prepared(cfg, smoke, root)
    s = pretrain_set(cfg, exp, toks, vocab, smoke, load_chapter().training.max_length)
    pos = np.arange(s.ids.shape[1])
    content = (pos >= 1) & (pos[None, :] < (s.lengths - 1)[:, None])  # [N, W], as the pretraining masks
    pieces, langs = s.ids[content], np.broadcast_to(s.lang[:, None], s.ids.shape)[content]
    share = np.bincount(langs, minlength=len(cfg.languages)) / len(langs)
    given = sum(share[li] * entropy(np.bincount(pieces[langs == li])) for li in range(len(cfg.languages)) if share[li])
    return float(entropy(np.bincount(pieces))), float(given)


def _fraction(text: str, option: str) -> tuple[int, int]:
    """'I/N' with 0 <= I < N, checked."""
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and int(k) < int(n)):
        raise ConfigError(f"{option} takes I/N with 0 <= I < N; got {text!r}")
    return int(k), int(n)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prepare", action="store_true", help="prepare tokenizers and the knn table only")
    p.add_argument("--shard", default="0/1", help="I/N: train the I-th of N stacks")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--time-limit", type=float, default=None, help="seconds; checkpoints and stops after them")
    p.add_argument("--smoke", action="store_true", help="tiny corpus and model (CPU tests)")
    p.add_argument("--compile", choices=["regional", "none"], default=None,
                   help="compile the pretraining stack region by region (default: regional on a GPU, none on a CPU); "
                        "a speed switch, no run key")
    p.add_argument("--no-graphs", action="store_true", help="no CUDA graphs (a speed switch, no run key)")
    p.add_argument("--pretrain-only", action="store_true", help="pretrain the shard's stack and save its models only")
    p.add_argument("--finetune-part", default="0/1",
                   help="J/K: fine-tune only the shard's members i with i %% K == J (K processes on one GPU; the shard "
                        "must be pretrained first)")
    p.add_argument("--root", default=None, help="run folder (default runs/dufter2020-table3/<lab|smoke>)")
    p.add_argument("--collect", default=None, help="write table3.csv from the run folder to this path and exit")
    p.add_argument("--recipe", default=None,
                   help="pretrain under this variant of Table 3's declared pilot (experiments.yaml table3_pilot: its "
                        "lr and warmup_steps in place of table3's); changes the run keys")
    a = p.parse_args(argv)
    cfg = recipe_config(load_config(a.smoke), a.recipe)
    root = Path(a.root) if a.root else run_root(a.smoke)
    if a.collect:  # table3.csv there, and the pretraining curves beside it (table3_pretraining.csv)
        from xlrepro.results import write_csv
        write_csv(collect(root, cfg, a.smoke), a.collect)
        write_csv(run_curves(root, cfg, a.smoke), Path(a.collect).with_name(CURVES_CSV))
        return 0
    prepare(cfg, a.smoke, root)
    if a.prepare:
        return 0
    k, n = _fraction(a.shard, "--shard")
    part = _fraction(a.finetune_part, "--finetune-part")
    if a.pretrain_only and part != (0, 1):
        raise ConfigError("--pretrain-only and --finetune-part exclude each other")
    stack = shard_stacks(cfg, n)[k]
    compile = a.compile or ("regional" if torch.device(a.device).type == "cuda" else "none")
    done = Table3Stack(cfg, stack, root, a.device, a.smoke, compile=None if compile == "none" else compile,
                       graphs=not a.no_graphs).run(a.time_limit, part=part, pretrain_only=a.pretrain_only)
    print(json.dumps({"shard": a.shard, "done": done}))
    return 0 if done else 3


if __name__ == "__main__":
    raise SystemExit(main())
