"""A small multilingual BERT ("mini-mBERT"), pretrained from scratch on the 22 languages' train chapters.

It follows mBERT's recipe at a small scale: one WordPiece vocabulary shared by all languages (or mBERT's own
cased vocabulary), MLM with 15% of the pieces masked (80% [MASK], 10% kept, 10% random), and the languages of
each batch drawn with exponentially smoothed probabilities, so that small languages are seen more often than
their share of the data (`sampling_weights`). The default size (hidden 256, 4 layers) pretrains on one H100
in about ten minutes; the result is saved to the cache, where later chapters find it (`load_mini_mbert`).

    out_dir = pretrain(MiniMBertConfig(), device="cuda")   # resumes from out_dir/checkpoint.pt if interrupted
    model, tokenizer = load_mini_mbert(out_dir)
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .. import atomic
from ..config import ConfigError, ModelSize, choose
from ..data.collate import pad_batch
from ..data.multilingual import LANGUAGES, load_verses
from .masking import mask_tokens
from ..models import bert_config, device_name, init_model
from ..paths import cache_dir
from .stacked import ModelStack, OptimConfig, masked_capacity, select_masked

VOCABS = ("shared", "mbert")
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
DEFAULT_SIZE = ModelSize(name="mini", hidden=256, layers=4, heads=4, ffn=1024, lr=5e-4)
CHECKPOINT_SECONDS = 180  # how often an unfinished run saves checkpoint.pt


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


@dataclass
class MiniMBertConfig:
    languages: tuple[str, ...] = LANGUAGES
    vocab: str = "shared"  # "shared": a WordPiece trained here; "mbert": mBERT's cased 119,547 pieces
    vocab_size: int = 32_000  # for vocab="shared" only
    size: ModelSize = DEFAULT_SIZE
    batch_size: int = 256
    max_length: int = 128
    steps: int = 20_000
    warmup: float = 0.01  # share of the steps with a linearly rising learning rate
    alpha: float = 0.7
    seed: int = 0
    mlm_probability: float = 0.15
    weight_decay: float = 0.01
    adam_eps: float = 1e-6
    max_grad_norm: float = 1.0

    def __post_init__(self):
        if isinstance(self.size, dict):  # read back from config.json
            self.size = ModelSize(**self.size)
        self.languages = tuple(self.languages)
        choose("vocab", self.vocab, VOCABS)
        if not self.languages or len(set(self.languages)) != len(self.languages):
            raise ConfigError(f"languages must be distinct and non-empty; valid: {', '.join(LANGUAGES)}")
        for lang in self.languages:
            choose("language", lang, LANGUAGES)
        for name in ("vocab_size", "batch_size", "steps"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a positive integer; got {getattr(self, name)!r}")
        if self.vocab == "shared" and self.vocab_size < 2 * len(SPECIAL_TOKENS):
            raise ConfigError(f"vocab_size {self.vocab_size} is too small for a WordPiece vocabulary")
        if not 3 <= self.max_length <= 512:
            raise ConfigError(f"max_length must be in 3..512 ([CLS], a piece, [SEP]); got {self.max_length}")
        if self.size.hidden % self.size.heads:
            raise ConfigError(f"hidden {self.size.hidden} is not divisible by heads {self.size.heads}")
        if not 0 <= self.warmup < 1:
            raise ConfigError(f"warmup is a share of the steps in [0, 1); got {self.warmup}")
        if self.alpha < 0:
            raise ConfigError(f"alpha must be >= 0 (1 = proportional, 0 = uniform); got {self.alpha}")

    def default_dir(self) -> Path:
        return cache_dir() / "mini_mbert" / f"{self.vocab}-{self.size.hidden}x{self.size.layers}"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def train_shared_wordpiece(texts_by_lang: dict[str, list[str]], vocab_size: int, alpha: float = 0.7,
                           seed: int = 0):
    """A cased WordPiece vocabulary shared by all languages, trained on a smoothed sample of their texts.

    The sample has as many sentences as the texts together, each language contributing in proportion to its
    `sampling_weights` (drawn with replacement where that exceeds what it has), so the vocabulary is balanced
    the way the training batches are. Returns a `tokenizers.Tokenizer` whose `encode` adds [CLS] ... [SEP].
    """
    from tokenizers.processors import BertProcessing

    from ..tokenization import bert_wordpiece, train_wordpiece_model

    weights = sampling_weights({lang: len(t) for lang, t in texts_by_lang.items()}, alpha)
    total = sum(len(t) for t in texts_by_lang.values())
    rng = np.random.default_rng(seed)
    sample = []
    for lang, texts in texts_by_lang.items():
        k = max(1, round(weights[lang] * total))
        sample += [texts[i] for i in rng.choice(len(texts), size=k, replace=k > len(texts))]
    # HF's WordPiece trainer as BertWordPieceTokenizer sets it up (clean_text on), made deterministic and numbered
    # canonically (xlrepro.tokenization); a large alphabet keeps the CJK characters of zh/ja (the default keeps 1,000)
    tok = train_wordpiece_model(bert_wordpiece(clean_text=True), sample, vocab_size, SPECIAL_TOKENS,
                                limit_alphabet=max(vocab_size // 4, 50))
    tok.post_processor = BertProcessing(("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def draw_batch(seed: int, step: int, weights: np.ndarray, sizes: np.ndarray, batch_size: int):
    """(language index, sentence index) of each sentence of a step: languages by `weights`, then sentences
    uniformly within the language. It depends only on (seed, step), so a resumed run draws the same batches."""
    rng = np.random.default_rng([seed, step])
    langs = rng.choice(len(weights), size=batch_size, p=weights)
    return langs, rng.integers(0, sizes[langs])


def _train_texts(config: MiniMBertConfig, max_sentences: int | None) -> dict[str, list[str]]:
    """Each language's train verses (the first `max_sentences` of them, if given)."""
    return {lang: load_verses(lang, "train")["text"].tolist()[:max_sentences] for lang in config.languages}


def _encode(tok, texts_by_lang: dict[str, list[str]], max_length: int):
    """All sentences as one padded [N, W] id tensor (W <= max_length), their lengths, and each language's first row."""
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    rows, starts = [], []
    for texts in texts_by_lang.values():
        starts.append(len(rows))
        rows += [[cls, *e.ids[:max_length - 2], sep] for e in tok.encode_batch(texts, add_special_tokens=False)]
    ids, lengths = pad_batch(rows, tok.token_to_id("[PAD]"), dtype=np.int32)
    return torch.from_numpy(ids), torch.from_numpy(lengths), np.array(starts)


def _tokenizer(config: MiniMBertConfig, out_dir: Path, texts_by_lang):
    """The run's tokenizer: out_dir/tokenizer.json if an earlier (interrupted) run wrote it, else a new one."""
    from tokenizers import Tokenizer
    path = out_dir / "tokenizer.json"
    if path.exists():
        return Tokenizer.from_file(str(path))
    if config.vocab == "shared":
        tok = train_shared_wordpiece(texts_by_lang, config.vocab_size, config.alpha, config.seed)
    else:
        from ..data.mbert_vocab import mbert_tokenizer
        tok = Tokenizer.from_str(mbert_tokenizer().to_str())
    atomic.write_bytes(path, tok.to_str().encode())
    return tok


def pretrain(config: MiniMBertConfig | None = None, device: str | torch.device = "cpu",
             out_dir: str | Path | None = None, time_limit: float | None = None,
             max_sentences_per_language: int | None = None, progress: bool = True) -> Path:
    """Pretrain mini-mBERT into `out_dir` (default ``<cache>/mini_mbert/<vocab>-<hidden>x<layers>``).

    Finished: out_dir holds model.safetensors, tokenizer.json, config.json and training.json (written last), and
    a second call returns at once. Stopped by `time_limit` (seconds of this call): out_dir holds checkpoint.pt
    (also saved every few minutes), and the next call resumes from it. Returns out_dir either way.
    """
    from safetensors.torch import save_model

    config = config or MiniMBertConfig()
    out_dir = Path(out_dir) if out_dir is not None else config.default_dir()
    if (out_dir / "config.json").exists():
        saved = json.loads((out_dir / "config.json").read_text())
        if saved != json.loads(json.dumps(config.to_json())):
            raise ConfigError(f"{out_dir} holds a mini-mBERT of another config ({saved}); "
                              "pass another out_dir or delete that folder")
        if (out_dir / "training.json").exists():
            return out_dir
    t0 = time.time()
    device = torch.device(device)
    texts = _train_texts(config, max_sentences_per_language)
    atomic.write_json(out_dir / "config.json", config.to_json())
    tok = _tokenizer(config, out_dir, texts)
    vocab_size = tok.get_vocab_size()
    ids, lengths, starts = _encode(tok, texts, config.max_length)
    sizes = np.array([len(t) for t in texts.values()])
    weights = sampling_weights(dict(zip(config.languages, sizes.tolist())), config.alpha)
    p = np.array([weights[lang] for lang in config.languages])

    model = init_model(config.size, vocab_size, config.seed, attn="sdpa", positions=config.max_length)
    optim = OptimConfig(lr=config.size.lr, weight_decay=config.weight_decay, eps=config.adam_eps,
                        warmup_steps=math.ceil(config.warmup * config.steps), total_steps=config.steps,
                        max_grad_norm=config.max_grad_norm)
    done = train_sampled_mlm(model, optim, device, ids, lengths, p, sizes, starts, seed=config.seed,
                             steps=config.steps, batch_size=config.batch_size,
                             mask_id=tok.token_to_id("[MASK]"), vocab_size=vocab_size,
                             mlm_probability=config.mlm_probability, checkpoint=out_dir / "checkpoint.pt",
                             time_limit=time_limit, t0=t0, progress=progress, desc="mini-mBERT", loss_every=100)
    if done is None:
        return out_dir
    stack, losses, seconds = done
    with atomic.atomic_path(out_dir / "model.safetensors") as tmp:
        # bfloat16 on disk: half the size (23 MB for the default model, small enough to carry to a GPU node with
        # the data), and the precision in which the pretraining forward pass (bf16 autocast) used the weights.
        # load_mini_mbert returns float32 parameters.
        save_model(stack.export(0).to(torch.bfloat16).cpu(), str(tmp))
    atomic.write_json(out_dir / "training.json", {
        "steps": config.steps, "seconds": seconds, "steps_per_second": config.steps / max(seconds, 1e-9),
        "device": device_name(device), "vocab_size": vocab_size, "sentences": dict(zip(config.languages, sizes.tolist())),
        "sampling_weights": weights, "max_sentences_per_language": max_sentences_per_language,
        "losses": losses})
    (out_dir / "checkpoint.pt").unlink(missing_ok=True)
    return out_dir


def train_sampled_mlm(model, optim: OptimConfig, device: torch.device, ids: torch.Tensor, lengths: torch.Tensor,
                      weights: np.ndarray, sizes: np.ndarray, starts: np.ndarray, *, seed: int, steps: int,
                      batch_size: int, mask_id: int, vocab_size: int, mlm_probability: float, checkpoint: Path,
                      time_limit: float | None, t0: float, progress: bool, desc: str, loss_every: int = 100,
                      compile: bool = False, on_eval=None, eval_every: int | None = None):
    """Masked-LM pretraining of one model on rows of several languages, each batch drawn from one language with
    probability `weights` (mini-mBERT's language sampling; `draw_batch`). Resumable from `checkpoint`.

    ids [R, W] and lengths [R] hold every language's rows, language l at rows starts[l]..starts[l] + sizes[l].
    Returns (stack, losses, seconds) when finished, None when stopped by `time_limit` (checkpoint saved).
    compile: run the fused loss (`fused_bert.py`, SDPA attention, dropout from PyTorch's generator) compiled
    region by region instead of HF's model; the random draws differ from the HF path, so callers key runs on it.
    on_eval(stack, losses, seconds): called at every multiple of `eval_every` steps (0 and `steps` included, and
    on resuming at such a step), then the checkpoint is saved; `seconds` is the training time so far, which leaves
    out the time spent in on_eval. A true return stops the run there as the time limit does (it returns None).
    """
    from ..progress import progress as progress_bar

    host_lengths = lengths.numpy()
    ids, lengths = ids.to(device), lengths.to(device)
    stack = ModelStack([model], optim, device, compile="regional" if compile else None)
    losses, elapsed = [], 0.0
    if checkpoint.exists():
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        stack.load_state_dict(state["stack"])
        losses, elapsed = state["losses"], state["elapsed"]

    def save():
        with atomic.atomic_path(checkpoint) as tmp:
            torch.save({"stack": stack.state_dict(), "losses": losses, "elapsed": elapsed + time.time() - t_start}, tmp)

    # Inputs are built from device tensors only (`rows` is refilled every step), so on a GPU a step can be
    # captured as a CUDA graph per padded width (ModelStack.step).
    rows = torch.zeros((1, batch_size), dtype=torch.int64, device=device)
    mask = torch.tensor(mask_id, device=device)
    probs = torch.tensor([0.8, 0.1, 0.1], device=device)

    def batch(width: int):
        x = ids[rows, :width].long()  # [1, B, W]
        n = lengths[rows]  # [1, B]
        pos = torch.arange(width, device=device)
        content = (pos >= 1) & (pos < (n - 1)[..., None])  # never [CLS], [SEP] or padding
        inputs, labels = mask_tokens(x, content, mask, probs, vocab_size, mlm_probability)
        sel_index, sel_labels = select_masked(labels, masked_capacity(batch_size * (width - 2), mlm_probability))
        attention = (pos < n[..., None])[:, :, None, None, :]  # [1, B, 1, 1, W], boolean for SDPA
        return inputs, attention, pos.expand_as(x), torch.zeros_like(x), sel_index, sel_labels

    torch.manual_seed(seed * 100003 + stack.step_count)  # masking and dropout streams (one model: its own)
    bar = progress_bar(total=steps, initial=stack.step_count, disable=not progress, desc=desc)
    t_start = last_save = time.time()

    def evaluate_here() -> bool | None:
        """None where this step is no evaluation point, else whether on_eval asks to stop."""
        nonlocal t_start
        if on_eval is None or not eval_every or (stack.step_count % eval_every and stack.step_count != steps):
            return None
        t_hook = time.time()
        stop = bool(on_eval(stack, losses, elapsed + t_hook - t_start))
        t_start += time.time() - t_hook  # training time leaves out the evaluation
        return stop

    if evaluate_here() and stack.step_count < steps:
        bar.close()
        return None
    while stack.step_count < steps:
        step = stack.step_count
        lang, sent = draw_batch(seed, step, weights, sizes, batch_size)
        picked = starts[lang] + sent
        rows.copy_(torch.as_tensor(picked)[None])
        width = int(host_lengths[picked].max())  # pad to the longest sentence of the batch
        if device.type == "cuda":  # ... rounded up to a multiple of 8: fewer CUDA graphs, tensor-core shapes
            width = min(math.ceil(width / 8) * 8, ids.shape[1])
        loss = stack.step(lambda: batch(width), graph_key=width if device.type == "cuda" else None)
        if step % loss_every == 0 or step == steps - 1:
            losses.append([step, loss.float().item()])
            bar.set_postfix(loss=f"{losses[-1][1]:.3f}")
        bar.update(1)
        evaluated = evaluate_here()
        over = bool(evaluated) or (time_limit is not None and time.time() - t0 > time_limit)
        if over or (evaluated is not None and stack.step_count < steps) or time.time() - last_save > CHECKPOINT_SECONDS:
            save()
            last_save = time.time()
        if over and stack.step_count < steps:
            bar.close()
            return None
    bar.close()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return stack, losses, elapsed + time.time() - t_start


def load_mini_mbert(out_dir: str | Path | None = None):
    """(HF BertForMaskedLM in eval mode, tokenizers.Tokenizer) of a finished `pretrain` run."""
    from safetensors.torch import load_model
    from tokenizers import Tokenizer
    from transformers import BertForMaskedLM

    out_dir = Path(out_dir) if out_dir is not None else MiniMBertConfig().default_dir()
    if not (out_dir / "training.json").exists():
        raise FileNotFoundError(f"no finished mini-mBERT in {out_dir}: run "
                                f"xlrepro.training.mini_mbert.pretrain(MiniMBertConfig(...), out_dir={str(out_dir)!r}) first")
    config = MiniMBertConfig(**json.loads((out_dir / "config.json").read_text()))
    tok = Tokenizer.from_file(str(out_dir / "tokenizer.json"))
    model = BertForMaskedLM(bert_config(config.size, tok.get_vocab_size(), positions=config.max_length))
    load_model(model, str(out_dir / "model.safetensors"))
    return model.eval(), tok
