"""A pilot of Liu et al.'s base BERT (big corpus, window 512) with learning curves, before the tables are scaled.

At the published 2,000 steps big-w512 ended at an MLM loss of 5.56 nats against a unigram entropy of about 6.20
nats per language, and its word-retrieval MRR at its chance level. The pilot trains the same model for `--steps`
steps and records, in long format (experiment ``pilot-big-w512``, seed = the training seed):

- every 100 steps the training loss (metric ``train_loss``; the batch mixes the languages, so no language);
- at every `--eval-every` steps (step 0 and the last included):
  - word retrieval on the chapters' test dictionaries, scored by the chapters' own code
    (`evaluate.retrieval_rows`): ``mrr``, ``mrr_low``, ``mrr_high``, ``words`` per language and layer;
    ``mrr_best`` per language (at its best layer, named in ``layer``); ``mrr`` of language ``mean`` (the mean
    over the languages) at every layer, and ``mrr_mean_best`` / ``mrr_mean_last`` (the mean at the layer where
    it is highest / at the last layer);
  - the MLM loss per language (``mlm_loss``) on a fixed sample of each language's training rows with fixed
    masks (15 %, 80/10/10 as in training), beside the language's unigram entropy (``unigram_entropy``, nats per
    token of the big corpus: the loss of a model that knows only token frequencies);
  - the exact chance MRR per language (``chance_mrr``, `baselines.chance_mrr`) and the two gates, as counts of
    languages (language ``all``): ``gate_loss_languages`` (mlm_loss at least 2 nats below the unigram entropy)
    and ``gate_mrr_languages`` (best-layer MRR at least twice the chance MRR); ``train_seconds`` (training time
    so far, evaluations left out).

The model is the published big-w512 config (`run.bert_configs`) with only `steps` changed; warm-up (5 % of the
steps) and the linear decay to zero follow the new length, so a pilot of N steps is not the published run
continued: its first 2,000 steps differ from the published run's unless N = 2,000.

Resumable: the checkpoint and the model stay in `--work` (default <runs>/liu2020/lab/pilot/train); a checkpoint is
written at every evaluation point and at the time limit, and a later identical call goes on from it. `--out`
(default <runs>/liu2020/lab/pilot) receives curve.csv and pilot.json (steps done, seconds, device, tokens per step,
one record per call), rewritten atomically after every evaluation, so a run that is killed keeps its curve; the
curve so far is also kept in `--work`, so an `--out` that is empty on the next call (a fresh results folder) is
filled again. An evaluation that would not finish before the time limit is left to the next call.

    python -m xlrepro.papers.liu2020.pilot --steps 6000 --eval-every 600 --time-limit 500 --device cuda
    python -m xlrepro.papers.liu2020.pilot --steps 8 --eval-every 4 --smoke      # a tiny model on the CPU
"""
from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch

from xlrepro import atomic
from xlrepro.config import ConfigError, ModelSize
from xlrepro.training.mini_mbert import DEFAULT_SIZE

from .bert import BASE
from .mlm_loss import PROBE_ROWS, language_losses, probe_batches, unigram_entropies  # noqa: F401 (re-exported)

EXPERIMENT = "pilot-big-w512"
MODEL = "big-w512"
COLUMNS = ["experiment", "seed", "step", "metric", "value", "layer", "language"]
LOSS_EVERY = 100
SAVE_RESERVE_S = 15.0  # left for the last checkpoint write (the 768 x 12 model with its Adam state: ~2 GB)
GATE_LOSS_NATS = 2.0
GATE_MRR_FACTOR = 2.0
#: Model shapes of the pilot (a lever: the paper's BERT-base may not learn from the lab's corpus). "base" is the
#: published run's shape; "medium" and "mini" are smaller encoders with the mBERT vocabulary, "mini" being the
#: multilingual lab's mini-mBERT (`xlrepro.training.mini_mbert.DEFAULT_SIZE`). Learning rates: the usual peak of
#: each size (BERT-base 1e-4, as published; the smaller ones higher, as smaller BERTs are trained).
SHAPES: dict[str, ModelSize] = {
    "base": BASE,
    "medium": ModelSize(name="medium", hidden=512, layers=6, heads=8, ffn=2048, lr=2e-4),
    "mini": DEFAULT_SIZE,
}


def pilot_setup(smoke: bool):
    """(evaluation Setup, the BertRunConfig before `steps` is set): the chapters' full setup and published
    big-w512 config, or the smoke ones (4 languages, 2 chapters, a 2-layer 32-wide model on the CPU)."""
    from .evaluate import full_setup, smoke_setup
    from .run import bert_configs
    setup = smoke_setup() if smoke else full_setup()
    return setup, bert_configs(setup.plan, **setup.model_overrides)[MODEL]


def check_args(a) -> None:
    """Every argument checked before any work; errors name the valid choices."""
    from xlrepro.config import choose
    if a.steps < 1:
        raise ConfigError(f"--steps must be a positive number of optimizer steps; got {a.steps}")
    if a.eval_every is None:
        a.eval_every = max(1, math.ceil(a.steps / 10))
    if not 1 <= a.eval_every <= a.steps:
        raise ConfigError(f"--eval-every must be between 1 and --steps ({a.steps}); got {a.eval_every}")
    choose("--shape", a.shape, tuple(SHAPES))
    if a.lr is not None and not 0 < a.lr < 1:
        raise ConfigError(f"--lr must be a learning rate between 0 and 1; got {a.lr}")
    if a.time_limit is not None and a.time_limit <= 0:
        raise ConfigError(f"--time-limit must be a positive number of seconds; got {a.time_limit}")
    kind = a.device.split(":")[0]
    choose("device", kind, ("cpu", "cuda"))
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("--device cuda: no CUDA device here; valid choices: cpu")
        if ":" in a.device:
            i = a.device.split(":", 1)[1]
            n = torch.cuda.device_count()
            if not i.isdigit() or int(i) >= n:
                raise ConfigError(f"--device {a.device}: valid choices: cuda, {', '.join(f'cuda:{k}' for k in range(n))}")
    if a.smoke and kind != "cpu":
        raise ConfigError("--smoke runs a tiny model on the CPU: valid --device choices with it: cpu")


def training_rows(config, langs: Sequence[str], tok, folder: Path):
    """`bert.encode_rows` of the pilot's corpus, kept in the run folder (rows-<key>.pt, keyed on the corpus, the
    window and the languages) so that a call that goes on with the run does not tokenize the big corpus again."""
    from xlrepro.runkeys import run_key

    from .bert import encode_rows
    key = run_key({"size": config.size, "window": config.window, "languages": list(langs),
                   "max_chapters": config.max_chapters, "vocabulary": tok.get_vocab_size()})
    path = folder / f"rows-{key}.pt"
    if path.exists():
        ids, lengths, starts = torch.load(path, weights_only=False)
        return ids, lengths, starts
    ids, lengths, starts = encode_rows(config.size, config.window, langs, config.max_chapters, tok)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic.atomic_path(path) as tmp:
        torch.save((ids, lengths, starts), tmp)
    return ids, lengths, starts


def steps_done(folder: Path, steps: int) -> int:
    """The step a run folder of `pretrain_bert` stands at (its checkpoint's, read memory-mapped)."""
    if (folder / "training.json").exists():
        return steps
    if (folder / "checkpoint.pt").exists():
        from xlrepro.engine.checkpoint import progress
        return progress(folder / "checkpoint.pt").step
    return 0


def summary_rows(rows: list[dict], chance: dict[str, float], losses: dict[str, float],
                 entropy: dict[str, float]) -> list[dict]:
    """The per-language best layer, the means over languages and the two gates, from `retrieval_rows`' rows."""
    mrr = pd.DataFrame([r for r in rows if r["metric"] == "mrr"])
    out = []
    for lang, g in mrr.groupby("language", sort=False):
        best = g.loc[g["value"].idxmax()]
        out.append({"metric": "mrr_best", "value": float(best["value"]), "layer": int(best["layer"]),
                    "language": lang})
    mean = mrr.groupby("layer")["value"].mean()
    out += [{"metric": "mrr", "value": float(v), "layer": int(layer), "language": "mean"} for layer, v in mean.items()]
    out.append({"metric": "mrr_mean_best", "value": float(mean.max()), "layer": int(mean.idxmax()), "language": "mean"})
    out.append({"metric": "mrr_mean_last", "value": float(mean.iloc[-1]), "layer": int(mean.index[-1]),
                "language": "mean"})
    best = {r["language"]: r["value"] for r in out if r["metric"] == "mrr_best"}
    out += [{"metric": "chance_mrr", "value": chance[l], "language": l} for l in best]
    out += [{"metric": "mlm_loss", "value": v, "language": l} for l, v in losses.items()]
    out += [{"metric": "unigram_entropy", "value": v, "language": l} for l, v in entropy.items()]
    out.append({"metric": "gate_mrr_languages", "language": "all",
                "value": sum(best[l] >= GATE_MRR_FACTOR * chance[l] for l in best)})
    out.append({"metric": "gate_loss_languages", "language": "all",
                "value": sum(losses[l] <= entropy[l] - GATE_LOSS_NATS for l in losses)})
    return out


class Curve:
    """The pilot's long frame: loss rows (from the trainer's list) and evaluation rows (kept in `work`), written
    to `work` and `out` after every evaluation (atomic), with pilot.json."""

    def __init__(self, work: Path, out: Path, seed: int, info: dict, experiment: str = EXPERIMENT):
        self.work, self.out, self.seed, self.info, self.experiment = work, out, seed, info, experiment
        self.evals = pd.DataFrame(columns=COLUMNS)
        if (work / "curve.csv").exists():
            old = pd.read_csv(work / "curve.csv", dtype={"experiment": str})
            self.evals = old[old["metric"] != "train_loss"]
        if (work / "pilot.json").exists():
            self.info["calls"] = json.loads((work / "pilot.json").read_text())["calls"]

    def evaluated(self, step: int) -> bool:
        return bool((self.evals["step"] == step).any())

    def add(self, step: int, rows: list[dict]) -> None:
        new = pd.DataFrame([{"experiment": self.experiment, "seed": self.seed, "step": step, "layer": None,
                             "language": None, **r} for r in rows], columns=COLUMNS)
        keep = self.evals[self.evals["step"] != step]
        self.evals = new if keep.empty else pd.concat([keep, new], ignore_index=True)

    def write(self, losses: Sequence) -> None:
        loss = pd.DataFrame([{"experiment": self.experiment, "seed": self.seed, "step": int(s), "metric": "train_loss",
                              "value": float(v), "layer": None, "language": None} for s, v in losses], columns=COLUMNS)
        frame = pd.concat([f for f in (loss, self.evals) if not f.empty], ignore_index=True) if len(loss) or len(
            self.evals) else loss
        frame = frame.sort_values(["step", "metric", "language", "layer"], kind="stable", na_position="first")
        frame["layer"] = frame["layer"].astype("Int64")
        text = frame[COLUMNS].to_csv(index=False).encode()
        for folder in dict.fromkeys((self.work, self.out)):
            folder.mkdir(parents=True, exist_ok=True)
            atomic.write_bytes(folder / "curve.csv", text)
            atomic.write_json(folder / "pilot.json", self.info)


def run_pilot(steps: int, eval_every: int, device: str = "cpu", time_limit: float | None = None,
              out: str | Path | None = None, work: str | Path | None = None, smoke: bool = False,
              t0: float | None = None, progress: bool = True, lr: float | None = None,
              shape: str = "base") -> dict:
    """Train (or go on training) the pilot and write its curve; returns pilot.json's content. `lr`: the peak
    learning rate instead of the shape's (a lever of the pilot; the experiment name then carries it); `shape`: a
    key of `SHAPES` (the published run's is "base"; another one is named in the experiment). With `smoke`, the
    shape is the smoke model's whatever `shape` says."""
    from xlrepro.data.mbert_vocab import mbert_tokenizer
    from xlrepro.engine.models import device_name
    from xlrepro.paths import runs_dir

    from .baselines import chance_mrr
    from .bert import pretrain_bert
    from .evaluate import Data, retrieval_rows

    t0 = time.time() if t0 is None else t0
    root = runs_dir() / "liu2020" / ("smoke" if smoke else "lab") / "pilot"
    out = Path(out) if out is not None else root
    work = Path(work) if work is not None else root / "train"
    from xlrepro.config import choose
    choose("shape", shape, tuple(SHAPES))
    setup, base = pilot_setup(smoke)
    model = base.model if smoke else SHAPES[shape]
    config = replace(base, steps=steps, model=model if lr is None else replace(model, lr=lr))
    name = EXPERIMENT + ("" if shape == "base" else f"-{shape}") + ("" if lr is None else f"-lr{lr:g}")
    langs = setup.languages
    folder = config.folder(work)
    cfg_json = json.loads(json.dumps({**config.as_dict(), "languages": list(langs)}))
    if (folder / "config.json").exists() and json.loads((folder / "config.json").read_text()) != cfg_json:
        old = json.loads((folder / "config.json").read_text())
        raise ConfigError(f"{work} holds a pilot of another config (steps {old.get('steps')}): pass --steps "
                          f"{old.get('steps')} to go on with it, or another --work (and --out) for a new one")
    start = steps_done(folder, steps)
    dev = torch.device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", torch.cuda.current_device() if dev.index is None else dev.index)
        torch.cuda.set_device(dev)
    tok = mbert_tokenizer()
    data = Data(setup, make_dictionaries=True)
    encoded = training_rows(config, langs, tok, folder)
    ids, lengths, starts = encoded
    entropy = unigram_entropies(ids, lengths, starts, langs)
    probes = probe_batches(ids, lengths, starts, langs, tok.token_to_id("[MASK]"), tok.get_vocab_size(),
                           config.mlm_probability, 2 if smoke else PROBE_ROWS)
    chance = {l: chance_mrr(p) for l, p in data.dictionaries().items()}
    call = {"start_step": start, "end_step": start, "wall_seconds": None, "device": device_name(dev),
            "eval_seconds": 0.0, "setup_seconds": round(time.time() - t0, 1)}
    info = {"experiment": name, "seed": config.seed, "steps": steps, "eval_every": eval_every,
            "steps_done": 0, "train_seconds": 0.0, "eval_seconds": 0.0, "device": device_name(dev),
            "tokens_per_step": config.tokens_per_step, "batch_size": config.batch_size,
            "languages": list(langs), "retrieval_languages": sorted(chance), "finished": False,
            "config": json.loads(json.dumps(config.as_dict())), "calls": []}
    curve = Curve(work, out, config.seed, info, name)
    info["calls"].append(call)
    info["eval_seconds"] = sum(c["eval_seconds"] for c in info["calls"])
    last_eval = {"seconds": None}

    def evaluate(model, step: int, seconds: float, losses: Sequence) -> bool:
        """Evaluate at `step` and write the curve; False where it is left to the next call (time limit)."""
        if curve.evaluated(step):
            return True
        need = 1.2 * last_eval["seconds"] if last_eval["seconds"] is not None else 0.0
        if time_limit is not None and time.time() - t0 + need > time_limit - SAVE_RESERVE_S:
            print(f"step {step}: evaluation left to the next call (time limit)", flush=True)
            return False
        t1 = time.time()
        model.eval()
        rows, _ = retrieval_rows(model.bert, data, dev, name)
        rows = [{k: v for k, v in r.items() if k not in ("experiment", "seed")} for r in rows]
        losses_now = language_losses(model, probes, dev)
        rows += summary_rows(rows, chance, losses_now, entropy)
        rows.append({"metric": "train_seconds", "value": seconds, "language": "all"})
        curve.add(step, rows)
        took = time.time() - t1
        last_eval["seconds"] = took
        call["eval_seconds"] = round(call["eval_seconds"] + took, 1)
        info.update(steps_done=step, train_seconds=round(seconds, 1),
                    eval_seconds=round(sum(c["eval_seconds"] for c in info["calls"]), 1))
        call["end_step"] = step
        call["wall_seconds"] = round(time.time() - t0, 1)
        curve.write(losses)
        s = {r["metric"]: r for r in rows if r.get("language") in ("mean", "all") and r["metric"] != "mrr"}
        print(f"step {step}: mean MRR best {s['mrr_mean_best']['value']:.4f} (layer {s['mrr_mean_best']['layer']}),"
              f" last {s['mrr_mean_last']['value']:.4f}; gates: MRR {s['gate_mrr_languages']['value']}/{len(chance)},"
              f" loss {s['gate_loss_languages']['value']}/{len(langs)}; eval {took:.1f} s", flush=True)
        return True

    def on_eval(stack, losses, seconds) -> bool:
        """The trainer's hook: True (stop here, checkpoint saved) where the evaluation is left to the next call."""
        if curve.evaluated(stack.step_count):
            return False
        model = stack.export(0)
        try:
            return not evaluate(model, stack.step_count, seconds, losses)
        finally:
            del model
            if dev.type == "cuda":
                torch.cuda.empty_cache()

    limit = None if time_limit is None else max(1.0, time_limit - SAVE_RESERVE_S - (time.time() - t0))
    pretrain_bert(config, dev, root=work, time_limit=limit, progress=progress, languages=langs,
                           rows=encoded, loss_every=LOSS_EVERY, on_eval=on_eval, eval_every=eval_every)
    finished = (folder / "training.json").exists()
    if finished:
        record = json.loads((folder / "training.json").read_text())
        losses, seconds, done = record["losses"], record["seconds"], steps
        if not curve.evaluated(steps):  # the last evaluation, left over by an earlier call
            from .bert import load_bert
            model, _ = load_bert(folder)
            evaluate(model.to(dev), steps, seconds, losses)
    elif (folder / "checkpoint.pt").exists():
        from xlrepro.engine.checkpoint import progress
        state = progress(folder / "checkpoint.pt")
        losses, seconds, done = state.losses, state.elapsed, state.step
    else:  # stopped before its first step
        losses, seconds, done = [], 0.0, 0
    call.update(end_step=done, wall_seconds=round(time.time() - t0, 1))
    info.update(steps_done=done, train_seconds=round(seconds, 1), finished=finished and curve.evaluated(steps),
                eval_seconds=round(sum(c["eval_seconds"] for c in info["calls"]), 1))
    curve.write(losses)
    return info


def main(argv: Sequence[str] | None = None) -> None:
    t0 = time.time()
    p = argparse.ArgumentParser(prog="python -m xlrepro.papers.liu2020.pilot", description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, required=True, help="optimizer steps of the whole pilot (sets the schedule)")
    p.add_argument("--eval-every", type=int, default=None, help="steps between evaluations (default: steps / 10)")
    p.add_argument("--time-limit", type=float, default=None, help="seconds for this call (then checkpoint and stop)")
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:i")
    p.add_argument("--out", default=None, help="curve.csv and pilot.json (default: <runs>/liu2020/lab/pilot; "
                   "with --smoke <runs>/liu2020/smoke/pilot)")
    p.add_argument("--work", default=None, help="checkpoint and model (default: <runs>/liu2020/lab/pilot/train)")
    p.add_argument("--lr", type=float, default=None,
                   help="peak learning rate (default: the published run's, 1e-4 for BERT-base); a lever of the pilot")
    p.add_argument("--shape", default="base", help=f"model shape: {' | '.join(SHAPES)} (default: base, the "
                   "published run's 768 x 12); a lever of the pilot")
    p.add_argument("--smoke", action="store_true", help="a tiny model and corpus on the CPU (tests)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    check_args(a)
    info = run_pilot(a.steps, a.eval_every, a.device, a.time_limit, a.out, a.work, a.smoke, t0=t0,
                     progress=not a.no_progress, lr=a.lr, shape=a.shape)
    print(json.dumps({k: info[k] for k in ("steps_done", "steps", "train_seconds", "eval_seconds", "finished",
                                           "device")}), flush=True)


if __name__ == "__main__":
    main()
