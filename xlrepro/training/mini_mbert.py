"""A small multilingual BERT ("mini-mBERT"), pretrained from scratch on the 22 languages' train chapters.

It follows mBERT's recipe at a small scale: one WordPiece vocabulary shared by all languages (or mBERT's own
cased vocabulary), MLM with 15% of the pieces masked (80% [MASK], 10% kept, 10% random), and the languages of
each batch drawn with exponentially smoothed probabilities, so that small languages are seen more often than
their share of the data (`engine.pretrain.sampling_weights`). The default size (hidden 256, 4 layers) pretrains on one H100
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
from ..engine.models import bert_config, device_name, init_model
from ..engine.pretrain import sampling_weights, train_sampled_mlm
from ..engine.stacked import OptimConfig
from ..paths import cache_dir

VOCABS = ("shared", "mbert")
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
DEFAULT_SIZE = ModelSize(name="mini", hidden=256, layers=4, heads=4, ffn=1024, lr=5e-4)


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
