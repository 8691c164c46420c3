"""Every BERT evaluation of the Liu et al. 2020 chapters, as tasks that run where the models are (the GPU node).

Model weights never leave the node, so the node runs all of it and writes small files into one folder (`--out`),
one file set per task, written atomically (a task cut off by the time limit leaves nothing; run again to go on):

    retrieval/<model>.csv          MRR with bootstrap interval at every layer, per language (S Figs 1, 3; L Figs 1, 3, 5)
    retrieval/<model>-words.csv    reciprocal rank of every English dictionary word at the last layer (S Table 1)
    transfer/<model>-all-s<seed>.json       zero-shot accuracy per test language (L Figs 2, 4, 6)
    transfer/big-w512-freeze<k>-s<seed>.json  bottom half frozen; accuracy per language and MDS alpha, dev and
                                              test (L Table 4)
    transfer/<static run>-s<seed>.json      frozen static embeddings + BiLSTM encoder (L Figs 2, 4)
    retrieval/glove-<size>.csv     GloVe's MRR (its vectors stay on the node, like the BERTs') (S Fig 1)
    language/big-w512-*.csv / .json         language identification per layer, MDS grid (convert rate, BLEU-1),
                                            vocabulary sizes, sample outputs (L §4, Tables 1-3, Figs 7-8)

    python -m xlrepro.papers.liu2020.evaluate --out DIR --shard i/4 --device cuda:i --time-limit 480

Shards split the task list by estimated cost (`shard_tasks`); a finished task is skipped. The sizes are the plan's
(`experiments.yaml`, `evaluate:` and `transfer:`), capped so that all of it fits a few GPU calls: on two H200s it
took two calls (511 s and 310 s), L §4 on big-w512 alone 343 s, a fine-tuning 26-39 s.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from xlrepro import atomic
from xlrepro.config import ConfigError, ModelSize

from .corpora import LANGUAGES
from .models import BERT_MODELS


@dataclass(frozen=True)
class Task:
    kind: str  # retrieval | transfer | table4 | language | static | static_retrieval | loss
    model: str  # a BERT name or a static run name
    seed: int = -1
    cost: float = 1.0

    @property
    def name(self) -> str:
        if self.kind in ("retrieval", "static_retrieval"):
            return f"retrieval/{self.model}"
        if self.kind == "language":
            return f"language/{self.model}"
        if self.kind == "loss":
            return f"loss/{self.model}"
        if self.kind == "table4":
            return f"transfer/{self.model}-half-s{self.seed}"
        if self.kind == "static":
            return f"transfer/{self.model}-s{self.seed}"
        return f"transfer/{self.model}-all-s{self.seed}"

    def done_file(self, out: Path) -> Path:
        return out / (self.name + (".csv" if self.kind in ("retrieval", "static_retrieval", "loss") else ".json"))


@dataclass
class Setup:
    """What the tasks read: the plan, the languages, the BERT configs and where they live, the smoke caps."""
    plan: object
    languages: tuple[str, ...]
    bert_root: Path | None  # None: runs/liu2020/lab/bert
    model_overrides: dict
    max_chapters: int | None
    smoke: bool


def smoke_setup() -> Setup:
    """A tiny version of everything (CPU tests): 4 languages, 2 small chapters, a 2-layer 32-wide BERT."""
    from dataclasses import replace

    from xlrepro.paths import runs_dir

    from .plan import load_plan

    plan = load_plan()
    plan = replace(plan, bert=replace(plan.bert, steps=4, tokens_per_step=1024, compile=False),
                   contexts=replace(plan.contexts, max_contexts=5),
                   mds=replace(plan.mds, alphas=(0.0, 1.0), directions=("en-fr", "fr-en"), sentences=6),
                   transfer=replace(plan.transfer, seeds=(0,), epochs=1, lstm_hidden=8, bert_epochs=1,
                                    max_train_pairs=48, max_dev_pairs=12, max_test_pairs=12),
                   evaluate=replace(plan.evaluate, language_sentences=12),
                   bootstrap=replace(plan.bootstrap, n_resamples=50),
                   dictionary=replace(plan.dictionary, min_count=2, max_words=40))
    tiny = ModelSize(name="smoke", hidden=32, layers=2, heads=2, ffn=64, lr=1e-3)
    return Setup(plan, ("en", "fr", "de", "zh"), runs_dir() / "liu2020" / "smoke" / "bert", {"model": tiny,
                 "max_chapters": 2}, 2, True)


def full_setup() -> Setup:
    from .plan import load_plan
    return Setup(load_plan(), LANGUAGES, None, {}, None, False)


def bert_config(setup: Setup, name: str):
    from .models import bert_configs
    return bert_configs(setup.plan, **setup.model_overrides)[name]


def bert_folder(setup: Setup, name: str) -> Path:
    return bert_config(setup, name).folder(setup.bert_root)


ZERO_SHOT_WINDOWS = (5, 10)  # the static runs' default windows (Word2Vec 5, GloVe 10): the zero-shot figures' runs


def static_runs(setup: Setup) -> list:
    """The static runs of the zero-shot figures (the plan's default windows, both sizes)."""
    return [r for r in setup.plan.static if r.window in ZERO_SHOT_WINDOWS]


def tasks(setup: Setup) -> list[Task]:
    seeds = setup.plan.transfer.seeds
    from .lab import static_name
    out = [Task("language", "big-w512", cost=3.0)]
    out += [Task("table4", "big-w512", s, cost=2.5) for s in seeds]
    out += [Task("retrieval", m, cost=1.5) for m in BERT_MODELS]
    out += [Task("loss", m, cost=0.5) for m in BERT_MODELS]
    out += [Task("transfer", m, s, cost=1.0) for m in BERT_MODELS for s in seeds]
    out += [Task("static", static_name(r), s, cost=0.5) for r in static_runs(setup) for s in seeds]
    # GloVe trains on the node and its vectors stay there: its word retrieval is scored there too
    out += [Task("static_retrieval", static_name(r), cost=0.3) for r in static_runs(setup) if r.model == "glove"]
    return out


def shard_tasks(all_tasks: Sequence[Task], shard: int, n_shards: int) -> list[Task]:
    """Greedy longest-first assignment to the least loaded shard (ties: the lowest shard): deterministic, so every
    process computes the same split."""
    if n_shards < 1 or not 0 <= shard < n_shards:
        raise ConfigError(f"shard {shard}/{n_shards}: need 0 <= shard < n_shards")
    load = [0.0] * n_shards
    mine = []
    for t in sorted(all_tasks, key=lambda t: -t.cost):  # sorted() is stable: ties keep the list's order
        k = min(range(n_shards), key=lambda i: (load[i], i))
        load[k] += t.cost
        if k == shard:
            mine.append(t)
    return mine


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(path, text.encode("utf-8"))


# ---- shared data ------------------------------------------------------------------------------------------------

class Data:
    """Lazily loaded inputs shared by the tasks of one process. make_dictionaries: build the test dictionaries
    where none are cached (from the installed dictionaries or the cache's prepared packs) instead of stopping."""

    def __init__(self, setup: Setup, make_dictionaries: bool = False):
        from xlrepro.data.mbert_vocab import mbert_tokenizer
        self.setup, self.tok = setup, mbert_tokenizer()
        self.make_dictionaries = make_dictionaries
        self._cache: dict = {}

    def once(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def corpus(self, size: str):
        from .corpora import tokenized_corpus
        return self.once(("corpus", size), lambda: tokenized_corpus(size, self.setup.languages, tokenizer=self.tok,
                                                                    max_chapters=self.setup.max_chapters))

    def dictionaries(self):
        def make():
            from .lab import cached_dictionaries, corpus_counts
            counts = corpus_counts(self.corpus("small"))
            langs = [l for l in self.setup.languages if l != "en"]
            from xlrepro.paths import runs_dir
            cached = runs_dir() / "liu2020" / "lab" / "dictionaries"
            if not self.setup.smoke and not self.make_dictionaries and not any(cached.glob("*.json")):
                raise ConfigError(f"no cached test dictionaries in {cached}: carry runs/liu2020/lab/dictionaries "
                                  "(made by the static_vs_bert chapter) to this machine")
            if self.setup.smoke:  # no dictionary files in the tests: shared tokens stand in (smoke only)
                return smoke_dictionaries(counts, self.tok, langs, self.setup.plan.dictionary.min_count)
            return cached_dictionaries(self.setup.plan, counts, self.tok, langs)[0]
        return self.once("dictionaries", make)

    def pairs(self, lang: str, split: str):
        from xlrepro.tasks.sections import parallel_keys, verse_pairs
        t = self.setup.plan.transfer
        if split == "test":
            keys = self.once("test_keys", lambda: parallel_keys(self.setup.languages, "test"))
            return self.once(("pairs", lang, split), lambda: verse_pairs(lang, "test", keys=keys,
                                                                         max_pairs=t.max_test_pairs))
        cap = t.max_train_pairs if split == "train" else t.max_dev_pairs
        return self.once(("pairs", lang, split), lambda: verse_pairs(lang, split, max_pairs=cap))

    def encoded(self, lang: str, split: str):
        from xlrepro.training.finetune import encode_pairs
        return self.once(("enc", lang, split), lambda: encode_pairs(self.tok, self.pairs(lang, split), 128))

    def verses(self, lang: str, split: str) -> pd.DataFrame:
        """book, chapter, verse, text of `lang`'s split (quotes made ASCII)."""
        from xlrepro.data.multilingual import load_verses

        from .corpora import ascii_quotes
        def make():
            df = load_verses(lang, split)[["book", "chapter", "verse", "text"]].copy()
            df["text"] = df["text"].map(ascii_quotes)
            return df
        return self.once(("verses", lang, split), make)


def smoke_dictionaries(counts, tokenizer, langs, min_count: int) -> dict[str, list[tuple[str, str]]]:
    """Smoke runs only: (w, w) for single-token words frequent in English and the target (names, numbers)."""
    from .retrieval import single_token_words
    out = {}
    for lang in langs:
        common = [w for w, c in counts["en"].most_common() if c >= min_count and counts[lang][w] >= min_count]
        words = sorted(single_token_words(common, tokenizer))[:20]
        if len(words) < 2:
            raise ConfigError(f"smoke corpus too small: {lang} shares fewer than 2 tokens with en")
        out[lang] = [(w, w) for w in words]
    return out


def hashed_subset(keys: Sequence, n: int, salt: str) -> list:
    """The n keys with the smallest SHA-256 of (salt, key), in their given order (uniform and deterministic)."""
    h = {k: hashlib.sha256(f"{salt}:{k}".encode()).digest() for k in keys}
    keep = set(sorted(keys, key=lambda k: h[k])[:n])
    return [k for k in keys if k in keep]


# ---- tasks ------------------------------------------------------------------------------------------------------

def load_model(setup: Setup, name: str, device):
    from .bert import load_bert
    model, _ = load_bert(bert_folder(setup, name))
    return model.to(device)


def retrieval_rows(bert, data: Data, device, experiment: str) -> tuple[list[dict], list[dict]]:
    """Word retrieval of one BERT encoder (`model.bert`) on the chapters' test dictionaries: (MRR rows with
    bootstrap intervals at every layer, per language; every source word's reciprocal rank at the last layer).
    The chapters' evaluation (`run_retrieval`) and the learning curves of `pilot` both score through it."""
    from .bert import word_vectors
    from .lab import mrr_rows
    from .retrieval import word_retrieval

    plan, tok = data.setup.plan, data.tok
    dictionaries = data.dictionaries()
    corpus = data.corpus("small")
    langs = ["en", *dictionaries]
    streams = {l: [[tok.token_to_id(t) for t in s] for s in corpus[l]] for l in langs}
    words = {"en": {tok.token_to_id(s) for p in dictionaries.values() for s, _ in p}}
    words.update({l: {tok.token_to_id(t) for _, t in p} for l, p in dictionaries.items()})
    vec = word_vectors(bert, streams, words, window=plan.contexts.window,
                       max_contexts=plan.contexts.max_contexts, device=device)
    rows, word_rows = [], []
    for lang, pairs in dictionaries.items():
        n_layers = next(iter(vec["en"].values())).shape[0]
        for layer in range(n_layers):
            src = list(dict.fromkeys(s for s, _ in pairs))
            table = {("s", w): vec["en"][tok.token_to_id(w)] for w in src}
            table.update({("t", t): vec[lang][tok.token_to_id(t)] for _, t in pairs})
            tagged = [(("s", s), ("t", t)) for s, t in pairs]
            ws, rr = word_retrieval(tagged, lambda keys, layer=layer: np.stack([table[k][layer].numpy() for k in keys]))
            rows += mrr_rows(experiment, lang, rr, plan, layer=layer)
            if layer == n_layers - 1:
                word_rows += [{"experiment": experiment, "language": lang, "word": w[1], "rr": r}
                              for w, r in zip(ws, rr)]
    return rows, word_rows


def run_retrieval(task: Task, data: Data, device, out: Path) -> None:
    """MRR per layer with bootstrap intervals, and every source word's reciprocal rank at the last layer."""
    model = load_model(data.setup, task.model, device)
    rows, word_rows = retrieval_rows(model.bert, data, device, f"bert-{task.model}")
    folder = out / "retrieval"
    write_text(folder / f"{task.model}-words.csv", pd.DataFrame(word_rows).to_csv(index=False))
    write_text(task.done_file(out), pd.DataFrame(rows).to_csv(index=False))


def finetune_config(setup: Setup, seed: int, freeze: int | None):
    from xlrepro.training.finetune import FinetuneConfig
    t = setup.plan.transfer
    return FinetuneConfig(lr=t.bert_lr, epochs=t.bert_epochs, batch_size=t.batch_size, seed=seed, freeze=freeze)


def run_transfer(task: Task, data: Data, device, out: Path) -> None:
    """Fine-tune on English (all layers), test zero-shot on every language."""
    from xlrepro.tasks.sections import SECTIONS
    from xlrepro.training.finetune import evaluate, finetune

    model = load_model(data.setup, task.model, device)
    config = finetune_config(data.setup, task.seed, None)
    clf, history = finetune(config, model, data.encoded("en", "train"), len(SECTIONS), device=device, progress=False)
    acc = {l: evaluate(clf, data.encoded(l, "test"), device, len(SECTIONS))[0] for l in data.setup.languages}
    atomic.write_json(task.done_file(out), {"model": task.model, "mode": "all", "seed": task.seed,
                                            "config": config.to_json(), "accuracy": acc,
                                            "train_pairs": len(data.encoded("en", "train")),
                                            "test_pairs": len(data.encoded("en", "test")),
                                            "seconds": history["seconds"]})


def sentence_batches(tok, texts: Sequence[str], device, batch_size: int = 64, max_length: int = 128):
    """(input_ids [B, W], attention_mask [B, W]) batches of [CLS] text [SEP], cut to max_length pieces."""
    for b in range(0, len(texts), batch_size):
        enc = [e.ids[:max_length - 1] + [102] if len(e.ids) > max_length else e.ids
               for e in tok.encode_batch(list(texts[b:b + batch_size]))]
        W = max(map(len, enc))
        ids = torch.zeros(len(enc), W, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, e in enumerate(enc):
            ids[i, :len(e)] = torch.tensor(e)
            mask[i, :len(e)] = 1
        yield ids.to(device), mask.to(device)


def language_texts(data: Data, lang: str) -> list[str]:
    """The plan's number of dev verses of `lang` (a hashed, language-independent choice of keys)."""
    df = data.verses(lang, "dev")
    keys = list(zip(df["book"], df["chapter"], df["verse"]))
    keep = set(hashed_subset(keys, data.setup.plan.evaluate.language_sentences, "liu-lang"))
    return [t for k, t in zip(keys, df["text"]) if k in keep]


def means_of(bert, data: Data, device) -> dict[str, torch.Tensor]:
    """R_lang [L+1, H] from the first half of each language's verses (`language_texts`)."""
    from .mds import language_means
    out = {}
    for lang in data.setup.languages:
        texts = language_texts(data, lang)
        out[lang] = language_means(bert, sentence_batches(data.tok, texts[:len(texts) // 2], device))[0].cpu()
    return out


def run_table4(task: Task, data: Data, device, out: Path) -> None:
    """L Table 4: fine-tune with the bottom half frozen (embeddings + layers 1..L/2), then add alpha (R_en −
    R_target) at layer L/2 at test time; accuracy per language and alpha on the target dev and test pairs
    (alpha is chosen per language on dev by `report.table4`)."""
    from xlrepro.tasks.sections import SECTIONS
    from xlrepro.training.finetune import evaluate, finetune

    from .mds import mds_hook

    model = load_model(data.setup, task.model, device).eval()
    half = model.config.num_hidden_layers // 2
    means = means_of(model.bert, data, device)
    config = finetune_config(data.setup, task.seed, half)
    clf, history = finetune(config, model, data.encoded("en", "train"), len(SECTIONS), device=device, progress=False)
    acc: dict = {}
    for lang in data.setup.languages:
        shift = (means["en"][half] - means[lang][half]).to(device)  # [H]
        alphas = data.setup.plan.mds.alphas if lang != "en" else (0.0,)
        acc[lang] = {}
        for alpha in alphas:
            with mds_hook(clf.encoder, half, shift, alpha):
                acc[lang][str(alpha)] = {s: evaluate(clf, data.encoded(lang, s), device, len(SECTIONS))[0]
                                         for s in ("dev", "test")}
    atomic.write_json(task.done_file(out), {"model": task.model, "mode": f"freeze-{half}", "layer": half,
                                            "seed": task.seed, "config": config.to_json(), "accuracy": acc,
                                            "seconds": history["seconds"]})


def static_vectors(task: Task, data: Data):
    """The vectors of the static run `task.model` (trained here in smoke runs); None where they are absent."""
    from .lab import static_name
    from .plan import static_config
    from .static import load_static, run_dir

    run = next(r for r in static_runs(data.setup) if static_name(r) == task.model)
    overrides = {"max_chapters": data.setup.max_chapters, "languages": data.setup.languages, "dim": 16,
                 "min_count": data.setup.plan.dictionary.min_count} \
        if data.setup.smoke else {}
    folder = run_dir(static_config(run, **overrides))
    if not (folder / "training.json").exists():
        if not data.setup.smoke:
            print(f"{task.name}: no vectors in {folder}; skipped")
            return None
        from .static import train_static
        train_static(static_config(run, **overrides), data.corpus(run.size))
    return load_static(folder)


def run_static_retrieval(task: Task, data: Data, device, out: Path) -> None:
    """Word retrieval MRR of a static run whose vectors are on this machine (GloVe), the chapters' dictionaries
    and bootstrap (`lab.static_retrieval`); skipped (no file) where the vectors are absent."""
    from .lab import static_retrieval

    emb = static_vectors(task, data)
    if emb is not None:
        write_text(task.done_file(out), static_retrieval(task.model, emb, data.dictionaries(), data.setup.plan
                                                         ).to_csv(index=False))


def run_static(task: Task, data: Data, device, out: Path) -> None:
    """Zero-shot transfer through frozen static embeddings (BiLSTM encoder); skipped (no file) where the run's
    vectors are not on this machine."""
    from .transfer_static import train_static_classifier

    emb = static_vectors(task, data)
    if emb is None:
        return
    result = train_static_classifier(emb, data, task.seed, device)
    atomic.write_json(task.done_file(out), {"model": task.model, "mode": "static", "seed": task.seed, **result})


def run_language(task: Task, data: Data, device, out: Path) -> None:
    """L §4 on big-512: language identification per layer, the MDS grid, vocabulary sizes, sample outputs."""
    from .mds import bleu1, convert_rate, language_vocabulary, mds_hook, nearest_mean_language

    setup, tok = data.setup, data.tok
    model = load_model(setup, task.model, device).eval()
    bert, L = model.bert, model.config.num_hidden_layers
    folder = out / "language"
    # vocabularies of the big corpus (L Table 3)
    vocab = {l: language_vocabulary(s) for l, s in data.corpus("big").items()}
    write_text(folder / f"{task.model}-vocabulary.csv", pd.DataFrame(
        [{"language": l, "tokens": len(v), "shared_with_en": len(v & vocab["en"])} for l, v in vocab.items()]
    ).to_csv(index=False))
    # language identification: means from the first half of each language's verses, nearest mean on the second
    means = means_of(bert, data, device)
    rows = []
    with torch.no_grad():
        for lang in setup.languages:
            texts = language_texts(data, lang)
            for ids, mask in sentence_batches(tok, texts[len(texts) // 2:], device):
                hs = torch.stack(bert(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states)
                m = mask.float()[None, :, :, None]
                sent = ((hs * m).sum(2) / m.sum(2)).cpu()  # [L+1, B, H]
                for layer in range(L + 1):
                    pred = nearest_mean_language(sent[layer], {k: v[layer] for k, v in means.items()})
                    rows += [{"language": lang, "layer": layer, "correct": int(p == lang)} for p in pred]
    ident = pd.DataFrame(rows).groupby(["language", "layer"])["correct"].agg(["mean", "count"]).reset_index()
    write_text(folder / f"{task.model}-language-id.csv", ident.to_csv(index=False))
    # MDS grid
    grid, samples = [], {}
    directions = [d for d in setup.plan.mds.directions if all(x in setup.languages for x in d.split("-"))]
    for direction in directions:
        src, tgt = direction.split("-")
        a, b = data.verses(src, "test"), data.verses(tgt, "test")
        ka = dict(zip(zip(a["book"], a["chapter"], a["verse"]), a["text"]))
        kb = dict(zip(zip(b["book"], b["chapter"], b["verse"]), b["text"]))
        keys = hashed_subset(sorted(set(ka) & set(kb)), setup.plan.mds.sentences, "liu-mds")
        src_texts, refs = [ka[k] for k in keys], [tokenize(tok, kb[k]) for k in keys]
        best = None
        for layer in range(1, L + 1):
            shift = (means[tgt][layer] - means[src][layer]).to(device)
            for alpha in setup.plan.mds.alphas:
                hyps = mds_outputs(model, tok, src_texts, layer, shift, alpha, device)
                flat = [t for h in hyps for t in h]
                cr, bl = convert_rate(flat, vocab[src], vocab[tgt]), bleu1(hyps, refs)
                grid += [{"direction": direction, "layer": layer, "alpha": alpha, "metric": m, "value": v}
                         for m, v in (("convert_rate", cr), ("bleu1", bl))]
                if best is None or bl > best[0]:
                    best = (bl, layer, alpha, hyps)
        bl, layer, alpha, hyps = best
        samples[direction] = {"layer": layer, "alpha": alpha, "bleu1": bl, "sentences": len(keys), "samples": [
            {"source": s, "output": detokenize(h), "reference": kb[k]} for s, h, k in zip(src_texts, hyps, keys)][:3]}
    atomic.write_json(folder / f"{task.model}-samples.json", samples)
    write_text(task.done_file(out).with_suffix(".csv"), pd.DataFrame(grid).to_csv(index=False))
    atomic.write_json(task.done_file(out), {"model": task.model, "directions": directions,
                                            "sentences": setup.plan.mds.sentences,
                                            "language_sentences": setup.plan.evaluate.language_sentences})


def tokenize(tok, text: str) -> list[str]:
    return tok.encode(text, add_special_tokens=False).tokens


def detokenize(tokens: Sequence[str]) -> str:
    return " ".join(tokens).replace(" ##", "")


@torch.no_grad()
def mds_outputs(model, tok, texts: Sequence[str], layer: int, shift: torch.Tensor, alpha: float, device
                ) -> list[list[str]]:
    """The unmasked input's argmax tokens at every non-special position, with alpha * shift added at `layer`."""
    from .mds import mds_hook
    vocab = tok.get_vocab()
    inv = {i: t for t, i in vocab.items()}
    out = []
    with mds_hook(model.bert, layer, shift, alpha):
        for ids, mask in sentence_batches(tok, texts, device):
            with torch.autocast(torch.device(device).type, dtype=torch.bfloat16,
                                enabled=torch.device(device).type == "cuda"):
                pred = model(input_ids=ids, attention_mask=mask).logits.argmax(-1).cpu()
            for p, n in zip(pred, mask.sum(1).tolist()):
                out.append([inv[i] for i in p[1:n - 1].tolist()])
    return out


def run_loss(task: Task, data: Data, device, out: Path) -> None:
    """The trained model's MLM loss per language (nats per masked token, on a fixed sample of its training rows
    with fixed masks: `pilot.language_losses`) beside the language's unigram entropy over the same corpus: the
    pre-training gate reads how far below the unigram level each language got."""
    from xlrepro.data.mbert_vocab import mbert_tokenizer

    from .bert import encode_rows
    from .mlm_loss import PROBE_ROWS, language_losses, probe_batches, unigram_entropies
    config = bert_config(data.setup, task.model)
    langs = data.setup.languages
    tok = mbert_tokenizer()
    ids, lengths, starts = encode_rows(config.size, config.window, langs, config.max_chapters, tok)
    probes = probe_batches(ids, lengths, starts, langs, tok.token_to_id("[MASK]"), tok.get_vocab_size(),
                           config.mlm_probability, 2 if data.setup.smoke else PROBE_ROWS)
    model = load_model(data.setup, task.model, device).eval()
    losses = language_losses(model, probes, device)
    entropy = unigram_entropies(ids, lengths, starts, langs)
    rows = [{"experiment": f"bert-{task.model}", "metric": m, "language": l, "value": v}
            for m, d in (("mlm_loss", losses), ("unigram_entropy", entropy)) for l, v in d.items()]
    write_text(task.done_file(out), pd.DataFrame(rows).to_csv(index=False))


RUNNERS = {"retrieval": run_retrieval, "loss": run_loss, "transfer": run_transfer, "table4": run_table4, "language": run_language,
           "static": run_static, "static_retrieval": run_static_retrieval}


def evaluate(setup: Setup, out: Path, device: str = "cpu", shard: tuple[int, int] = (0, 1),
             time_limit: float | None = None, kinds: Sequence[str] | None = None) -> list[str]:
    """Run this shard's unfinished tasks (those whose models are trained); returns a line per task."""
    t0 = time.time()
    kinds = tuple(kinds or RUNNERS)
    for k in kinds:
        if k not in RUNNERS:
            raise ConfigError(f"unknown task kind {k!r}; valid choices: {', '.join(RUNNERS)}")
    try:
        import nltk.translate.bleu_score  # noqa: F401  (BLEU-1 of the MDS grid)
    except ImportError as e:
        raise ConfigError("the evaluation needs nltk (BLEU-1): install it (`make wheelhouse` without LITE)") from e
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    data = Data(setup)
    lines = []
    for task in shard_tasks([t for t in tasks(setup) if t.kind in kinds], *shard):
        if task.done_file(out).exists():
            lines.append(f"{task.name}: done before")
            continue
        if task.kind not in ("static", "static_retrieval") and not (bert_folder(setup, task.model) / "training.json").exists():
            lines.append(f"{task.name}: model {task.model} not trained; skipped")
            continue
        if time_limit is not None and time.time() - t0 > time_limit:
            lines.append(f"{task.name}: time limit reached; run again")
            continue
        t1 = time.time()
        RUNNERS[task.kind](task, data, device, out)
        lines.append(f"{task.name}: {time.time() - t1:.1f} s")
        print(lines[-1], flush=True)
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m xlrepro.papers.liu2020.evaluate", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="results folder (pack it to bring the results back)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--shard", default="0/1", help="i/n: this process's share of the tasks")
    p.add_argument("--time-limit", type=float, default=None, help="start no task after this many seconds")
    p.add_argument("--kinds", nargs="*", help=f"only these task kinds: {' '.join(RUNNERS)}")
    p.add_argument("--smoke", action="store_true", help="the tiny CPU version (tests)")
    a = p.parse_args(argv)
    try:
        i, n = (int(x) for x in a.shard.split("/"))
    except ValueError:
        raise ConfigError(f"--shard must be i/n, e.g. 0/4; got {a.shard!r}") from None
    from xlrepro.config import choose
    choose("device", a.device.split(":")[0], ("cpu", "cuda"))
    if a.time_limit is not None and a.time_limit <= 0:
        raise ConfigError(f"--time-limit must be positive; got {a.time_limit}")
    setup = smoke_setup() if a.smoke else full_setup()
    shard_tasks([], i, n)  # checks the shard
    t0 = time.time()
    lines = evaluate(setup, Path(a.out), a.device, (i, n), a.time_limit, a.kinds)
    atomic.write_json(Path(a.out) / "timing" / f"shard{i}.json", {"shard": a.shard, "device": a.device,
                                                                   "seconds": time.time() - t0, "tasks": lines})


if __name__ == "__main__":
    main()
