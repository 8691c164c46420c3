"""The stacked pre-training of K et al.'s cells: the pair tables, which cells can share a stack, and the trainer.

See `stacks` for what a stack shares and what stays each model's own; a part's jobs, queue and workers are there
too. `bbert.Cell` pre-trains its seeds through `StackTrainer`; this module never imports `bbert` back.
"""
from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from xlrepro import atomic
from xlrepro.config import ConfigError
from xlrepro.engine.planner import wrap_stacks
from xlrepro.engine.noise import MASK_ACTION, MASK_RANDOM_ID, MASK_SELECT
from xlrepro.engine.stacked import ModelStack, OptimConfig, compile_mode, masked_capacity, select_masked

from .constants import CHECKPOINT_SECONDS
from .masking import whole_word_mask

MAX_STACK = 16  # models per stack: ~1.2 GB of activations each for the 192 x 12 base at 128 pairs (GPUs of 80 GB)
LOSS_EVERY = 200  # steps: each model's mean MLM loss goes into timing.json (a diverged model shows there)
LENGTH_BIN_SALT = 0x4B32  # the shared length-quantile order: a permutation per cycle of `bins` steps


def shared_bin(step: int, bins: int) -> int:
    """The length quantile every model of every stack draws from at `step`: each cycle of `bins` steps visits every
    quantile once, in an order that depends on the cycle only (never on a seed or a stack)."""
    if bins < 1:
        raise ValueError(f"bins must be >= 1; got {bins}")
    if bins == 1:
        return 0
    cycle, within = divmod(step, bins)
    return int(np.random.default_rng([cycle, LENGTH_BIN_SALT]).permutation(bins)[within])


@dataclass
class PairTable:
    """A cell's pre-training pairs, all languages in one padded table (built on the CPU, once per cell).

    ids [N, W] int32; types [N, W] int8; wstart [N, W] int16 (input position of each piece's word-initial piece);
    maskable [N, W] bool (content pieces: no [CLS]/[SEP]/language-id separators, no padding); lengths [N] int16;
    is_next [N] bool; offsets/sizes [L] (each language's rows); probs [L] (language sampling, exponent alpha);
    by_length [N] (each language's rows sorted by length, stable: the quantiles of `draw`)."""
    ids: np.ndarray
    types: np.ndarray
    wstart: np.ndarray
    maskable: np.ndarray
    lengths: np.ndarray
    is_next: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray
    probs: np.ndarray
    by_length: np.ndarray

    @classmethod
    def build(cls, pairs: dict, special, pretrain) -> "PairTable":
        """From `Cell.pretraining_pairs` (per language: ids, types, word starts, lengths, is_next)."""
        from xlrepro.training.mini_mbert import sampling_weights
        langs = list(pairs)
        width = max(p[0].shape[1] for p in pairs.values())
        pad = lambda a: np.pad(a, ((0, 0), (0, width - a.shape[1])))  # noqa: E731
        ids = np.concatenate([pad(pairs[l][0]) for l in langs])
        lengths = np.concatenate([pairs[l][3] for l in langs])
        sizes = np.array([len(pairs[l][0]) for l in langs], np.int64)
        if pretrain.length_bins > sizes.min():
            raise ConfigError(f"length_bins {pretrain.length_bins} exceeds the smallest language's {sizes.min()} pairs")
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        weights = sampling_weights(dict(zip(langs, sizes.tolist())), pretrain.alpha)
        content = np.arange(width)[None, :] < lengths[:, None]
        maskable = content & ~np.isin(ids, np.array(sorted(special)))
        by_length = np.concatenate([o + np.argsort(lengths[o:o + n], kind="stable") for o, n in zip(offsets, sizes)])
        return cls(ids.astype(np.int32), np.concatenate([pad(pairs[l][1]) for l in langs]).astype(np.int8),
                   np.concatenate([pad(pairs[l][2]) for l in langs]).astype(np.int16), maskable,
                   lengths.astype(np.int16), np.concatenate([pairs[l][4] for l in langs]).astype(bool),
                   offsets, sizes, np.array([weights[l] for l in langs]), by_length)

    def draw(self, seed: int, step: int, batch_size: int, bins: int = 1) -> np.ndarray:
        """[B] rows of a model's batch: languages by `probs`, then uniformly among the language's pairs of the
        step's shared length quantile (all pairs with bins = 1). Depends on (seed, step) only: resumable."""
        rng = np.random.default_rng([seed, step])
        langs = rng.choice(len(self.sizes), size=batch_size, p=self.probs)
        b = shared_bin(step, bins)
        lo, hi = (b * self.sizes) // bins, ((b + 1) * self.sizes) // bins
        k = rng.integers(lo[langs], hi[langs])
        return self.by_length[self.offsets[langs] + k]

    def save(self, path: Path) -> None:
        with atomic.atomic_path(path) as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, **self.__dict__)

    @classmethod
    def load(cls, path: Path) -> "PairTable":
        with np.load(path) as z:
            return cls(**{k: z[k] for k in z.files})


# ----------------------------------------------------------------------------------------------- planning
def stack_shape(cell) -> tuple:
    """What models of a stack of `bbert.Cell` seeds must share: architecture, optimiser recipe, batch, table rows and
    the loss (NSP or not: NSP cells stack only with NSP cells) and the tokenization (its padded width sets the step's
    cost: a char+word stack stepped at 16 ms per model-step against 8.9 for word pieces, so a mixed stack is
    misplanned). Cells trained one seed at a time (`Cell.alone`: NSP and its control where the profile does not stack
    them): None."""
    if cell.alone:
        return None
    s, p = cell.size, cell.profile.pretrain
    return (s.hidden, s.layers, s.heads, s.ffn, s.lr, p.steps, p.warmup, p.weight_decay, p.batch_size, p.max_length,
            p.mlm_probability, p.length_bins, cell.planned_rows, cell.exp.nsp, cell.exp.tokenization, cell.exp.linear)


def stack_key(members) -> str:
    return hashlib.sha1(",".join(f"{c.key}/{s}" for c, s in members).encode()).hexdigest()[:12]


def stack_folder(members, root: Path | None = None) -> Path:
    """Where a stack of (cell, seed) members keeps its checkpoint, progress.json and timing.json."""
    base = Path(root) if root is not None else members[0][0].dir.parent
    return base / "stacks" / stack_key(members)


def plan_stacks(members, slots: int = 1, max_stack: int = MAX_STACK, seconds=None,
                max_seconds: float | None = None, sized=None) -> list[list]:
    """(cell, seed) members grouped by `stack_shape`, each group cut into stacks so that the `slots` (GPUs x
    workers), each taking the next stack when free, finish together (the engine's `wrap_stacks`: a group's models are
    cut where the slots' equal shares of the whole time end, no stack of one where its group has more, none above
    `max_stack`). `seconds(cell)`: a model's estimated training seconds (None: the same for all). `max_seconds` (with
    `seconds`): no stack above that many seconds of training where a stack of one fits in it, so that a stack
    started at a call's beginning finishes within the call rather than waiting on a checkpoint for the next one;
    `sized(cell, k)`, where given, a model's seconds in a stack of k, which then bounds each stack by its own size
    (a model-step costs less in a larger stack). The plan changes no number. Members trained one by one
    (`Cell.alone`) are left out."""
    if slots < 1 or max_stack < 1:
        raise ConfigError(f"slots and max_stack must be >= 1; got {slots}, {max_stack}")
    if max_seconds is not None and (seconds is None or max_seconds <= 0):
        raise ConfigError(f"max_seconds needs the models' seconds and must be positive; got {max_seconds}")
    groups: dict[tuple, list] = {}
    for cell, seed in members:
        shape = stack_shape(cell)
        if shape is not None:
            groups.setdefault(shape, []).append((cell, seed))
    sizes = [len(g) for g in groups.values()]
    times = [1.0 if seconds is None else float(seconds(g[0][0])) for g in groups.values()]
    stacks = []

    def size_cap(cell, t):  # the most models a stack of `cell`'s group may hold within max_seconds
        if max_seconds is None or t <= 0:
            return max_stack
        k = max(1, min(max_stack, int(max_seconds // t)))
        while sized is not None and k > 1 and k * sized(cell, k) > max_seconds:
            k -= 1
        return k
    caps = [size_cap(g[0][0], t) for g, t in zip(groups.values(), times)]
    # a cell with its own linear layers (`Experiment.linear`: the FP8 switch's check) trains one model per stack
    caps = [1 if g[0][0].exp.linear else cap for g, cap in zip(groups.values(), caps)]
    for group, pieces in zip(groups.values(), wrap_stacks(sizes, times, slots, caps)):
        start = 0
        for k in pieces:
            stacks.append(group[start:start + k])
            start += k
    return stacks


# ----------------------------------------------------------------------------------------------- training
class StackTrainer:
    """Pre-train (cell, seed) members of one shape together; each model is saved into its cell's folder. NSP cells
    (at a profile with `nsp_stack`) are HF `BertForPreTraining` models whose loss adds next-sentence prediction on
    their pairs' labels; their encoders are saved with the pooler, as `_pretrain_alone` saves them."""

    def __init__(self, members, device="cpu", compile=None, graphs: bool = True, root: Path | None = None,
                 snapshots: bool = True):
        if not members:
            raise ValueError("a stack needs at least one member")
        shapes = {stack_shape(c) for c, _ in members}
        if len(shapes) != 1 or None in shapes:
            raise ValueError(f"members of one stack need one shape and none trained alone; got {len(shapes)} shapes")
        names = [f"{c.name}/{s}" for c, s in members]
        if len(set(names)) != len(names):
            raise ValueError(f"a (cell, seed) appears twice in one stack: {names}")
        self.members = members
        self.device = torch.device(device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # graph capture records on the current device's stream
        self.compile = compile_mode(compile, self.device)
        self.graphs = graphs and self.device.type == "cuda"
        self.snapshots = snapshots  # save the profile's snapshots (`Pretrain.snapshots`) on the way
        cell0 = members[0][0]
        self.size, self.p = cell0.size, cell0.profile.pretrain
        self.nsp = cell0.exp.nsp  # one for all members (`stack_shape`)
        self.folder = stack_folder(members, root)

    def _device_data(self):
        """The tables of the stack's distinct cells on the device, one after the other; member m's rows start at
        offset[m]. Per member: [MASK] id and vocabulary size (the range of random replacements), [M, 1, 1]."""
        cells, tables = {}, []
        for c, _ in self.members:
            if c.dir not in cells:
                cells[c.dir] = (sum(len(t.ids) for t in tables), len(tables))
                tables.append(c.table())
        width = max(t.ids.shape[1] for t in tables)
        cat = lambda name: np.concatenate([np.pad(getattr(t, name), ((0, 0), (0, width - t.ids.shape[1])))  # noqa
                                           for t in tables])
        dev = self.device
        m, b = len(self.members), self.p.batch_size
        return dict(
            tables=tables, table_of=[cells[c.dir][1] for c, _ in self.members],
            offset=np.array([cells[c.dir][0] for c, _ in self.members]),
            host_lengths=np.concatenate([t.lengths for t in tables]).astype(np.int64),
            ids=torch.from_numpy(cat("ids")).to(dev), types=torch.from_numpy(cat("types")).to(dev),
            wstart=torch.from_numpy(cat("wstart")).to(dev), maskable=torch.from_numpy(cat("maskable")).to(dev),
            lengths=torch.from_numpy(np.concatenate([t.lengths for t in tables]).astype(np.int64)).to(dev),
            is_next=torch.from_numpy(np.concatenate([t.is_next for t in tables]).astype(np.int64)).to(dev),
            mask_id=torch.tensor([c.ids["[MASK]"] for c, _ in self.members], device=dev).view(m, 1, 1),
            vocab=torch.tensor([c.vocab_size for c, _ in self.members], device=dev).view(m, 1, 1),
            rows=torch.zeros((m, b), dtype=torch.int64, device=dev), width=width)

    def _batch(self, d, stack: ModelStack, width: int):
        """Inputs of one step for all models from device tensors only (capturable in a CUDA graph)."""
        rows = d["rows"]  # [M, B] rows of the stacked tables
        x = d["ids"][rows, :width].long()  # [M, B, W]
        tt, ws = d["types"][rows, :width].long(), d["wstart"][rows, :width].long()
        maskable, n = d["maskable"][rows, :width], d["lengths"][rows]  # [M, B, W], [M, B]
        noise = stack.noise
        u, r = noise.uniform_tokens(MASK_SELECT, width), noise.uniform_tokens(MASK_ACTION, width)
        rnd = torch.minimum((noise.uniform_tokens(MASK_RANDOM_ID, width) * d["vocab"]).long(), d["vocab"] - 1)
        inputs, labels = whole_word_mask(x, maskable, ws, u, r, rnd, d["mask_id"], self.p.mlm_probability)
        sel = select_masked(labels, masked_capacity(rows.shape[1] * width, self.p.mlm_probability))
        pos = torch.arange(width, device=self.device)
        attention = (pos < n[..., None])[:, :, None, None, :]  # [M, B, 1, 1, W]
        if self.nsp:  # HF's NSP labels [M, B]: 0 = the second line follows the first, 1 = a random one
            return inputs, attention, pos.expand_as(x), tt, *sel, 1 - d["is_next"][rows]
        return inputs, attention, pos.expand_as(x), tt, *sel

    def _new_stack(self) -> ModelStack:
        from xlrepro.engine.models import init_model
        p = self.p
        models = [init_model(self.size, c.vocab_rows, s, positions=p.max_length, nsp=self.nsp) for c, s in self.members]
        optim = OptimConfig(lr=self.size.lr, weight_decay=p.weight_decay, eps=1e-6,
                            warmup_steps=math.ceil(p.warmup * p.steps), total_steps=p.steps, max_grad_norm=1.0)
        from xlrepro.engine.pretrain import new_stack
        linear = self.members[0][0].exp.linear  # one per stack (`stack_shape`); empty: the default product
        from xlrepro.engine.fused_bert import Levers
        return new_stack(models, optim, self.device, engine="fused", seeds=[s for _, s in self.members],
                         rows=torch.arange(p.batch_size), compile=self.compile, graphs=self.graphs,
                         levers=Levers(linear=linear) if linear else None)

    def run(self, time_limit: float | None = None, progress: bool = True) -> bool:
        """Train to the end (True) or until `time_limit` seconds (False, checkpointed); save every model.
        The loop is the engine's (`pretrain_loop`); this recipe gives it the batches (each member's own length-binned
        draw, `PairTable.draw`) and keeps each model's mean MLM loss over every LOSS_EVERY steps."""
        from safetensors.torch import save_model

        from xlrepro.engine.models import device_name
        from xlrepro.engine.pretrain import pretrain_loop
        if all((c.dir / f"model_{s}.safetensors").exists() for c, s in self.members):
            return True
        t0 = time.time()
        p = self.p
        d = self._device_data()
        stack = self._new_stack()
        ckpt = self.folder / "checkpoint.pt"
        label = ",".join(sorted({c.name for c, _ in self.members}))
        counts = {"tokens": 0, "padded": 0}  # pieces and padded slots of this call's batches
        loss_sum = torch.zeros(len(self.members), device=self.device)  # [M], read back once per LOSS_EVERY steps
        window = [0]  # steps in loss_sum (fewer than LOSS_EVERY in the first window after a resume)

        def batch(step: int):
            picked = np.stack([d["offset"][i] + d["tables"][d["table_of"][i]].draw(s, step, p.batch_size,
                                                                                   p.length_bins)
                               for i, (_, s) in enumerate(self.members)])  # [M, B]
            lengths = d["host_lengths"][picked]
            width = min(int(math.ceil(lengths.max() / 8) * 8), d["width"])
            counts["tokens"] += int(lengths.sum())
            counts["padded"] += picked.size * width
            rows = torch.as_tensor(picked)
            if self.device.type == "cuda":
                rows = rows.pin_memory()
            d["rows"].copy_(rows, non_blocking=True)
            return (lambda: self._batch(d, stack, width)), (width if self.graphs else None)

        def record_loss(curve: dict, step: int, losses: torch.Tensor):
            # curve: step -> each model's mean MLM loss over the LOSS_EVERY steps before it
            loss_sum.add_(losses)
            window[0] += 1
            if (step + 1) % LOSS_EVERY and step + 1 != p.steps:
                return None
            curve[step + 1] = [round(v, 4) for v in (loss_sum / window[0]).tolist()]
            loss_sum.zero_()
            window[0] = 0
            return None

        def save(stack, i: int, path: Path) -> None:  # member i's encoder, in bf16, as its cell's fine-tuning reads it
            with atomic.atomic_path(path) as tmp:
                save_model(stack.export(i).bert.to(torch.bfloat16).cpu(), str(tmp))

        def snapshot(stack, curve, seconds):
            # the profile's `snapshots`: each model's weights after this step, kept beside its final model for the
            # zero-shot learning curve (`Cell.evaluate_snapshot`); a snapshot saved before a resume is not rewritten
            for i, (cell, seed) in enumerate(self.members):
                if not (path := cell.snapshot_path(seed, stack.step_count)).exists():
                    save(stack, i, path)
            return False  # go on training

        def on_save(stack, curve):  # a check can read the progress mid-run; the next call's plan keeps the members
            atomic.write_json(self.folder / "progress.json", {"step": stack.step_count, "steps": p.steps,
                                                              "shape": self.size.name,
                                                              "members": [f"{c.name}/{s}" for c, s in self.members],
                                                              "compile_fallbacks": stack.fallbacks})

        snapshot_steps = set(p.snapshot_steps) if self.snapshots else set()
        done = pretrain_loop(stack, batch, steps=p.steps, checkpoint=ckpt, time_limit=time_limit, t0=t0,
                             progress=progress, desc=f"{len(self.members)}x {self.size.name} ({label[:60]})",
                             curve={}, record_loss=record_loss, on_save=on_save, checkpoint_seconds=CHECKPOINT_SECONDS,
                             on_eval=snapshot if snapshot_steps else None, eval_steps=snapshot_steps or None)
        if done is None:
            return False
        stack, curve, seconds = done
        tokens, padded = counts["tokens"], counts["padded"]
        for i, (cell, seed) in enumerate(self.members):
            save(stack, i, cell.dir / f"model_{seed}.safetensors")
        atomic.write_json(self.folder / "timing.json", {
            "members": [f"{c.name}/{s}" for c, s in self.members], "shape": self.size.name,
            "tokenization": self.members[0][0].exp.tokenization, "steps": p.steps,
            "train_seconds": seconds, "ms_per_model_step": 1000 * seconds / (p.steps * len(self.members)),
            "padding_share_this_call": 1 - tokens / max(padded, 1), "device": device_name(self.device),
            "compile": self.compile or "none", "graphs": self.graphs, "torch": torch.__version__,
            # compiled steps that failed: the stack went on eagerly (same losses, lower speed) from that step
            "compile_fallbacks": stack.fallbacks,
            # NSP stacks: the curve's losses are MLM + NSP (HF's BertForPreTraining loss)
            "loss_every": LOSS_EVERY, "loss": "mlm+nsp" if self.nsp else "mlm",
            "mlm_loss_curve": {str(k): v for k, v in sorted(curve.items())}})
        ckpt.unlink(missing_ok=True)
        (self.folder / "progress.json").unlink(missing_ok=True)
        return True
