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
