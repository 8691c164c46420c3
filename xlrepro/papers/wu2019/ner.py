"""Wu & Dredze's Table 4 on the paper's own data (the paper profile): the released mBERT fine-tuned for NER on
English CoNLL-2003, selected on its dev set (eng.testa), and tested zero-shot on the test sets (``*.testb``) of
German (CoNLL-2003), Spanish and Dutch (CoNLL-2002); entity-level F1 by `seqeval` (`xlrepro.resources.entity_f1`).
Their Chinese column (Levow 2006's MSRA data) is not among the CoNLL files and is left out.

Resources: the encoder ($XLREPRO_MBERT, else the hub id) and one folder ($XLREPRO_CONLL_DIR) holding the CoNLL files
under their distributed names: eng.train, eng.testa, eng.testb, deu.testb, esp.testb, ned.testb (`FILES`). The
English file is read as UTF-8, the others as ISO-8859-1 as distributed (`ENCODINGS`). CoNLL-2003's IOB1 tags and
CoNLL-2002's IOB2 tags are both rewritten as IOB2 (`to_iob2`), so training and test share one tag set.

The mechanics are the lab's token fine-tuning (`xlrepro.training.token_finetune`: a linear head on each word's
first piece); the learning-rate grid is the paper's (`experiments.yaml`, ``paper.lr_grid``), the rest of the recipe
the plan's. Runs are cached as JSON under ``runs/wu2019/paper/<encoder>[-limits]/ner/``, beside Table 3's.

    folder = table4(NerPaths("google-bert/bert-base-multilingual-cased", Path("/data/conll")))
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xlrepro.config import ConfigError, choose
from xlrepro.resources import entity_f1, mbert_encoder, read_iob, to_iob2
from xlrepro.training.finetune import FinetuneConfig
from xlrepro.training.token_finetune import IGNORE, EncodedTokens, predict_tokens

from .plan import TransferPlan
from .tagging import TaggingLab

#: language -> the CoNLL file stem (eng.train, deu.testb, ...)
STEMS = {"en": "eng", "de": "deu", "es": "esp", "nl": "ned"}
ENCODINGS = {"eng": "utf-8", "deu": "latin-1", "esp": "latin-1", "ned": "latin-1"}
FILES = ("eng.train", "eng.testa", "eng.testb", "deu.testb", "esp.testb", "ned.testb")
RESULTS = "ner.csv"  # `TaggingLab.write_table` writes <task>.csv


@dataclass(frozen=True)
class NerPaths:
    encoder: str  # a hub id or a folder written by save_pretrained
    conll: Path  # the folder of the CoNLL files


def resolve_ner_paths(encoder: str | os.PathLike | None = None, conll: str | os.PathLike | None = None,
                      languages=None) -> NerPaths:
    """The resources of Table 4: the arguments where given, else $XLREPRO_MBERT (or the hub id) and
    $XLREPRO_CONLL_DIR. The files of English and of `languages` (default: all of `STEMS`) must be there, else a
    one-line ConfigError names them and the variable."""
    languages = [choose("NER language", lang, STEMS) for lang in (languages or STEMS)]
    folder = Path(conll) if conll is not None else (Path(os.environ["XLREPRO_CONLL_DIR"])
                                                    if os.environ.get("XLREPRO_CONLL_DIR") else None)
    needed = ["eng.train", "eng.testa"] + [f"{STEMS[lang]}.testb" for lang in languages]
    missing = needed if folder is None else [f for f in needed if not (folder / f).is_file()]
    if missing:
        raise ConfigError(f"the paper profile's Table 4 needs the CoNLL files {', '.join(missing)} "
                          f"({'XLREPRO_CONLL_DIR unset' if folder is None else f'not in {folder}'}): build them as "
                          f"`xlrepro prepare --profile paper --dry-run` describes (conll2002, conll2003) and set "
                          f"XLREPRO_CONLL_DIR to their folder")
    return NerPaths(mbert_encoder(encoder), folder)


def encode_tagged(tokenizer, sentences, tags, max_length: int, unseen: int = 0) -> tuple[EncodedTokens, list[int]]:
    """Token-classification inputs of pre-split sentences: per sentence, the ids of ``[CLS] pieces [SEP]`` cut at
    `max_length` (a fast Hugging Face tokenizer, `is_split_into_words`) and a label per piece: the id of the word's
    tag in `tags` at each word's first piece, IGNORE at the other pieces and the specials (a tag not in `tags` gets
    id `unseen`). Also the number of words each sequence kept (all but those cut off by `max_length`).

    sentences: (words, tags) pairs, as `NerLab.sentences` gives them; the NER and POS paths share this."""
    index = {t: i for i, t in enumerate(tags)}
    ids, labels, kept = [], [], []
    for tokens, word_tags in sentences:
        enc = tokenizer(list(tokens), is_split_into_words=True, truncation=True, max_length=max_length)
        words = enc.word_ids()
        lab = np.full(len(words), IGNORE, np.int64)  # [L]
        seen = set()
        for pos, w in enumerate(words):
            if w is not None and w not in seen:
                seen.add(w)
                lab[pos] = index.get(word_tags[w], unseen)
        ids.append(np.asarray(enc["input_ids"], np.int64))
        labels.append(lab)
        kept.append(len(seen))
    return EncodedTokens(ids, labels), kept


class NerLab(TaggingLab):
    """mBERT, CoNLL English for training and selection, the other CoNLL test sets for zero-shot testing.

    languages: test languages among `STEMS` (default all; English always in). max_train_sentences /
    max_test_sentences: the first sentences (a smoke run; in the run folder's name). epochs: the recipe's unless
    given."""

    TASK, METRIC, TABLE, LANGUAGES = "ner", "f1", "Table 4", STEMS

    def __init__(self, paths: NerPaths, plan: TransferPlan | None = None, **options):
        super().__init__(paths, plan, **options)
        self.tags = self._tag_set()

    # --- data ---------------------------------------------------------------------------------------------------
    def sentences(self, file: str) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """(tokens, IOB2 tags) of a CoNLL file ("eng.train", "deu.testb", ...), limited for a smoke run."""
        choose("CoNLL file", file, FILES)
        if file not in self._sentences:
            sents = read_iob(self.paths.conll / file, encoding=ENCODINGS[file.split(".")[0]])
            limit = self.max_train if file == "eng.train" else self.max_test
            self._sentences[file] = [(s.tokens, to_iob2(s.tags)) for s in sents[:limit]]
        return self._sentences[file]

    def _tag_set(self) -> tuple[str, ...]:
        """"O" first, then the training file's other tags sorted: the classifier's labels."""
        tags = {t for _, ts in self.sentences("eng.train") for t in ts}
        return ("O", *sorted(tags - {"O"}))

    def encode(self, file: str, max_length: int) -> tuple[EncodedTokens, list[int]]:
        """Word pieces of each sentence ([CLS] ... [SEP], cut at `max_length`) with the tag id at each word's first
        piece (IGNORE elsewhere; a tag unseen in training counts as "O" for the input, never for scoring), and the
        number of words each sequence kept (`encode_tagged`)."""
        return encode_tagged(self.tokenizer, self.sentences(file), self.tags, max_length)

    # --- scores ---------------------------------------------------------------------------------------------------
    def run_config(self, config: FinetuneConfig) -> dict:
        files = {f: (self.paths.conll / f).stat().st_size for f in FILES if (self.paths.conll / f).is_file()}
        return {"finetune": config.to_json(), "task": "ner", "encoder": self.paths.encoder,
                "encoder_config": self.encoder.config.to_dict(), "files": files, "tags": list(self.tags),
                "max_train_sentences": self.max_train, "max_test_sentences": self.max_test}

    def f1(self, model, file: str) -> float:
        """Entity F1 of `model` on a CoNLL file; words cut off by the encoder's length limit count as "O"."""
        data, kept = self.encode(file, self.encoder.config.max_position_embeddings)
        pred = predict_tokens(model, data, self.device, self.pad_id)
        gold = [list(tags) for _, tags in self.sentences(file)]
        guessed = [[self.tags[i] for i in p] + ["O"] * (len(g) - k) for p, g, k in zip(pred, gold, kept)]
        return entity_f1(gold, guessed)

    def train_data(self, max_length: int):
        return self.encode("eng.train", max_length)

    def dev_score(self, model) -> float:
        return self.f1(model, "eng.testa")

    def test_score(self, model, lang: str) -> float:
        return self.f1(model, f"{STEMS[lang]}.testb")


def table4(paths: NerPaths, *, languages=None, seeds=None, max_train_sentences=None, max_test_sentences=None,
           epochs=None, device=None, root=None, results=None) -> Path:
    """Run Table 4 end to end: ``ner_selection.csv`` (lr, dev_f1) and ``ner.csv`` (long rows) into `results`
    (default: the run folder's ``results/``). Returns the results folder."""
    lab = NerLab(paths, languages=languages, max_train_sentences=max_train_sentences,
                 max_test_sentences=max_test_sentences, epochs=epochs, device=device, root=root)
    return lab.write_table(results, seeds, ner=str(lab.paths.conll))
