"""`xlrepro train liu2020 --part static|bert|all`: the plan's runs, each cached, each resumable.

Run it again after a time limit: finished runs are skipped, an interrupted BERT resumes from its checkpoint.
"""
from __future__ import annotations

import time
from typing import Sequence

from .models import BERT_MODELS, bert_configs  # noqa: F401  (read as run.BERT_MODELS, run.bert_configs)

TRAIN_COMMAND = "xlrepro train liu2020 --part bert"


def train_part(part: str, device: str = "cpu", models: Sequence[str] | None = None,
               time_limit: float | None = None, smoke: bool = False) -> str:
    """part: static (Word2Vec and GloVe runs of the plan), glove (GloVe only), word2vec (the Word2Vec runs the
    zero-shot evaluation reads: `evaluate.static_runs`), bert (the four BERTs), all.
    smoke: the tiny BERTs of `evaluate.smoke_setup` (CPU tests; their own runs folder)."""
    from .plan import load_plan, static_config
    from .static import run_dir, train_static

    t0 = time.time()
    plan = load_plan()
    done = []
    if smoke:
        from .bert import pretrain_bert
        from .evaluate import smoke_setup
        setup = smoke_setup()
        for name, cfg in bert_configs(setup.plan, **setup.model_overrides).items():
            if not models or name in models:
                out = pretrain_bert(cfg, device=device, root=setup.bert_root, progress=False,
                                    languages=setup.languages, time_limit=time_limit)
                done.append(f"{name}: {out}")
        return "; ".join(done)

    def left():
        return None if time_limit is None else time_limit - (time.time() - t0)

    if part in ("static", "glove", "word2vec", "all"):
        from .evaluate import ZERO_SHOT_WINDOWS
        for run in plan.static:
            if part == "glove" and run.model != "glove":
                continue
            if part == "word2vec" and (run.model != "word2vec" or run.window not in ZERO_SHOT_WINDOWS):
                continue
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
        configs = bert_configs(plan)
        for name in models or configs:  # in the order asked for (a node trains the most-read model first)
            cfg = configs[name]
            if left() is not None and left() <= 0:
                return "; ".join(done + ["time limit reached: run the command again"])
            out = pretrain_bert(cfg, device=device, time_limit=left(), progress=False)
            finished = (out / "training.json").exists()
            done.append(f"{name}: {'finished' if finished else 'checkpointed, run the command again'} ({out})")
            if not finished:
                break
    return "; ".join(done)


def evaluate_part(device: str = "cpu", time_limit: float | None = None, smoke: bool = False) -> str:
    """`xlrepro train liu2020 --part evaluate`: every evaluation that reads the BERTs' weights (`evaluate.main`, one
    process, every task), into the folder the chapters read (runs/liu2020/lab/gpu-results; smoke: its own), with
    the training records the chapters' run tables show: each BERT's config.json and training.json, and those of the
    static runs trained on a GPU, under `training/`. Resumable: finished tasks are skipped."""
    import json
    import shutil

    from xlrepro.paths import runs_dir

    from .evaluate import bert_folder, full_setup, smoke_setup
    from .evaluate import main as evaluate_main

    setup = smoke_setup() if smoke else full_setup()
    # the folder `report.gpu_results_dir` names (report imports this module, so not the other way round)
    out = runs_dir() / "liu2020" / ("smoke" if smoke else "lab") / "gpu-results"
    for name in bert_configs(setup.plan, **setup.model_overrides):
        for f in ("config.json", "training.json"):
            src = bert_folder(setup, name) / f
            if src.exists():
                (out / "training" / name).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, out / "training" / name / f)
    for f in sorted((runs_dir() / "liu2020" / "lab" / "static").glob("*/training.json")) if not smoke else []:
        if str(json.loads(f.read_text()).get("device", "")).startswith("cuda"):
            dst = out / "training" / "static" / f.parent.name
            dst.mkdir(parents=True, exist_ok=True)
            for g in (f, f.parent / "config.json"):
                if g.exists():
                    shutil.copyfile(g, dst / g.name)
    start = time.time()
    evaluate_main(["--out", str(out), "--device", device,
                   *(["--time-limit", str(time_limit)] if time_limit is not None else []),
                   *(["--smoke"] if smoke else [])])
    import torch

    from xlrepro import atomic
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if device != "cpu" else []
    atomic.write_json(out / f"wall-evaluate-{int(start)}.json",  # one record per run (`report.wall_records`)
                      {"phase": "evaluate", "wall_seconds": int(time.time() - start), "exit_code": 0, "gpus": gpus})
    return f"evaluations in {out}"


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


def evaluate_pos(words_rr, tags, experiment: str | None = None):
    """MRR by part of speech (S Table 1) from the per-word reciprocal ranks the GPU evaluation writes
    (`retrieval/<model>-words.csv`: experiment, language, word, rr) and `tags` {english word: tag}
    (`pos.most_frequent_tags`). Long frame: experiment "<experiment>/<class>", metric mrr and words, per language
    and "avg" (the mean over languages of the per-language MRR, as the paper's avg column). Words without a tag
    are left out (counted in metric "untagged")."""
    import numpy as np
    import pandas as pd

    from .pos import CLASSES, classes_of

    df = words_rr if experiment is None else words_rr[words_rr["experiment"] == experiment]
    if df.empty:
        raise ValueError(f"no per-word reciprocal ranks for {experiment!r}; experiments: "
                         f"{', '.join(sorted(words_rr['experiment'].unique()))}")
    rows = []
    for (exp, lang), g in df.groupby(["experiment", "language"], sort=True):
        by_class: dict[str, list[float]] = {c: [] for c in CLASSES}
        untagged = 0
        for w, rr in zip(g["word"], g["rr"]):
            if w not in tags:
                untagged += 1
                continue
            for c in classes_of(tags[w]):
                by_class[c].append(rr)
        for c in CLASSES:
            base = {"experiment": f"{exp}/{c}", "seed": -1, "language": lang}
            rows += [{**base, "metric": "mrr", "value": float(np.mean(by_class[c])) if by_class[c] else np.nan},
                     {**base, "metric": "words", "value": len(by_class[c])}]
        rows.append({"experiment": exp, "seed": -1, "language": lang, "metric": "untagged", "value": untagged})
    out = pd.DataFrame(rows)
    mrr = out[out["metric"] == "mrr"]
    avg = mrr.groupby("experiment", sort=False)["value"].mean().reset_index().assign(
        seed=-1, language="avg", metric="mrr")
    return pd.concat([out, avg[out.columns]], ignore_index=True)


def evaluate_language_information(results_dir, model: str = "big-w512"):
    """L §4 frames from the GPU evaluation's files in `results_dir/language/` (see `evaluate.run_language`):
    {"language_id", "mds_grid", "vocabulary", "samples"}; None where the files are absent.

    language_id: experiment bert-<model>, metric language_id_accuracy, per language and layer (0 = embeddings).
    mds_grid (the claims' shape): experiment = alpha ("-1.0", "0.0", ..., "3.0"), language = direction ("en-de"),
    layer 1..L, metric convert_rate | bleu1."""
    import json
    from pathlib import Path

    import pandas as pd

    folder = Path(results_dir) / "language"
    if not (folder / f"{model}.json").exists():
        return None
    ident = pd.read_csv(folder / f"{model}-language-id.csv")
    return {"language_id": ident.rename(columns={"mean": "value"}).assign(
                experiment=f"bert-{model}", seed=-1, metric="language_id_accuracy")[
                    ["experiment", "seed", "metric", "value", "language", "layer"]],
            "mds_grid": mds_long(pd.read_csv(folder / f"{model}.csv")),
            "vocabulary": pd.read_csv(folder / f"{model}-vocabulary.csv"),
            "samples": json.loads((folder / f"{model}-samples.json").read_text(encoding="utf-8"))}


def mds_long(grid):
    """`evaluate.run_language`'s grid (direction, layer, alpha, metric, value) in the results contract: experiment =
    the alpha written as a float ("3.0"), language = the direction, seed -1 (one model, no seed noise)."""
    return grid.assign(experiment=grid["alpha"].astype(float).map(str), language=grid["direction"], seed=-1)[
        ["experiment", "seed", "metric", "value", "language", "layer"]]
