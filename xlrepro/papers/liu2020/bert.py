"""The four BERTs of Liu et al. 2020: {small, big} corpus x {window 512, window 20}, 768 x 12 with mBERT's vocabulary.

Windows (§3.2.3 L): "window 512" packs whole verses of a chapter into rows of at most 510 pieces + [CLS]/[SEP];
"window 20" cuts each chapter stream into pieces of 18 + [CLS]/[SEP] (`slice_stream`: every token once). Every
model takes the same number of steps with the same number of token slots per step (`tokens_per_step`: 512-rows
batch tokens_per_step // 512 rows, 20-rows tokens_per_step // 20), so the two windows see the same number of
tokens; languages are drawn per row with mini-mBERT's smoothed probabilities (alpha 0.7). MLM 15 % (80/10/10).

Runs are resumable (checkpoint.pt every few minutes and at `time_limit`), in
``runs/liu2020/lab/bert/<size>-w<window>/``; `load_bert` returns the finished HF BertForMaskedLM. `pad_vocab` (the
fused loss's `Levers.pad_vocab`, a speed switch) stays 1 in every chapter's run until its training check
(`padv_check`) adopts it.
Word vectors for retrieval: `word_vectors` averages a word's hidden states over all its occurrences (every layer).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch

from xlrepro import atomic
from xlrepro.config import ConfigError, ModelSize, choose

WINDOWS = (512, 20)
BASE = ModelSize(name="base", hidden=768, layers=12, heads=12, ffn=3072, lr=1e-4)
CHECKPOINT_SECONDS = 180


def slice_stream(tokens: Sequence, piece: int) -> list[list]:
    """Consecutive pieces of `piece` tokens (the last may be shorter): every token exactly once, in order."""
    if piece < 1:
        raise ConfigError(f"piece must be >= 1; got {piece}")
    return [list(tokens[i:i + piece]) for i in range(0, len(tokens), piece)]


def pack_verses(verses: Sequence[Sequence], max_tokens: int) -> list[list]:
    """Whole verses packed greedily into rows of at most `max_tokens` (a longer verse is cut into pieces)."""
    rows, cur = [], []
    for v in verses:
        if len(v) > max_tokens:
            if cur:
                rows.append(cur)
                cur = []
            rows += slice_stream(v, max_tokens)
            continue
        if len(cur) + len(v) > max_tokens:
            rows.append(cur)
            cur = []
        cur = cur + list(v)
    if cur:
        rows.append(cur)
    return rows


def rows_for(chapters: Sequence[Sequence[Sequence]], window: int) -> list[list]:
    """Training rows (without specials) of one language: chapters given as lists of verses of token ids."""
    choose("window", window, WINDOWS)
    out = []
    for verses in chapters:
        if window == 512:
            out += pack_verses(verses, window - 2)
        else:
            out += slice_stream([t for v in verses for t in v], window - 2)
    return out


@dataclass
class BertRunConfig:
    size: str = "big"  # corpus: small | big
    window: int = 512
    model: ModelSize = field(default_factory=lambda: BASE)
    steps: int = 2000
    tokens_per_step: int = 32_768
    warmup: float = 0.05
    alpha: float = 0.7
    seed: int = 0
    mlm_probability: float = 0.15
    weight_decay: float = 0.01
    max_chapters: int | None = None  # smoke runs
    # True: the fused loss (xlrepro/engine/fused_bert.py) compiled region by region, SDPA attention (the GPU
    # runs); False: HF's BertForMaskedLM. Different random draws (dropout), so part of the run's config.
    compile: bool = False
    # the MLM decoder's product over the vocabulary padded with zero rows to a multiple of this many (the fused
    # loss's `Levers.pad_vocab`; 1: no padding): rounding only, but a speed switch with a training check (`padv_check`)
    pad_vocab: int = 1

    def __post_init__(self):
        from .corpora import SIZES
        if isinstance(self.model, dict):
            self.model = ModelSize(**self.model)
        choose("size", self.size, SIZES)
        choose("window", self.window, WINDOWS)
        if self.tokens_per_step < 512:
            raise ConfigError(f"tokens_per_step must be >= 512 (one 512-token row); got {self.tokens_per_step}")
        if isinstance(self.pad_vocab, bool) or not isinstance(self.pad_vocab, int) or self.pad_vocab < 1:
            raise ConfigError(f"pad_vocab must be a whole number of rows >= 1 (1: no padding; e.g. 8 or 64 align the "
                              f"decoder's product); got {self.pad_vocab!r}")
        if self.pad_vocab != 1 and not self.compile:
            raise ConfigError(f"pad_vocab={self.pad_vocab} pads the fused loss's decoder, which only compile=True "
                              f"trains with; valid values with compile=False: 1")

    @property
    def batch_size(self) -> int:
        return self.tokens_per_step // self.window

    @property
    def name(self) -> str:
        """<size>-w<window>, with -padv<pad_vocab> where the vocabulary is padded: a padded run never resumes, nor is
        read as, an unpadded one."""
        return f"{self.size}-w{self.window}" + ("" if self.pad_vocab == 1 else f"-padv{self.pad_vocab}")

    def as_dict(self) -> dict:
        """The config as runs save and key it (`asdict`), with pad_vocab left out where it is 1 (no padding): a run
        made before the switch existed keeps its config.json and its key."""
        out = asdict(self)
        if self.pad_vocab == 1:
            del out["pad_vocab"]
        return out

    def folder(self, root: str | Path | None = None) -> Path:
        from xlrepro.paths import runs_dir
        return Path(root or runs_dir() / "liu2020" / "lab" / "bert") / self.name


def encode_rows(size: str, window: int, langs: Sequence[str], max_chapters: int | None = None, tokenizer=None):
    """[N, window] int32 ids with [CLS] ... [SEP] and padding, lengths [N], each language's first row."""
    from xlrepro.data.collate import pad_batch
    from xlrepro.data.mbert_vocab import mbert_tokenizer

    from .corpora import tokenized_verses

    tok = tokenizer or mbert_tokenizer()
    verses = tokenized_verses(size, langs, tokenizer=tok, max_chapters=max_chapters)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    rows, starts = [], []
    for lang in langs:
        starts.append(len(rows))
        ids = [[[tok.token_to_id(t) for t in v] for v in ch] for ch in verses[lang]]
        rows += [[cls, *r, sep] for r in rows_for(ids, window)]
    ids, lengths = pad_batch(rows, tok.token_to_id("[PAD]"), dtype=np.int32)
    return torch.from_numpy(ids), torch.from_numpy(lengths), np.array(starts + [len(rows)])


def pretrain_bert(config: BertRunConfig, device: str | torch.device = "cpu", root: str | Path | None = None,
                  time_limit: float | None = None, progress: bool = True, languages: Sequence[str] | None = None,
                  rows=None, loss_every: int = 50, on_eval=None, eval_every: int | None = None) -> Path:
    """Train (or resume) one of the four BERTs; returns its folder (training.json there when finished).
    rows: `encode_rows`'s output where the caller has it already; on_eval / eval_every: evaluation points during
    training (`train_sampled_mlm`), each followed by a checkpoint."""
    from safetensors.torch import save_model

    from xlrepro.data.mbert_vocab import mbert_tokenizer
    from xlrepro.engine.fused_bert import Levers
    from xlrepro.engine.models import device_name, init_model
    from xlrepro.engine.pretrain import sampling_weights, train_sampled_mlm
    from xlrepro.engine.stacked import OptimConfig

    from .corpora import LANGUAGES

    langs = tuple(languages or LANGUAGES)
    out = config.folder(root)
    cfg_json = json.loads(json.dumps({**config.as_dict(), "languages": list(langs)}))
    if (out / "config.json").exists():
        if json.loads((out / "config.json").read_text()) != cfg_json:
            raise ConfigError(f"{out} holds a run of another config; delete it or pass another root")
        if (out / "training.json").exists():
            return out
    t0 = time.time()
    device = torch.device(device)
    atomic.write_json(out / "config.json", cfg_json)
    tok = mbert_tokenizer()
    ids, lengths, starts = rows or encode_rows(config.size, config.window, langs, config.max_chapters, tok)
    sizes = np.diff(starts)
    weights = sampling_weights(dict(zip(langs, sizes.tolist())), config.alpha)
    p = np.array([weights[lang] for lang in langs])
    vocab_size = tok.get_vocab_size()
    model = init_model(config.model, vocab_size, config.seed, attn="sdpa", positions=512)
    optim = OptimConfig(lr=config.model.lr, weight_decay=config.weight_decay, eps=1e-6,
                        warmup_steps=math.ceil(config.warmup * config.steps), total_steps=config.steps,
                        max_grad_norm=1.0)
    B = config.batch_size
    done = train_sampled_mlm(model, optim, device, ids, lengths, p, sizes, starts, seed=config.seed,
                             steps=config.steps, batch_size=B, mask_id=tok.token_to_id("[MASK]"),
                             vocab_size=vocab_size, mlm_probability=config.mlm_probability,
                             checkpoint=out / "checkpoint.pt", time_limit=time_limit, t0=t0, progress=progress,
                             desc=config.name, loss_every=loss_every, compile=config.compile, on_eval=on_eval,
                             eval_every=eval_every,
                             levers=None if config.pad_vocab == 1 else Levers(pad_vocab=config.pad_vocab))
    if done is None:
        return out
    stack, losses, seconds = done
    with atomic.atomic_path(out / "model.safetensors") as tmp:
        save_model(stack.export(0).cpu(), str(tmp))
    atomic.write_json(out / "training.json", {
        "steps": config.steps, "seconds": seconds, "device": device_name(device),
        "rows": dict(zip(langs, sizes.tolist())), "sampling_weights": weights, "losses": losses,
        "tokens_per_step": config.tokens_per_step, "batch_size": B})
    (out / "checkpoint.pt").unlink(missing_ok=True)
    return out


def load_bert(folder: str | Path):
    """The finished run's HF BertForMaskedLM (eval mode) and its config."""
    from safetensors.torch import load_model
    from transformers import BertForMaskedLM

    from xlrepro.data.mbert_vocab import VOCAB_SIZE
    from xlrepro.engine.models import bert_config

    folder = Path(folder)
    if not (folder / "training.json").exists():
        raise FileNotFoundError(f"no finished BERT in {folder}: run `xlrepro train liu2020 --part bert` first")
    raw = json.loads((folder / "config.json").read_text())
    raw.pop("languages", None)
    config = BertRunConfig(**raw)
    model = BertForMaskedLM(bert_config(config.model, VOCAB_SIZE, positions=512))
    load_model(model, str(folder / "model.safetensors"))
    return model.eval(), config


@torch.no_grad()
def word_vectors(bert, streams: Mapping[str, list[list[int]]], words: Mapping[str, set[int]], *, window: int = 128,
                 max_contexts: int = 200, device="cpu", batch_size: int = 32) -> dict[str, dict[int, torch.Tensor]]:
    """{language: {token id: [L+1, H] mean hidden state over its occurrences}} for the token ids in
    `words[lang]`, read in windows of `window` pieces of the language's streams (ids); at most `max_contexts`
    occurrences per token (the first ones in reading order). Only windows holding a chosen occurrence are read;
    the sums are gathered on the device (index_add_), so the cost is the forward passes."""
    device = torch.device(device)
    out = {}
    for lang, wanted in words.items():
        slot = {t: k for k, t in enumerate(sorted(wanted))}
        rows = [r for s in streams[lang] for r in slice_stream(s, window - 2)]
        seen = np.zeros(len(slot), dtype=np.int64)
        picks: list[list[tuple[int, int]]] = []  # per row: (position incl. [CLS], slot)
        for r in rows:
            p = []
            for j, t in enumerate(r):
                k = slot.get(t)
                if k is not None and seen[k] < max_contexts:
                    seen[k] += 1
                    p.append((j + 1, k))
            picks.append(p)
        keep = [i for i, p in enumerate(picks) if p]
        sums = None
        for b in range(0, len(keep), batch_size):
            chunk = keep[b:b + batch_size]
            W = max(len(rows[i]) for i in chunk) + 2
            ids = torch.zeros(len(chunk), W, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for i, r in enumerate(chunk):
                ids[i, :len(rows[r]) + 2] = torch.tensor([101, *rows[r], 102])  # mBERT's [CLS] / [SEP]
                mask[i, :len(rows[r]) + 2] = 1
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                hs = bert(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True).hidden_states
            hs = torch.stack(hs).float()  # [L+1, B, W, H]
            bi = torch.tensor([i for i, r in enumerate(chunk) for _ in picks[r]], device=device)
            pos = torch.tensor([j for r in chunk for j, _ in picks[r]], device=device)
            slots = torch.tensor([k for r in chunk for _, k in picks[r]], device=device)
            if sums is None:
                sums = torch.zeros(hs.shape[0], len(slot), hs.shape[-1], dtype=torch.float64, device=device)
            sums.index_add_(1, slots, hs[:, bi, pos].double())  # [L+1, n, H] into [L+1, V, H]
        out[lang] = {t: (sums[:, k] / seen[k]).float().cpu() for t, k in slot.items() if seen[k] > 0}
    return out
