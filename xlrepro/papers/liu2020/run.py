"""`xlrepro train liu2020 --part static|bert|all`: the plan's runs, each cached, each resumable.

Run it again after a time limit: finished runs are skipped, an interrupted BERT resumes from its checkpoint.
"""
from __future__ import annotations

import time
from typing import Sequence

BERT_MODELS = ("small-w512", "small-w20", "big-w512", "big-w20")
TRAIN_COMMAND = "xlrepro train liu2020 --part bert"


def bert_configs(plan=None, **overrides):
    from .bert import BASE, BertRunConfig
    from .plan import load_plan

    plan = plan or load_plan()
    b = plan.bert
    model = overrides.pop("model", None) or BASE.__class__(**{**vars(BASE), "lr": b.lr})
    return {f"{s}-w{w}": BertRunConfig(size=s, window=w, model=model, steps=b.steps,
                                       tokens_per_step=b.tokens_per_step, warmup=b.warmup, seed=b.seed, **overrides)
            for s in ("small", "big") for w in (512, 20)}


def train_part(part: str, device: str = "cpu", models: Sequence[str] | None = None,
               time_limit: float | None = None) -> str:
    from .plan import load_plan, static_config
    from .static import run_dir, train_static

    t0 = time.time()
    plan = load_plan()
    done = []

    def left():
        return None if time_limit is None else time_limit - (time.time() - t0)

    if part in ("static", "all"):
        for run in plan.static:
            cfg = static_config(run)
            if left() is not None and left() <= 0:
                return "; ".join(done + ["time limit reached: run the command again"])
            if cfg.model == "glove" and device == "cpu" and not (run_dir(cfg) / "training.json").exists():
                done.append(f"glove-{cfg.size}: skipped on the CPU (minutes per pass; use --device cuda)")
                continue
            train_static(cfg, device=device)
            done.append(f"{cfg.model}-{cfg.size}-w{cfg.window}: {run_dir(cfg)}")
    if part in ("bert", "all"):
        from .bert import pretrain_bert
        for name, cfg in bert_configs(plan).items():
            if models and name not in models:
                continue
            if left() is not None and left() <= 0:
                return "; ".join(done + ["time limit reached: run the command again"])
            out = pretrain_bert(cfg, device=device, time_limit=left(), progress=False)
            finished = (out / "training.json").exists()
            done.append(f"{name}: {'finished' if finished else 'checkpointed, run the command again'} ({out})")
            if not finished:
                break
    return "; ".join(done)


def missing_training(chapter: str, parameters: dict) -> str | None:
    """The chapters train nothing large themselves: Word2Vec runs train in minutes on a CPU where missing; GloVe
    and the BERTs are read if present and otherwise shown as pending."""
    return None


def evaluate_bert_retrieval(names: Sequence[str], dictionaries, plan, tokenizer, device: str | None = None):
    """MRR at every layer for the trained BERTs `names`: word vectors averaged over their contexts in the small
    corpus (at most plan.contexts.max_contexts each), the same dictionaries as the static models."""
    import pandas as pd

    from xlrepro.devices import default_device

    from .bert import load_bert, word_vectors
    from .corpora import tokenized_corpus
    from .lab import bert_retrieval

    device = device or default_device()
    langs = ["en", *dictionaries]
    corpus = tokenized_corpus("small", langs, tokenizer=tokenizer)
    streams = {l: [[tokenizer.token_to_id(t) for t in s] for s in v] for l, v in corpus.items()}
    words = {"en": {tokenizer.token_to_id(s) for p in dictionaries.values() for s, _ in p}}
    words.update({l: {tokenizer.token_to_id(t) for _, t in p} for l, p in dictionaries.items()})
    configs = bert_configs(plan)
    frames = []
    for name in names:
        model, _ = load_bert(configs[name].folder())
        vec = word_vectors(model.bert.to(device), streams, words, window=plan.contexts.window,
                           max_contexts=plan.contexts.max_contexts, device=device)
        frames.append(bert_retrieval(f"bert-{name}", vec, dictionaries, tokenizer, plan))
    return pd.concat(frames, ignore_index=True)


def evaluate_pos(dictionaries, plan, tokenizer):
    raise NotImplementedError("MRR by part of speech on the trained BERT: written with the GPU results "
                              "(pos.most_frequent_tags + evaluate_bert_retrieval per class)")


def evaluate_language_information(plan, tokenizer):
    raise NotImplementedError("L §4 on the trained BERT: written with the GPU results (mds.language_means, "
                              "mds.mds_hook, convert_rate, bleu1 over plan.mds)")
