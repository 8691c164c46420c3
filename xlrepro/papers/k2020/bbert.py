"""One cell of K et al. (2020): pre-train a B-BERT (every seed of an experiment as one `ModelStack`), fine-tune each
on the source side of the section task, test zero-shot on the targets. Resumable; folders keyed by `run_key`.

    cell = Cell(plan, "lab", "enfake-es")                 # resolves corpora, tokenizer, shape; checks everything
    cell.run(device="cuda", time_limit=540)                # returns the results frame, or None if it ran out of time

Folder ``runs/k2020/<profile>/<experiment with / as __>-<key>/``: config.json, tokenizer.json, checkpoint.pt
(while pre-training), model_<seed>.safetensors (bf16), results_<seed>.csv, timing.json.

Whole-word masking (their scripts): a word is selected with probability 0.15 and all its pieces are predicted;
each selected piece then becomes [MASK] (80%), stays (10%) or becomes a random piece (10%), as in BERT's
create_pretraining_data. Their cap of 20 predictions per sequence is not applied (our pairs are ~70 pieces).
NSP cells (and their control) train their seeds one by one with HF's `BertForPreTraining` (same data, masking rule
and optimiser), or, at a profile with `nsp_stack`, in stacks of NSP cells whose fused loss adds HF's NSP head. Every
other cell trains in a `ModelStack`: alone (a stack of its seeds) or beside other cells of the same shape
(`stacks.run_stacks`); a model trains the same in either (its data order, masks and dropout are keyed by its own
seed; `tests/test_k2020_stacks.py` checks it).
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from xlrepro import atomic
from xlrepro.config import ConfigError, choose
from xlrepro.data.collate import pad_batch
from xlrepro.paths import runs_dir
from xlrepro.runkeys import canonical, run_key, write_config
from xlrepro.tasks.sections import SECTIONS, majority_baseline, parallel_keys, verse_pairs
from xlrepro.training.finetune import EncodedPairs, FinetuneConfig, evaluate, finetune, macro_f1, predict

from . import data as D
from .config import PROFILES, Plan, load_plan, model_size
from .constants import CHECKPOINT_SECONDS  # noqa: F401  (read as bbert.CHECKPOINT_SECONDS)
from .masking import whole_word_mask  # noqa: F401  (read as bbert.whole_word_mask)

NAME = "k2020"
TASK = "sections"
NER_TASK = "ner"
ADJACENCY_TASK = "adjacency"  # Table 11's stand-in that needs both verses (xlrepro.tasks.adjacency)
ADJACENCY_VERSION = "same-section-other-chapter-v1"  # bump when the adjacency pairs change
NER_LABELS_VERSION = "spacy-en_core_web_sm-3.8.0/per-loc-org-v1"  # bump when the silver labels change
# Bump when the training code changes numbers for the same configuration (a new key for every cell).
ENGINE = "k2020-stack/length-bins/padded-vocab-v1"
RESULT_COLUMNS = ["experiment", "seed", "language", "task", "metric", "value"]


def prediction_shares(pred: np.ndarray, n_labels: int) -> list[tuple[str, float]]:
    """The test predictions' make-up, as result rows (metric, value): ``top_prediction_share``, the share of the
    most predicted class, and ``top_prediction_class``, its index (ties: the lower). A zero-shot classifier at or
    below the majority class either predicts one class nearly always (share near 1) or spreads its errors."""
    counts = np.bincount(np.asarray(pred, np.int64), minlength=n_labels)
    top = int(counts.argmax())
    return [("top_prediction_share", float(counts[top] / max(len(pred), 1))), ("top_prediction_class", float(top))]


KEY_FREE_FIELDS = ("table", "tasks")  # Experiment fields left out of a cell's run key (see Cell.__init__)
# Experiment fields added after cells were trained: in the run key only when set, so that those cells keep their keys
KEY_WHEN_SET = ("single", "retrain", "linear")


class Cell:
    """One experiment of the plan at one profile, all its seeds."""

    def __init__(self, plan: Plan | None, profile: str, experiment: str, seeds=None, cache_dir=None, root=None):
        self.plan = plan or load_plan()
        self.profile_name = choose("profile", profile, PROFILES)
        self.profile = self.plan.profiles[profile]
        self.name = choose("experiment", experiment, self.plan.experiments)
        self.exp = self.plan.experiments[experiment]
        self.seeds = list(self.plan.seeds if seeds is None else seeds)
        self.size = model_size(self.profile, self.exp)
        self.cache_dir = cache_dir
        # the folder is keyed without the seeds (a seed's files are its own, and more seeds extend a cell) and without
        # what only presents or schedules a cell: the tables it serves and the tasks it is evaluated on (each task's
        # results have their own files); those two are kept in config.json under "recorded"
        experiment_key = {k: v for k, v in canonical(self.exp).items()
                          if k not in KEY_FREE_FIELDS and (v or k not in KEY_WHEN_SET)}
        # the pretrain recipe keyed without `text` at its default, so one-edition cells keep their keys, without
        # `snapshots` (extra weights saved on the way change no number of the final model), and with `nsp_stack` only
        # where it is set and changes the cell's trainer (NSP cells and their control)
        pretrain = {k: v for k, v in canonical(self.profile.pretrain).items()
                    if not (k == "text" and v == "bible") and k != "snapshots"
                    and not (k == "nsp_stack" and not (v and self.exp.alone))}
        self.config = {"paper": NAME, "engine": ENGINE, "experiment": experiment_key, "size": self.size,
                       "pretrain": pretrain, "finetune": self.profile.finetune,
                       "half_seed": self.plan.half_seed, "task": TASK}
        self.key = run_key(self.config)
        base = Path(root) if root is not None else runs_dir() / NAME / profile
        self.dir = base / f"{experiment.replace('/', '__').replace('%', 'pct')}-{self.key}"

    @property
    def alone(self) -> bool:
        """Pre-trained one seed at a time (`_pretrain_alone`): an NSP cell or its control, at a profile whose NSP
        cells do not train in the stack (`Pretrain.nsp_stack`)."""
        return self.exp.alone and not self.profile.pretrain.nsp_stack

    # ------------------------------------------------------------------------------------------- data
    def corpora(self) -> dict[str, pd.DataFrame]:
        """Pre-training lines per language: the source (first) from chapter half 0, the others from half 1;
        Fake-English shifted (Unicode way), target corpora replaced by unigram samples where declared."""
        p, out = self.profile.pretrain, {}
        for i, lang in enumerate(self.exp.pretrain):
            df = D.corpus(lang, 0 if i == 0 else 1, seed=self.plan.half_seed, max_lines=p.max_lines,
                          cache_dir=self.cache_dir, text=p.text)
            texts = df["text"].tolist()
            if self.exp.unigram and i > 0:
                texts = D.unigram_corpus(texts, seed=self.plan.half_seed)
            out[lang] = df.assign(text=self.surface(lang, texts))
        return out

    def surface(self, lang: str, texts: list[str]) -> list[str]:
        """Texts as the tokenizer sees them: Fake-English shifted by code point in the Unicode way."""
        if lang == D.FAKE and self.exp.fake == "unicode":
            return [D.to_fake_unicode(t) for t in texts]
        return list(texts)

    def tokenizer(self, corpora=None):
        path = self.dir / "tokenizer.json"
        from tokenizers import Tokenizer
        if path.exists():
            return Tokenizer.from_file(str(path))
        corpora = corpora or self.corpora()
        p = self.profile.pretrain
        size = p.word_vocab_size if self.exp.tokenization == "word" else p.vocab_size
        texts = [t for df in corpora.values() for t in df["text"]]
        tok = D.build_tokenizer(self.exp.tokenization, texts, size, D.special_tokens(self.exp.pretrain, self.exp.langid))
        atomic.write_bytes(path, tok.to_str().encode())
        return tok

    @property
    def shift(self) -> int:
        """The id shift of Fake-English in the id way (0 otherwise): the joint vocabulary's size."""
        self._load()
        return self._tok.get_vocab_size() if self.exp.fake == "id" else 0

    @property
    def vocab_size(self) -> int:
        self._load()
        return self._tok.get_vocab_size() * (2 if self.exp.fake == "id" else 1)

    def _load(self):
        if not hasattr(self, "_tok"):
            self.dir.mkdir(parents=True, exist_ok=True)
            write_config(self.dir, self.config, recorded={k: getattr(self.exp, k) for k in KEY_FREE_FIELDS})
            self._tok = self.tokenizer()
            t = self._tok
            self.ids = {s: t.token_to_id(s) for s in D.SPECIAL_TOKENS}
            self.special = set(self.ids.values()) | ({t.token_to_id(D.separator(l)) for l in self.exp.pretrain}
                                                     if self.exp.langid else set())

    def encode(self, lang: str, texts: list[str], permute_seed: int | None = None) -> D.Encoded:
        """Lines of `lang` (surface already applied) as ids; Fake-English in the id way shifted past the vocabulary;
        with the experiment's permutation (seeded per line) when `permute_seed` is given."""
        self._load()
        enc = D.encode_lines(self._tok, texts)
        if lang == D.FAKE and self.exp.fake == "id":
            special = np.array(sorted(self.special))
            enc.ids = [np.where(np.isin(x, special), x, x + self.shift) for x in enc.ids]
        if permute_seed is not None and self.exp.permute > 0:
            ids = []
            for i, x in enumerate(enc.ids):
                ids.append(np.asarray(D.permute(x, self.exp.permute, np.random.default_rng([permute_seed, i])),
                                      np.int64))
            enc.ids = ids
            enc.word_start = [np.arange(len(x)) for x in ids]  # after swapping, every piece is its own unit
        return enc

    def sep(self, lang: str) -> int:
        return self._tok.token_to_id(D.separator(lang)) if self.exp.langid else self.ids["[SEP]"]

    def pretraining_pairs(self, corpora):
        """Per language: padded pair inputs [N, W], token types, word starts, lengths, is_next."""
        p = self.profile.pretrain
        out = {}
        for lang, df in corpora.items():
            enc = self.encode(lang, df["text"].tolist(), permute_seed=self.plan.half_seed)
            docs = (df["book"].astype(np.int64) * 1000 + df["chapter"].astype(np.int64)).to_numpy()
            pairs = D.nsp_pairs(docs, seed=self.plan.half_seed, random_share=0.5 if self.exp.nsp else 0.0)
            rows = [D.pair_input(enc.ids[q.first], enc.ids[q.second], self.ids["[CLS]"], self.sep(lang),
                                 self.sep(lang), p.max_length, enc.word_start[q.first], enc.word_start[q.second])
                    for q in pairs]
            ids, lengths = pad_batch([r[0] for r in rows], self.ids["[PAD]"])
            types, _ = pad_batch([r[1] for r in rows], 0)
            starts, _ = pad_batch([r[2] for r in rows], 0)
            out[lang] = (ids, types, starts, lengths, np.array([q.is_next for q in pairs]))
        return out

    # ------------------------------------------------------------------------------------------- pre-training
    def pretrained(self) -> list[int]:
        return [s for s in self.seeds if (self.dir / f"model_{s}.safetensors").exists()]

    @property
    def vocab_rows(self) -> int:
        """Rows of the model's word-embedding table: the profile's `embedding_rows` (the vocabulary plus rows no input
        uses, so that cells with different vocabularies share a stack), else the vocabulary's own size."""
        self._load()
        rows = self.profile.pretrain.embedding_rows
        if rows is None:
            return self.vocab_size
        if self.vocab_size > rows:
            raise ConfigError(f"{self.name}: its vocabulary has {self.vocab_size} ids, more than the profile's "
                              f"embedding_rows {rows}; raise embedding_rows to at least {self.vocab_size}")
        return rows

    @property
    def planned_rows(self) -> int:
        """The embedding rows a plan can count on without building the tokenizer: the profile's `embedding_rows`
        where set (`vocab_rows` checks the vocabulary fits when the cell trains), else the vocabulary's size."""
        rows = self.profile.pretrain.embedding_rows
        return self.vocab_rows if rows is None else rows

    def table(self) -> "PairTable":
        """The cell's pre-training pairs as one table (all languages; built once, then read from pairs.npz)."""
        from .trainer import PairTable
        self._load()
        path = self.dir / "pairs.npz"
        if path.exists():
            return PairTable.load(path)
        t = PairTable.build(self.pretraining_pairs(self.corpora()), self.special, self.profile.pretrain)
        t.save(path)
        return t

    def pretrain(self, device="cpu", time_limit: float | None = None, progress: bool = True,
                 compile=None, graphs: bool = True) -> bool:
        """Pre-train the seeds that have no model yet; True when all are done (False: stopped, resumable).
        The seeds train as one stack (`trainer.StackTrainer`; other cells of the same shape may join it through
        `stacks.run_stacks`, which changes no number); NSP cells and their control train their seeds one by one
        (`_pretrain_alone`)."""
        self._load()
        todo = [s for s in self.seeds if s not in self.pretrained()]
        if not todo:
            return True
        if self.alone:
            return self._pretrain_alone(todo, device, time_limit, progress)
        from .trainer import StackTrainer
        return StackTrainer([(self, s) for s in todo], device, compile=compile, graphs=graphs).run(time_limit,
                                                                                                   progress)

    def _pretrain_alone(self, todo, device, time_limit, progress) -> bool:
        """At a profile without `nsp_stack`, NSP cells train here: HF's `BertForPreTraining`, one seed at a time,
        with the same pairs, whole-word masking rule, optimiser and precision (bf16 autocast on a GPU; PyTorch's
        generator for the masks). A `single` cell (the control) trains the same way on the MLM loss alone: its
        pairs are never random, and its NSP head and pooler get no gradient, so they keep their initial weights."""
        from safetensors.torch import save_model
        from transformers import BertForPreTraining

        from xlrepro.engine.models import bert_config, device_name
        from xlrepro.engine.pretrain import pretrain_loop
        from xlrepro.engine.single import SingleModel

        t0 = time.time()
        device = torch.device(device)
        p = self.profile.pretrain
        table = self.table()
        ids, types, wstart = (torch.from_numpy(a).long().to(device) for a in (table.ids, table.types, table.wstart))
        maskable = torch.from_numpy(table.maskable).to(device)
        lengths = torch.from_numpy(table.lengths).long().to(device)
        is_next = torch.from_numpy(table.is_next).long().to(device)
        warmup = math.ceil(p.warmup * p.steps)

        def loss(model, inputs, attention, tt, labels, rows):
            out = model(input_ids=inputs, attention_mask=attention, token_type_ids=tt, labels=labels,
                        next_sentence_label=1 - is_next[rows] if self.exp.nsp else None)
            # HF's loss is MLM + NSP, and None without NSP labels: the control's loss is HF's MLM term alone
            return out.loss if self.exp.nsp else torch.nn.functional.cross_entropy(
                out.prediction_logits.float().view(-1, out.prediction_logits.shape[-1]), labels.view(-1))

        for seed in todo:
            ckpt = self.dir / f"checkpoint_{seed}.pt"
            torch.manual_seed(seed)
            model = BertForPreTraining(bert_config(self.size, self.vocab_rows, positions=p.max_length)).to(device)
            # bf16 autocast on a GPU, as the stacks train the cells NSP is compared with (ModelStack.bf16)
            single = SingleModel(model, loss, lr=self.size.lr, weight_decay=p.weight_decay, eps=1e-6,
                                 warmup_steps=warmup, total_steps=p.steps, max_grad_norm=1.0, device=device)
            gen = torch.Generator(device=device).manual_seed(seed)  # the masks: PyTorch's generator, per seed
            started: list[int] = []  # the first step of this call

            def batch(step: int, seed=seed, gen=gen, started=started):
                if not started:
                    started.append(step)
                    if step:  # resumed: the mask stream restarts from (seed, step)
                        gen.manual_seed(seed * 1_000_003 + step)
                rows = torch.as_tensor(table.draw(seed, step, p.batch_size, p.length_bins), device=device)  # [B]
                width = int(table.lengths[rows.cpu().numpy()].max())

                def make_inputs():
                    x, tt, ws, mk = ids[rows, :width], types[rows, :width], wstart[rows, :width], maskable[rows, :width]
                    pos = torch.arange(width, device=device)
                    u, r = (torch.rand(x.shape, device=device, generator=gen) for _ in range(2))  # [B, W] each
                    rnd = torch.randint(self.vocab_size, x.shape, device=device, generator=gen)
                    inputs, labels = whole_word_mask(x, mk, ws, u, r, rnd, self.ids["[MASK]"], p.mlm_probability)
                    return inputs, (pos < lengths[rows][:, None]).long(), tt, labels, rows
                return make_inputs, None

            done = pretrain_loop(single, batch, steps=p.steps, checkpoint=ckpt, time_limit=time_limit, t0=t0,
                                 progress=progress, record_loss=lambda curve, step, losses: None,
                                 desc=f"{self.name} seed {seed} ({'NSP' if self.exp.nsp else 'one at a time, no NSP'})",
                                 checkpoint_seconds=CHECKPOINT_SECONDS)
            if done is None:
                return False
            seconds = done[2]
            with atomic.atomic_path(self.dir / f"model_{seed}.safetensors") as tmp:
                save_model(model.bert.to(torch.bfloat16).cpu(), str(tmp))
            ckpt.unlink(missing_ok=True)
            atomic.write_json(self.dir / f"timing_{seed}.json", {
                "seeds": [seed], "seconds": seconds, "ms_per_step": 1000 * seconds / p.steps,
                "device": device_name(device), "steps": p.steps, "torch": torch.__version__})
        return True

    def encoder(self, seed: int, step: int | None = None):
        """Seed `seed`'s pre-trained encoder: the final model, or with `step` its snapshot after that step."""
        from safetensors.torch import load_model
        from transformers import BertModel

        from xlrepro.engine.models import bert_config
        self._load()
        model = BertModel(bert_config(self.size, self.vocab_rows, positions=self.profile.pretrain.max_length),
                          add_pooling_layer=False)
        path = self.dir / f"model_{seed}.safetensors" if step is None else self.snapshot_path(seed, step)
        # an NSP model also saved its pooler (the NSP head's input): the classifier does not use it
        missing, unexpected = load_model(model, str(path), strict=False)
        if missing or any(not k.startswith("pooler.") for k in unexpected):
            raise RuntimeError(f"{path.name} does not match the cell's shape: missing {missing}, extra {unexpected}")
        return model.float()

    # ------------------------------------------------------------------------------------------- snapshots
    def snapshot_path(self, seed: int, step: int) -> Path:
        """Seed `seed`'s weights after `step` pre-training steps (the profile's `snapshots`)."""
        return self.dir / "snapshots" / f"model_{seed}_step{step}.safetensors"

    def curve_path(self, seed: int, step: int) -> Path:
        """The section task's results of the snapshot of `seed` after `step` steps (as results_<seed>.csv)."""
        return self.dir / "snapshots" / f"results_{seed}_step{step}.csv"

    def curve_done(self, seed: int, step: int) -> bool:
        return self.curve_path(seed, step).exists()

    def evaluate_snapshot(self, seed: int, step: int, device="cpu", progress: bool = False) -> pd.DataFrame:
        """The section task on the snapshot of `seed` after `step` steps: fine-tuned and tested exactly as the final
        model (`evaluate_sections_seed`), one point of the zero-shot learning curve; a `step` column added."""
        return self.evaluate_sections_seed(seed, device, progress, step=step)

    # ------------------------------------------------------------------------------------------- the task
    def task_pairs(self, premise: str, hypothesis: str, split: str, keys=None, max_pairs=None,
                   task: str = TASK) -> EncodedPairs:
        """Verse pairs of `split` with the first verse in language `premise` and the second in `hypothesis`
        (the same language for the ordinary task; different ones for Table 11), encoded for this cell: the section
        task's pairs, or with `task` ADJACENCY_TASK the adjacency task's (twice as many: each positive and its
        negative)."""
        from xlrepro.tasks.adjacency import adjacency_pairs
        choose("task", task, (TASK, ADJACENCY_TASK))
        self._load()
        pairs = verse_pairs if task == TASK else adjacency_pairs
        a = pairs(D.base_language(premise), split, self.cache_dir, max_pairs=max_pairs, keys=keys)
        b = a if hypothesis == premise else pairs(D.base_language(hypothesis), split, self.cache_dir,
                                                  max_pairs=max_pairs, keys=keys)
        if not (a[["book", "chapter", "verse"]].values == b[["book", "chapter", "verse"]].values).all():
            raise ValueError("premise and hypothesis pairs differ in keys: pass parallel keys")
        first = self.encode(premise, self.surface(premise, a["first"].tolist()))
        second = self.encode(hypothesis, self.surface(hypothesis, b["second"].tolist()))
        rows = [D.pair_input(x, y, self.ids["[CLS]"], self.sep(premise), self.sep(hypothesis),
                             self.profile.pretrain.max_length) for x, y in zip(first.ids, second.ids)]
        return EncodedPairs([r[0] for r in rows], [r[1] for r in rows], a["label"].to_numpy(np.int64))

    def test_keys(self):
        """Test pairs present in en, es, hi, ru and the cell's languages: every cell is tested on translations of
        the same pairs, so accuracies compare across targets and cells."""
        langs = sorted({"en", "es", "hi", "ru"} | {D.base_language(l) for l in self.exp.test})
        return parallel_keys(langs, "test", self.cache_dir)

    def evaluated(self, seed: int) -> bool:
        """Whether every task the experiment declares has its results for `seed`."""
        return (self.dir / f"results_{seed}.csv").exists() and (
            "ner" not in self.exp.tasks or self.ner_results_path(seed).exists()) and (
            ADJACENCY_TASK not in self.exp.tasks or self.adjacency_results_path(seed).exists())

    def evaluate_seed(self, seed: int, device="cpu", progress: bool = False) -> pd.DataFrame:
        """The section task's results of `seed` and, where the experiment declares them, the NER task's and the
        adjacency task's."""
        frames = [self.evaluate_sections_seed(seed, device, progress)]
        if ADJACENCY_TASK in self.exp.tasks:
            frames.append(self.evaluate_adjacency_seed(seed, device, progress))
        if "ner" in self.exp.tasks:
            frames.append(self.evaluate_ner_seed(seed, device, progress))
        return pd.concat(frames, ignore_index=True)

    # ------------------------------------------------------------------------------------------- the NER task
    @property
    def ner_recipe(self):
        return self.profile.ner or self.profile.finetune

    def ner_results_path(self, seed: int) -> Path:
        """results_ner-<key of the NER recipe>_<seed>.csv: a changed recipe gets new files, the cell keeps its key."""
        key = run_key({"task": NER_TASK, "recipe": self.ner_recipe, "labels": NER_LABELS_VERSION})[:8]
        return self.dir / f"results_ner-{key}_{seed}.csv"

    def ner_data(self, lang: str, split: str, max_verses: int | None = None):
        """Silver-labelled verses of `split` in `lang` (en or enfake), encoded for this cell: per verse [CLS] pieces
        [SEP], the label id at each word's first piece (cut to max_length); and the gold tags of every word (the same
        in every language: words cut off by max_length count as predicted O, see `evaluate_ner_seed`).
        A verse whose word count differs from its labels' under this cell's tokenizer is skipped (counted)."""
        from xlrepro.tasks.entities import LABEL_ID, check_labelled, silver_entities
        from xlrepro.training.token_finetune import IGNORE, EncodedTokens
        check_labelled(lang)
        self._load()
        df = silver_entities(split, self.cache_dir, max_verses=max_verses)
        # the words joined by spaces: the basic tokenizer splits them back into the same words (and Fake-English
        # shifts each of them one-to-one)
        texts = self.surface(lang, [" ".join(w) for w in df["words"]])
        enc = self.encode(lang, texts)
        width = self.profile.pretrain.max_length - 2
        ids, labels, gold, skipped = [], [], [], 0
        for x, start, tags in zip(enc.ids, enc.word_start, df["tags"]):
            first = np.flatnonzero(start == np.arange(len(start)))  # positions of each word's first piece
            if len(first) != len(tags):
                skipped += 1
                continue
            x, start = x[:width], start[:width]
            first = first[first < width]
            y = np.full(len(x), IGNORE, np.int64)
            y[first] = [LABEL_ID[t] for t in tags[:len(first)]]
            ids.append(np.array([self.ids["[CLS]"], *x, self.sep(lang)], np.int64))
            labels.append(np.array([IGNORE, *y, IGNORE], np.int64))
            gold.append(list(tags))
        return EncodedTokens(ids, labels), gold, skipped

    def evaluate_ner_seed(self, seed: int, device="cpu", progress: bool = False) -> pd.DataFrame:
        """Fine-tune seed `seed`'s encoder on the source's silver train verses (token classification); entity-level
        precision, recall and F1 on the source dev and on the test verses of every labelled test language."""
        from xlrepro.tasks.entities import LABELLED_LANGUAGES, LABELS, entity_prf
        from xlrepro.training.token_finetune import finetune_tokens, predict_tokens
        path = self.ner_results_path(seed)
        if path.exists():
            return pd.read_csv(path, dtype={"experiment": str, "language": str})
        f = self.ner_recipe
        src = self.exp.finetune
        train, _, _ = self.ner_data(src, "train", f.max_train_pairs)
        cfg = FinetuneConfig(lr=f.lr, batch_size=f.batch_size, epochs=f.epochs,
                             max_length=self.profile.pretrain.max_length, seed=seed)
        model, history = finetune_tokens(cfg, self.encoder(seed), train, len(LABELS), pad_id=self.ids["[PAD]"],
                                         device=device, progress=progress)
        rows = []
        tests = [("dev", src)] + [("test", lang) for lang in self.exp.test if lang in LABELLED_LANGUAGES]
        for split, lang in tests:
            data, gold, skipped = self.ner_data(lang, split, f.max_test_pairs)
            pred = [[LABELS[i] for i in p] + ["O"] * (len(g) - len(p))  # words cut off by max_length: O
                    for p, g in zip(predict_tokens(model, data, device, self.ids["[PAD]"]), gold)]
            prf = entity_prf(gold, pred)
            prefix = "" if split == "test" else "dev_"
            for metric, v in zip(("precision", "recall", "f1"), prf):
                rows.append({"experiment": self.name, "seed": seed, "language": lang, "task": NER_TASK,
                             "metric": prefix + metric, "value": v})
            rows.append({"experiment": self.name, "seed": seed, "language": lang, "task": NER_TASK,
                         "metric": prefix + "skipped_verses", "value": skipped})
        rows.append({"experiment": self.name, "seed": seed, "language": src, "task": NER_TASK,
                     "metric": "finetune_seconds", "value": history["seconds"]})
        df = pd.DataFrame(rows, columns=RESULT_COLUMNS)
        atomic.write_bytes(path, df.to_csv(index=False).encode())
        return df

    def evaluate_sections_seed(self, seed: int, device="cpu", progress: bool = False,
                               step: int | None = None) -> pd.DataFrame:
        """Fine-tune seed `seed`'s encoder on the source train pairs; accuracy and macro-F1 on the source dev and
        on every test language (parallel test pairs); Table 11's mixed pairs for enfake-X cells. With `step`, the
        same for the encoder's snapshot after that many steps (`evaluate_snapshot`)."""
        path = self.dir / f"results_{seed}.csv" if step is None else self.curve_path(seed, step)
        if path.exists():
            return pd.read_csv(path, dtype={"experiment": str, "language": str})
        f = self.profile.finetune
        src = self.exp.finetune
        train = self.task_pairs(src, src, "train", max_pairs=f.max_train_pairs)
        dev = self.task_pairs(src, src, "dev", max_pairs=f.max_test_pairs)
        cfg = FinetuneConfig(lr=f.lr, batch_size=f.batch_size, epochs=f.epochs,
                             max_length=self.profile.pretrain.max_length, seed=seed)
        model, history = finetune(cfg, self.encoder(seed, step), train, len(SECTIONS), device=device, progress=progress)
        rows = []

        def add(language, split, data):
            pred = predict(model, data, device)
            acc, f1 = float((pred == data.labels).mean()), macro_f1(data.labels, pred, len(SECTIONS))
            values = [(f"{split}_accuracy" if split != "test" else "accuracy", acc),
                      (f"{split}_macro_f1" if split != "test" else "macro_f1", f1)]
            if split == "test":  # what a classifier at or below the majority class predicts (`prediction_shares`)
                values += prediction_shares(pred, len(SECTIONS))
            for metric, v in values:
                rows.append({"experiment": self.name, "seed": seed, "language": language, "task": TASK,
                             "metric": metric, "value": v})
        add(src, "dev", dev)
        keys = self.test_keys()
        for lang in self.exp.test:
            add(lang, "test", self.task_pairs(lang, lang, "test", keys=keys, max_pairs=f.max_test_pairs))
            if lang != src:
                add(lang, "dev", self.task_pairs(lang, lang, "dev", max_pairs=f.max_test_pairs))
        targets = [l for l in self.exp.test if l != src]
        if src == D.FAKE and len(targets) == 1 and targets[0] != "en":  # Table 11: premise > hypothesis
            t = targets[0]
            for a, b in ((src, t), (t, src)):
                acc, f1 = evaluate(model, self.task_pairs(a, b, "test", keys=keys, max_pairs=f.max_test_pairs),
                                   device, len(SECTIONS))
                rows.append({"experiment": self.name, "seed": seed, "language": f"{a}>{b}", "task": TASK,
                             "metric": "accuracy", "value": acc})
        rows.append({"experiment": self.name, "seed": seed, "language": src, "task": TASK,
                     "metric": "finetune_seconds", "value": history["seconds"]})
        df = pd.DataFrame(rows, columns=RESULT_COLUMNS)
        if step is not None:
            df["step"] = step
        atomic.write_bytes(path, df.to_csv(index=False).encode())
        return df

    def mixed_languages(self) -> list[tuple[str, str]]:
        """Table 11's mixed pairs on the adjacency task: (first verse's language, second's), the source with each
        target, both orders."""
        src = self.exp.finetune
        return [(a, b) for t in self.exp.test if t != src for a, b in ((src, t), (t, src))]

    def adjacency_results_path(self, seed: int) -> Path:
        """results_adjacency-<key of the task's version>_<seed>.csv (a changed task gets new files)."""
        key = run_key({"task": ADJACENCY_TASK, "version": ADJACENCY_VERSION})[:8]
        return self.dir / f"results_adjacency-{key}_{seed}.csv"

    def evaluate_adjacency_seed(self, seed: int, device="cpu", progress: bool = False) -> pd.DataFrame:
        """Fine-tune seed `seed`'s encoder on the source's adjacency pairs (the section task's recipe, 2 labels);
        metric ``adjacency_accuracy`` on every test language's test pairs (parallel keys, as the section task's) and
        on Table 11's mixed pairs (``<first>><second>`` languages, both orders), ``dev_adjacency_accuracy`` on the
        source's dev pairs, and the fine-tuning's seconds."""
        from xlrepro.tasks.adjacency import LABELS
        path = self.adjacency_results_path(seed)
        if path.exists():
            return pd.read_csv(path, dtype={"experiment": str, "language": str})
        f, src = self.profile.finetune, self.exp.finetune
        train = self.task_pairs(src, src, "train", max_pairs=f.max_train_pairs, task=ADJACENCY_TASK)
        dev = self.task_pairs(src, src, "dev", max_pairs=f.max_test_pairs, task=ADJACENCY_TASK)
        cfg = FinetuneConfig(lr=f.lr, batch_size=f.batch_size, epochs=f.epochs,
                             max_length=self.profile.pretrain.max_length, seed=seed)
        model, history = finetune(cfg, self.encoder(seed), train, len(LABELS), device=device, progress=progress)
        keys = self.test_keys()
        row = lambda language, metric, value: {"experiment": self.name, "seed": seed,  # noqa: E731
                                               "language": language, "task": ADJACENCY_TASK, "metric": metric,
                                               "value": value}
        rows = [row(src, "dev_adjacency_accuracy", evaluate(model, dev, device, len(LABELS))[0])]
        for a, b in [(l, l) for l in self.exp.test] + self.mixed_languages():
            data = self.task_pairs(a, b, "test", keys=keys, max_pairs=f.max_test_pairs, task=ADJACENCY_TASK)
            rows.append(row(a if a == b else f"{a}>{b}", "adjacency_accuracy",
                            evaluate(model, data, device, len(LABELS))[0]))
        rows.append(row(src, "finetune_seconds", history["seconds"]))
        df = pd.DataFrame(rows, columns=RESULT_COLUMNS)
        atomic.write_bytes(path, df.to_csv(index=False).encode())
        return df

    def majority(self) -> pd.DataFrame:
        """The majority-class baseline (source train majority) on each test language's test pairs and on dev; for a
        cell evaluated on the adjacency task also that task's (50 %) on each test language's pairs and Table 11's
        mixed pairs."""
        f = self.profile.finetune
        train = verse_pairs(D.base_language(self.exp.finetune), "train", self.cache_dir, max_pairs=f.max_train_pairs)
        keys = self.test_keys()
        rows = []
        for lang in self.exp.test:
            base = D.base_language(lang)
            for split, metric, k in (("test", "accuracy", keys), ("dev", "dev_accuracy", None)):
                test = verse_pairs(base, split, self.cache_dir, max_pairs=f.max_test_pairs, keys=k)
                rows.append({"experiment": "majority", "seed": -1, "language": lang, "task": TASK, "metric": metric,
                             "value": majority_baseline(train["label"], test["label"])})
        if ADJACENCY_TASK in self.exp.tasks:  # 0.5 by construction (each positive has its negative); measured
            from xlrepro.tasks.adjacency import adjacency_pairs
            labels = adjacency_pairs(D.base_language(self.exp.finetune), "train", self.cache_dir,
                                     max_pairs=f.max_train_pairs)
            for lang in list(self.exp.test) + [f"{a}>{b}" for a, b in self.mixed_languages()]:
                test = adjacency_pairs(D.base_language(lang.split(">")[0]), "test", self.cache_dir,
                                       max_pairs=f.max_test_pairs, keys=keys)
                rows.append({"experiment": "majority", "seed": -1, "language": lang, "task": ADJACENCY_TASK,
                             "metric": "adjacency_accuracy", "value": majority_baseline(labels["label"],
                                                                                        test["label"])})
        return pd.DataFrame(rows, columns=RESULT_COLUMNS)

    def run(self, device="cpu", time_limit: float | None = None, progress: bool = True) -> pd.DataFrame | None:
        t0 = time.time()
        if not self.pretrain(device, time_limit, progress):
            return None
        frames = []
        for seed in self.seeds:
            if time_limit is not None and time.time() - t0 > time_limit and not self.evaluated(seed):
                return None
            frames.append(self.evaluate_seed(seed, device, progress))
        return pd.concat(frames, ignore_index=True)


GATE_MARGIN = 0.05  # the pilot gate: a target this far above the majority class on dev transfers


def pilot_gate(results: pd.DataFrame, margin: float = GATE_MARGIN) -> pd.DataFrame:
    """The pilot's check on dev: each experiment's target dev accuracy (mean over seeds) minus the majority's."""
    rows = []
    for name in results["experiment"].unique():
        if name.startswith("majority"):
            continue
        r = results[(results["experiment"] == name) & (results["metric"] == "dev_accuracy")]
        m = results[(results["experiment"] == f"majority/{name}") & (results["metric"] == "dev_accuracy")]
        for lang in r["language"].unique():
            if lang in ("en", D.FAKE):
                continue
            acc, base = r[r["language"] == lang]["value"].mean(), m[m["language"] == lang]["value"].mean()
            rows.append({"experiment": name, "language": lang, "dev_accuracy": acc, "majority": base,
                         "margin": acc - base, "passes": bool(acc - base >= margin)})
    return pd.DataFrame(rows)
