"""Wu & Dredze's Table 5 (POS tagging) on the paper's own data (the paper profile): the released mBERT fine-tuned
to tag English Universal Dependencies with universal parts of speech (UPOS), selected on the English dev set, and
tested zero-shot on the test sets of the paper's 15 languages; accuracy over words.

Resources: the encoder ($XLREPRO_MBERT, else the hub id) and an unpacked Universal Dependencies release
($XLREPRO_UD_DIR; `xlrepro prepare --profile paper --dry-run` says where to get v2.2). One treebank a language
(`TREEBANKS`, the largest of each language in v2.2, the release the registry names); its files keep their
distributed names, ``<folder>/<stem>-ud-<split>.conllu``. Multi-word tokens and empty nodes are left out
(`xlrepro.resources.read_conllu`): the words tagged are UD's syntactic words, as in the paper's tagger.

The labels are the 17 UPOS tags of UD v2 (`UPOS`), fixed in advance, so that a tag absent from the English
training set still has an id. The mechanics are the NER path's (`ner.encode_tagged`: a tag at each word's first
piece; `xlrepro.training.token_finetune`); a word cut off by the encoder's length limit counts as wrong. Runs are
cached as JSON under ``runs/wu2019/paper/<encoder>[-limits]/pos/``, beside Tables 3 and 4.

    folder = table5(resolve_pos_paths(languages=["de", "es"]), seeds=[0])   # pos.csv, pos_selection.csv
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xlrepro.config import ConfigError, choose
from xlrepro.resources import locate, mbert_encoder, read_conllu
from xlrepro.training.finetune import FinetuneConfig
from xlrepro.training.token_finetune import predict_tokens

from .ner import encode_tagged
from .tagging import TaggingLab

#: language -> the treebank of UD v2.2 (folder/file stem): English first, then the paper's Table 5 languages
TREEBANKS = {
    "en": "UD_English-EWT/en_ewt", "bg": "UD_Bulgarian-BTB/bg_btb", "da": "UD_Danish-DDT/da_ddt",
    "de": "UD_German-GSD/de_gsd", "es": "UD_Spanish-GSD/es_gsd", "fa": "UD_Persian-Seraji/fa_seraji",
    "hu": "UD_Hungarian-Szeged/hu_szeged", "it": "UD_Italian-ISDT/it_isdt", "nl": "UD_Dutch-Alpino/nl_alpino",
    "pl": "UD_Polish-LFG/pl_lfg", "pt": "UD_Portuguese-Bosque/pt_bosque", "ro": "UD_Romanian-RRT/ro_rrt",
    "sk": "UD_Slovak-SNK/sk_snk", "sl": "UD_Slovenian-SSJ/sl_ssj", "sv": "UD_Swedish-Talbanken/sv_talbanken",
}
#: the universal part-of-speech tags of UD v2, the classifier's labels in this order
UPOS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
        "SCONJ", "SYM", "VERB", "X")
SPLITS = ("train", "dev", "test")
RESULTS = "pos.csv"  # `TaggingLab.write_table` writes <task>.csv


@dataclass(frozen=True)
class PosPaths:
    encoder: str  # a hub id or a folder written by save_pretrained
    ud: Path  # the folder of the unpacked UD release (its UD_<Language>-<Treebank>/ folders)


def treebank_file(ud: Path, lang: str, split: str, treebanks: dict | None = None, what: str = "POS") -> Path:
    """``<ud>/UD_<Language>-<Treebank>/<stem>-ud-<split>.conllu`` of a language of `treebanks` (default
    `TREEBANKS`, Table 5's; Table 6 passes its own, `what` names the task in errors)."""
    treebanks = TREEBANKS if treebanks is None else treebanks
    choose("UD split", split, SPLITS)
    return Path(ud) / f"{treebanks[choose(f'{what} language', lang, treebanks)]}-ud-{split}.conllu"


def treebank_sizes(ud: Path, languages, file=None) -> dict[str, int]:
    """File name -> size in bytes of the English train and dev treebanks and each of `languages`' test treebank
    (`file(ud, lang, split)`, default `treebank_file`): what a run's key records of its data."""
    file = file or treebank_file
    paths = [file(ud, lang, split) for lang, split in [("en", "train"), ("en", "dev")]
             + [(lang, "test") for lang in languages]]
    return {path.name: path.stat().st_size for path in paths}


def resolve_ud(ud, languages, treebanks: dict, what: str, table: str) -> Path:
    """The UD folder (`ud`, else $XLREPRO_UD_DIR, then the prepared cache) holding English train and dev and the test
    file of English and each of `languages` (default: all of `treebanks`), else a one-line ConfigError naming the
    missing files. `what` / `table` name the task in errors ("POS", "Table 5")."""
    languages = [choose(f"{what} language", lang, treebanks) for lang in (languages or treebanks)]
    folder = Path(ud) if ud is not None else locate("ud")
    needed = [("en", "train"), ("en", "dev")] + [(lang, "test") for lang in dict.fromkeys(["en", *languages])]
    missing = [f"{treebanks[lang]}-ud-{split}.conllu" for lang, split in needed
               if folder is None or not treebank_file(folder, lang, split, treebanks, what).is_file()]
    if missing:
        where = "XLREPRO_UD_DIR unset or not prepared" if folder is None else f"not in {folder}"
        raise ConfigError(f"the paper profile's {table} ({what}) needs the UD files {', '.join(missing)} ({where}): "
                          f"unpack UD v2.2 as `xlrepro prepare --profile paper --dry-run` describes (ud) and set "
                          f"XLREPRO_UD_DIR to its folder")
    return folder


def resolve_pos_paths(encoder: str | os.PathLike | None = None, ud: str | os.PathLike | None = None,
                      languages=None) -> PosPaths:
    """The resources of Table 5: the arguments where given, else $XLREPRO_MBERT (or the hub id) and the UD folder
    ($XLREPRO_UD_DIR, then the prepared cache). English train and dev and the test file of each of `languages`
    (default: every language of `TREEBANKS`) must be there, else a one-line ConfigError names them."""
    return PosPaths(mbert_encoder(encoder), resolve_ud(ud, languages, TREEBANKS, "POS", "Table 5"))


class PosLab(TaggingLab):
    """mBERT, English UD for training (train) and selection (dev), each language's UD test set for zero-shot
    testing. languages: among `TREEBANKS` (default all; English always in). max_train_sentences /
    max_test_sentences: the first sentences (a smoke run; in the run folder's name). epochs: the recipe's unless
    given."""

    TASK, METRIC, TABLE, LANGUAGES = "pos", "accuracy", "Table 5", TREEBANKS
    tags = UPOS

    def sentences(self, lang: str, split: str) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """(words, UPOS tags) of a language's treebank split, limited for a smoke run (train: max_train_sentences;
        dev and test: max_test_sentences)."""
        if (lang, split) not in self._sentences:
            sents = read_conllu(treebank_file(self.paths.ud, lang, split))
            limit = self.max_train if split == "train" else self.max_test
            self._sentences[(lang, split)] = [(s.forms, s.upos) for s in sents[:limit]]
        return self._sentences[(lang, split)]

    def run_config(self, config: FinetuneConfig) -> dict:
        """Everything that sets a run's numbers; its hash names the run's file."""
        files = treebank_sizes(self.paths.ud, self.languages)
        return {"finetune": config.to_json(), "task": "pos", "encoder": self.paths.encoder,
                "encoder_config": self.encoder.config.to_dict(), "files": files, "tags": list(self.tags),
                "max_train_sentences": self.max_train, "max_test_sentences": self.max_test}

    def accuracy(self, model, lang: str, split: str) -> float:
        """Share of the words of a treebank split whose predicted tag is the gold one; a word cut off by the
        encoder's length limit counts as wrong."""
        data, kept = encode_tagged(self.tokenizer, self.sentences(lang, split), self.tags,
                                   self.encoder.config.max_position_embeddings)
        pred = predict_tokens(model, data, self.device, self.pad_id)
        index = {t: i for i, t in enumerate(self.tags)}
        right = total = 0
        for p, (_, gold), k in zip(pred, self.sentences(lang, split), kept):
            right += int((np.asarray(p[:k]) == np.asarray([index.get(t, -1) for t in gold[:k]])).sum())
            total += len(gold)
        if total == 0:
            raise ConfigError(f"{treebank_file(self.paths.ud, lang, split)} has no words")
        return right / total

    def train_data(self, max_length: int):
        return encode_tagged(self.tokenizer, self.sentences("en", "train"), self.tags, max_length)

    def dev_score(self, model) -> float:
        return self.accuracy(model, "en", "dev")

    def test_score(self, model, lang: str) -> float:
        return self.accuracy(model, lang, "test")


def table5(paths: PosPaths, *, languages=None, seeds=None, max_train_sentences=None, max_test_sentences=None,
           epochs=None, device=None, root=None, results=None) -> Path:
    """Run Table 5 end to end: ``pos_selection.csv`` (lr, dev_accuracy) and ``pos.csv`` (long rows) into `results`
    (default: the run folder's ``results/``). Returns the results folder."""
    lab = PosLab(paths, languages=languages, max_train_sentences=max_train_sentences,
                 max_test_sentences=max_test_sentences, epochs=epochs, device=device, root=root)
    return lab.write_table(results, seeds, pos=str(lab.paths.ud))
