"""Train many independent BERT models at once, in one set of kernels.

A tiny BERT (hidden 64) trained alone leaves a GPU idle: every step is a thousand small kernel launches.
Here M models (different seeds and/or experiments of the same size) are stacked with `torch.func`: their
parameters become tensors with a leading model dimension, and `vmap` runs HF's own `BertForMaskedLM` forward
over that dimension, so every kernel does M models' work. Each model keeps its own data order, masking,
dropout, gradient clipping and AdamW state, exactly as if it were trained alone. PyTorch has no multi-model
trainer, so this file (and the per-model clipping below) is written by hand.
"""
from __future__ import annotations

import contextlib
import copy
import math
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from transformers import BertForMaskedLM

from .distributed import average_gradients, world
from .fused_bert import EAGER, FP8, Levers, compiled_regions, inductor_options, stacked_mlm_losses
from .noise import Noise

NO_DECAY = ("bias", "LayerNorm.weight")  # as in HF's Trainer: no weight decay on biases and LayerNorm weights
WARMUP_STEPS = 3  # eager steps on the capture stream before the first graph (as PyTorch's CUDA-graph notes advise)


class MaskedPositionsLM(nn.Module):
    """BertForMaskedLM whose output layer runs only at the masked positions (the others carry no loss). It also wraps
    a `BertForPreTraining` (the same encoder and MLM head, plus the pooler and the NSP head): with `nsp_labels` (HF's:
    0 = the second segment follows, 1 = random) the loss is HF's MLM + NSP."""

    def __init__(self, mlm: BertForMaskedLM):
        super().__init__()
        self.mlm = mlm

    def forward(self, input_ids, attention_mask, position_ids, token_type_ids, sel_index, sel_labels, nsp_labels=None):
        out = self.mlm.bert(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                            token_type_ids=token_type_ids)
        hidden = out.last_hidden_state.reshape(-1, out.last_hidden_state.shape[-1]).index_select(0, sel_index)
        logits = self.mlm.cls.predictions(hidden).float()
        loss = F.cross_entropy(logits, sel_labels, ignore_index=-100)
        if nsp_labels is None:
            return loss
        return loss + F.cross_entropy(self.mlm.cls.seq_relationship(out.pooler_output).float(), nsp_labels)


# The padded width and the masked-position capacity change from step to step: dims compiled as symbols (NSP's labels,
# [M, B], a seventh input where the models train NSP, have none).
DYNAMIC_DIMS = (2, 4, 2, 2, 1, 1)  # input_ids, attention_mask, position_ids, token_type_ids, sel_index, sel_labels


COMPILE_MODES = ("none", "regional", "full")


def compile_mode(mode: str | bool | None, device: torch.device | str = "cuda") -> str | None:
    """The compile mode a stack on `device` uses: "regional" (each layer compiled once; what `--compile` asks for),
    "full" (the whole step's loss as one graph: slower to compile, kept to measure the two side by side) or None.
    Compiling is for CUDA devices only (on the CPU it costs more than it saves). Compiling changes no number
    beyond floating-point rounding: every random draw is the model's own (`noise.py`)."""
    if mode is True:
        mode = "regional"
    if mode in (None, False):
        mode = "none"
    if mode not in COMPILE_MODES:
        raise ValueError(f"compile={mode!r}: valid values are {', '.join(COMPILE_MODES)}")
    cuda = torch.device(device).type == "cuda" and torch.cuda.is_available()
    return None if mode == "none" or not cuda else mode


def linear_schedule(warmup: int, total: int):
    """HF's get_linear_schedule_with_warmup as a LambdaLR factor."""
    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))
    return factor


@dataclass
class OptimConfig:
    lr: float
    weight_decay: float
    eps: float
    warmup_steps: int
    total_steps: int
    max_grad_norm: float


ENGINES = ("hf", "fused")


def choose_engine(engine: str | None, *, seeds=None, levers=None, compiled=None) -> str:
    """The stack's engine (see `ModelStack`): `engine` checked against `ENGINES` and against what only "fused" does
    (per-model seeds, levers, compiling), or, for None, inferred from those."""
    needs_fused = [name for name, given in (("seeds", seeds is not None), ("levers", levers is not None),
                                            ("compile", bool(compiled))) if given]
    if engine is None:
        return "fused" if needs_fused else "hf"
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}: valid values are {', '.join(ENGINES)}")
    if engine == "hf" and needs_fused:
        raise ValueError(f"engine='hf' runs HF's model: {', '.join(needs_fused)} need engine='fused'")
    return engine


# Inductor pads strides to 8 elements ("comprehensive padding") and pads the operands of matrix products to aligned
# sizes ("shape padding", pad_mm). With the width compiled as a symbol, a padded stride of a hidden size not a
# multiple of 8 was computed from one width and failed its own check at another (torch 2.11 on H200s: "expected size
# 3==3, stride 401408==573440" = 128 rows x 56 x widths 56 and 80, 56 most likely the hidden sizes 51-53 padded). It
# hit the single-head stacks (L16H1, L24H1, L36H1) in two runs, the second with comprehensive padding already off:
# shape padding goes off too (with both off, all seven Table 7 shapes then trained compiled without a failure:
# the compile check of the engineering appendix). Aligned sizes are never padded, so this costs them
# nothing. Should a compiled step still fail, the stack goes on eagerly (`_guarded_body`) and records it
# (`fallbacks`). These are options of each compiled stack's own `torch.compile`, never Inductor's global settings.
NO_PADDING = {"comprehensive_padding": False, "shape_padding": False}
# Should a shape still specialise: more graphs than Dynamo's default limit of 8, while a compiled stack runs.
RECOMPILE_LIMIT = 64


def compile_options(levers: Levers | None) -> dict:
    """The Inductor options of a compiled stack: padding off (`NO_PADDING`) and the levers' (`inductor_options`)."""
    return {**NO_PADDING, **(inductor_options(levers) or {})}


def with_compile_limits(losses):
    """`losses` run with Dynamo's recompile limit raised to RECOMPILE_LIMIT for the call only (Dynamo checks it when
    it compiles, which happens inside the call); the process's setting is left as it was."""
    import torch._dynamo as dynamo
    name = next(n for n in ("recompile_limit", "cache_size_limit") if hasattr(dynamo.config, n))

    def limited(*args):
        with dynamo.config.patch(**{name: max(getattr(dynamo.config, name), RECOMPILE_LIMIT)}):
            return losses(*args)
    return limited


class GraphCaptureFailed(RuntimeError):
    """A CUDA-graph capture failed; the stack goes on without graphs."""


class CudaGraphs:
    """One CUDA graph per key (the padded width): a step's batch assembly, masking, forward, backward, clipping
    and AdamW captured once, then replayed as one launch.

    Graphs are captured on, and warmed up on, one side stream: cuBLAS creates its handle and workspace per stream,
    and creating them inside a capture fails (CUBLAS_STATUS_NOT_INITIALIZED, capture invalidated). `warm` counts
    eager steps on that stream in this process (a resumed run warms up again); a key is captured once it has run
    eagerly there. Graphs of all keys share one memory pool: they never run concurrently and keep nothing between
    replays (Adam's moments and the parameters live outside the pool)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.stream = torch.cuda.Stream(device)
        self.graphs: dict = {}
        self.pool = None
        self.warm = 0
        self.warm_keys: set = set()

    def run(self, key, eager_step, body, optimizer) -> torch.Tensor:
        """The step's losses: `eager_step()` on the side stream while warming up, else the replay of the key's
        graph of `body()` (captured on first use). Raises GraphCaptureFailed where capturing fails."""
        if self.warm < WARMUP_STEPS or key not in self.warm_keys:
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.stream):
                losses = eager_step()
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
            self.warm += 1
            self.warm_keys.add(key)
            return losses
        if key not in self.graphs:
            try:
                self.pool = self.pool or torch.cuda.graph_pool_handle()
                optimizer.zero_grad(set_to_none=True)
                torch.cuda.synchronize(self.device)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=self.pool, stream=self.stream):
                    out = body()
                self.graphs[key] = (graph, out)
            except RuntimeError as err:
                raise GraphCaptureFailed(str(err)) from err
        graph, out = self.graphs[key]
        graph.replay()
        return out.clone()


class ModelStack:
    """M models of one architecture, trained together. `models[i]` is unchanged; read results with `export`.

    On a GPU each step can be captured once per input shape as a CUDA graph (`step(..., graph_key=...)`):
    batch assembly, masking, forward, backward, clipping and AdamW then replay as one launch, which removes the
    thousands of kernel launches that otherwise bound a tiny model's step time.
    """

    def __init__(self, models: list[BertForMaskedLM], optim: OptimConfig, device: torch.device,
                 bf16: bool | None = None, compile: str | bool | None = None, seeds: list[int] | None = None,
                 graphs: bool = True, levers: Levers | None = None, data_parallel: bool | None = None,
                 ddp_graphs: bool = False, engine: str | None = None):
        """engine: which code computes the losses (`ENGINES`). "hf": HF's `BertForMaskedLM` under vmap (a stack of
        one: without vmap) with PyTorch's generator for dropout, the reference engine of the tests. "fused": the
        fused loss (`fused_bert.py`), eager or compiled; with `seeds` every random draw is the model's own, whatever
        the stack. None infers it: "fused" where seeds, levers or compile are given, else "hf".
        seeds: each model's own seed for dropout (and, through `noise`, masking); "fused" only.
        compile: None/False, True/"regional" or "full" (compiling asks for "fused"; `compile_mode` says where it
        pays); graphs: capture steps as CUDA graphs (CUDA). levers: the fused loss's speed options
        (`fused_bert.Levers`). data_parallel: average gradients over torchrun's ranks (None: whenever a process group
        of more than one rank exists; False: this stack trains alone, e.g. rank 0's one-GPU reference in the
        benchmark). ddp_graphs: under data parallelism, capture the gradient all-reduce (NCCL) inside the step's CUDA
        graph too; without it a data-parallel stack runs its steps eagerly (compiled regions stay compiled)."""
        self.device = torch.device(device)
        self.size = len(models)
        if seeds is not None and len(seeds) != self.size:
            raise ValueError(f"{len(seeds)} seeds for a stack of {self.size} models")
        if compile is True:
            compile = "regional"
        if compile not in (None, False, "none", "regional", "full"):
            raise ValueError(f"compile={compile!r}: valid values are None, False, True, 'regional', 'full'")
        # torch.compile (Inductor) fuses the element-wise work (dropout, GELU, LayerNorm, residuals, casts) that
        # bounds these memory-bound steps (`_select_losses`). compile=True on a CPU compiles too (the tests do).
        self.compiled = None if compile in (None, False, "none") else compile
        self.engine = choose_engine(engine, seeds=seeds, levers=levers, compiled=self.compiled)
        if levers is not None and levers.linear == FP8 and len(models) != 1:
            raise ValueError(f"linear='fp8' runs a stack of one model; got {len(models)} models")
        wrapped = [MaskedPositionsLM(m) for m in models]
        params, buffers = stack_module_state(wrapped)
        self.params = {k: v.detach().to(self.device).requires_grad_() for k, v in params.items()}
        self.buffers = {k: v.to(self.device) for k, v in buffers.items()}
        # The module whose code runs; its own weights are never read (functional_call substitutes the stacks).
        self.base = copy.deepcopy(wrapped[0]).to(self.device)
        self.template = copy.deepcopy(models[0]).cpu()
        self.bf16 = self.device.type == "cuda" if bf16 is None else bf16
        if levers is not None and levers.residual != "float32" and not self.bf16:
            raise ValueError(f"levers.residual={levers.residual!r} rounds the residual stream for bf16 autocast's "
                             "products; this stack runs without autocast (bf16=True, the default on CUDA, has it)")
        self._make_optimizer(optim)
        self.step_count = 0
        # Each model's own random numbers: seeds [M], the step as a device tensor (a captured graph reads it), and
        # the batch rows (set by the caller under data parallelism; else 0..B-1 at the first step).
        self.noise = None if seeds is None else Noise(
            seeds=torch.tensor(list(seeds), dtype=torch.int64, device=self.device),
            step=torch.zeros((), dtype=torch.int64, device=self.device), rows=None)
        # Each compiled step that failed and ran again eagerly: {"step", "error"} (a record of speed, not of results)
        self.fallbacks: list[dict] = []
        self._losses, self._eager_losses = self._select_losses(levers)
        # No graphs in data parallel unless asked (ddp_graphs: the all-reduce is captured too), nor with graphs=False
        # (to time eager steps).
        self.data_parallel = world()[1] > 1 if data_parallel is None else data_parallel
        graphs = graphs and self.device.type == "cuda" and (not self.data_parallel or ddp_graphs)
        self._graph_runner = CudaGraphs(self.device) if graphs else None

    @property
    def captured_graphs(self) -> int:
        """How many CUDA graphs this stack holds (0 without graphs, or after a capture failed)."""
        return 0 if self._graph_runner is None else len(self._graph_runner.graphs)

    @contextlib.contextmanager
    def eager_steps(self):
        """Inside the block, steps run without their CUDA graphs (the same compiled regions, launched one by one), so
        that a profiler sees the operator behind each kernel; the graphs are replayed again after it."""
        runner, self._graph_runner = self._graph_runner, None
        try:
            yield self
        finally:
            self._graph_runner = runner

    def _make_optimizer(self, optim: OptimConfig) -> None:
        """AdamW over the stacked parameters (no weight decay on biases and LayerNorm weights, as HF's Trainer) and
        HF's linear warm-up and decay; on the GPU fused and capturable, with the learning rate a device tensor, so
        that a captured step reads the current value."""
        cuda = self.device.type == "cuda"
        groups = [
            {"params": [p for k, p in self.params.items() if not k.endswith(NO_DECAY)], "weight_decay": optim.weight_decay},
            {"params": [p for k, p in self.params.items() if k.endswith(NO_DECAY)], "weight_decay": 0.0},
        ]
        self._lr = torch.tensor(optim.lr, device=self.device) if cuda else optim.lr
        self.optimizer = torch.optim.AdamW(groups, lr=self._lr, eps=optim.eps, fused=cuda, capturable=cuda)
        self.base_lr = optim.lr
        self.lr_factor = linear_schedule(optim.warmup_steps, optim.total_steps)
        self.max_grad_norm = optim.max_grad_norm

    def _select_losses(self, levers: Levers | None):
        """(losses, eager losses): the function (params, buffers, *inputs) -> [M] losses that a step runs, and the
        eager fused loss a failed compiled step falls back to (`_guarded_body`).

        "hf": HF's model under vmap with "different" randomness (each model its own dropout draws from PyTorch's
        generator); a stack of one skips vmap, so the model may use PyTorch's fused SDPA attention kernels (their
        backward does not support vmap); the stacked leaves still receive the gradient. "fused": `stacked_mlm_losses`
        eager, compiled region by region (one compiled layer serves all layers) or compiled whole ("full": slower to
        compile, kept to measure the two side by side), with the width a symbol either way. Every new width still
        first runs once outside any capture, so that compiling never happens inside a CUDA-graph capture."""
        config, base, noise = self.template.config, self.base, self.noise
        options = {} if levers is None else levers.options()

        def fused(regions):
            return lambda p, b, *inputs: stacked_mlm_losses(p, config, base.training, *inputs, regions=regions,
                                                            noise=noise, **options)

        eager = fused(EAGER)
        if self.engine == "hf":
            def one_model_loss(p, b, *inputs):
                return functional_call(base, (p, b), inputs)

            def single_model_loss(p, b, *inputs):
                first = lambda tree: {k: v[0] for k, v in tree.items()}  # noqa: E731
                return one_model_loss(first(p), first(b), *(x[0] for x in inputs))[None]

            return (single_model_loss if self.size == 1 else vmap(one_model_loss, randomness="different")), eager
        if not self.compiled:
            return eager, eager
        if self.compiled == "regional":
            return with_compile_limits(fused(compiled_regions(compile_options(levers)))), eager
        import torch._dynamo as dynamo
        compiled = torch.compile(lambda p, b, *inputs: stacked_mlm_losses(p, config, base.training, *inputs,
                                                                          noise=noise, **options),
                                 options=compile_options(levers))

        def losses(p, b, *inputs):
            for x, dim in zip(inputs, DYNAMIC_DIMS):
                dynamo.maybe_mark_dynamic(x, dim)
            return compiled(p, b, *inputs)

        return with_compile_limits(losses), eager

    def _set_lr(self) -> None:
        lr = self.base_lr * self.lr_factor(self.step_count)
        for group in self.optimizer.param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(lr)
            else:
                group["lr"] = lr

    def _guarded_body(self, make_inputs) -> torch.Tensor:
        """`_body`, and should a compiled step fail (an Inductor bug; never out of memory), the same step again on
        the eager path of the same loss, which the stack then keeps: a compiler failure costs speed, not the run."""
        try:
            return self._body(make_inputs())
        except Exception as err:  # noqa: BLE001 - Inductor raises AssertionError, RuntimeError, BackendCompilerFailed
            if not self.compiled or isinstance(err, torch.OutOfMemoryError):
                raise
            error = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
            warnings.warn(f"a compiled step failed at step {self.step_count} ({error}); this stack continues eagerly")
            self.fallbacks.append({"step": self.step_count, "error": error})
            self.compiled, self._losses = None, self._eager_losses
            self.optimizer.zero_grad(set_to_none=True)
            return self._body(make_inputs())

    def _body(self, inputs) -> torch.Tensor:
        """Forward, backward, per-model clipping and the AdamW update; gradients must be None on entry."""
        self.base.train()
        if self.noise is not None and self.noise.rows is None:  # eager, before any capture: rows 0..B-1
            self.noise.rows = torch.arange(inputs[0].shape[1], device=self.device)
        # No autocast weight cache: a captured graph must re-cast the weights it reads at every replay.
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16, cache_enabled=False):
            losses = self._losses(self.params, self.buffers, *inputs)
        losses.sum().backward()  # the models share no parameter, so each gets exactly its own gradient
        if self.data_parallel:
            average_gradients([p.grad for p in self.params.values() if p.grad is not None])
        self._clip_per_model()
        self.optimizer.step()
        return losses.detach()

    def train_step(self, input_ids, attention_mask, position_ids, token_type_ids, sel_index, sel_labels,
                   nsp_labels=None) -> torch.Tensor:
        """One eager optimiser step for every model; all inputs have a leading model dimension. Returns the M losses.
        nsp_labels [M, B]: the models are `BertForPreTraining`s and train NSP too (`MaskedPositionsLM`)."""
        inputs = (input_ids, attention_mask, position_ids, token_type_ids, sel_index, sel_labels)
        return self.step(lambda: inputs if nsp_labels is None else (*inputs, nsp_labels))

    def step(self, make_inputs, graph_key=None) -> torch.Tensor:
        """One optimiser step. `make_inputs()` builds the inputs from device tensors only; with a `graph_key`
        (on a GPU, after the first steps) the step is captured once per key and replayed afterwards (`CudaGraphs`)."""
        self._set_lr()
        if self.noise is not None:
            self.noise.step.fill_(self.step_count)
        if graph_key is None or self._graph_runner is None:
            losses = self._guarded_body(make_inputs)
        else:
            try:
                losses = self._graph_runner.run(graph_key, lambda: self._guarded_body(make_inputs),
                                                lambda: self._body(make_inputs()), self.optimizer)
            except GraphCaptureFailed as err:  # never lose a run to a failed capture: continue eagerly
                warnings.warn(f"CUDA graph capture failed ({err}); this stack continues without graphs")
                self._graph_runner = None
                self.optimizer.zero_grad(set_to_none=True)
                return self.step(make_inputs)
        self.optimizer.zero_grad(set_to_none=True)
        self.step_count += 1
        return losses

    @torch.no_grad()
    def _clip_per_model(self) -> None:
        """torch.nn.utils.clip_grad_norm_ applied to each model separately (over its own parameters)."""
        params = [p for p in self.params.values() if p.grad is not None]
        if self.size == 1:  # PyTorch's own, with its multi-tensor kernels (a few launches instead of three a tensor)
            torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm, foreach=True)
            return
        grads = [p.grad for p in params]
        # each model's norm from the norms of its slices of every gradient, in one multi-tensor launch
        norms = torch.stack(torch._foreach_norm([g[i] for g in grads for i in range(self.size)]))
        total = norms.float().view(len(grads), self.size).pow(2).sum(0).sqrt()  # [M]
        scale = (self.max_grad_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.view(-1, *([1] * (g.dim() - 1))).to(g.dtype))

    def export(self, i: int) -> BertForMaskedLM:
        """Model i as an ordinary HF model (a copy, on the stack's device)."""
        model = copy.deepcopy(self.template).to(self.device)
        state = {k.removeprefix("mlm."): v[i].detach() for k, v in self.params.items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        # Only the tied decoder weight is absent from the stack (it is the word-embedding matrix).
        assert not unexpected and all("decoder" in k for k in missing), (missing, unexpected)
        model.tie_weights()
        return model

    def state_dict(self) -> dict:
        return {"params": {k: v.detach() for k, v in self.params.items()}, "optimizer": self.optimizer.state_dict(),
                "step": self.step_count}

    def load_state_dict(self, state: dict) -> None:
        with torch.no_grad():
            for k, v in state["params"].items():
                self.params[k].copy_(v)
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:  # keep the shared device learning rate after loading
            group["lr"] = self._lr
        self.step_count = state["step"]


def select_masked(labels: torch.Tensor, capacity: int):
    """Flat indices of the masked positions of each model, padded to `capacity` (padding has label -100).

    A fixed capacity (from the batch's size, known on the host) avoids a device-to-host sync every step.
    """
    flat = labels.reshape(labels.shape[0], -1)
    order = torch.argsort((flat == -100).to(torch.int8), dim=1, stable=True)[:, :capacity].contiguous()
    return order, torch.gather(flat, 1, order)


def masked_capacity(maskable_tokens: int, mlm_probability: float) -> int:
    """An upper bound on the number of selected pieces that is exceeded with negligible probability (>8 sigma)."""
    mean = mlm_probability * maskable_tokens
    return int(math.ceil(mean + 8 * math.sqrt(max(mean, 1.0)) + 8))
