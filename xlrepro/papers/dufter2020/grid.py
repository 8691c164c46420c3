"""Train and evaluate a grid of (experiment, seed) models: stacks of models, resumable, over one or more GPUs.

Layout of a run folder (`runs/<chapter>/<profile>/`):
  <exp>/<seed>/<key>/config.json    the model's fully resolved configuration; <key> is its hash (`runkeys.py`)
  <exp>/<seed>/<key>/metrics.json   final Table-1 metrics of one model (its presence means "done")
                                    config.json and metrics.json record the vocabulary's fingerprint ("vocabulary",
                                    `xlrepro.tokenization.vocab_fingerprint`; not part of the key)
  <exp>/<seed>/<key>/curve.json     metrics at checkpoints during training (experiments with `curve: true`)
  <exp>/<seed>/<key>/model.safetensors   weights (small models, and the first seed of large ones)
  stacks/<key>/checkpoint.pt  training state of an unfinished stack, for resume
  stacks/<key>/timing.json    wall time and throughput of a finished stack (and of its evaluations)

A model's numbers are its own: its initialisation, data order, masking and dropout depend only on its
(experiment, seed), never on the stack it shares, the number of GPUs, or the compile and CUDA-graph switches
(`noise.py`). So `xlrepro train dufter2020 --ids 0 --seeds 0` retrains the published model (0, 0).

Evaluation (checkpoints and final) runs all models of a stack in one batched forward (`evaluation="stacked"`, the
default, `multilinguality.evaluate_stack`) or exports each model to Hugging Face and evaluates it alone
("per-model", the reference, and the path the published runs took). Both give the same numbers to floating-point
rounding: equal in float32 on the CPU (tests/test_stacked_eval.py); in bfloat16 on an H200, for 20 BERT-small models,
`time_stack_evaluation` measured the stacked path 3.0x faster with perplexities within 7.4e-4, alignment within 4e-6
and the retrieval and translation accuracies equal (book/results/bench/stack_eval.json). So the choice is not part of
a run's key; metrics.json records which one ran.
"""
from __future__ import annotations

import hashlib
import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from torch.func import stack_module_state

from xlrepro import atomic
from xlrepro.config import ConfigError, check_profile, check_seeds, plural
from xlrepro.engine.masking import mask_tokens
from xlrepro.engine.models import count_parameters, device_name, init_model
from xlrepro.paths import runs_dir
from xlrepro.runkeys import run_key, write_config
from xlrepro.tokenization import vocab_fingerprint
from xlrepro.engine.distributed import barrier, init_from_env, world
from xlrepro.engine.queue import Job, all_finished, queue_world, rank_device, run_queue
from xlrepro.engine import planner
from xlrepro.engine.fused_bert import LINEARS
# ONE_MODEL_COMPILES and PERSISTENT_REDUCTIONS_OFF (the planner's): the engineering appendix names them as the grid's
from xlrepro.engine.planner import (MAX_STACK, ONE_MODEL_COMPILES, PERSISTENT_REDUCTIONS_OFF,  # noqa: F401
                                    stack_compile, stack_levers)
from xlrepro.engine.pretrain import new_stack, pretrain_loop
from xlrepro.engine.stacked import (MaskedPositionsLM, ModelStack, OptimConfig, compile_mode, masked_capacity,
                                      select_masked)

from .config import Chapter, Experiment, load_chapter
from .lab import CORPUS, LabData, load_lab
from .multilinguality import EVALUATIONS, EvalSets, evaluate, evaluate_stack
from .transforms import BilingualSet, build_bilingual

MEGABATCH = 50  # batches per length-sorted megabatch (HF's group_by_length uses 50 as well)
# Bump when the training code changes numbers for the same configuration (a new key for every run).
ENGINE = "stacked-fused/per-model-noise-v1"


@dataclass(frozen=True)
class Member:
    """One model of the grid: an experiment, a seed, and the resolved configuration that names its run folder."""
    exp: Experiment
    seed: int
    config: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.exp.id}/{self.seed}"

    @property
    def run_key(self) -> str:
        return run_key(self.config)


def member_config(chapter: Chapter, exp: Experiment, seed: int, profile: str = "lab", epochs: int | None = None,
                  max_sentences: int | None = None, batch_size: int | None = None) -> dict:
    """Everything that determines a model's numbers (the description and the engine's speed switches do not)."""
    training = asdict(chapter.training if batch_size is None else replace(chapter.training, batch_size=batch_size))
    training.pop("vocab_per_language", None)  # not read by training (the corpus sets the vocabulary)
    return {"chapter": chapter.name, "engine": ENGINE, "profile": profile, "corpus": CORPUS,
            "experiment": exp.key_fields(), **knn_key(exp, profile, max_sentences),
            "size": asdict(chapter.size(exp)), "training": training, "seed": seed,
            "epochs": epochs or exp.epochs, "max_sentences": max_sentences}


def knn_key(exp: Experiment, profile: str, max_sentences: int | None = None) -> dict:
    """knn-replace runs carry their neighbour table's settings (embeddings, mapping, corpus) in their key."""
    if not exp.knn_replace:
        return {}
    from .knn import spec
    return {"knn": {"profile": profile, **spec(exp.knn_k, max_sentences)}}


def member_dir(root: Path, m: Member) -> Path:
    if not m.config:
        raise ValueError(f"model {m.key} has no resolved configuration: build members with grid_members")
    return root / m.exp.id / str(m.seed) / m.run_key


def is_done(root: Path, m: Member) -> bool:
    return (member_dir(root, m) / "metrics.json").exists()


def parse_max_stack(items: list[str] | None) -> dict[str, int]:
    """`["base=3"]` -> {"base": 3}: the `--max-stack` option, checked before any work."""
    out = {}
    for item in items or []:
        size, _, n = item.partition("=")
        if size not in MAX_STACK or not n.isdigit() or int(n) < 1:
            raise ConfigError(f"--max-stack takes SIZE=N with SIZE one of {sorted(MAX_STACK)} and N >= 1; "
                              f"got {item!r}")
        out[size] = int(n)
    return out


def check_evaluation(evaluation: str) -> str:
    """How a stack's models are evaluated: "stacked" (one batched forward) or "per-model" (the HF reference)."""
    if evaluation not in EVALUATIONS:
        raise ConfigError(f"evaluation={evaluation!r}: valid choices are {', '.join(EVALUATIONS)}")
    return evaluation


def check_linear(linear: str) -> str:
    """The `--linear` option, checked before any work: how the stacks' linear layers multiply (`fused_bert.Levers`)."""
    if linear not in LINEARS:
        raise ConfigError(f"--linear takes one of {', '.join(LINEARS)}; got {linear!r}")
    return linear


def stack_key(members: list[Member]) -> str:
    text = ",".join(m.run_key for m in members)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def plan_stacks(members: list[Member], max_stack: dict[str, int] | None = None, gpus: int = 1,
                compile: str | bool | None = None) -> list[list[Member]]:
    """Group models that can share kernels: same size, same corpus size and number of steps; untrained apart.

    With several GPUs a group is cut into a multiple of the GPU count of stacks (as many stacks as models at most),
    so that the group shares out evenly: 15 BERT-base models on two GPUs train as 4 + 4 | 4 + 3 rather than as
    5 + 5 | 5, which would leave one GPU idle for a third of the time. A group's models are dealt to its stacks in
    turn. The plan changes no number: a model trains the same in any stack."""
    max_stack = planner.max_stack(compile, max_stack)
    groups: dict[tuple, list[Member]] = {}
    for m in members:
        knn = m.exp.knn_k if m.exp.knn_replace else 0  # a stack shares one neighbour table
        groups.setdefault((m.exp.untrained, m.exp.size, m.exp.no_parallel, m.exp.epochs, knn), []).append(m)
    stacks = []
    for (untrained, size, *_), group in groups.items():
        # untrained models are only evaluated: one stack. Dealt round-robin (`planner.deal`), each stack has its
        # share of every experiment, so that the experiments evaluated during training (curves) do not all load one GPU
        stacks += [group] if untrained else planner.deal(group, max_stack[size], gpus)
    return stacks


class StackBatches:
    """Per-model data order (own seed), with length grouping aligned across the stack.

    Each model shuffles its corpus with its own seed every epoch, as a plain DataLoader would. Shuffled indices are
    cut into megabatches of 50 batches, sorted by length inside each megabatch (as HF's group_by_length does), and
    the batch order inside a megabatch is permuted with one fixed permutation per (epoch, megabatch), the same for
    every model and every stack. Every model therefore sees, at each step, a batch of about the same length
    quantile, so padding the stack to a common width wastes little, and a model's batches do not depend on its
    neighbours. The last incomplete batch of an epoch is dropped (each epoch reshuffles, so no sentence is lost).
    """

    def __init__(self, sets: list[BilingualSet], seeds: list[int], batch_size: int):
        self.sets, self.seeds, self.batch_size = sets, seeds, batch_size
        n = {len(s) for s in sets}
        assert len(n) == 1, "models of one stack need corpora of one size"
        self.n = n.pop()
        self.steps_per_epoch = self.n // batch_size
        self._epoch, self._schedule = None, None

    def _epoch_schedule(self, epoch: int) -> np.ndarray:
        shared = np.random.default_rng([epoch, 1])  # the same for every model: no stack-dependent seed
        out = np.empty((len(self.sets), self.steps_per_epoch, self.batch_size), dtype=np.int64)
        spm = MEGABATCH
        perms_inside = [shared.permutation(min(spm, self.steps_per_epoch - s)) for s in range(0, self.steps_per_epoch, spm)]
        for i, (data, seed) in enumerate(zip(self.sets, self.seeds)):
            order = np.random.default_rng([seed, epoch]).permutation(self.n)[: self.steps_per_epoch * self.batch_size]
            batches = []
            for k, start in enumerate(range(0, self.steps_per_epoch, spm)):
                chunk = order[start * self.batch_size:(start + spm) * self.batch_size]
                chunk = chunk[np.argsort(-data.lengths[chunk], kind="stable")]
                mb = chunk.reshape(-1, self.batch_size)
                batches.append(mb[perms_inside[k]])
            out[i] = np.concatenate(batches)
        return out

    def rows(self, step: int) -> np.ndarray:
        """[M, batch] row indices of every model at a global step."""
        epoch, within = divmod(step, self.steps_per_epoch)
        if epoch != self._epoch:
            self._epoch, self._schedule = epoch, self._epoch_schedule(epoch)
        return self._schedule[:, within]


class StackRun:
    """Train one stack to the end (or until the time limit), evaluating and saving each model."""

    def __init__(self, chapter: Chapter, members: list[Member], lab: LabData, root: Path, device: str,
                 epochs: int | None = None, max_sentences: int | None = None, eval_batch: int | None = None,
                 graphs: bool = True, batch_size: int | None = None, compile: str | bool | None = None,
                 evaluation: str = "stacked", linear: str = "baddbmm"):
        check_evaluation(evaluation)
        check_linear(linear)
        self.evaluation, self.linear = evaluation, linear
        self.eval_seconds = 0.0
        self.chapter, self.members, self.lab, self.root = chapter, members, lab, Path(root)
        self.device = torch.device(device)
        if self.device.type == "cuda":
            # Graph capture records on the current device's stream: it must be the device the tensors live on.
            torch.cuda.set_device(self.device)
        self.cfg = chapter.training if batch_size is None else replace(chapter.training, batch_size=batch_size)
        self.size = chapter.size(members[0].exp)
        self.epochs = epochs or members[0].exp.epochs
        # Evaluation is launch-bound for small models: large batches; large models: memory-bound batches.
        self.eval_batch = eval_batch or (2048 if self.size.hidden <= 256 else 512)
        # CUDA graphs remove the launch overhead that bounds small models (and shorten BERT-base steps too).
        self.rank, self.world = world()  # data parallel under torchrun: each rank takes 1/world of every batch
        self.graphs = graphs and self.device.type == "cuda" and self.world == 1
        self.compile = stack_compile(compile, self.device, len(members), self.size.name)
        self.bf16 = self.cfg.precision == "bf16"
        # Stacks use eager attention: PyTorch's fused SDPA backward does not support vmap's batched strides
        # ("LSE is not correctly aligned"); at ~30 pieces per sentence attention is a small share of the work.
        # A stack of one model runs without vmap and uses SDPA.
        self.attn = "sdpa" if len(members) == 1 else "eager"
        self.folder = self.root / "stacks" / stack_key(members)
        lab = self.lab = lab.subset(max_sentences)
        pieces = lab.train_pieces
        self.sets = {}
        for m in members:
            if m.exp.id not in self.sets:
                self.sets[m.exp.id] = build_bilingual(lab.fe, pieces, m.exp, self.cfg.max_length)
        self.vocab_size = lab.fe.vocab_size
        # knn-replace (§4): the prepared neighbour table [2 * shift, k]; one k per stack (plan_stacks groups by it)
        knn = sorted({m.exp.knn_k for m in members if m.exp.knn_replace})
        if len(knn) > 1:
            raise ValueError(f"one stack holds knn-replace models with different k {knn}; plan_stacks separates them")
        self.neighbours = None
        if knn:
            from .knn import load_neighbours
            self.neighbours = load_neighbours(members[0].config.get("profile", "lab"), knn[0],
                                              max_sentences=members[0].config.get("max_sentences"))
        self.eval_sets: dict[str, EvalSets] = {}

    # ---------------------------------------------------------------- device-side data
    def _device_data(self):
        exps = list(self.sets)
        width = max(s.ids.shape[1] for s in self.sets.values())
        n = len(next(iter(self.sets.values())))
        ids = torch.full((len(exps), n, width), self.lab.fe.pad, dtype=torch.int64)
        for e, exp_id in enumerate(exps):
            s = self.sets[exp_id]
            ids[e, :, :s.ids.shape[1]] = torch.as_tensor(s.ids)
        dev = self.device
        n_probs = 4 if self.neighbours is not None else 3  # (mask, id, rand[, knn])
        exp_of = torch.tensor([exps.index(m.exp.id) for m in self.members], device=dev)
        return dict(
            ids=ids.to(dev), exp_of=exp_of,
            lengths=torch.stack([torch.as_tensor(self.sets[e].lengths) for e in exps]).to(dev),
            fake=torch.stack([torch.as_tensor(self.sets[e].fake) for e in exps]).to(dev),
            lang_pos=torch.tensor([m.exp.lang_pos for m in self.members], device=dev),
            shift_special=torch.tensor([m.exp.shift_special for m in self.members], device=dev),
            probs=torch.tensor([m.exp.mask_probs[:n_probs] for m in self.members], device=dev).view(-1, 1, 1, n_probs),
            neighbours=None if self.neighbours is None else torch.as_tensor(self.neighbours, device=dev),  # [V, k]
            rows=torch.zeros((len(self.members), len(range(self.rank, self.cfg.batch_size, self.world))),
                             dtype=torch.int64, device=dev),
        )

    def _batch(self, d, rows: torch.Tensor, width: int):
        """Inputs of one step for all models, from device tensors only (so that it can be captured in a graph).

        rows: [M, B] sentence indices of every model; width: padded length of the step (a multiple of 8).
        """
        e = d["exp_of"][:, None]
        ids = d["ids"][e, rows, :width]  # [M, B, W]
        lengths = d["lengths"][e, rows]  # [M, B]
        fake = d["fake"][e, rows]  # [M, B]
        pos = torch.arange(width, device=self.device)
        content = (pos >= 1) & (pos[None, None, :] < (lengths - 1)[..., None])
        lp = (fake & d["lang_pos"][:, None])[..., None]
        position_ids = pos + lp.long() * self.cfg.max_length
        token_type_ids = lp.long().expand_as(ids)
        mask_id = torch.where(fake & d["shift_special"][:, None], self.lab.fe.mask + self.lab.fe.shift,
                              self.lab.fe.mask)[..., None].expand_as(ids)
        inputs, labels = mask_tokens(ids, content, mask_id, d["probs"], self.vocab_size, self.cfg.mlm_probability,
                                     noise=self.noise, neighbours=d["neighbours"])
        capacity = masked_capacity(rows.shape[1] * (width - 2), self.cfg.mlm_probability)
        sel_index, sel_labels = select_masked(labels, capacity)
        # A 4D mask [M, B, 1, 1, W], which HF passes through unchanged (its own mask builder branches on the data,
        # which neither vmap nor graph capture allow): boolean for SDPA, additive for eager attention.
        attend = (pos[None, None, :] < lengths[..., None])[:, :, None, None, :]
        attention = attend if self.attn == "sdpa" else torch.where(attend, 0.0, -1e9)
        return inputs, attention, position_ids.expand_as(ids), token_type_ids, sel_index, sel_labels

    # ---------------------------------------------------------------- evaluation and saving
    def _eval_sets(self, i: int) -> EvalSets:
        m = self.members[i]
        if m.exp.id not in self.eval_sets:
            self.eval_sets[m.exp.id] = EvalSets(self.lab, m.exp, self.cfg.max_length, self.sets.get(m.exp.id))
        return self.eval_sets[m.exp.id]

    def _evaluate(self, stack: ModelStack | None, models, i: int) -> dict[str, float]:
        """One model, exported to Hugging Face: the reference path."""
        m = self.members[i]
        model = stack.export(i) if stack is not None else models[i].to(self.device)
        return evaluate(model, m.exp, self.lab, layers=self.cfg.eval_layers, max_length=self.cfg.max_length,
                        batch_size=self.eval_batch, device=self.device, sets=self._eval_sets(i))

    def _evaluate_many(self, stack: ModelStack | None, models, idx: list[int]) -> dict[int, dict[str, float]]:
        """Models `idx` of the stack: in one batched forward (evaluation="stacked", two models or more) or one by one."""
        t = time.perf_counter()
        if self.evaluation == "per-model" or len(idx) < 2:
            out = {i: self._evaluate(stack, models, i) for i in idx}
        else:
            if stack is not None:
                params, config = stack.params, stack.template.config
                if idx != list(range(len(self.members))):
                    params = {k: v[idx] for k, v in params.items()}  # [len(idx), ...] copies of these models
            else:  # untrained models: stacked here for their evaluation
                params = stack_module_state([MaskedPositionsLM(models[i]) for i in idx])[0]
                params, config = {k: v.to(self.device) for k, v in params.items()}, models[idx[0]].config
            results = evaluate_stack(params, config, [self.members[i].exp for i in idx], self.lab,
                                     [self._eval_sets(i) for i in idx], layers=self.cfg.eval_layers,
                                     batch_size=self.eval_batch, device=self.device)
            out = dict(zip(idx, results))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.eval_seconds += time.perf_counter() - t
        return out

    @property
    def vocabulary(self) -> str:
        """The fingerprint of the English vocabulary (pieces with ids) the stack trains with."""
        return vocab_fingerprint(self.lab.fe.tokenizer)

    def _save_member(self, stack, models, i: int, metrics: dict, curve: list, seconds: float, steps: int) -> None:
        m = self.members[i]
        folder = member_dir(self.root, m)
        model = stack.export(i) if stack is not None else models[i]
        # the vocabulary the model was trained with (pieces with ids): recorded, not keyed, and checked on loading
        # (report.load_model); runs made before it was recorded keep their keys
        write_config(folder, m.config, recorded={"vocabulary": self.vocabulary})
        if m.exp.size == "small" or m.seed == self.chapter.seeds[0]:
            from safetensors.torch import save_model
            with atomic.atomic_path(folder / "model.safetensors") as tmp:
                save_model(model.float().cpu(), str(tmp))
        if curve:
            atomic.write_json(folder / "curve.json", curve)
        atomic.write_json(folder / "metrics.json", {
            "experiment": m.exp.id, "seed": m.seed, "metrics": metrics, "steps": steps,
            "stack_size": len(self.members), "stack_seconds": seconds, "device": device_name(self.device),
            "compile": self.compile or "none", "graphs": bool(self.graphs), "evaluation": self.evaluation,
            "linear": self.linear,
            "torch": torch.__version__,
            "parameters": count_parameters(model), "vocabulary": self.vocabulary})

    # ---------------------------------------------------------------- training loop
    def _new_stack(self) -> tuple[ModelStack, StackBatches, int]:
        models = [init_model(self.size, self.vocab_size, m.seed, attn=self.attn) for m in self.members]
        batches = StackBatches([self.sets[m.exp.id] for m in self.members], [m.seed for m in self.members],
                               self.cfg.batch_size)
        total = batches.steps_per_epoch * self.epochs
        optim = OptimConfig(lr=self.size.lr, weight_decay=self.cfg.weight_decay, eps=self.cfg.adam_eps,
                            warmup_steps=self.cfg.warmup_steps, total_steps=total, max_grad_norm=self.cfg.max_grad_norm)
        levers = stack_levers(self.linear, len(self.members), self.size.name)
        # each rank holds rows rank, rank + world, ... of every batch; the draws are keyed by the full batch's rows
        stack = new_stack(models, optim, self.device, engine="fused", seeds=[m.seed for m in self.members],
                          rows=torch.arange(self.rank, self.cfg.batch_size, self.world), bf16=self.bf16,
                          compile=self.compile, graphs=self.graphs, levers=levers)
        self.noise = stack.noise
        return stack, batches, total

    def _step_inputs(self, d, rows_np: np.ndarray, lengths_np, graphs: bool):
        """(make_inputs, graph_key) of one step: this rank's share of the batch's rows [M, B / world]; the padded
        width is rounded up to a multiple of 8 so few graph shapes exist."""
        rows_np = rows_np[:, self.rank::self.world]
        width = int(max(l[r].max() for l, r in zip(lengths_np, rows_np)))
        width = min(int(math.ceil(width / 8) * 8), d["ids"].shape[2])
        rows = torch.as_tensor(np.ascontiguousarray(rows_np))
        if self.device.type == "cuda":  # an asynchronous copy: a pageable one would wait for the previous step
            rows = rows.pin_memory()
        d["rows"].copy_(rows, non_blocking=True)
        return (lambda: self._batch(d, d["rows"], width)), (width if graphs else None)

    def time_steps(self, steps: int, warmup: int = 5, graphs: bool = True) -> float:
        """Seconds per training step of this stack (after warm-up), for benchmarks and planning."""
        stack, batches, _ = self._new_stack()
        d = self._device_data()
        lengths_np = [self.sets[m.exp.id].lengths for m in self.members]
        for step in range(warmup + steps):
            if step == warmup:
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                t = time.perf_counter()
            make_inputs, key = self._step_inputs(d, batches.rows(step), lengths_np, graphs)
            stack.step(make_inputs, graph_key=key)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return (time.perf_counter() - t) / steps

    def run(self, time_limit: float | None = None, progress: bool = True) -> bool:
        """Returns True when every model of the stack is done; False when stopped by the time limit."""
        t0 = time.time()
        if self.members[0].exp.untrained:  # evaluated as initialised (by rank 0 alone under data parallel)
            models = [init_model(self.size, self.vocab_size, m.seed) for m in self.members]
            if self.rank == 0:
                metrics = self._evaluate_many(None, models, list(range(len(self.members))))
                for i in range(len(self.members)):
                    self._save_member(None, models, i, metrics[i], [], 0.0, 0)
            barrier()
            return True
        stack, batches, total = self._new_stack()
        models = None
        curve_members = [i for i, m in enumerate(self.members) if m.exp.curve]
        curve_steps = sorted({round(total * k / self.cfg.curve_points) for k in range(self.cfg.curve_points + 1)})
        saved = {"curves": {i: [] for i in curve_members}}  # checkpointed with the stack (`pretrain_loop(extra=)`)
        ckpt = self.folder / "checkpoint.pt"
        d = self._device_data()
        lengths_np = [self.sets[m.exp.id].lengths for m in self.members]
        first_step_at = []  # when the first step of this call had run (model set-up, compiles and capture included)

        def batch(step: int):  # each model's own data order (`StackBatches`), this rank's share
            return self._step_inputs(d, batches.rows(step), lengths_np, self.graphs)

        def record_loss(curve, step: int, losses: torch.Tensor):
            if not first_step_at:
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                first_step_at.append(time.time())
            return f"{losses.float().mean().item():.3f}" if step % 100 == 0 else None  # shown, not kept

        def evaluate_curves(stack, curve, seconds):
            """The curve experiments' metrics at this step (rank 0 evaluates; once, also across a resume)."""
            step, curves = stack.step_count, {int(k): v for k, v in saved["curves"].items()}
            saved["curves"] = curves
            if any(c and c[-1]["step"] == step for c in curves.values()):
                return False
            metrics = self._evaluate_many(stack, models, curve_members) if self.rank == 0 else {}
            for i in curve_members:
                curves[i].append({"step": step, **metrics.get(i, {})})  # rank 0 holds the numbers
            barrier()
            return False

        called = time.time()
        done = pretrain_loop(
            stack, batch, steps=total, checkpoint=ckpt, time_limit=time_limit, t0=t0, progress=progress,
            desc=f"{len(self.members)}× {self.size.name} ({','.join(sorted({m.exp.id for m in self.members}))})",
            record_loss=record_loss, on_eval=evaluate_curves if curve_members else None,
            eval_steps={s for s in curve_steps if s < total}, count_eval_time=True, extra=saved,
            checkpoint_seconds=120)
        if done is None:
            return False
        first_step_at = first_step_at[0] if first_step_at else None
        curves = {int(k): v for k, v in saved["curves"].items()}
        trained_at = time.time()
        train_seconds = done[2]  # earlier calls' included, curve evaluations too (`count_eval_time`)
        elapsed = train_seconds - (trained_at - called)  # earlier calls' share

        if self.rank > 0:  # rank 0 evaluates and writes; the others wait for it
            barrier()
            return True
        # every model still to evaluate (the curve's last point included) in one stacked evaluation
        todo = [i for i in range(len(self.members))
                if i not in curves or not curves[i] or curves[i][-1]["step"] != total]
        final = self._evaluate_many(stack, models, todo) if todo else {}
        for i in curve_members:
            if i in final:
                curves[i].append({"step": total, **final[i]})
        for i in range(len(self.members)):
            metrics = curves[i][-1] if i in curves else final[i]
            metrics = {k: v for k, v in metrics.items() if k != "step"}
            self._save_member(stack, models, i, metrics, curves.get(i, []), train_seconds, total)
        atomic.write_json(self.folder / "timing.json", {
            "members": [m.key for m in self.members], "size": self.size.name, "steps": total,
            "train_seconds": train_seconds, "steps_per_second": (total - 0) / max(train_seconds, 1e-9),
            "device": device_name(self.device), "wall_seconds_incl_eval": time.time() - t0 + elapsed,
            "evaluation": self.evaluation, "eval_seconds_this_call": self.eval_seconds,
            # this call's timeline (Unix times): run started, first step done, last step done, all written
            "timeline": {"started": t0, "first_step": first_step_at, "trained": trained_at, "finished": time.time()}})
        if ckpt.exists():
            ckpt.unlink()
        barrier()
        return True


# -------------------------------------------------------------------- the grid
def grid_members(chapter: Chapter, exp_ids, seeds, large_seeds=None, profile: str = "lab", epochs: int | None = None,
                 max_sentences: int | None = None, batch_size: int | None = None) -> list[Member]:
    """(experiment, seed) models with their resolved configurations; models larger than BERT-small take
    `large_seeds` when given. `epochs`/`max_sentences`/`batch_size` shrink the run (smoke tests)."""
    seeds = check_seeds(seeds)
    large_seeds = seeds if large_seeds is None else check_seeds(large_seeds)
    exps = [chapter.experiment(e) for e in exp_ids]
    return [Member(e, s, member_config(chapter, e, s, profile, epochs, max_sentences, batch_size))
            for e in exps for s in (seeds if e.size == "small" else large_seeds)]


def available_devices() -> list[str]:
    if torch.cuda.is_available():
        return [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return ["cpu"]


def run_grid(chapter_name: str, exp_ids, seeds, *, large_seeds=None, profile: str = "lab",
             device: str | None = None, gpus: int | None = None, root: Path | None = None, epochs: int | None = None,
             max_sentences: int | None = None, time_limit: float | None = None, max_stack: dict | None = None,
             progress: bool = True, batch_size: int | None = None, compile: str | bool | None = None,
             graphs: bool = True, evaluation: str = "stacked", linear: str = "baddbmm",
             data_parallel: bool = False) -> bool:
    """Train and evaluate every (experiment, seed) not done yet. Returns True when all are done.

    The stacks are the jobs of the engine's work queue (`xlrepro.engine.queue`), the longest first: in this process
    (one device, `device`, default this rank's), or, under torchrun, one rank per GPU, each taking the next stack
    (`xlrepro train dufter2020` starts torchrun itself when it has several GPUs). `gpus` (default: torchrun's ranks,
    else 1; `xlrepro train` passes its GPU count) is how many GPUs the plan deals the stacks over (`plan_stacks`). With
    `data_parallel` (under torchrun) every rank trains each stack on its share of every batch instead.
    `large_seeds` (default: `seeds`) are the seeds of the models that are not BERT-small.
    `epochs`/`max_sentences`/`batch_size` shrink the run (smoke tests): they are part of each model's configuration,
    so a shrunk run never mixes with a full one (and gets a folder of its own as well).
    `compile` ("regional", "full", True or None) and `graphs` (CUDA graphs) are speed switches: they change no number
    beyond floating-point rounding, so they are not part of a run's key; so is `evaluation` ("stacked", the default:
    each stack's models in one batched forward; "per-model": each exported and evaluated alone, the reference path),
    and `linear` ("baddbmm", the default, or "mm": the bias outside the batched product, `fused_bert.Levers`).
    """
    chapter = load_chapter(chapter_name)
    check_profile(profile)
    compile_mode(compile)  # a bad value fails before any work
    check_evaluation(evaluation)
    check_linear(linear)
    if gpus is not None and (not isinstance(gpus, int) or gpus < 1):
        raise ConfigError(f"gpus must be an integer >= 1 or None; got {gpus!r}")
    root = Path(root or run_root(chapter_name, profile, epochs, max_sentences, batch_size))
    members = grid_members(chapter, exp_ids, seeds, large_seeds, profile, epochs, max_sentences, batch_size)
    rank, ranks = queue_world()
    # under torchrun every rank joins the queue, even where all looks done: a rank that starts late may find the
    # results of a rank that started early, which waits for it at the queue's end
    if ranks == 1 and all(is_done(root, m) for m in members):
        return True
    if data_parallel:  # every rank trains every stack together, one device each
        device = init_from_env() or device
        gpus = 1
    device = device or rank_device()
    # The plan is made from every requested model, done or not, so that a resumed call plans the same stacks and
    # finds their checkpoints; a stack whose models are all done is skipped (a stack's models finish together).
    stacks = plan_stacks(members, max_stack, gpus=gpus or ranks, compile=compile)
    stacks = sorted((s for s in stacks if not all(is_done(root, m) for m in s)), key=lambda s: _cost(s, compile),
                    reverse=True)
    by_key = {m.key: m for m in members}
    labs = {}

    def train_stack(spec: dict, left: float | None) -> bool:
        if "lab" not in labs:
            labs["lab"] = load_lab(profile)
        stack = [by_key[f"{e}/{s}"] for e, s in spec["members"]]
        return StackRun(chapter, stack, labs["lab"], root, device, epochs, max_sentences, batch_size=batch_size,
                        compile=compile, graphs=graphs, evaluation=evaluation,
                        linear=linear).run(left, progress and (ranks == 1 or data_parallel))

    jobs = [Job({"members": [[m.exp.id, m.seed] for m in s]}) for s in stacks]
    if data_parallel:  # one job list, run by every rank in step
        states = run_queue(jobs, train_stack, name="grid", time_limit=time_limit, local=True)
    else:
        states = run_queue(jobs if rank == 0 else None, train_stack, name="grid", time_limit=time_limit,
                           done=lambda spec: all(is_done(root, by_key[f"{e}/{s}"]) for e, s in spec["members"]),
                           describe=_describe)
    return all_finished(states)


def _describe(spec: dict) -> str:
    """A stack job in a line of the queue's log: "4 models (0,3)"."""
    return f"{plural(len(spec['members']), 'model')} ({','.join(sorted({e for e, _ in spec['members']}))})"


def run_root(chapter_name: str, profile: str, epochs: int | None = None, max_sentences: int | None = None,
             batch_size: int | None = None) -> Path:
    """runs/<chapter>/<profile>, or a folder named after the shrunk settings of a smoke run."""
    shrunk = (epochs, max_sentences, batch_size) != (None, None, None)
    name = f"{profile}-e{epochs}-n{max_sentences}-b{batch_size}" if shrunk else profile
    return runs_dir() / chapter_name / name


def _cost(stack: list[Member], compile=None) -> float:
    """Rough GPU cost (models x epochs x a measured time per model-step), to hand out the largest jobs first: the
    250-epoch BERT-base stack before the 100-epoch ones."""
    m = stack[0]
    per_model = planner.model_step_ms(m.exp.size, compile)  # ms per model-step, measured
    epochs = (m.config.get("epochs") or m.exp.epochs) * (0.5 if m.exp.no_parallel else 1.0)  # half a corpus each
    return 0.1 if m.exp.untrained else per_model * len(stack) * epochs


# -------------------------------------------------------------------- evaluation of a grid stack
def time_stack_evaluation(models: int = 20, experiments=("0", "1", "2", "3"), max_sentences: int | None = None,
                          device: str | None = None, repeats: int = 2, rows_per_model: int | None = None) -> dict:
    """Seconds to evaluate one Dufter & Schütze stack of `models` BERT-small models (all Table 1 metrics, lab corpus),
    model by model (export to Hugging Face + `evaluate`, the reference) and stacked (`evaluate_stack`), the fastest
    of `repeats`, with the largest difference of any metric between the two (bf16 on a GPU: argmax metrics may move
    by one sentence or word where two similarities tie within bf16 rounding). The models are freshly initialised
    (evaluation costs the same at any step); experiments cycle over the stack, seeds 0, 1, ...
    Run on the GPU: `python -c "from xlrepro.papers.dufter2020.grid import time_stack_evaluation as t; print(t(20))"`.
    """
    from xlrepro.bench import _sync

    if not isinstance(models, int) or models < 1 or not isinstance(repeats, int) or repeats < 1:
        raise ConfigError(f"models and repeats must be integers >= 1; got {models!r}, {repeats!r}")
    ch = load_chapter("dufter2020")
    exps = [ch.experiment(e) for e in experiments]  # unknown ids fail here, naming the valid ones
    if any(e.size != "small" or e.untrained or e.no_parallel for e in exps):
        raise ConfigError("time_stack_evaluation takes trained BERT-small experiments with the parallel corpus "
                          "(e.g. 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)")
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    lab = load_lab("lab").subset(max_sentences)
    members = [grid_members(ch, [exps[i % len(exps)].id], [i])[0] for i in range(models)]
    size = ch.size(exps[0])
    eval_batch = 2048  # StackRun's evaluation batch for small models (it fixes the perplexity masks)
    sets = {e.id: EvalSets(lab, e, ch.training.max_length) for e in exps}
    stack = new_stack([init_model(size, lab.fe.vocab_size, i, attn="eager") for i in range(models)],
                      OptimConfig(size.lr, 0.0, 1e-6, 0, 1, 1.0), device, engine="fused", seeds=list(range(models)),
                      graphs=False)
    layers = tuple(ch.training.eval_layers)

    def per_model():
        return [evaluate(stack.export(i), m.exp, lab, layers=layers, batch_size=eval_batch, device=device,
                         sets=sets[m.exp.id]) for i, m in enumerate(members)]

    def stacked():
        return evaluate_stack(stack.params, stack.template.config, [m.exp for m in members], lab,
                              [sets[m.exp.id] for m in members], layers=layers, batch_size=eval_batch, device=device,
                              rows_per_model=rows_per_model)

    best, out = {}, {}
    for _ in range(repeats):
        for name, f in (("per_model", per_model), ("stacked", stacked)):
            _sync(device)
            t = time.perf_counter()
            out[name] = f()
            _sync(device)
            best[name] = min(best.get(name, math.inf), time.perf_counter() - t)
    diff = {k: max(abs(a[k] - b[k]) for a, b in zip(out["per_model"], out["stacked"])) for k in out["stacked"][0]}
    return {"device": device_name(device), "models": models, "sentences": len(lab.dev_pieces),
            "per_model_s": best["per_model"], "stacked_s": best["stacked"],
            "speedup": best["per_model"] / best["stacked"], "max_abs_diff": diff}
