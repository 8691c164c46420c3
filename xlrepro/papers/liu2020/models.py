"""The four BERTs of the plan (sizes small/big, windows 512/20) and their run configs.

Read by `run` (training) and `evaluate` (the evaluation tasks); kept apart so neither imports the other back.
"""
from __future__ import annotations

BERT_MODELS = ("small-w512", "small-w20", "big-w512", "big-w20")


def bert_configs(plan=None, **overrides):
    from .bert import BASE, BertRunConfig
    from .plan import load_plan

    plan = plan or load_plan()
    b = plan.bert
    shape = {"hidden": b.hidden, "layers": b.layers, "heads": b.heads, "ffn": b.ffn}
    name = BASE.name if all(shape[k] == getattr(BASE, k) for k in shape) else f"{b.layers}x{b.hidden}"
    model = overrides.pop("model", None) or BASE.__class__(**{**vars(BASE), **shape, "name": name, "lr": b.lr})
    return {f"{s}-w{w}": BertRunConfig(size=s, window=w, model=model, steps=b.steps,
                                       tokens_per_step=b.tokens_per_step, warmup=b.warmup, seed=b.seed,
                                       **{"compile": b.compile, **overrides})
            for s in ("small", "big") for w in (512, 20)}
