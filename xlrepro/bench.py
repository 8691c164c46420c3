"""MLM training throughput: Hugging Face as a competent user runs it, against ours, in one process, on the same shapes.

Cases:
  small       BERT-small of Dufter & Schütze (hidden 64, 12 layers, 1 head, vocab 4,096), 256 sentences x 128
  base        BERT-base with the same vocabulary, 256 x 128
  mbert       BERT-base with mBERT's 119,547-piece vocabulary, 32 x 512
  base-ragged BERT-base, 256 documents of 16..128 pieces (uniform, fixed seed): HF pads them to 128, ours may pack
  base-dp     BERT-base, 256 x 128 on every GPU, under `torchrun --nproc_per_node N`: data parallel (weak scaling:
              the global batch is N x 256). Rank 0 first times the one-GPU references (HF compiled, ours) alone, then
              every rank times the data-parallel engines; `scaling_efficiency` = the reference's time per step over
              the data-parallel row's (1.0: N GPUs do N times the work in the same time).
Engines (rows; `ENGINES`), each applicable to some cases (`engines_for`):
  HF fp32          `BertForMaskedLM(labels=...)` in float32 (no TF32), SDPA attention, torch AdamW (foreach)
  HF bf16          the same under bf16 autocast, with fused AdamW
  HF bf16 compile  the same, the model wrapped in `torch.compile`: what a competent user runs
  HF best          what a careful user writes: `model.bert(...)` then `model.cls` at the labelled pieces only (the
                   MLM output layer where the loss is, as Google's BERT does), cross-entropy there, bf16 autocast,
                   SDPA attention, fused AdamW, the loss `torch.compile`d with CUDA graphs: modes "reduce-overhead"
                   and "max-autotune" both timed in the process, the faster kept (`compile_mode` says which, `note`
                   gives both); on the CPU, without `compile_on_cpu`, eager
  ours             `ModelStack` over `fused_bert` (bf16, output layer at the masked positions only, fused AdamW,
                   regional torch.compile and a CUDA graph per step on a GPU): the engine the grid trains with
  ours + lever     the same with one speed lever of `fused_bert.Levers` or of the inputs (no attention mask on full
                   rows, fused QKV, packed documents with SDPA or FlexAttention), each measured, none assumed
  ours, stacked    16 small models in one stack (small only): per-stack and per-model figures; also with Inductor's
                   matrix-product autotuning
  data parallel    (base-dp only) HF compiled inside DistributedDataParallel (`torch.compile(DDP(model))`, as
                   PyTorch's DDP notes advise); ours with the gradient all-reduce after the backward, with eager
                   steps or with the all-reduce captured in the step's CUDA graph
Every engine trains with dropout 0.1 (hidden and attention) and clips gradients at norm 1, except the FlexAttention
row, which has no attention dropout (FlexAttention has none; its label says so). Inputs are fixed random word pieces
with 15% of the pieces labelled; the same for every engine of a case.

Each figure is the median of `repeats` runs of `steps` timed steps after `warmup` steps (compiling and CUDA-graph
capture happen in the warm-up, timed apart), with the fastest and slowest repeat. Model FLOPs count useful work only
(`model_flops`: encoder at every real piece, attention within each document, the output layer at the 15% labelled
pieces), the same for every engine, so MFU compares like with like; the peak is the dense bf16 tensor-core peak of
the device's datasheet (`PEAK_BF16`; H100 and H200 SXM: 989 TFLOP/s), also for the fp32 row. The headline,
`speedup_vs_best_hf`, divides the best HF row's time per model-step by the row's: the best HF row is `hf-best`
where it was timed, else the fastest HF row of the same GPU count; `best_hf_engine` names it.
"""
from __future__ import annotations

import datetime
import gc
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from .config import ConfigError, ModelSize
from .engine.models import device_name, init_model
from .engine.distributed import any_rank, barrier, world

SMALL = ModelSize("small", 64, 12, 1, 256, 2e-3)
BASE = ModelSize("base", 768, 12, 12, 3072, 1e-4)
BBERT = ModelSize("bbert", 192, 12, 12, 768, 5e-4)  # the lab's bilingual B-BERT (192 wide, 12 layers, 12 heads)


@dataclass(frozen=True)
class Case:
    size: ModelSize
    vocab: int
    batch: int      # sentences (documents) per step
    length: int     # the row width; with ragged, the longest document
    ragged: bool = False
    data_parallel: bool = False  # run under torchrun, one replica per GPU

    def lengths(self) -> list[int]:
        """Each document's length: all `length`, or (ragged) uniform in [length/8, length] from a fixed generator."""
        if not self.ragged:
            return [self.length] * self.batch
        g = torch.Generator().manual_seed(0)
        return torch.randint(self.length // 8, self.length + 1, (self.batch,), generator=g).tolist()


CASES = {
    "small": Case(SMALL, 4096, 256, 128),
    "base": Case(BASE, 4096, 256, 128),
    "mbert": Case(BASE, 119_547, 32, 512),
    "base-ragged": Case(BASE, 4096, 256, 128, ragged=True),
    "base-dp": Case(BASE, 4096, 256, 128, data_parallel=True),
    # the lab's bilingual B-BERT at its pre-training batch: 128 pairs of up to 128 pieces, 20,480 embedding rows;
    # the cost table's ratio for its runs (their real steps are stacked and length-binned)
    "bbert": Case(BBERT, 20_480, 128, 128),
}
DEFAULT_CASES = ("small", "base", "mbert")
PEAK_BF16 = {"H100": 989e12, "H200": 989e12}  # dense bf16 tensor-core peak of the SXM parts (datasheets, no sparsity)
STACK = 16  # models in the stacked small row


@dataclass(frozen=True)
class Engine:
    label: str
    family: str                 # "hf" or "ours"
    cases: str                  # "all", "dense" (full rows), "ragged", "small"
    nomask: bool = False        # ours: no attention mask (full rows: SDPA may pick FlashAttention)
    packed: bool = False        # ours: documents packed into rows, block-diagonal mask
    attention: str | None = None
    fused_qkv: bool = False
    linear: str = "baddbmm"     # ours: how the linear layers multiply (`fused_bert.Levers.linear`)
    autotune: bool = False      # ours: Inductor's matrix-product autotuning (`fused_bert.Levers.autotune`)
    residual: str = "float32"   # ours: the residual stream's dtype (`fused_bert.Levers.residual`)
    pad_vocab: int = 1          # ours: the decoder's product over the vocabulary padded (`fused_bert.Levers.pad_vocab`)
    models: int = 1
    ddp: bool = False           # data parallel over torchrun's ranks (the base-dp case)
    ddp_graphs: bool = False    # ours: the all-reduce inside the step's CUDA graph
    reference: str | None = None  # the one-GPU engine a data-parallel row's scaling efficiency is against


ENGINES = {
    "hf-fp32": Engine("HF fp32", "hf", "all"),
    "hf-bf16": Engine("HF bf16 autocast + fused AdamW", "hf", "all"),
    "hf-compile": Engine("HF bf16 + torch.compile", "hf", "all"),
    "hf-best": Engine("HF best: masked-only head + compile, CUDA graphs", "hf", "all"),
    "ours": Engine("ours (fused, compiled, CUDA graph)", "ours", "all"),
    "ours-nomask": Engine("ours + no mask", "ours", "dense", nomask=True),
    "ours-qkv": Engine("ours + fused QKV", "ours", "all", fused_qkv=True),
    "ours-nomask-qkv": Engine("ours + no mask + fused QKV", "ours", "dense", nomask=True, fused_qkv=True),
    "ours-mm": Engine("ours + bias outside the batched product", "ours", "all", linear="mm"),
    "ours-nomask-mm": Engine("ours + no mask + bias outside the product", "ours", "dense", nomask=True, linear="mm"),
    # FP8 products (one scale per row; the weight gradient in bf16): numbers change beyond rounding, so a speed row
    # until its training check passes (`fused_bert.Fp8Linear`). The check's criterion, written before any run (one
    # definition, with the check in the K et al. recipe's fp8_check module): its base B-BERT (lab recipe, en-es, one
    # model per stack, seeds 0-2) trained with linear fp8 and with mm: the seed means of the final MLM loss (its last
    # five recorded points) differ by at most 0.02 nats, and those of the zero-shot es accuracy by less than 2 SE of
    # the mm seeds; only then may a chapter train with it.
    "ours-fp8": Engine("ours + FP8 linear layers", "ours", "dense", linear="fp8"),
    # the residual stream in bf16 (LayerNorm still computes in float32; its output, and so each residual add, is
    # rounded to bf16): numbers change beyond float32 rounding, so a speed row until a training check with its
    # criterion written before the run passes, like ours-fp8's
    "ours-nomask-mm-bf16": Engine("ours + no mask + bias outside the product + bf16 residual stream", "ours", "dense",
                                  nomask=True, linear="mm", residual="bfloat16"),
    # the decoder's product over the vocabulary padded with zero rows to a multiple of 64 (mBERT's 119,547 pieces run
    # unaligned kernels otherwise); rounding only, but a speed row until a training check passes, like the two above.
    # The check's criterion, written before any run, is defined once, with the check, in Liu et al.'s padv_check
    # module (the chapters that train with mBERT's vocabulary are theirs).
    # Timed only where the vocabulary is not a multiple of 64 already (`engines_for`: the mbert case)
    "ours-nomask-mm-padv": Engine("ours + no mask + bias outside the product + vocabulary padded to 64", "ours",
                                  "dense", nomask=True, linear="mm", pad_vocab=64),
    # the padding alone on the chapters' step (mask, bias inside the product): the gain the chapters would have
    "ours-padv": Engine("ours + vocabulary padded to 64", "ours", "all", pad_vocab=64),
    "ours-nomask-mm-tuned": Engine("ours + no mask + bias outside the product + autotuned matmuls", "ours", "dense",
                                   nomask=True, linear="mm", autotune=True),
    "ours-packed": Engine("ours + packed (SDPA)", "ours", "ragged", packed=True),
    "ours-packed-qkv": Engine("ours + packed (SDPA) + fused QKV", "ours", "ragged", packed=True, fused_qkv=True),
    "ours-flex": Engine("ours + packed (FlexAttention, no attention dropout)", "ours", "ragged", packed=True,
                        attention="flex", fused_qkv=True),
    "ours-stack": Engine(f"ours, {STACK} stacked", "ours", "small", models=STACK),
    # the stack with Inductor's matrix-product autotuning: its Triton templates for `baddbmm` add the bias to the
    # float32 accumulator in the product's epilogue, as cuBLAS does, so the copy of the broadcast bias into every
    # output that ATen's baddbmm makes first (about a ninth of the stacked small step, `bias_copies`) is gone where a
    # template wins. Rounding only (another summation order), but a speed row until a training check passes
    "ours-stack-tuned": Engine(f"ours, {STACK} stacked + autotuned batched products", "ours", "small", models=STACK,
                               autotune=True),
    "hf-compile-ddp": Engine("HF bf16 + torch.compile, DDP", "hf", "dp", ddp=True, reference="hf-compile"),
    "ours-ddp": Engine("ours, data parallel (eager steps)", "ours", "dp", ddp=True, reference="ours"),
    "ours-ddp-graph": Engine("ours, data parallel (all-reduce in the CUDA graph)", "ours", "dp", ddp=True,
                             ddp_graphs=True, reference="ours"),
}
HF_BEST = "hf-best"  # the HF engine every headline ratio is against, where it was timed
HF_BEST_MODES = ("reduce-overhead", "max-autotune")  # torch.compile modes hf-best times ("auto": both, the faster kept)
DP_REFERENCES = ("hf-compile", "ours")  # the one-GPU engines the data-parallel case times first, on rank 0 alone
# The order a case runs its engines in: the rows the headline needs first (HEADLINE, which a case's time budget never
# skips), so that a time limit cuts the least informative (fp32, at 0.4 s a step the slowest to time) last.
HEADLINE = ("hf-best", "ours")
RUN_ORDER = ("hf-best", "ours", "hf-compile", "hf-bf16", "ours-fp8", "ours-nomask-mm", "ours-mm", "ours-nomask-qkv",
             "ours-packed", "ours-flex", "ours-nomask", "ours-qkv", "ours-packed-qkv", "ours-stack", "hf-compile-ddp",
             "ours-ddp", "ours-ddp-graph", "ours-padv", "ours-nomask-mm-padv", "ours-nomask-mm-bf16", "ours-nomask-mm-tuned",
             "ours-stack-tuned", "hf-fp32")  # autotuning compiles for minutes: near the end
assert sorted(RUN_ORDER) == sorted(ENGINES)


def speed_row(key: str) -> bool:
    """Whether an engine of ours steps differently from the chapters' training (`engine.planner`: the bias inside the
    batched product, separate query, key and value products, SDPA on padded rows, a float32 residual stream, the
    vocabulary unpadded, no autotuning): then it is a speed row, which no chapter trains with until a training check,
    its criterion written before the run, passes. No attention mask on full rows (``nomask``) is the same step."""
    e = ENGINES[key]
    return e.family == "ours" and (e.linear != "baddbmm" or e.residual != "float32" or e.pad_vocab != 1
                                   or e.autotune or e.fused_qkv or e.packed or e.attention is not None)


def engines_for(case: str) -> list[str]:
    """The engines that apply to a case, in `ENGINES` order."""
    c = CASES[case]
    if c.data_parallel:
        return [k for k, e in ENGINES.items() if k in DP_REFERENCES or e.cases == "dp"]
    kind = {"all": True, "dense": not c.ragged, "ragged": c.ragged, "small": case == "small", "dp": False}
    # a padded vocabulary only where the padding changes it (elsewhere the row would time ours-nomask-mm again)
    return [k for k, e in ENGINES.items() if kind[e.cases] and (e.pad_vocab == 1 or c.vocab % e.pad_vocab)]


def check_bench_args(cases, engines=None, steps: int = 50, repeats: int = 3, warmup: int = 10) -> None:
    """Raise ConfigError, naming the valid choices, before anything is built."""
    unknown = [c for c in cases if c not in CASES]
    if unknown or not cases:
        raise ConfigError(f"unknown or no bench case(s) {unknown}: valid cases are {', '.join(CASES)}")
    bad = [e for e in engines or () if e not in ENGINES]
    if bad:
        raise ConfigError(f"unknown engine(s) {bad}: valid engines are {', '.join(ENGINES)}")
    for name, value, least in (("steps", steps, 1), ("repeats", repeats, 1), ("warmup", warmup, 0)):
        if not isinstance(value, int) or value < least:
            raise ConfigError(f"--{name} must be an integer >= {least}; got {value!r}")
    parallel = [c for c in cases if CASES[c].data_parallel]
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if parallel and launched < 2:
        raise ConfigError(f"the data-parallel case(s) {parallel} run under torchrun on 2 or more GPUs: "
                          f"torchrun --nproc_per_node 2 -m xlrepro.cli bench --cases {' '.join(parallel)}")
    if launched > 1 and len(parallel) != len(cases):
        raise ConfigError(f"under torchrun only the data-parallel cases run "
                          f"({', '.join(c for c in CASES if CASES[c].data_parallel)}); got {list(cases)}")


def model_flops(size: ModelSize, vocab: int, batch: int, length: int, mlm: float = 0.15,
                lengths: list[int] | None = None) -> float:
    """Training FLOPs of one step (forward + backward = 3 x forward), useful work only: `lengths` (default: `batch`
    documents of `length`) counts the real pieces and attention within each document, never padding."""
    lengths = lengths or [length] * batch
    tokens = sum(lengths)
    h, f, layers = size.hidden, size.ffn, size.layers
    dense = 2 * (4 * h * h + 2 * h * f)  # per piece and layer: Q, K, V, output projection, FFN
    attention = 2 * 2 * h * sum(n * n for n in lengths)  # per layer: scores and values over each document
    head = 2 * (h * h + h * vocab)  # MLM transform + decoder, at masked positions only
    # (useful work: the same count for every engine, also for the HF rows that compute the head at every piece, so
    # that MFU compares like with like; hf-best and ours do exactly this work)
    return 3 * (layers * (tokens * dense + attention) + mlm * tokens * head)


def peak_flops(device) -> float | None:
    name = device_name(device)
    return next((v for k, v in PEAK_BF16.items() if k in name), None)


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def measure(step: Callable[[], object], device, steps: int, repeats: int, warmup: int) -> tuple[float, list[float]]:
    """(seconds of the warm-up, [seconds per step of each repeat])."""
    start = time.perf_counter()
    for _ in range(warmup):
        step()
    _sync(device)
    warm = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(steps):
            step()
        _sync(device)
        times.append((time.perf_counter() - t) / steps)
    return warm, times


@dataclass
class Inputs:
    """One case's fixed batch, padded (every engine) and packed (the packed levers)."""
    ids: torch.Tensor       # [B, W]
    real: torch.Tensor      # [B, W] bool
    labels: torch.Tensor    # [B, W], -100 where unlabelled
    lengths: list[int]


def make_inputs(case: Case, device) -> Inputs:
    g = torch.Generator().manual_seed(1)
    lengths = case.lengths()
    ids = torch.randint(5, case.vocab, (case.batch, case.length), generator=g)
    real = torch.arange(case.length) < torch.tensor(lengths)[:, None]
    labels = torch.where((torch.rand(ids.shape, generator=g) < 0.15) & real, ids, -100)
    ids = torch.where(real, ids, 0)
    return Inputs(ids.to(device), real.to(device), labels.to(device), lengths)


def masked_positions(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(flat indices of the labelled pieces of a [B, W] label tensor, their labels): computed once per batch beside
    it, as BERT's input pipeline gives `masked_lm_positions`, so that the step has fixed shapes."""
    flat = labels.reshape(-1)
    where = (flat != -100).nonzero().squeeze(1)
    return where, flat[where]


def masked_mlm_loss(model, ids: torch.Tensor, mask: torch.Tensor | None, where: torch.Tensor,
                    targets: torch.Tensor) -> torch.Tensor:
    """HF `BertForMaskedLM`'s MLM loss with the output layer at the labelled pieces only: the encoder
    (`model.bert`), then `model.cls` on the hidden states at `where` (flat indices), cross-entropy against
    `targets`. The same loss as `model(labels=...)`, which computes the output layer at every piece."""
    h = model.bert(input_ids=ids, attention_mask=mask).last_hidden_state
    logits = model.cls(h.flatten(0, 1).index_select(0, where))
    return torch.nn.functional.cross_entropy(logits.float(), targets)


def _hf_step(case: Case, inputs: Inputs, device, engine: str, mode: str | None = None, bf16: bool | None = None):
    """One HF training step of `engine` (a closure; `.model` is the model). mode: hf-best's torch.compile mode
    (None: eager). bf16: autocast (default: every engine but hf-fp32). TF32 as `allows_tf32` says, before compiling."""
    torch.backends.cuda.matmul.allow_tf32 = allows_tf32(engine)
    model = init_model(case.size, case.vocab, 0, attn="sdpa", positions=max(256, case.length)).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=case.size.lr, eps=1e-6, weight_decay=0.01,
                            fused=True if engine != "hf-fp32" else None)  # fp32: torch's default (foreach)
    run = model
    if ENGINES[engine].ddp:  # gradients averaged over the ranks, bucketed and overlapped with the backward
        from torch.nn.parallel import DistributedDataParallel
        index = torch.device(device).index
        run = DistributedDataParallel(model, device_ids=None if index is None else [index])
    if engine in ("hf-compile", "hf-compile-ddp"):
        run = torch.compile(run)
    mask = inputs.real.long() if case.ragged else None  # full rows: no mask, as a user without padding passes
    bf16 = engine != "hf-fp32" if bf16 is None else bf16
    if engine == HF_BEST:
        where, targets = masked_positions(inputs.labels)
        loss_of = torch.compile(masked_mlm_loss, mode=mode) if mode else masked_mlm_loss

        def forward():
            if mode:  # a new step: the CUDA graphs' outputs of the last one may be overwritten
                torch.compiler.cudagraph_mark_step_begin()
            return loss_of(model, inputs.ids, mask, where, targets)
    else:
        def forward():
            return run(input_ids=inputs.ids, attention_mask=mask, labels=inputs.labels).loss

    def step():
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
            loss = forward()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    step.model = model
    return step


def hf_best_modes(cuda: bool, compile_on_cpu: bool, choice: str = "auto") -> list[str | None]:
    """The torch.compile modes hf-best times: `choice` ("auto": both of `HF_BEST_MODES`); [None] (eager) on the CPU
    unless `compile_on_cpu`."""
    if choice != "auto" and choice not in HF_BEST_MODES:
        raise ConfigError(f"hf-best mode {choice!r}: valid modes are auto, {', '.join(HF_BEST_MODES)}")
    if not cuda and not compile_on_cpu:
        return [None]
    return list(HF_BEST_MODES) if choice == "auto" else [choice]


def allows_tf32(engine: str) -> bool:
    """Whether `engine`'s float32 matrix products may use TF32 tensor cores: every engine but hf-fp32 (float32
    proper). Under bf16 autocast some products may stay float32 (the profiles of Inductor's compiled HF steps show
    float32 products on CUDA cores); a careful user lets cuBLAS use tensor cores for them
    (`torch.set_float32_matmul_precision("high")`, as PyTorch's warning asks and nanoGPT does), so the bench does for
    every bf16 row, ours included."""
    return engine != "hf-fp32"


def _free(cuda: bool) -> None:
    """Drop what the last engine left: garbage, the CUDA cache, compiled graphs; float32 without TF32 again."""
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    torch._dynamo.reset()
    torch.backends.cuda.matmul.allow_tf32 = False


def _time_hf_best(case: Case, inputs: Inputs, device, modes: list[str | None], steps: int, repeats: int,
                  warmup: int, profile: bool):
    """Time hf-best in each of `modes`, one after the other in this process: (warm-up seconds, times, profile or
    None, mode, note) of the fastest (median), the note giving every mode's median or failure."""
    cuda = torch.device(device).type == "cuda"
    trials, notes, error = [], [], None
    for mode in modes:
        step = None
        try:
            step = _hf_step(case, inputs, device, HF_BEST, mode=mode)
            warm, times = measure(step, device, steps, repeats, warmup)
            profiled = profile_step(step, device) if profile else None
            trials.append((statistics.median(times), mode, warm, times, profiled))
            notes.append(f"{mode or 'eager'} {1e3 * statistics.median(times):.2f} ms")
        except Exception as err:  # noqa: BLE001 - one mode failing (a compile error) leaves the other
            error = err
            notes.append(f"{mode or 'eager'} failed: {type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''}")
        finally:
            step = None
            _free(cuda)
    if not trials:
        raise error
    med, mode, warm, times, profiled = min(trials, key=lambda t: t[0])
    note = ("eager: torch.compile is timed on a GPU only" if mode is None and not cuda else
            f"the fastest of {', '.join(notes)}" if len(modes) > 1 else ", ".join(notes))
    return warm, times, profiled, mode or "none", note


def _ours_step(case: Case, inputs: Inputs, device, engine: Engine):
    from .engine.fused_bert import Levers
    from .engine.packing import document_block_mask, document_mask, pack_documents
    from .engine.stacked import ModelStack, OptimConfig, compile_mode, masked_capacity, select_masked

    torch.backends.cuda.matmul.allow_tf32 = allows_tf32("ours")  # every engine of ours runs bf16
    m = engine.models
    models = [init_model(case.size, case.vocab, s, attn="sdpa", positions=max(256, case.length)) for s in range(m)]
    if engine.attention == "flex":
        for model in models:
            model.config.attention_probs_dropout_prob = 0.0
    stack = ModelStack(models, OptimConfig(case.size.lr, 0.01, 1e-6, 50, 10**6, 1.0), device,
                       compile=compile_mode("regional", device), graphs=True,
                       levers=Levers(attention=engine.attention, fused_qkv=engine.fused_qkv, linear=engine.linear,
                                     autotune=engine.autotune, residual=engine.residual,
                                     pad_vocab=engine.pad_vocab),
                       data_parallel=engine.ddp, ddp_graphs=engine.ddp_graphs)
    if engine.packed:  # [R, W] rows of whole documents; labels follow their pieces
        docs = [inputs.ids[i, :n] for i, n in enumerate(inputs.lengths)]
        packed = pack_documents(docs, case.length)
        flat_labels = torch.cat([inputs.labels[i, :n] for i, n in enumerate(inputs.lengths)])
        labels = torch.full((packed.rows * case.length,), -100, device=inputs.ids.device)
        labels[packed.index] = flat_labels
        ids, positions, labels = packed.ids, packed.positions, labels.view(packed.rows, case.length)
        # The mask is built once, as a data loader would beside the batch (not inside the timed step).
        mask = document_block_mask(packed.documents) if engine.attention == "flex" else \
            document_mask(packed.documents)[None].expand(m, -1, -1, -1, -1)
    else:
        ids, labels = inputs.ids, inputs.labels
        positions = torch.arange(case.length, device=ids.device).expand_as(ids)
        mask = None if engine.nomask else inputs.real[None, :, None, None, :].expand(m, -1, -1, -1, -1)
    ids, positions, labels = (t[None].expand(m, *t.shape) for t in (ids, positions, labels))
    sel, lab = select_masked(labels, masked_capacity(int(inputs.real.sum()), 0.15))
    batch = (ids, mask, positions, torch.zeros_like(ids), sel, lab)
    return lambda: stack.step(lambda: batch, graph_key="bench"), ids.shape[1], stack


KERNEL_KINDS = (  # (kind, substrings of a kernel's name, lower case), first match wins; the rest is "other"
    ("attention", ("flash", "fmha", "attention", "sdpa", "efficient")),  # first: fused attention may run on CUTLASS
    ("matrix products", ("gemm", "xmma", "cutlass", "cublas", "nvjet", "triton_tem", "aten::mm", "addmm", "bmm")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("communication", ("nccl",)),
    ("fused element-wise (Triton)", ("triton",)),
    ("element-wise and reductions (ATen)", ("elementwise", "reduce", "vectorized", "softmax", "layer_norm",
                                            "dropout", "copy", "fill", "cat", "index", "gather", "scatter")),
)


def kernel_kind(name: str) -> str:
    """The kind of a GPU kernel by its name (`KERNEL_KINDS`). A Triton kernel is a matrix product only when it is a
    template (``triton_tem_*``); Inductor's other kernels name the operations they fused, so one called
    ``triton_per_fused_..._baddbmm_...`` is the element-wise work around a product, not the product."""
    low = name.lower()
    if low.startswith("triton_") and not low.startswith("triton_tem"):
        return "fused element-wise (Triton)"
    return next((kind for kind, keys in KERNEL_KINDS if any(k in low for k in keys)), "other")


def profile_step(step: Callable[[], object], device, steps: int = 5) -> tuple[list[dict], str]:
    """Profile `steps` more steps of a warmed-up engine: (one row per kernel kind: total ms per step and share of the
    device time; the profiler's own top-30 table). On a GPU the device's kernels (also those replayed from a CUDA
    graph, which the profiler traces through CUPTI); on the CPU the operators' self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        _sync(device)
    events = prof.key_averages()
    attr = "self_device_time_total" if cuda else "self_cpu_time_total"
    totals: dict[str, float] = {}
    for e in events:
        if cuda and getattr(e, "device_type", None) is not None and "CUDA" not in str(e.device_type):
            continue
        totals[kernel_kind(e.key)] = totals.get(kernel_kind(e.key), 0.0) + getattr(e, attr, 0.0)
    whole = sum(totals.values()) or 1.0
    rows = [{"kind": k, "ms_per_step": v / 1e3 / steps, "share": v / whole}
            for k, v in sorted(totals.items(), key=lambda kv: -kv[1])]
    table = events.table(sort_by=attr, row_limit=30, max_name_column_width=90)
    return rows, table


def profile_ops(step: Callable[[], object], stack, device, steps: int = 3) -> "pd.DataFrame":
    """The operators behind the kernels of `steps` more steps of a warmed-up stack of ours, run without its CUDA graphs
    (`ModelStack.eager_steps`; a replayed graph shows the profiler its kernels only): one row per operator and input
    shapes, op, shapes, ms_per_step (on a GPU the device time of the kernels it launched itself; on the CPU its self
    CPU time), calls_per_step, largest first; operators that took no time are left out."""
    import pandas as pd
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    attr = "self_device_time_total" if cuda else "self_cpu_time_total"
    with stack.eager_steps(), profile(activities=activities, record_shapes=True) as prof:
        for _ in range(steps):
            step()
        _sync(device)
    rows = [{"op": e.key, "shapes": str(e.input_shapes), "ms_per_step": getattr(e, attr) / 1e3 / steps,
             "calls_per_step": e.count / steps}
            for e in prof.key_averages(group_by_input_shape=True)
            if e.key.startswith("aten::") and getattr(e, attr) > 0]
    columns = ["op", "shapes", "ms_per_step", "calls_per_step"]
    return pd.DataFrame(rows, columns=columns).sort_values("ms_per_step", ascending=False, ignore_index=True)


def bench_case(case_name: str, engines, device, steps: int, repeats: int, warmup: int, budget_s: float | None = None,
               compile_on_cpu: bool = False, on_row: Callable[[dict], None] | None = None,
               profile_to: Path | None = None, hf_best_mode: str = "auto",
               provenance: dict | None = None) -> list[dict]:
    """Rows for one case (dicts; see `write_bench` for the columns). An engine that fails leaves a row that says so;
    past `budget_s` of the case's wall time the remaining engines are skipped with a row that says so, except the
    headline's pair (`HEADLINE`: hf-best and ours, which run first).
    profile_to: a folder; each engine timed "ok" is then profiled for 5 more steps (`profile_step`), into
    profile-<case>-<engine>.txt (the kinds of kernels, then the profiler's top 30) and the rows of profile.csv; a
    stack of ours that replays CUDA graphs also into profile-ops-<case>-<engine>.csv (`profile_ops`: the operators
    behind the kernels, with their shapes).
    hf_best_mode: the torch.compile mode of hf-best ("auto": each of `HF_BEST_MODES`, the faster kept)."""
    case = CASES[case_name]
    cuda = torch.device(device).type == "cuda"
    peak = peak_flops(device)
    inputs = make_inputs(case, device)
    tokens = sum(inputs.lengths)
    flops = model_flops(case.size, case.vocab, case.batch, case.length, lengths=inputs.lengths)
    start = time.perf_counter()
    rank, gpus = world()
    rows = []
    for key in sorted(engines, key=RUN_ORDER.index):
        e = ENGINES[key]
        over = budget_s is not None and time.perf_counter() - start > budget_s and key not in HEADLINE
        if case.data_parallel:
            over = any_rank(over)  # every rank skips the same engines
            if not e.ddp and rank != 0:  # rank 0 times the one-GPU references alone; the others wait
                barrier()
                continue
        row = {"case": case_name, "engine": e.label, "engine_key": key, "family": e.family, "models": e.models,
               "gpus": gpus if e.ddp else 1, "status": "ok", "batch": case.batch, "width": case.length,
               "rows": case.batch, "tokens": tokens, "padding_share": 1 - tokens / (case.batch * case.length)}
        try:
            if over:
                raise _Skip(f"skipped: the case's time budget of {budget_s:.0f} s was spent")
            if key in ("hf-compile", "hf-compile-ddp") and not cuda and not compile_on_cpu:
                raise _Skip("skipped: torch.compile is timed on a GPU only")
            if e.attention == "flex" and not cuda:
                raise _Skip("skipped: FlexAttention trains on a GPU only (no backward on the CPU)")
            if e.ddp_graphs and not cuda:
                raise _Skip("skipped: CUDA graphs need a GPU")
            if e.residual != "float32" and not cuda:
                raise _Skip("skipped: the bf16 residual stream is timed under autocast on a GPU only")
            stack = profiled = None
            if key == HF_BEST:
                modes = hf_best_modes(cuda, compile_on_cpu, hf_best_mode)
                warm, times, profiled, row["compile_mode"], row["note"] = _time_hf_best(
                    case, inputs, device, modes, steps, repeats, warmup, profile_to is not None)
            elif e.family == "hf":
                step = _hf_step(case, inputs, device, key)
                row["compile_mode"] = "default" if key in ("hf-compile", "hf-compile-ddp") else "none"
            else:
                step, row["rows"], stack = _ours_step(case, inputs, device, e)
                row["compile_mode"] = stack.compiled or "none"
            row["tf32"] = allows_tf32(key)  # as `_hf_step` and `_ours_step` set it
            if key != HF_BEST:
                warm, times = measure(step, device, steps, repeats, warmup)
                if profile_to is not None:  # every rank steps (data parallel: the all-reduce needs them)
                    profiled = profile_step(step, device)
            if stack is not None and stack.fallbacks:  # timed (mostly) on the eager path: not the engine's speed
                row["status"] = f"eager fallback: {stack.fallbacks[0]['error']}"
            elif e.ddp_graphs and stack is not None and not stack.captured_graphs:  # the capture failed: eager steps
                row["status"] = "no CUDA graph: the capture failed, the steps ran eagerly"
            if profiled is not None and rank == 0:
                _write_profile(profile_to, case_name, key, *profiled, provenance=provenance)
                ops_path = Path(profile_to) / f"profile-ops-{case_name}-{key}.csv"
                if stack is not None and stack.captured_graphs and not case.data_parallel:
                    # the kernels of replayed graphs have no operator: name them from eager steps
                    from .atomic import atomic_path
                    with atomic_path(ops_path) as tmp:
                        profile_ops(step, stack, device).to_csv(tmp, index=False)
                else:  # none now (no graphs): an earlier run's would be read beside this profile
                    ops_path.unlink(missing_ok=True)
            med = statistics.median(times)
            per_model = med / e.models
            row.update(ms_per_step=1e3 * med, ms_per_step_min=1e3 * min(times), ms_per_step_max=1e3 * max(times),
                       ms_per_model_step=1e3 * per_model, tokens_per_s_stack=tokens * e.models / med,
                       tokens_per_s_per_model=tokens / med,  # how fast each model of the stack trains
                       tokens_per_s_all=tokens * e.models * row["gpus"] / med,  # every GPU of the row together
                       mfu=None if peak is None else flops / per_model / peak,  # per GPU
                       warmup_s=warm)
        except _Skip as why:
            row["status"] = str(why)
        except Exception as err:  # noqa: BLE001 - one engine's failure (OOM, compile error) must not lose the others
            row["status"] = f"failed: {type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
        finally:
            step = stack = None  # the model, optimiser, stack and CUDA graphs of this engine go before the next one
            _free(cuda)
        rows.append(row)
        _headline(rows)
        if on_row is not None:
            on_row(row)
        if case.data_parallel:
            barrier()
    return sorted(rows, key=lambda r: list(ENGINES).index(r["engine_key"]))


class _Skip(Exception):
    pass


def _write_profile(folder: Path, case: str, engine: str, kinds: list[dict], table: str,
                   provenance: dict | None = None) -> None:
    """profile-<case>-<engine>.txt, and this engine's rows of profile.csv (others' rows kept), both atomically;
    `provenance` (device, torch, commit, date) fills those columns of the rows."""
    import pandas as pd

    from .atomic import atomic_path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"{case}, {engine}: GPU time by kind of kernel (ms per step, share)"]
    lines += [f"  {k['kind']:38s} {k['ms_per_step']:8.2f} ms  {k['share']:6.1%}" for k in kinds]
    with atomic_path(folder / f"profile-{case}-{engine}.txt") as tmp:
        tmp.write_text("\n".join(lines) + "\n\n" + table + "\n")
    path = folder / "profile.csv"
    old = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=["case", "engine_key", "kind"])
    old = old[~((old["case"] == case) & (old["engine_key"] == engine))]
    new = pd.DataFrame([{"case": case, "engine_key": engine, **k, **(provenance or {})} for k in kinds])
    with atomic_path(path) as tmp:
        pd.concat([old, new], ignore_index=True).to_csv(tmp, index=False)


def _headline(rows: list[dict]) -> None:
    """Fill, in place, best_hf_engine and speedup_vs_best_hf (the best HF row's time per model-step over the row's,
    among the rows of the same GPU count: the best HF row is hf-best where it was timed, else the fastest HF row) and,
    for data-parallel rows, scaling_efficiency (the one-GPU reference engine's time per step over the row's: with the
    same batch on every GPU, 1.0 is perfect scaling)."""
    for gpus in {r.get("gpus", 1) for r in rows}:
        group = [r for r in rows if r.get("gpus", 1) == gpus]
        hf = [r for r in group if r["family"] == "hf" and r["status"] == "ok"]
        best = next((r for r in hf if r["engine_key"] == HF_BEST), None) or \
            (min(hf, key=lambda r: r["ms_per_model_step"]) if hf else None)
        for r in group:
            r["best_hf_engine"] = best["engine"] if best else None
            ok = best is not None and r["status"] == "ok"
            r["speedup_vs_best_hf"] = best["ms_per_model_step"] / r["ms_per_model_step"] if ok else None
    for r in rows:
        reference = ENGINES[r["engine_key"]].reference if r["engine_key"] in ENGINES else None
        one = [x for x in rows if x["engine_key"] == reference and x.get("gpus", 1) == 1 and x["status"] == "ok"]
        ok = bool(one) and r["status"] == "ok"
        r["scaling_efficiency"] = one[0]["ms_per_step"] / r["ms_per_step"] if ok else None


COLUMNS = ["case", "engine", "engine_key", "family", "models", "gpus", "status", "ms_per_step", "ms_per_step_min",
           "ms_per_step_max", "ms_per_model_step", "tokens_per_s_stack", "tokens_per_s_per_model", "tokens_per_s_all",
           "mfu", "speedup_vs_best_hf", "best_hf_engine", "scaling_efficiency", "compile_mode", "tf32", "note",
           "warmup_s",
           "batch", "width", "rows", "tokens", "padding_share",
           "steps", "repeats", "warmup_steps", "device", "peak_tflops", "torch", "transformers", "commit", "date"]


def write_bench(cases=DEFAULT_CASES, engines=None, steps: int = 50, repeats: int = 3, warmup: int = 10,
                folder: Path | None = None, device: str | None = None, budget_s: float | None = None,
                commit: str | None = None, compile_on_cpu: bool = False, profile: bool = False,
                hf_best_mode: str = "auto") -> Path:
    """Run the benchmark and write `bench.csv` (and `bench.png`) in `folder` (default `book/results/bench`), after
    every row (atomically), keeping the rows of cases not run now. engines: None = every engine of each case.
    Under torchrun (the data-parallel case) every rank runs it and rank 0 alone writes. profile: also write a kernel
    profile of each engine (`profile_step`) beside the CSV (profile.csv, profile-<case>-<engine>.txt).
    hf_best_mode: hf-best's torch.compile mode on a GPU: "auto" (both of `HF_BEST_MODES`, the faster kept) or one."""
    import pandas as pd
    import transformers

    from .atomic import atomic_path
    from .paths import repo_root
    from .runrecord import git_commit

    check_bench_args(cases, engines, steps, repeats, warmup)
    hf_best_modes(True, True, hf_best_mode)  # an unknown mode: ConfigError before anything runs
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    folder = Path(folder or repo_root() / "book" / "results" / "bench")
    peak = peak_flops(device)
    meta = {"steps": steps, "repeats": repeats, "warmup_steps": warmup, "device": device_name(device),
            "peak_tflops": None if peak is None else peak / 1e12, "torch": torch.__version__,
            "transformers": transformers.__version__, "commit": commit or git_commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    path = folder / "bench.csv"
    kept = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=COLUMNS)
    if "engine_key" not in kept.columns:  # an older benchmark's layout: not comparable, replaced
        kept = pd.DataFrame(columns=COLUMNS)
    kept = kept.reindex(columns=COLUMNS)  # rows from before the data-parallel columns: one GPU each
    kept["gpus"] = kept["gpus"].fillna(1).astype(int)
    kept = kept[~kept["case"].isin(cases)]
    writer = world()[0] == 0
    done: list[dict] = []

    def save(row=None):
        if row is not None:
            done.append({**row, **meta})
            _headline([r for r in done if r["case"] == row["case"]])
        df = pd.concat([kept, pd.DataFrame(done, columns=COLUMNS)], ignore_index=True) if done else kept
        order = {k: i for i, k in enumerate(ENGINES)}
        df = df.sort_values(["case", "engine_key"], key=lambda s: s.map(order) if s.name == "engine_key"
                            else s.map({c: i for i, c in enumerate(CASES)}), kind="stable")
        df["tf32"] = df["tf32"].astype("boolean")  # True/False, blank for rows from before the column (not 1.0)
        with atomic_path(path) as tmp:
            df[COLUMNS].to_csv(tmp, index=False)
        return df

    for case in cases:
        chosen = [e for e in (engines or engines_for(case)) if e in engines_for(case)]
        bench_case(case, chosen, device, steps, repeats, warmup, budget_s, compile_on_cpu,
                   on_row=save if writer else None, profile_to=folder if profile else None,
                   hf_best_mode=hf_best_mode, provenance={"device": meta["device"], "torch": meta["torch"],
                                                          "commit": str(meta["commit"])[:7],
                                                          "date": meta["date"][:10]})
        if writer:
            print(summary(save()[lambda d: d["case"] == case]), flush=True)
    if writer:
        _save_plot(save(), folder)
    return path


def summary(df) -> str:
    """One line per row: engine, median ms per model-step (min-max), MFU, speed-up against the best HF row (named),
    hf-best's compile mode."""
    import pandas as pd

    lines = []
    for r in df.itertuples():
        if r.status != "ok":
            lines.append(f"{r.case:12s} {r.engine:52s} {r.status}")
            continue
        mfu = "" if pd.isna(r.mfu) else f" MFU {r.mfu:5.1%}"
        speed = "" if pd.isna(r.speedup_vs_best_hf) else f"  {r.speedup_vs_best_hf:.2f}x vs {r.best_hf_engine}"
        scaling = "" if pd.isna(r.scaling_efficiency) else f"  {r.gpus} GPUs: scaling efficiency {r.scaling_efficiency:.0%}"
        mode = f"  [{r.note}]" if r.engine_key == HF_BEST and isinstance(r.note, str) else ""
        lines.append(f"{r.case:12s} {r.engine:52s} {r.ms_per_model_step:8.2f} ms/model-step "
                     f"({r.ms_per_step_min / r.models:.2f}-{r.ms_per_step_max / r.models:.2f}){mfu}{speed}{scaling}{mode}")
    return "\n".join(lines)


def _save_plot(df, folder: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .atomic import atomic_path

    ok = df[df["status"] == "ok"]
    if not len(ok):
        return
    fig = plot_bench(ok)
    with atomic_path(folder / "bench.png") as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def plot_bench(df):
    """Milliseconds per model-step of every engine, one panel per case (a linear axis from 0, so that a bar's length
    is its time), HF grey; MFU and speed-up annotated, the speed-up's HF row named in the panel's title."""
    import matplotlib.pyplot as plt
    import pandas as pd

    cases = list(dict.fromkeys(df["case"]))
    cols = min(2, len(cases))  # two panels a row: the book's column is narrow
    rows = -(-len(cases) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.flat[len(cases):]:
        ax.set_visible(False)
    for ax, case in zip(axes.flat, cases):
        sub = df[df["case"] == case]
        colours = ["#999999" if f == "hf" else "#1f77b4" for f in sub["family"]]
        err = [sub["ms_per_model_step"] - sub["ms_per_step_min"] / sub["models"],
               sub["ms_per_step_max"] / sub["models"] - sub["ms_per_model_step"]]
        bars = ax.barh(sub["engine"], sub["ms_per_model_step"], xerr=err, color=colours)
        for bar, mfu, speed, gpus, scaling in zip(bars, sub["mfu"], sub["speedup_vs_best_hf"], sub["gpus"],
                                                  sub["scaling_efficiency"]):
            text = ("" if pd.isna(speed) else f"{speed:.2f}x") + ("" if pd.isna(mfu) else f", MFU {mfu:.0%}") + \
                ("" if pd.isna(scaling) else f", {gpus:.0f} GPUs: scaling {scaling:.0%}")
            ax.annotate(text, (bar.get_width(), bar.get_y() + bar.get_height() / 2), xytext=(3, 0),
                        textcoords="offset points", va="center", fontsize=7)
        ax.set_xlim(0, 1.45 * float((sub["ms_per_step_max"] / sub["models"]).max()))  # linear from 0: bar = time
        ax.invert_yaxis()
        refs = list(dict.fromkeys(sub["best_hf_engine"].dropna())) if "best_hf_engine" in sub else []
        ax.set_title(case + (f" (speed-ups vs {' / '.join(refs)})" if refs else ""), fontsize=9)
        ax.set_xlabel("ms per model-step (median; bars: min-max)")
        ax.tick_params(axis="y", labelsize=7)
    fig.suptitle(f"MLM training step time on {df['device'].iloc[0]}")
    fig.tight_layout()
    return fig
