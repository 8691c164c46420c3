"""Wu & Dredze's Table 6 (dependency parsing) on the paper's own data (the paper profile): the released mBERT under
Dozat & Manning's graph-based parser (a biaffine arc scorer and a biaffine relation classifier, their LSTM encoder
replaced by mBERT, §4.5), fine-tuned on the English UD treebank, the learning rate selected on English dev (LAS),
and tested zero-shot on the test treebanks of Ahmad et al. (2019)'s 31 languages of UD v2.2; UAS and LAS.

As the paper does: a word is represented by its first word piece (the POS path's choice, `ner.encode_tagged`);
only the coarse relation is predicted (``nsubj:pass`` -> ``nsubj``, UD v2's 37 universal relations, `RELATIONS`);
punctuation and symbols (UPOS PUNCT and SYM) are left out of the scores (their note 3); training sequences are cut
at the recipe's 128 pieces, test sentences at their first 140 words or 512 pieces, whichever is smaller (a word cut
off counts as wrong). Multi-word token lines and empty nodes are left out (`xlrepro.resources.read_conllu`). Not
run: their mBERT(Z+POS) row (a gold-POS embedding concatenated to mBERT's output) and the supervised mBERT(S) row.

Our choices where the paper says nothing: one treebank a language (`TREEBANKS`: the POS path's for its 15, the
largest of UD v2.2 for the others); the [CLS] vector stands for the root; Dozat & Manning's sizes (arc MLP 500,
relation MLP 100, dropout 0.33); heads decoded by each word's best-scoring head (no tree constraint).

    folder = table6(resolve_parsing_paths(languages=["de", "es"]), seeds=[0])   # table6.csv, table6_selection.csv
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from xlrepro.config import ConfigError
from xlrepro.data.collate import pad_batch
from xlrepro.engine.finetune import autocast, finetune_loop
from xlrepro.resources import mbert_encoder, read_conllu
from xlrepro.training.finetune import FinetuneConfig
from xlrepro.training.token_finetune import IGNORE

from . import pos
from .pos import TREEBANKS as POS_TREEBANKS
from .tagging import TaggingLab

#: language -> its UD v2.2 treebank (folder/file stem): Ahmad et al. (2019)'s 31 languages, English first
TREEBANKS = {
    "en": POS_TREEBANKS["en"], "ar": "UD_Arabic-PADT/ar_padt", "bg": POS_TREEBANKS["bg"],
    "ca": "UD_Catalan-AnCora/ca_ancora", "cs": "UD_Czech-PDT/cs_pdt", "da": POS_TREEBANKS["da"],
    "de": POS_TREEBANKS["de"], "es": POS_TREEBANKS["es"], "et": "UD_Estonian-EDT/et_edt",
    "fi": "UD_Finnish-TDT/fi_tdt", "fr": "UD_French-GSD/fr_gsd", "he": "UD_Hebrew-HTB/he_htb",
    "hi": "UD_Hindi-HDTB/hi_hdtb", "hr": "UD_Croatian-SET/hr_set", "id": "UD_Indonesian-GSD/id_gsd",
    "it": POS_TREEBANKS["it"], "ja": "UD_Japanese-GSD/ja_gsd", "ko": "UD_Korean-Kaist/ko_kaist",
    "la": "UD_Latin-ITTB/la_ittb", "lv": "UD_Latvian-LVTB/lv_lvtb", "nl": POS_TREEBANKS["nl"],
    "no": "UD_Norwegian-Bokmaal/no_bokmaal", "pl": POS_TREEBANKS["pl"], "pt": POS_TREEBANKS["pt"],
    "ro": POS_TREEBANKS["ro"], "ru": "UD_Russian-SynTagRus/ru_syntagrus", "sk": POS_TREEBANKS["sk"],
    "sl": POS_TREEBANKS["sl"], "sv": POS_TREEBANKS["sv"], "uk": "UD_Ukrainian-IU/uk_iu", "zh": "UD_Chinese-GSD/zh_gsd",
}
#: UD v2's universal relations (the coarse labels), the relation classifier's labels in this order
RELATIONS = ("acl", "advcl", "advmod", "amod", "appos", "aux", "case", "cc", "ccomp", "clf", "compound", "conj", "cop",
             "csubj", "dep", "det", "discourse", "dislocated", "expl", "fixed", "flat", "goeswith", "iobj", "list",
             "mark", "nmod", "nsubj", "nummod", "obj", "obl", "orphan", "parataxis", "punct", "reparandum", "root",
             "vocative", "xcomp")
UNSCORED = ("PUNCT", "SYM")  # the paper's note 3: punctuation and symbols are excluded
SPLITS = ("train", "dev", "test")
MAX_TEST_WORDS, MAX_TEST_PIECES = 140, 512  # §5: test sentences' first 140 words, at most 512 pieces
RESULTS = "table6.csv"


@dataclass(frozen=True)
class ParsingPaths:
    encoder: str  # a hub id or a folder written by save_pretrained
    ud: Path  # the folder of the unpacked UD release (its UD_<Language>-<Treebank>/ folders)


def treebank_file(ud: Path, lang: str, split: str) -> Path:
    """``<ud>/UD_<Language>-<Treebank>/<stem>-ud-<split>.conllu`` of a language of `TREEBANKS`."""
    return pos.treebank_file(ud, lang, split, TREEBANKS, "parsing")


def resolve_parsing_paths(encoder: str | os.PathLike | None = None, ud: str | os.PathLike | None = None,
                          languages=None) -> ParsingPaths:
    """The resources of Table 6: the arguments where given, else $XLREPRO_MBERT (or the hub id) and the UD folder
    ($XLREPRO_UD_DIR, then the prepared cache). English train and dev and the test file of each of `languages`
    (default: all of `TREEBANKS`) must be there, else a one-line ConfigError names them."""
    return ParsingPaths(mbert_encoder(encoder), pos.resolve_ud(ud, languages, TREEBANKS, "parsing", "Table 6"))


def coarse(deprel: str) -> str:
    """The universal relation of a UD relation: its part before a subtype (``nsubj:pass`` -> ``nsubj``)."""
    return deprel.split(":")[0]


def attachment_scores(gold_heads, gold_rels, pred_heads, pred_rels, upos) -> tuple[float, float]:
    """(UAS, LAS) over sentences: the share of scored words whose predicted head is the gold one, and whose
    relation is the gold one too (coarse relations compared). Words tagged PUNCT or SYM are not scored; a word
    without a prediction (a shorter predicted sentence: cut off by the length limit) counts as wrong."""
    right_heads = right_both = total = 0
    for gh, gr, ph, pr, tags in zip(gold_heads, gold_rels, pred_heads, pred_rels, upos, strict=True):
        for i, (h, r, tag) in enumerate(zip(gh, gr, tags, strict=True)):
            if tag in UNSCORED:
                continue
            total += 1
            if i < len(ph) and ph[i] == h:
                right_heads += 1
                right_both += int(coarse(pr[i]) == coarse(r))
    if total == 0:
        raise ConfigError("no word to score: every word is punctuation or a symbol")
    return right_heads / total, right_both / total


@dataclass
class EncodedTrees:
    """Per sentence: input ids [L] ([CLS] pieces [SEP]), the position of each kept word's first piece [n], the gold
    head of each kept word [n] (0 the root, j word j; IGNORE where the head was cut off) and its relation id [n]."""
    ids: list[np.ndarray]
    starts: list[np.ndarray]
    heads: list[np.ndarray]
    rels: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.ids)


def encode_trees(tokenizer, sentences, max_length: int, max_words: int | None = None) -> EncodedTrees:
    """Parser inputs of `read_conllu` sentences, cut at `max_length` pieces and at `max_words` words."""
    index = {r: i for i, r in enumerate(RELATIONS)}
    ids, starts, heads, rels = [], [], [], []
    for s in sentences:
        words = list(s.forms[:max_words])
        enc = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length)
        first: dict[int, int] = {}
        for pos, w in enumerate(enc.word_ids()):
            if w is not None and w not in first:
                first[w] = pos
        kept = len(first)
        h = np.asarray([hd if hd <= kept else IGNORE for hd in s.heads[:kept]], np.int64)
        r = np.asarray([index.get(coarse(d), IGNORE) if hd != IGNORE else IGNORE
                        for d, hd in zip(s.deprels[:kept], h)], np.int64)
        ids.append(np.asarray(enc["input_ids"], np.int64))
        starts.append(np.asarray([first[w] for w in range(kept)], np.int64))
        heads.append(h)
        rels.append(r)
    return EncodedTrees(ids, starts, heads, rels)


class BiaffineParser(nn.Module):
    """Dozat & Manning (2017)'s biaffine arc scorer and relation classifier on a BERT encoder's first-piece vectors,
    the [CLS] vector standing for the root. Written here by hand: no maintained pip library offers this head for a
    Hugging Face encoder offline (supar, the maintained implementation, builds its own encoders)."""

    def __init__(self, encoder: nn.Module, n_rels: int, arc_dim: int = 500, rel_dim: int = 100,
                 dropout: float = 0.33):
        super().__init__()
        self.encoder = encoder
        hidden = encoder.config.hidden_size
        mlp = lambda d: nn.Sequential(nn.Linear(hidden, d), nn.LeakyReLU(0.1), nn.Dropout(dropout))  # noqa: E731
        self.arc_dep, self.arc_head = mlp(arc_dim), mlp(arc_dim)  # a word as a dependent / as a head
        self.rel_dep, self.rel_head = mlp(rel_dim), mlp(rel_dim)
        self.arc_weight = nn.Parameter(torch.zeros(arc_dim, arc_dim))  # zero-initialised, as theirs
        self.arc_bias = nn.Parameter(torch.zeros(arc_dim))  # the head's prior: h_head . u
        self.rel_weight = nn.Parameter(torch.zeros(n_rels, rel_dim + 1, rel_dim + 1))  # +1: the bias terms

    def forward(self, input_ids, attention_mask, starts, word_mask, heads=None):
        """arc scores [B, n, n+1] (dependent i, head j; j = 0 the root) and relation scores [B, n, R] at `heads`
        [B, n] (the gold heads in training; each word's best head where None)."""
        x = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # [B, L, H]
        nodes = torch.cat([torch.zeros_like(starts[:, :1]), starts], 1)  # [B, n+1]: [CLS] as the root
        x = x.gather(1, nodes[..., None].expand(-1, -1, x.shape[-1])).float()  # [B, n+1, H]
        dep, head = self.arc_dep(x[:, 1:]), self.arc_head(x)  # [B, n, A], [B, n+1, A]
        arc = dep @ self.arc_weight @ head.transpose(1, 2) + (head @ self.arc_bias)[:, None, :]  # [B, n, n+1]
        n = starts.shape[1]
        allowed = torch.cat([torch.ones_like(word_mask[:, :1]), word_mask], 1).bool()[:, None, :]  # [B, 1, n+1]
        positions = torch.arange(n + 1, device=arc.device)
        self_loop = (positions[1:, None] == positions[None, :])[None]  # [1, n, n+1]: word i heading itself
        arc = arc.masked_fill(~allowed | self_loop, torch.finfo(arc.dtype).min)
        if heads is None:
            heads = arc.argmax(-1)
        one = lambda t: torch.cat([t, torch.ones_like(t[..., :1])], -1)  # noqa: E731
        rel_dep = one(self.rel_dep(x[:, 1:]))  # [B, n, D+1]
        rel_head = one(self.rel_head(x)).gather(1, heads.clamp(min=0)[..., None].expand(-1, -1, rel_dep.shape[-1]))
        rel = torch.einsum("bnd,rde,bne->bnr", rel_dep, self.rel_weight, rel_head)  # [B, n, R]
        return arc, rel


def _batch(data: EncodedTrees, rows, device, pad_id: int):
    ids, lengths = pad_batch([data.ids[i] for i in rows], pad_id)
    width = max(1, max(len(data.starts[i]) for i in rows))  # at least one word position, for an empty sentence
    starts, n_words = pad_batch([data.starts[i] for i in rows], 0, width=width)
    heads, _ = pad_batch([data.heads[i] for i in rows], IGNORE, width=starts.shape[1])
    rels, _ = pad_batch([data.rels[i] for i in rows], IGNORE, width=starts.shape[1])
    mask = (np.arange(ids.shape[1]) < lengths[:, None]).astype(np.int64)
    word_mask = (np.arange(starts.shape[1]) < n_words[:, None]).astype(np.int64)
    t = lambda a: torch.from_numpy(a).to(device, non_blocking=True)  # noqa: E731
    return t(ids), t(mask), t(starts), t(word_mask), t(heads), t(rels)


def _cross_entropy(scores, gold):
    """Mean cross-entropy over the positions whose gold is not IGNORE; 0 (with a gradient) where there are none."""
    keep = gold != IGNORE
    if not bool(keep.any()):
        return scores.sum() * 0
    return nn.functional.cross_entropy(scores[keep].float(), gold[keep])


def finetune_parser(config: FinetuneConfig, encoder: nn.Module, train: EncodedTrees, *, pad_id: int = 0, device="cpu",
                    progress: bool = True) -> tuple[BiaffineParser, dict]:
    """Fine-tune a copy of `encoder` (all of it) with the biaffine heads on `train` (the engine's loop: AdamW, warm-up
    and linear decay); the loss is the arcs' cross-entropy plus the relations' at the gold heads."""
    if config.freeze is not None or config.feature_based:
        raise ConfigError("the parser fine-tunes the whole encoder: leave freeze None and feature_based off")
    device = torch.device(device)
    torch.manual_seed(config.seed)
    model = BiaffineParser(copy.deepcopy(getattr(encoder, "bert", encoder)), len(RELATIONS)).to(device)

    def batch(rows):
        ids, mask, starts, word_mask, heads, rels = _batch(train, rows, device, pad_id)
        return (ids, mask, starts, word_mask, heads), (heads, rels)

    def loss(scores, gold):
        (arc, rel), (heads, rels) = scores, gold
        return _cross_entropy(arc, heads) + _cross_entropy(rel, rels)

    history = finetune_loop(model, config, len(train), batch, loss, device=device, progress=progress,
                            desc=f"fine-tune parser lr={config.lr:g} seed={config.seed}")
    return model.eval(), history


@torch.no_grad()
def parse(model: BiaffineParser, data: EncodedTrees, device="cpu", pad_id: int = 0,
          batch_size: int = 64) -> list[tuple[np.ndarray, list[str]]]:
    """Per sentence, the predicted head of each kept word (0 the root) and its relation."""
    device = torch.device(device)
    model.eval()
    out: list = [None] * len(data)
    order = np.argsort([len(x) for x in data.ids], kind="stable")
    for k in range(0, len(order), batch_size):
        rows = order[k:k + batch_size]
        ids, mask, starts, word_mask, _, _ = _batch(data, rows, device, pad_id)
        with autocast(device):
            arc, rel = model(ids, mask, starts, word_mask)
        heads, rels = arc.argmax(-1).cpu().numpy(), rel.argmax(-1).cpu().numpy()  # [B, n]
        for j, r in enumerate(rows):
            n = len(data.starts[r])
            out[r] = (heads[j, :n], [RELATIONS[i] for i in rels[j, :n]])
    return out


class ParsingLab(TaggingLab):
    """mBERT, English UD for training (train) and selection (dev, LAS), each language's UD test set for zero-shot
    testing (UAS and LAS). languages: among `TREEBANKS` (default all; English always in). max_train_sentences /
    max_test_sentences: the first sentences (a smoke run; in the run folder's name). epochs: the recipe's unless
    given."""

    TASK, METRIC, TABLE, LANGUAGES, RESULTS = "parsing", "las", "Table 6", TREEBANKS, RESULTS
    tags = RELATIONS

    def sentences(self, lang: str, split: str):
        """The `read_conllu` sentences of a language's treebank split, limited for a smoke run."""
        if (lang, split) not in self._sentences:
            limit = self.max_train if split == "train" else self.max_test
            self._sentences[(lang, split)] = read_conllu(treebank_file(self.paths.ud, lang, split))[:limit]
        return self._sentences[(lang, split)]

    def run_config(self, config: FinetuneConfig) -> dict:
        """Everything that sets a run's numbers; its hash names the run's file."""
        files = pos.treebank_sizes(self.paths.ud, self.languages, treebank_file)
        return {"finetune": config.to_json(), "task": "parsing", "encoder": self.paths.encoder,
                "encoder_config": self.encoder.config.to_dict(), "files": files, "relations": list(RELATIONS),
                "head": "biaffine 500/100, dropout 0.33", "max_train_sentences": self.max_train,
                "max_test_sentences": self.max_test}

    def fit(self, config: FinetuneConfig):
        train = encode_trees(self.tokenizer, self.sentences("en", "train"), config.max_length)
        return finetune_parser(config, self.encoder, train, pad_id=self.pad_id, device=self.device,
                               progress=self.progress)

    def scores(self, model, lang: str, split: str) -> dict[str, float]:
        """UAS and LAS of a treebank split (`attachment_scores`)."""
        sents = self.sentences(lang, split)
        pieces = min(MAX_TEST_PIECES, self.encoder.config.max_position_embeddings)
        pred = parse(model, encode_trees(self.tokenizer, sents, pieces, MAX_TEST_WORDS), self.device, self.pad_id)
        uas, las = attachment_scores([s.heads for s in sents], [s.deprels for s in sents], [p[0] for p in pred],
                                     [p[1] for p in pred], [s.upos for s in sents])
        return {"uas": uas, "las": las}

    def dev_score(self, model) -> float:
        return self.scores(model, "en", "dev")["las"]

    def test_scores(self, model, lang: str) -> dict[str, float]:
        return self.scores(model, lang, "test")


def table6(paths: ParsingPaths, *, languages=None, seeds=None, max_train_sentences=None, max_test_sentences=None,
           epochs=None, device=None, root=None, results=None) -> Path:
    """Run Table 6 end to end: ``table6_selection.csv`` (lr, dev_las) and ``table6.csv`` (long rows: experiment
    "zero-shot", seed, language, metric uas / las, value) into `results` (default: the run folder's ``results/``).
    Returns the results folder."""
    lab = ParsingLab(paths, languages=languages, max_train_sentences=max_train_sentences,
                     max_test_sentences=max_test_sentences, epochs=epochs, device=device, root=root)
    return lab.write_table(results, seeds, parsing=str(lab.paths.ud))
