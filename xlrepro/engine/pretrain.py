"""The pre-training loop: one resumable loop over a `ModelStack` (or a `single.SingleModel`), read top to bottom.

`pretrain_loop` owns what every pre-training run needs: the step count, the time limit, a checkpoint every few
minutes and at the limit (`checkpoint.py`), resuming from it, the progress bar, the loss curve and evaluation
points. What a recipe owns comes in as arguments:

    batch(step) -> (make_inputs, graph_key)   the step's inputs, built from device tensors only (see below)
    record_loss(curve, step, losses [M])      how the curve keeps the step's losses (default: `every_n`);
                                              returns the text for the progress bar, or None
    on_eval(stack, curve, seconds) -> bool    an evaluation point (every `eval_every` steps, or at `eval_steps`);
                                              True stops the run
    on_save(stack, curve)                     the recipe's own files, written whenever the checkpoint is
    extra                                     a dict the recipe keeps in the checkpoint (e.g. evaluation curves)

`make_inputs()` returns the six inputs of `ModelStack.step`, each with a leading model dimension M:
input_ids [M, B, W], attention [M, B, 1, 1, W] (boolean, or additive float), position_ids [M, B, W],
token_type_ids [M, B, W], sel_index [M, C] (flat positions of the masked pieces, padded to a capacity C) and
sel_labels [M, C] (-100 on padding). On a GPU a step with a `graph_key` is captured as a CUDA graph once per key
(the padded width W) and replayed, so `make_inputs` may read only device tensors that the recipe refills.

The extension point of a paper is its `batch` function: whatever makes a paper's inputs its own happens there, in
the paper's folder, on device tensors, before the step: language-specific position offsets (position_ids shifted
by max_length for the second language), a per-language vocabulary shift of the ids and of [MASK], knn-replace
masking (`masking.mask_tokens` with a neighbour table), whole-word masking. Corpus transformations (a shifted,
inverted or reordered copy of a language) are data, built before training. The engine sees the six inputs above.

`train_sampled_mlm` is the first recipe on it: masked-LM pretraining of one model on rows of several languages,
each sentence's language drawn with smoothed probabilities (mini-mBERT's sampling; also the BERTs of the word-
vector chapter).
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from . import checkpoint as ckpt
from .fused_bert import Levers
from .masking import mask_tokens
from .stacked import ENGINES, ModelStack, OptimConfig, masked_capacity, select_masked

CHECKPOINT_SECONDS = 180  # how often an unfinished run saves its checkpoint
STOP_SYNC_STEPS = 50  # data parallel: how often the ranks agree on whether to stop (one all-reduce)


def new_stack(models, optim: OptimConfig, device, *, engine: str, seeds=None, rows: torch.Tensor | None = None,
              **options) -> ModelStack:
    """The stack a recipe trains on `pretrain_loop`, with its engine named: "hf" (HF's model, PyTorch's generator)
    or "fused" (the fused loss; with `seeds`, each model's own random numbers). Recipes build stacks here only.

    rows [B']: the rows of each batch this process holds, which key the per-model draws (0..B-1 alone; rank,
    rank + world, ... under data parallelism); they need seeds. options: `ModelStack`'s (bf16, compile, graphs,
    levers, data_parallel, ddp_graphs)."""
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}: valid values are {', '.join(ENGINES)}")
    if rows is not None and seeds is None:
        raise ValueError("rows key each model's own random draws: they need seeds")
    stack = ModelStack(models, optim, device, engine=engine, seeds=seeds, **options)
    if rows is not None:
        stack.noise.rows = rows.to(stack.device)
    return stack


def every_n(n: int, steps: int) -> Callable[[list, int, torch.Tensor], str | None]:
    """The default loss record: [step, loss] appended to the curve at every n-th step (counted from 0) and at the
    last; the loss is a float for a stack of one model, else the list of the M models' losses. Reading a loss
    back to the host waits for the step, so it happens only at these steps."""
    def record(curve: list, step: int, losses: torch.Tensor) -> str | None:
        if step % n and step != steps - 1:
            return None
        values = losses.float()
        curve.append([step, values.item() if values.numel() == 1 else values.tolist()])
        return f"{values.mean().item():.3f}"
    return record


def pretrain_loop(stack: ModelStack, batch: Callable[[int], tuple], *, steps: int, checkpoint: Path,
                  time_limit: float | None = None, t0: float | None = None, progress: bool = True,
                  desc: str = "pretrain", curve: list | dict | None = None, record_loss=None, loss_every: int = 100,
                  on_eval=None, eval_every: int | None = None, eval_steps=None, count_eval_time: bool = False,
                  on_save=None, extra: dict | None = None, seed: int | None = None,
                  checkpoint_seconds: float = CHECKPOINT_SECONDS):
    """Train `stack` to `steps` steps, resuming from `checkpoint` where it exists.

    Returns (stack, curve, seconds) when finished, None when stopped by `time_limit` (seconds since `t0`, default
    now) or by `on_eval` (the checkpoint saved either way). `seconds` is the training time of all calls together,
    evaluation left out (unless count_eval_time). curve: the loss record to fill (a list for `every_n`, the default record, every
    `loss_every` steps; a recipe passing `record_loss` may keep a dict); a checkpoint's record replaces it.
    seed: re-seed PyTorch's generator with seed * 100003 + step at the start and on resuming, for the draws that
    come from it (HF's dropout, `mask_tokens` without per-model noise); None leaves the generator alone.
    on_eval(stack, curve, seconds) runs at every multiple of `eval_every` (step 0 and the last step included), or
    at the steps of `eval_steps` (a set), also on resuming at such a step; then the checkpoint is saved; its true
    return stops the run there. count_eval_time: the evaluations' time counts as training time (default: left out).
    on_save(stack, curve): the recipe's own files, written with every checkpoint. extra: a dict the recipe owns
    (e.g. evaluation curves), saved in every checkpoint and updated from it on resuming.
    Under data parallelism (`stack.data_parallel`, torchrun) every rank runs this loop on its share of each batch:
    the ranks agree every STOP_SYNC_STEPS steps on whether to stop, and rank 0 alone writes the checkpoint.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1; got {steps}")
    if eval_every is not None and eval_steps is not None:
        raise ValueError("give eval_every or eval_steps, not both")
    from ..progress import progress as progress_bar
    from .distributed import any_rank, world

    rank = world()[0] if stack.data_parallel else 0

    t0 = time.time() if t0 is None else t0
    curve = [] if curve is None else curve
    elapsed = 0.0
    if checkpoint.exists():  # resume: the stack in place, the loss record and the training time so far
        resumed = ckpt.load(checkpoint, stack)
        curve = curve if resumed.losses is None else resumed.losses
        elapsed = resumed.elapsed
        if extra is not None:
            extra.update({k: v for k, v in resumed.extra.items() if k != "fallbacks"})
    record_loss = record_loss or every_n(loss_every, steps)
    if seed is not None:
        torch.manual_seed(seed * 100003 + stack.step_count)  # masking and dropout streams (one model: its own)
    bar = progress_bar(total=steps, initial=stack.step_count, disable=not progress or rank > 0, desc=desc)
    t_start = last_save = time.time()

    def save():
        if rank > 0:  # data parallel: the ranks hold the same stack; rank 0 writes it
            return
        ckpt.save(checkpoint, stack, elapsed=elapsed + time.time() - t_start, losses=curve, extra=extra)
        if on_save is not None:
            on_save(stack, curve)

    def is_eval_point(n: int) -> bool:
        if on_eval is None:
            return False
        if eval_steps is not None:
            return n in eval_steps
        return bool(eval_every) and (n % eval_every == 0 or n == steps)

    def evaluate_here() -> bool | None:
        """None where this step is no evaluation point, else whether on_eval asks to stop."""
        nonlocal t_start
        if not is_eval_point(stack.step_count):
            return None
        t_hook = time.time()
        stop = bool(on_eval(stack, curve, elapsed + t_hook - t_start))
        if not count_eval_time:
            t_start += time.time() - t_hook  # training time leaves out the evaluation
        return stop

    if evaluate_here() and stack.step_count < steps:
        bar.close()
        return None
    while stack.step_count < steps:
        step = stack.step_count
        make_inputs, graph_key = batch(step)  # the recipe's batch: inputs [M, B, W] (see the module docstring)
        losses = stack.step(make_inputs, graph_key=graph_key)  # [M], one AdamW step for every model
        shown = record_loss(curve, step, losses)
        if shown is not None:
            bar.set_postfix(loss=shown)
        bar.update(1)
        evaluated = evaluate_here()
        late = time_limit is not None and time.time() - t0 > time_limit
        if stack.data_parallel:  # every rank stops at the same step
            late = any_rank(late) if step % STOP_SYNC_STEPS == 0 else False
        over = bool(evaluated) or late
        if over or (evaluated is not None and stack.step_count < steps) or time.time() - last_save > checkpoint_seconds:
            save()
            last_save = time.time()
        if over and stack.step_count < steps:
            bar.close()
            return None
    bar.close()
    if stack.device.type == "cuda":
        torch.cuda.synchronize(stack.device)
    return stack, curve, elapsed + time.time() - t_start


def sampling_weights(sizes: dict[str, int], alpha: float = 0.7) -> dict[str, float]:
    """Exponentially smoothed language probabilities: p_l ∝ (n_l / N)^alpha, normalised to sum to 1.

    alpha = 1 samples in proportion to the data, alpha = 0 uniformly. mBERT smooths with alpha = 0.7
    (google-research/bert, multilingual.md; K et al. 2020, "Cross-lingual ability of multilingual BERT",
    describe the same sampling), which up-samples small languages.
    """
    if not sizes:
        raise ValueError("sampling_weights of no languages")
    bad = {lang: n for lang, n in sizes.items() if n <= 0}
    if bad:
        raise ValueError(f"every language needs at least one sentence; empty: {bad}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0 (1 = proportional, 0 = uniform); got {alpha}")
    total = sum(sizes.values())
    q = {lang: (n / total) ** alpha for lang, n in sizes.items()}
    z = sum(q.values())
    return {lang: v / z for lang, v in q.items()}


def draw_batch(seed: int, step: int, weights: np.ndarray, sizes: np.ndarray, batch_size: int):
    """(language index, sentence index) of each sentence of a step: languages by `weights`, then sentences
    uniformly within the language. It depends only on (seed, step), so a resumed run draws the same batches."""
    rng = np.random.default_rng([seed, step])
    langs = rng.choice(len(weights), size=batch_size, p=weights)
    return langs, rng.integers(0, sizes[langs])


def train_sampled_mlm(model, optim: OptimConfig, device: torch.device, ids: torch.Tensor, lengths: torch.Tensor,
                      weights: np.ndarray, sizes: np.ndarray, starts: np.ndarray, *, seed: int, steps: int,
                      batch_size: int, mask_id: int, vocab_size: int, mlm_probability: float, checkpoint: Path,
                      time_limit: float | None, t0: float, progress: bool, desc: str, loss_every: int = 100,
                      compile: bool = False, on_eval=None, eval_every: int | None = None,
                      levers: Levers | None = None):
    """Masked-LM pretraining of one model on rows of several languages, each batch drawn from one language with
    probability `weights` (`draw_batch`). Resumable from `checkpoint`.

    ids [R, W] and lengths [R] hold every language's rows, language l at rows starts[l]..starts[l] + sizes[l].
    Returns (stack, losses, seconds) when finished, None when stopped by `time_limit` (checkpoint saved).
    compile: run the fused loss (`fused_bert.py`, SDPA attention, dropout from PyTorch's generator) compiled
    region by region instead of HF's model; the random draws differ from the HF path, so callers key runs on it.
    on_eval / eval_every: evaluation points (`pretrain_loop`). levers: the fused loss's speed options
    (`fused_bert.Levers`, with compile only; None: the defaults); callers key runs on any that changes numbers.
    """
    host_lengths = lengths.numpy()
    ids, lengths = ids.to(device), lengths.to(device)
    stack = new_stack([model], optim, device, engine="fused" if compile else "hf",
                      compile="regional" if compile else None, levers=levers)

    # Inputs are built from device tensors only (`rows` is refilled every step), so on a GPU a step can be
    # captured as a CUDA graph per padded width (ModelStack.step).
    rows = torch.zeros((1, batch_size), dtype=torch.int64, device=device)
    mask = torch.tensor(mask_id, device=device)
    probs = torch.tensor([0.8, 0.1, 0.1], device=device)  # [MASK], random piece, kept

    def inputs(width: int):
        x = ids[rows, :width].long()  # [1, B, W]
        n = lengths[rows]  # [1, B]
        pos = torch.arange(width, device=device)
        content = (pos >= 1) & (pos < (n - 1)[..., None])  # never [CLS], [SEP] or padding
        masked, labels = mask_tokens(x, content, mask, probs, vocab_size, mlm_probability)
        sel_index, sel_labels = select_masked(labels, masked_capacity(batch_size * (width - 2), mlm_probability))
        attention = (pos < n[..., None])[:, :, None, None, :]  # [1, B, 1, 1, W], boolean for SDPA
        return masked, attention, pos.expand_as(x), torch.zeros_like(x), sel_index, sel_labels

    def batch(step: int):
        lang, sent = draw_batch(seed, step, weights, sizes, batch_size)
        picked = starts[lang] + sent
        rows.copy_(torch.as_tensor(picked)[None])
        width = int(host_lengths[picked].max())  # pad to the longest sentence of the batch
        if device.type == "cuda":  # ... rounded up to a multiple of 8: fewer CUDA graphs, tensor-core shapes
            width = min(math.ceil(width / 8) * 8, ids.shape[1])
        return (lambda: inputs(width)), (width if device.type == "cuda" else None)

    return pretrain_loop(stack, batch, steps=steps, checkpoint=checkpoint, time_limit=time_limit, t0=t0,
                         progress=progress, desc=desc, loss_every=loss_every, on_eval=on_eval,
                         eval_every=eval_every, seed=seed)
