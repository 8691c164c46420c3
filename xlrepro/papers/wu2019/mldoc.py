"""Wu & Dredze's Table 2 (MLDoc document classification) on the paper's own data (the paper profile): the released
mBERT fine-tuned on English MLDoc, the learning rate selected on English dev, and tested zero-shot on the test file
of each of the paper's eight languages (en de es fr it ja ru zh); classification accuracy.

Resources: the encoder ($XLREPRO_MBERT, else the hub id) and the folder of the MLDoc files built from Reuters
RCV1/RCV2 ($XLREPRO_MLDOC_DIR; `xlrepro.resources.read_mldoc`): ``english.train.<size>``, ``english.dev`` and
``<language>.test``. The paper does not say which of MLDoc's training sizes (1000, 2000, 5000, 10000) its Table 2
uses; ``english.train.1000`` is the default here and `train_size` picks another.

Input, as in the paper (§4.1): the first two sentences of a document, fed to mBERT as a sentence pair (the first
sentence alone where the document has one), cut to the recipe's 128 pieces (longest first). Sentences are split
with NLTK's Punkt, as theirs were; its untrained parameters (no model download) split at ". ! ?", so a Chinese or
Japanese document (。) is one sentence, cut at 128 pieces. The classifier is the XNLI path's (`xlrepro.training.
finetune`: a head on [CLS]), the learning-rate grid the paper's (``paper.lr_grid``); runs are cached as JSON per
(learning rate, seed) under ``runs/wu2019/paper/<encoder>[-limits]/mldoc/``, beside Tables 3-5.

    folder = table2(resolve_mldoc_paths(languages=["de", "fr"]), seeds=[0])   # table2.csv, table2_selection.csv
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from xlrepro.config import ConfigError, choose
from xlrepro.resources import MLDOC_LABELS, locate, mbert_encoder, read_mldoc
from xlrepro.resources.mldoc import MLDOC_LANGUAGES
from xlrepro.training.finetune import EncodedPairs, FinetuneConfig, evaluate, finetune

from .plan import TransferPlan
from .tagging import TaggingLab

TRAIN_SIZES = (1000, 2000, 5000, 10000)  # MLDoc's English training files, english.train.<size>
RESULTS = "table2.csv"


@dataclass(frozen=True)
class MldocPaths:
    encoder: str  # a hub id or a folder written by save_pretrained
    mldoc: Path  # the folder of the MLDoc files
    train_size: int = 1000  # english.train.<train_size>

    @property
    def train(self) -> Path:
        return self.mldoc / f"english.train.{self.train_size}"

    def file(self, lang: str, split: str) -> Path:
        """``<language>.<split>`` (dev or test) of a language of `MLDOC_LANGUAGES`."""
        choose("MLDoc split", split, ("dev", "test"))
        return self.mldoc / f"{MLDOC_LANGUAGES[choose('MLDoc language', lang, MLDOC_LANGUAGES)]}.{split}"


def resolve_mldoc_paths(encoder: str | os.PathLike | None = None, mldoc: str | os.PathLike | None = None,
                        languages=None, train_size: int = 1000) -> MldocPaths:
    """The resources of Table 2: the arguments where given, else $XLREPRO_MBERT (or the hub id) and the MLDoc folder
    ($XLREPRO_MLDOC_DIR, then the prepared cache). english.train.<train_size>, english.dev and the test file of each
    of `languages` (default: all eight) must be there, else a one-line ConfigError names them."""
    languages = [choose("MLDoc language", lang, MLDOC_LANGUAGES) for lang in (languages or MLDOC_LANGUAGES)]
    choose("MLDoc training size", train_size, TRAIN_SIZES)
    folder = Path(mldoc) if mldoc is not None else (Path(os.environ["XLREPRO_MLDOC_DIR"])
                                                    if os.environ.get("XLREPRO_MLDOC_DIR") else locate("mldoc"))
    needed = [f"english.train.{train_size}", "english.dev"] + [
        f"{MLDOC_LANGUAGES[lang]}.test" for lang in dict.fromkeys(["en", *languages])]
    missing = needed if folder is None else [f for f in needed if not (folder / f).is_file()]
    if missing:
        where = "XLREPRO_MLDOC_DIR unset or not prepared" if folder is None else f"not in {folder}"
        raise ConfigError(f"the paper profile's Table 2 (MLDoc) needs the files {', '.join(missing)} ({where}): "
                          f"build them as `xlrepro prepare --profile paper --dry-run` describes (mldoc) and set "
                          f"XLREPRO_MLDOC_DIR to their folder")
    return MldocPaths(mbert_encoder(encoder), folder, train_size)


@lru_cache(maxsize=1)
def _punkt():
    from nltk.tokenize.punkt import PunktSentenceTokenizer
    return PunktSentenceTokenizer()


def first_two_sentences(text: str) -> tuple[str, str]:
    """The document's first sentence and its second ("" where it has one), NLTK Punkt's split (§4.1 and note 2)."""
    sentences = _punkt().tokenize(" ".join(text.split()))
    return (sentences[0] if sentences else "", sentences[1] if len(sentences) > 1 else "")


class MldocLab(TaggingLab):
    """mBERT, English MLDoc for training (english.train.<size>) and selection (english.dev), each language's test
    file for zero-shot testing. languages: among `MLDOC_LANGUAGES` (default all eight; English always in).
    max_train_docs / max_test_docs: the first documents of the training file / of each dev and test file (a smoke
    run; in the run folder's name). epochs: the recipe's unless given."""

    TASK, METRIC, TABLE, LANGUAGES, RESULTS = "mldoc", "accuracy", "Table 2", MLDOC_LANGUAGES, RESULTS
    tags = MLDOC_LABELS

    def __init__(self, paths: MldocPaths, plan: TransferPlan | None = None, *, max_train_docs=None,
                 max_test_docs=None, **options):
        choose("MLDoc training size", paths.train_size, TRAIN_SIZES)
        super().__init__(paths, plan, max_train_sentences=max_train_docs, max_test_sentences=max_test_docs, **options)
        self.backend = self.tokenizer.backend_tokenizer  # adds [CLS]/[SEP], as encode_pairs needs

    def documents(self, lang: str, split: str) -> pd.DataFrame:
        """"train" (English only), "dev" (English only) or "test": the documents as first / second sentence and
        label (columns first, second, label), limited for a smoke run."""
        choose("MLDoc split", split, ("train", "dev", "test"))
        if (lang, split) not in self._sentences:
            if split != "test" and lang != "en":
                raise ConfigError(f"Table 2 trains and selects on English only; got {split} of language {lang!r}")
            path = self.paths.train if split == "train" else self.paths.file(lang, split)
            frame = read_mldoc(path).head(self.max_train if split == "train" else self.max_test)
            if frame.empty:
                raise ConfigError(f"{path} has no documents")
            pairs = [first_two_sentences(t) for t in frame["text"]]
            self._sentences[(lang, split)] = pd.DataFrame({"first": [p[0] for p in pairs],
                                                           "second": [p[1] for p in pairs],
                                                           "label": frame["label"].to_numpy(np.int64)})
        return self._sentences[(lang, split)]

    def encode(self, lang: str, split: str, max_length: int) -> EncodedPairs:
        """[CLS] first [SEP] second [SEP] (segments 0 and 1), cut longest-first at `max_length`; a document of one
        sentence is [CLS] first [SEP] alone."""
        frame = self.documents(lang, split)
        tok = copy.deepcopy(self.backend)  # truncation is tokenizer state: leave the lab's unchanged
        tok.no_padding()
        tok.enable_truncation(max_length, strategy="longest_first")
        enc = tok.encode_batch([(a, b) if b else a for a, b in zip(frame["first"], frame["second"])])
        return EncodedPairs([np.asarray(e.ids, np.int64) for e in enc],
                            [np.asarray(e.type_ids, np.int64) for e in enc], frame["label"].to_numpy(np.int64))

    def max_length(self) -> int:
        return min(int(self.plan.recipe.get("max_length", 128)), self.encoder.config.max_position_embeddings)

    def run_config(self, config: FinetuneConfig) -> dict:
        """Everything that sets a run's numbers; its hash names the run's file."""
        files = [self.paths.train, self.paths.file("en", "dev")] + [self.paths.file(lang, "test")
                                                                     for lang in self.languages]
        return {"finetune": config.to_json(), "task": "mldoc", "encoder": self.paths.encoder,
                "encoder_config": self.encoder.config.to_dict(), "files": {p.name: p.stat().st_size for p in files},
                "input": "first two sentences (punkt)", "max_train_docs": self.max_train,
                "max_test_docs": self.max_test}

    def fit(self, config: FinetuneConfig):
        return finetune(config, self.encoder, self.encode("en", "train", config.max_length), len(self.tags),
                        device=self.device, progress=self.progress)

    def accuracy(self, model, lang: str, split: str) -> float:
        return evaluate(model, self.encode(lang, split, self.max_length()), self.device, len(self.tags))[0]

    def dev_score(self, model) -> float:
        return self.accuracy(model, "en", "dev")

    def test_score(self, model, lang: str) -> float:
        return self.accuracy(model, lang, "test")


def table2(paths: MldocPaths, *, languages=None, seeds=None, max_train_docs=None, max_test_docs=None, epochs=None,
           device=None, root=None, results=None) -> Path:
    """Run Table 2 end to end: ``table2_selection.csv`` (lr, dev_accuracy) and ``table2.csv`` (long rows:
    experiment "zero-shot", seed, language, metric accuracy, value) into `results` (default: the run folder's
    ``results/``). Returns the results folder."""
    lab = MldocLab(paths, languages=languages, max_train_docs=max_train_docs, max_test_docs=max_test_docs,
                   epochs=epochs, device=device, root=root)
    return lab.write_table(results, seeds, mldoc=str(lab.paths.mldoc))
