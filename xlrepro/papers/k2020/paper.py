"""K et al. 2020's core experiment on its own data (the paper profile): a B-BERT pre-trained from the Wikipedia text
of English (or Fake-English) and one other language, fine-tuned on MultiNLI English and tested zero-shot on XNLI.

    settings = PaperSettings(pair="en-es", fake=True, seeds=(0,))   # every field checked; ConfigError names choices
    paths = resolve_paths(settings)                                  # $XLREPRO_WIKI_DIR, $XLREPRO_MULTINLI_DIR, ...
    run_paper(pair="en-es", fake=True)                               # writes <results>/paper/enfake-es.csv

The B-BERT (`pretrain_bbert`): the documents of ``$XLREPRO_WIKI_DIR/<lang>/`` (wikiextractor output, read by
`xlrepro.resources.read_wikiextractor`), each language cut to its first `max_chars` characters of paragraphs (the
paper subsamples en, es and ru to 1 GB and keeps the whole Hindi Wikipedia); English shifted code point by code
point into Fake-English (`data.to_fake_unicode`) when `fake`; one WordPiece vocabulary trained on both sides
(`data.build_tokenizer`, as the lab's cells); sentence pairs of consecutive paragraphs of one document, cut to
`max_length` pieces; masked-LM pre-training with whole-word masking, language sampling exponent 0.7, every seed a
model of one `ModelStack` on the engine's loop (`trainer.StackTrainer`, which the lab's cells train on). The
models are kept per run key (settings and the Wikipedia files' names and sizes): a second call reuses them.

XNLI (`evaluate_xnli`): each seed's encoder fine-tuned on MultiNLI's train pairs with the [CLS] head and the
lab's fine-tuning (`xlrepro.training.finetune`) at BERT's XNLI recipe (its multilingual README: learning rate
5e-5, batch 32, 2 epochs, 128 pieces, warm-up 10%, Adam beta2 0.999), tested on XNLI's test pairs of the source
(English, shifted when `fake`) and of the target.

What differs from the paper (said in the report and in `DIFFERENCES`): the vocabulary is WordPiece trained by
HF's trainer, not SentencePiece's unigram model; no next-sentence prediction (the paper's Table 8 finds NSP changes
little; the stack can train it, as the lab's `nsp_stack` profiles do, but this profile does not ask for it); segments are single paragraphs, not packed to 512 pieces.
NER is not run: the paper's LORELEI sets are licensed, and WikiANN's test files are not wired in yet.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from xlrepro.config import ConfigError, ModelSize, choose
from xlrepro.paths import runs_dir
from xlrepro.resources import XNLI_LANGUAGES, locate, read_multinli, read_wikiextractor, read_xnli
from xlrepro.runkeys import run_key, write_config

from . import data as D
from .config import Pretrain

NAME = "k2020"
TASK = "xnli"
RESULT_COLUMNS = ["experiment", "seed", "language", "task", "metric", "value"]
FUNCTION = f"{NAME}/paper.run_paper"  # its key in the registry's resources: `xlrepro prepare --only` accepts it
PREPARE = f"xlrepro prepare --profile paper --only {FUNCTION}"
ENGINE = "k2020-paper/stack-v1"  # bump when the code changes numbers for the same settings
#: The paper's target languages (es, hi, ru) and XNLI's others: any XNLI language but English.
TARGETS = tuple(lang for lang in XNLI_LANGUAGES if lang != "en")
DIFFERENCES = (
    "vocabulary: WordPiece (HF's trainer, as the lab) instead of SentencePiece's unigram model",
    "no next-sentence prediction (the paper's Table 8: NSP changes little); the stack could train it, as the lab's "
    "`nsp_stack` profiles do, but this profile does not ask for it",
    "segments: one Wikipedia paragraph each (consecutive paragraphs of a document), not packed to 512 pieces",
    "NER not run: the paper's LORELEI sets are licensed; WikiANN is not wired in yet",
)


@dataclass(frozen=True)
class PaperSettings:
    """One B-BERT of the paper profile and its XNLI evaluation; defaults are the paper's (§3.1.2-3.1.3, Table 5's
    132.78M parameters: BERT-base with a 60k vocabulary)."""
    pair: str = field(default="en-es", metadata={"help": "en-X, X a target of XNLI (paper: es, hi, ru)"})
    fake: bool = field(default=False, metadata={"help": "English shifted into Fake-English (enfake-X)"})
    seeds: tuple[int, ...] = field(default=(0,), metadata={"help": "one model each"})
    steps: int = field(default=2_000_000, metadata={"help": "pre-training steps (paper: 2M)"})
    batch_size: int = field(default=32, metadata={"help": "pre-training pairs per step (paper: 32)"})
    lr: float = field(default=1e-4, metadata={"help": "pre-training peak learning rate (paper: 0.0001)"})
    warmup: float = field(default=0.005, metadata={"help": "share of warm-up steps (BERT's 10k of 2M)"})
    vocab_size: int = field(default=60_000, metadata={"help": "joint vocabulary (paper: 60000)"})
    hidden: int = field(default=768, metadata={"help": "BERT-base"})
    layers: int = field(default=12, metadata={"help": "BERT-base"})
    heads: int = field(default=12, metadata={"help": "BERT-base"})
    ffn: int = field(default=3072, metadata={"help": "4x hidden, as the paper keeps it"})
    max_length: int = field(default=128, metadata={"help": "pieces of a pair, specials included"})
    max_chars: int | None = field(default=1_000_000_000, metadata={
        "help": "characters of paragraphs read per language (paper: 1 GB subsamples; None: all)"})
    finetune_lr: float = field(default=5e-5, metadata={"help": "BERT's XNLI recipe"})
    finetune_epochs: int = field(default=2, metadata={"help": "BERT's XNLI recipe"})
    finetune_batch_size: int = field(default=32, metadata={"help": "BERT's XNLI recipe"})
    max_train_pairs: int | None = field(default=None, metadata={"help": "MultiNLI pairs (None: all 393k)"})
    max_test_pairs: int | None = field(default=None, metadata={"help": "XNLI test pairs a language (None: 5010)"})

    def __post_init__(self):
        object.__setattr__(self, "seeds", tuple(self.seeds))
        source, sep, target = self.pair.partition("-") if isinstance(self.pair, str) else ("", "", "")
        if source != "en" or not sep:
            raise ConfigError(f"pair {self.pair!r} must be en-X (Fake-English: fake=True); valid choices: "
                              f"{', '.join('en-' + t for t in TARGETS)}")
        choose("target language of the pair", target, TARGETS)
        if not isinstance(self.fake, bool):
            raise ConfigError(f"fake must be True or False; got {self.fake!r}")
        seeds = self.seeds
        if not seeds or any(not _is_int(s) or s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
            raise ConfigError(f"seeds must be distinct integers >= 0, at least one; got {list(self.seeds)}")
        for name in ("steps", "batch_size", "vocab_size", "hidden", "layers", "heads", "ffn", "finetune_epochs",
                     "finetune_batch_size"):
            if not _is_int(getattr(self, name)) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a positive integer; got {getattr(self, name)!r}")
        for name in ("max_chars", "max_train_pairs", "max_test_pairs"):
            v = getattr(self, name)
            if v is not None and (not _is_int(v) or v < 1):
                raise ConfigError(f"{name} must be None (all) or a positive integer; got {v!r}")
        if self.hidden % self.heads:
            raise ConfigError(f"hidden {self.hidden} must be a multiple of heads {self.heads}")
        if not _is_int(self.max_length) or self.max_length < 8:
            raise ConfigError(f"max_length must be an integer >= 8 (pieces of a pair); got {self.max_length!r}")
        for name in ("lr", "finetune_lr"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ConfigError(f"{name} must be a positive number; got {v!r}")
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, (int, float)) or not 0 <= self.warmup < 1:
            raise ConfigError(f"warmup is a share of the steps in [0, 1); got {self.warmup!r}")

    @property
    def target(self) -> str:
        return self.pair.split("-", 1)[1]

    @property
    def source(self) -> str:
        """The pre-training name of the source side: en, or enfake (Fake-English)."""
        return D.FAKE if self.fake else "en"

    @property
    def name(self) -> str:
        """The experiment's name as the paper writes it: en-es, enfake-es."""
        return f"{self.source}-{self.target}"

    def surface(self, lang: str, texts) -> list[str]:
        """Texts as the model sees them: the source side shifted into Fake-English when `fake`."""
        return [D.to_fake_unicode(t) for t in texts] if lang == D.FAKE else list(texts)


def _base(lang: str) -> str:
    """The Wikipedia and XNLI language of a pre-training language (enfake -> en)."""
    return "en" if lang == D.FAKE else lang


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


@dataclass(frozen=True)
class PaperPaths:
    wiki: Path  # one wikiextractor folder per language
    multinli: Path  # multinli_1.0_train.jsonl
    xnli: Path  # xnli.test.tsv


def _folder(name: str, variable: str, what: str) -> Path:
    found = Path(os.environ[variable]).expanduser() if os.environ.get(variable) else locate(name)
    if found is None or not found.is_dir():
        where = f"{variable} unset, not prepared" if found is None else f"{variable}={found} is no folder"
        raise ConfigError(f"K et al.'s paper profile needs {what} ({where}): set {variable} or run `{PREPARE}`")
    return found


def resolve_paths(settings: PaperSettings | None = None) -> PaperPaths:
    """The resources, from $XLREPRO_WIKI_DIR, $XLREPRO_MULTINLI_DIR and $XLREPRO_XNLI_DIR (else the prepared
    cache). A missing one stops in one ConfigError line naming its variable and the prepare command."""
    settings = settings or PaperSettings()
    wiki = _folder("wikipedia", "XLREPRO_WIKI_DIR", "Wikipedia text, one wikiextractor folder per language")
    for lang in ("en", settings.target):
        if not (wiki / lang).is_dir():
            present = sorted(p.name for p in wiki.iterdir() if p.is_dir() and not p.name.startswith("."))
            raise ConfigError(f"no {lang}/ in XLREPRO_WIKI_DIR={wiki} (its languages: {', '.join(present) or 'none'}):"
                              f" extract {lang}wiki with wikiextractor into it, or run `{PREPARE}`")
    multinli = _folder("multinli", "XLREPRO_MULTINLI_DIR", "MultiNLI 1.0's multinli_1.0_train.jsonl") / \
        "multinli_1.0_train.jsonl"
    xnli = _folder("xnli", "XLREPRO_XNLI_DIR", "XNLI 1.0's xnli.test.tsv") / "xnli.test.tsv"
    for path, variable in ((multinli, "XLREPRO_MULTINLI_DIR"), (xnli, "XLREPRO_XNLI_DIR")):
        if not path.is_file():
            raise ConfigError(f"no {path.name} in {variable}={path.parent}: unpack the archive there or run "
                              f"`{PREPARE}`")
    return PaperPaths(wiki, multinli, xnli)


# ----------------------------------------------------------------------------------------------- pre-training data
def wiki_lines(folder: Path, max_chars: int | None) -> tuple[list[str], np.ndarray]:
    """The paragraphs of a wikiextractor folder in file order, while their characters stay within `max_chars`
    (None: all), and each one's document number."""
    lines, docs, total = [], [], 0
    for d, doc in enumerate(read_wikiextractor(folder)):
        for line in doc.text.split("\n"):
            line = line.strip()
            if not line:
                continue
            if max_chars is not None and total + len(line) > max_chars:
                return lines, np.asarray(docs, np.int64)
            lines.append(line)
            docs.append(d)
            total += len(line)
    return lines, np.asarray(docs, np.int64)


def _files_fingerprint(folder: Path) -> list:
    """The text files of a language folder by relative name and size: part of the run key (a changed dump, a new
    key) without reading the text."""
    return [[p.relative_to(folder).as_posix(), p.stat().st_size]
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.startswith(".")]


class BBert:
    """The pre-trained B-BERT of `settings` (all its seeds), in ``<root>/<name>-<key>/``: config.json,
    tokenizer.json, pairs.npz, model_<seed>.safetensors. It has what `trainer.StackTrainer` reads of a lab cell."""

    def __init__(self, settings: PaperSettings, paths: PaperPaths, root: Path | None = None):
        s = self.settings = settings
        self.paths = paths
        self.name = s.name
        self.languages = (s.source, s.target)
        self.size = ModelSize(name="paper", hidden=s.hidden, layers=s.layers, heads=s.heads, ffn=s.ffn, lr=s.lr)
        self.profile = SimpleNamespace(pretrain=Pretrain(
            steps=s.steps, batch_size=s.batch_size, max_length=s.max_length, warmup=s.warmup, mlm_probability=0.15,
            alpha=0.7, weight_decay=0.01, vocab_size=s.vocab_size, max_lines=None, length_bins=1))
        self.exp = SimpleNamespace(alone=False, nsp=False,  # trained as a stack of its seeds, without NSP,
                                   tokenization="wordpiece", linear="")  # word pieces, default products
        self.alone = False
        self.config = {"paper": NAME, "engine": ENGINE, "languages": list(self.languages), "size": self.size,
                       "pretrain": self.profile.pretrain, "max_chars": s.max_chars,
                       "wikipedia": {lang: _files_fingerprint(paths.wiki / _base(lang))
                                     for lang in self.languages}}
        self.key = run_key(self.config)
        self.dir = (Path(root) if root is not None else runs_dir() / NAME / "paper") / f"{self.name}-{self.key}"

    # ------------------------------------------------------------------------------------------- data
    def corpora(self) -> dict[str, tuple[list[str], np.ndarray]]:
        """Per pre-training language: its paragraphs as the model sees them, and their document numbers."""
        out = {}
        for lang in self.languages:
            lines, docs = wiki_lines(self.paths.wiki / _base(lang), self.settings.max_chars)
            if len(lines) < 2:
                raise ConfigError(f"{self.paths.wiki / _base(lang)} holds {len(lines)} paragraph(s): "
                                  f"pre-training pairs need two consecutive paragraphs of a document")
            out[lang] = (self.settings.surface(lang, lines), docs)
        return out

    def _load(self):
        if hasattr(self, "_tok"):
            return
        from tokenizers import Tokenizer

        from xlrepro import atomic
        self.dir.mkdir(parents=True, exist_ok=True)
        write_config(self.dir, self.config)
        path = self.dir / "tokenizer.json"
        if path.exists():
            self._tok = Tokenizer.from_file(str(path))
        else:
            texts = [t for lines, _ in self._corpora().values() for t in lines]
            self._tok = D.build_tokenizer("wordpiece", texts, self.settings.vocab_size,
                                          D.special_tokens(self.languages, False))
            atomic.write_bytes(path, self._tok.to_str().encode())
        self.ids = {t: self._tok.token_to_id(t) for t in D.SPECIAL_TOKENS}
        self.special = set(self.ids.values())

    def _corpora(self):
        if not hasattr(self, "_text"):
            self._text = self.corpora()
        return self._text

    @property
    def tokenizer(self):
        self._load()
        return self._tok

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    @property
    def vocab_rows(self) -> int:
        return self.vocab_size

    @property
    def planned_rows(self) -> int:  # what `trainer.stack_shape` plans with: the vocabulary itself here
        return self.vocab_rows

    def pair_rows(self, first: list[str], second: list[str]):
        """[CLS] first [SEP] second [SEP] of each pair (texts as the model sees them): ids, types, word starts."""
        self._load()
        a, b = D.encode_lines(self._tok, first), D.encode_lines(self._tok, second)
        return [D.pair_input(x, y, self.ids["[CLS]"], self.ids["[SEP]"], self.ids["[SEP]"], self.settings.max_length,
                             xs, ys) for x, y, xs, ys in zip(a.ids, b.ids, a.word_start, b.word_start)]

    def table(self):
        """The pre-training pairs of both languages (`trainer.PairTable`; built once, then read from pairs.npz):
        each paragraph with the next one of its document."""
        from xlrepro.data.collate import pad_batch

        from .trainer import PairTable
        self._load()
        path = self.dir / "pairs.npz"
        if path.exists():
            return PairTable.load(path)
        pairs = {}
        for lang, (lines, docs) in self._corpora().items():
            first = np.flatnonzero(docs[1:] == docs[:-1])  # paragraph i and i + 1 of one document
            rows = self.pair_rows([lines[i] for i in first], [lines[i + 1] for i in first])
            ids, lengths = pad_batch([r[0] for r in rows], self.ids["[PAD]"])
            types, _ = pad_batch([r[1] for r in rows], 0)
            starts, _ = pad_batch([r[2] for r in rows], 0)
            pairs[lang] = (ids, types, starts, lengths, np.ones(len(rows), bool))
        table = PairTable.build(pairs, self.special, self.profile.pretrain)
        table.save(path)
        return table

    # ------------------------------------------------------------------------------------------- models
    def pretrained(self) -> list[int]:
        return [s for s in self.settings.seeds if (self.dir / f"model_{s}.safetensors").exists()]

    def pretrain(self, device="cpu", time_limit: float | None = None, progress: bool = False) -> bool:
        """Pre-train the seeds without a model yet, as one stack on the engine; True when all are done (False:
        stopped by `time_limit`, resumable from the checkpoint)."""
        from .trainer import StackTrainer
        self._load()
        todo = [s for s in self.settings.seeds if s not in self.pretrained()]
        if not todo:
            return True
        return StackTrainer([(self, s) for s in todo], device, root=self.dir).run(time_limit, progress)

    def encoder(self, seed: int):
        from safetensors.torch import load_model
        from transformers import BertModel

        from xlrepro.engine.models import bert_config
        model = BertModel(bert_config(self.size, self.vocab_rows, positions=self.settings.max_length),
                          add_pooling_layer=False)
        missing, unexpected = load_model(model, str(self.dir / f"model_{seed}.safetensors"), strict=False)
        if missing or any(not k.startswith("pooler.") for k in unexpected):
            raise RuntimeError(f"model_{seed} does not match the shape: missing {missing}, extra {unexpected}")
        return model.float()


def pretrain_bbert(settings: PaperSettings, paths: PaperPaths | None = None, *, device="cpu", root=None,
                   time_limit: float | None = None, progress: bool = False) -> BBert | None:
    """The B-BERT of `settings`, pre-trained (or read back from its run folder); None when stopped by time."""
    bbert = BBert(settings, paths or resolve_paths(settings), root)
    return bbert if bbert.pretrain(device, time_limit, progress) else None


# ----------------------------------------------------------------------------------------------- XNLI
def nli_pairs(bbert: BBert, frame: pd.DataFrame, lang: str):
    """An NLI frame (read_multinli / read_xnli) encoded for the B-BERT, premise and hypothesis in `lang`'s surface."""
    from xlrepro.training.finetune import EncodedPairs
    s = bbert.settings
    rows = bbert.pair_rows(s.surface(lang, frame["first"]), s.surface(lang, frame["second"]))
    return EncodedPairs([r[0] for r in rows], [r[1] for r in rows], frame["label"].to_numpy(np.int64))


def evaluate_xnli(bbert: BBert, seed: int, *, device="cpu", progress: bool = False) -> pd.DataFrame:
    """Fine-tune seed `seed`'s encoder on MultiNLI English (Fake-English when `fake`); accuracy and macro-F1 on
    XNLI's test pairs of the source and of the target; long rows."""
    from xlrepro.resources import NLI_LABELS
    from xlrepro.training.finetune import FinetuneConfig, evaluate, finetune

    s, paths = bbert.settings, bbert.paths
    train = nli_pairs(bbert, read_multinli(paths.multinli, max_pairs=s.max_train_pairs), s.source)
    cfg = FinetuneConfig(lr=s.finetune_lr, batch_size=s.finetune_batch_size, epochs=s.finetune_epochs,
                         warmup=0.1, beta2=0.999, max_length=s.max_length, seed=seed)
    model, history = finetune(cfg, bbert.encoder(seed), train, len(NLI_LABELS), device=device, progress=progress)
    test = read_xnli(paths.xnli, languages=["en", s.target])
    rows = []
    for lang in (s.source, s.target):
        frame = test[test["language"] == _base(lang)]
        if s.max_test_pairs is not None:
            frame = frame.head(s.max_test_pairs)
        if frame.empty:
            raise ConfigError(f"{paths.xnli} has no test pair of {_base(lang)}")
        acc, f1 = evaluate(model, nli_pairs(bbert, frame, lang), device, len(NLI_LABELS))
        rows += [{"language": lang, "metric": "accuracy", "value": acc},
                 {"language": lang, "metric": "macro_f1", "value": f1},
                 {"language": lang, "metric": "test_pairs", "value": float(len(frame))}]
    rows.append({"language": s.source, "metric": "finetune_seconds", "value": history["seconds"]})
    out = pd.DataFrame(rows).assign(experiment=s.name, seed=seed, task=TASK)
    return out[RESULT_COLUMNS]


def run_paper(pair: str = "en-es", fake: bool = False, seeds=(0,), steps: int | None = None, *, device="cpu",
              results=None, root=None, time_limit: float | None = None, progress: bool = False,
              **settings) -> Path | None:
    """Pre-train (or reuse) the B-BERT of `pair`, evaluate every seed on XNLI, write ``<results>/paper/<name>.csv``
    (name: en-X or enfake-X; columns experiment, seed, language, task, metric, value) and profile.json beside it.
    results: default ``runs/k2020/paper/results`` (a published run passes its own folder); root: where the models
    are kept (default ``runs/k2020/paper``). settings: the other `PaperSettings` fields. Every argument is checked
    and every resource found before work starts. Returns the CSV's path, or None when stopped by `time_limit`."""
    allowed = [f.name for f in dataclasses.fields(PaperSettings) if f.name not in ("pair", "fake", "seeds", "steps")]
    unknown = sorted(set(settings) - set(allowed))
    if unknown:
        raise ConfigError(f"unknown setting {unknown[0]!r}; valid choices: {', '.join(allowed)}")
    s = PaperSettings(pair=pair, fake=fake, seeds=tuple(seeds), **({} if steps is None else {"steps": steps}),
                      **settings)
    paths = resolve_paths(s)
    bbert = pretrain_bbert(s, paths, device=device, root=root, time_limit=time_limit, progress=progress)
    if bbert is None:
        return None
    frame = pd.concat([evaluate_xnli(bbert, seed, device=device, progress=progress) for seed in s.seeds],
                      ignore_index=True)
    return _write(s, paths, bbert, frame, results)


def _write(s: PaperSettings, paths: PaperPaths, bbert: BBert, frame: pd.DataFrame, results) -> Path:
    from xlrepro import atomic
    from xlrepro.results import write_csv
    from xlrepro.runrecord import shown

    folder = Path(results) if results is not None else runs_dir() / NAME / "paper" / "results"
    out = write_csv(frame, folder / "paper" / f"{s.name}.csv")
    atomic.write_json(folder / "paper" / f"{s.name}.json", {
        "profile": "paper", "settings": dataclasses.asdict(s), "model_key": bbert.key,
        "wikipedia": shown(paths.wiki), "multinli": shown(paths.multinli), "xnli": shown(paths.xnli),
        "differences": list(DIFFERENCES)})
    return out
