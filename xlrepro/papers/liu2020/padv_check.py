"""The training check of the engine's padded vocabulary (`xlrepro.engine.fused_bert.Levers.pad_vocab`, the bench's
``ours-nomask-mm-padv``).

Its criterion, written here before any run (the bench's ``ours-nomask-mm-padv`` row points to it):

- Runs: Liu et al.'s lab BERT recipe (experiments.yaml ``bert``) on the big corpus, window 512, for `STEPS` = 2,000
  steps (a quarter of the recipe's 8,000: the switch changes rounding only, and the check asks whether training
  follows the same course, not for a finished model), seeds 0, 1, 2, each trained with pad_vocab 1 and with
  pad_vocab 64: six models. Everything else is the recipe's (`BertRunConfig`: the chapters' compiled engine, its
  warm-up and linear decay over the 2,000 steps); the loss is recorded every `LOSS_EVERY` = 50 steps and at the last.
- Precondition: every pad_vocab-1 run's final MLM loss is below the mean unigram entropy of the languages under the
  mBERT tokenizer (`mlm_loss.unigram_entropies` of the big corpus's window-512 training rows, averaged over the
  languages). If it fails, the verdict is "inconclusive" with that reason, never pass or fail.
- Criterion 1: the seed means of the final MLM loss (each run's mean over its last `FINAL_POINTS` = 5 recorded loss
  points) differ by at most `LOSS_TOLERANCE` = 0.02 nats.
- Criterion 2: that difference of means is less than 2 standard errors (scipy.stats.sem, ddof 1) of the pad_vocab-1
  seeds' final losses, or at most `DIFFERENCE_FLOOR` = 0.005 nats (so that three nearly identical unpadded seeds
  cannot make the criterion impossible to pass).

Adopted only if the precondition holds and both criteria hold; until then no chapter trains with pad_vocab other than
1. The runs are resumable, in ``<runs>/liu2020/lab/padv_check/seed<seed>/big-w512[-padv64]/``; ``check.json`` is
written only once all six are finished. Train and read it with:

    python -m xlrepro.papers.liu2020.padv_check --train --device cuda --time-limit 540
    python -m xlrepro.papers.liu2020.padv_check
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd
from scipy import stats

from xlrepro import atomic
from xlrepro.config import ConfigError

from .bert import BertRunConfig, pretrain_bert
from .corpora import LANGUAGES

STEPS = 2000            # a quarter of the recipe's 8,000
SEEDS = (0, 1, 2)
PADS = (1, 64)          # pad_vocab: the chapters' (no padding) and the bench's ``ours-nomask-mm-padv``
MODEL = "big-w512"      # the plan's BERT whose recipe the runs follow
LOSS_EVERY = 50         # steps between recorded loss points (and the last step)
FINAL_POINTS = 5        # the last recorded points of a loss curve that make its final loss
LOSS_TOLERANCE = 0.02   # nats (criterion 1)
DIFFERENCE_FLOOR = 0.005  # nats: a difference this small passes criterion 2 whatever the seeds' spread


def default_root() -> Path:
    from xlrepro.paths import runs_dir
    return runs_dir() / "liu2020" / "lab" / "padv_check"


def configs() -> dict[tuple[int, int], BertRunConfig]:
    """(pad_vocab, seed) -> the run's config: the plan's big-w512 with `STEPS` steps, the seed and the padding; in
    training order (both paddings of a seed one after the other, so that a cut-short call leaves pairs)."""
    from .models import bert_configs
    base = bert_configs()[MODEL]
    return {(pad, seed): replace(base, steps=STEPS, seed=seed, pad_vocab=pad) for seed in SEEDS for pad in PADS}


def run_folder(config: BertRunConfig, root: str | Path | None = None) -> Path:
    """The folder of one run: <root>/seed<seed>/<config.name> (the name carries the padding)."""
    return config.folder(Path(root or default_root()) / f"seed{config.seed}")


def final_loss(losses: Sequence) -> float:
    """The mean of the last `FINAL_POINTS` points of a recorded loss curve ([step, loss] pairs, `pretrain_bert`'s
    ``losses``); ConfigError where the curve has fewer points."""
    if len(losses) < FINAL_POINTS:
        raise ConfigError(f"a final loss is the mean of the last {FINAL_POINTS} recorded points; the curve has "
                          f"{len(losses)}")
    return sum(float(loss) for _, loss in losses[-FINAL_POINTS:]) / FINAL_POINTS


def final_losses(root: str | Path | None = None) -> dict[tuple[int, int], float]:
    """(pad_vocab, seed) -> final MLM loss (`final_loss` of ``losses`` in the run's training.json) of every finished
    run under `root`. ConfigError where a run folder holds a run of another config (the plan changed since)."""
    out = {}
    for key, config in configs().items():
        folder = run_folder(config, root)
        if not (folder / "training.json").exists():
            continue
        saved = json.loads((folder / "config.json").read_text())
        if saved != json.loads(json.dumps({**config.as_dict(), "languages": list(LANGUAGES)})):
            raise ConfigError(f"{folder} holds a run of another config; delete it and train again (--train)")
        out[key] = final_loss(json.loads((folder / "training.json").read_text())["losses"])
    return out


def check(losses_by_pad: Mapping[int, Sequence[float]], entropy: float) -> dict:
    """The precondition and the two criteria on the final losses of each padding (one per seed) and the mean unigram
    entropy (nats): the seed means, their difference, the tolerance, 2 SE of the unpadded seeds, each criterion,
    `verdict` ("adopted", "not adopted" or "inconclusive") and `reason`. ConfigError where a padding has fewer
    than two seeds (no SE to compare with) or where a padding is not one of `PADS`."""
    unknown = sorted(set(losses_by_pad) - set(PADS))
    if unknown:
        raise ConfigError(f"the padded-vocabulary check compares pad_vocab {unknown}; valid values: "
                          f"{', '.join(map(str, PADS))}")
    for pad in PADS:
        n = len(losses_by_pad.get(pad, ()))
        if n < 2:
            raise ConfigError(f"the padded-vocabulary check needs at least two seeds of pad_vocab {pad}; it has {n}")
    base, padded = ([float(x) for x in losses_by_pad[pad]] for pad in PADS)
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    difference = abs(mean(padded) - mean(base))
    two_se = 2 * float(stats.sem(base))  # the sample's standard error (ddof 1)
    above = [x for x in base if not x < entropy]
    out = {"loss_pad1": mean(base), "loss_pad64": mean(padded), "loss_difference": difference,
           "loss_tolerance": LOSS_TOLERANCE, "loss_2se_pad1": two_se, "difference_floor": DIFFERENCE_FLOOR,
           "unigram_entropy": float(entropy), "precondition": not above,
           "criterion_1": difference <= LOSS_TOLERANCE,
           "criterion_2": difference < two_se or difference <= DIFFERENCE_FLOOR}
    if above:
        out["verdict"] = "inconclusive"
        out["reason"] = (f"precondition not met: {len(above)} of the {len(base)} pad_vocab-1 runs ended at a final "
                         f"loss ({', '.join(f'{x:.3f}' for x in above)} nats) not below the mean unigram entropy "
                         f"({entropy:.3f} nats), so the recipe did not learn in these steps and the runs cannot tell "
                         f"whether the padding changes training")
        return out
    said = f"the seed means of the final loss differ by {difference:.4f} nats"
    failed = [text for ok, text in (
        (out["criterion_1"], f"criterion 1 (over {LOSS_TOLERANCE} nats)"),
        (out["criterion_2"], f"criterion 2 (neither under 2 SE of the pad_vocab-1 seeds, {two_se:.4f} nats, nor at "
                             f"most {DIFFERENCE_FLOOR} nats)")) if not ok]
    out["verdict"] = "not adopted" if failed else "adopted"
    out["reason"] = (f"{said}: fails {' and '.join(failed)}" if failed else
                     f"{said}: at most {LOSS_TOLERANCE} nats, and under 2 SE of the pad_vocab-1 seeds "
                     f"({two_se:.4f} nats) or at most {DIFFERENCE_FLOOR} nats")
    return out


def training_rows(root: str | Path | None = None):
    """The runs' training rows (`bert.encode_rows` of the big corpus, window 512, every language), cached in `root`
    (`pilot.training_rows`): ids [R, 512], lengths [R], each language's first row (and the end) [L + 1]."""
    from xlrepro.data.mbert_vocab import mbert_tokenizer

    from .pilot import training_rows as cached_rows
    config = next(iter(configs().values()))
    return cached_rows(config, LANGUAGES, mbert_tokenizer(), Path(root or default_root()))


def mean_unigram_entropy(root: str | Path | None = None) -> float:
    """The precondition's level: the mean over the languages of each language's unigram entropy (nats per token)
    over the runs' training rows (`mlm_loss.unigram_entropies`)."""
    from .mlm_loss import unigram_entropies
    ids, lengths, starts = training_rows(root)
    entropy = unigram_entropies(ids, lengths, starts, LANGUAGES)
    return sum(entropy.values()) / len(entropy)


def missing_runs(root: str | Path | None = None) -> list[str]:
    """The runs without a training.json under `root`, as "pad_vocab <p>, seed <s>"."""
    return [f"pad_vocab {pad}, seed {seed}" for (pad, seed), config in configs().items()
            if not (run_folder(config, root) / "training.json").exists()]


def train(device: str = "cuda", time_limit: float | None = None, root: str | Path | None = None) -> list[str]:
    """Train (or go on with) the six runs with `bert.pretrain_bert`, in `configs`' order, until all are finished or
    `time_limit` seconds have passed (the running one checkpoints then and resumes on the next call); one line per
    run touched."""
    t0 = time.time()
    rows = training_rows(root)  # ids [R, 512], lengths [R], starts [L + 1]: tokenized once for the six runs
    lines = []
    for (pad, seed), config in configs().items():
        folder = run_folder(config, root)
        left = None if time_limit is None else time_limit - (time.time() - t0)
        if left is not None and left <= 0:
            lines.append("time limit reached: run the command again")
            print(lines[-1], flush=True)
            break
        pretrain_bert(config, device, root=folder.parent, time_limit=left, progress=False, languages=LANGUAGES,
                      rows=rows, loss_every=LOSS_EVERY)
        finished = (folder / "training.json").exists()
        lines.append(f"pad_vocab {pad}, seed {seed}: {'finished' if finished else 'checkpointed'} ({folder})")
        print(lines[-1], flush=True)
        if not finished:
            break
    return lines


def run_check(root: str | Path | None = None) -> dict:
    """`check` on the six finished runs under `root`, with each run's final loss and training seconds."""
    losses = final_losses(root)
    result = check({pad: [losses[pad, seed] for seed in SEEDS] for pad in PADS}, mean_unigram_entropy(root))
    seconds = {f"pad{pad}-seed{seed}": json.loads((run_folder(c, root) / "training.json").read_text())["seconds"]
               for (pad, seed), c in configs().items()}
    return {**result, "steps": STEPS, "seeds": list(SEEDS), "final_points": FINAL_POINTS,
            "final_losses": {f"pad{pad}-seed{seed}": v for (pad, seed), v in losses.items()},
            "train_seconds": seconds}


def check_args(a: argparse.Namespace) -> None:
    """Every argument checked before any work; errors name the valid choices. Training runs the compiled engine:
    a GPU only."""
    if not a.train:
        for name, value in (("--device", a.device), ("--time-limit", a.time_limit)):
            if value is not None:
                raise ConfigError(f"{name} applies to --train only")
    else:
        import torch
        a.device = a.device or "cuda"
        kind, _, index = a.device.partition(":")
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        valid = ["cuda", *(f"cuda:{k}" for k in range(n))]
        if kind != "cuda" or (index and (not index.isdigit() or int(index) >= n)):
            raise ConfigError(f"--device {a.device}: the six runs train the compiled engine on a GPU; valid choices: "
                              f"{', '.join(valid)}")
        if not n:
            raise ConfigError("--device cuda: no CUDA device here; train on a machine with a GPU")
        if a.time_limit is not None and a.time_limit <= 0:
            raise ConfigError(f"--time-limit must be a positive number of seconds; got {a.time_limit}")
    if a.out.exists() and not a.out.is_dir():
        raise ConfigError(f"--out {a.out} is a file; give a folder for check.json")


def main(argv: Sequence[str] | None = None) -> None:
    from xlrepro.results import results_dir
    p = argparse.ArgumentParser(prog="python -m xlrepro.papers.liu2020.padv_check",
                                description=__doc__.split("\n")[0])
    p.add_argument("--train", action="store_true", help="train (or go on with) the six runs first")
    p.add_argument("--device", default=None, help="with --train: cuda | cuda:i (default cuda)")
    p.add_argument("--time-limit", type=float, default=None, help="with --train: seconds for this call")
    p.add_argument("--out", type=Path, default=results_dir("bench") / "padv_check",
                   help="folder for check.json (default: book/results/bench/padv_check)")
    a = p.parse_args(argv)
    check_args(a)
    if a.train:
        train(a.device, a.time_limit)
    missing = missing_runs()
    if missing:
        print(f"not checked: {len(missing)} of the {len(configs())} runs are not finished ({'; '.join(missing)}); "
              f"train them with --train", flush=True)
        return
    result = run_check()
    atomic.write_json(a.out / "check.json", result)
    print(pd.Series({k: v for k, v in result.items() if not isinstance(v, (dict, list))}).to_string(), flush=True)


if __name__ == "__main__":
    main()
