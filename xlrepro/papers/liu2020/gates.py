"""The gates of the Liu et al. 2020 chapters (gates.yaml): did the base BERT learn what the claims are about?

Three gates on the plan's base model (big corpus, window 512), each with its threshold fixed in ``gates.yaml``
before the runs it judges:

- ``loss_below_unigram``: the MLM loss per language (``pretraining_loss.csv``, `evaluate.run_loss`: a fixed sample
  of the language's training rows with fixed masks) at least `margin` nats below the language's unigram entropy over
  the same rows (the loss of a model that knows only token frequencies), in at least `languages` languages;
- ``retrieval_above_chance``: the best layer's word-retrieval MRR (``retrieval_bert.csv``) at least `factor` times
  the exact chance MRR with identical spellings ranked first (``baselines.csv``, ``chance-identical``: the stricter
  of the two chance levels), in at least `languages` of the dictionaries' languages;
- ``zero_shot_above_majority``: the zero-shot accuracy over seeds (``transfer.csv``), its mean minus 2 SE (SE = sample
  std / sqrt(seeds)), at least `points` above the majority class of the language's test pairs (``baselines.csv``,
  ``majority-test``), in at least `share` of the target languages (every language but English).

`gate_frame` returns ``gates.csv``'s rows: gate, criterion, value (languages that pass), threshold (languages needed),
passed (True / False; empty where a result file is missing), languages (those that pass, comma-separated).
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

import yaml

from xlrepro.config import ConfigError

GATES_FILE = Path(__file__).with_name("gates.yaml")
COLUMNS = ["gate", "criterion", "value", "threshold", "passed", "languages"]
SOURCE = "en"


def load_gates(path: str | Path = GATES_FILE) -> dict:
    spec = yaml.safe_load(Path(path).read_text())
    known = {"loss_below_unigram", "retrieval_above_chance", "zero_shot_above_majority"}
    for g in spec["gates"]:
        if g["id"] not in known:
            raise ConfigError(f"{path}: unknown gate {g['id']!r}; valid choices: {', '.join(sorted(known))}")
    return spec


def _criterion(g: dict) -> str:
    text = g["criterion"]
    for k, v in g.items():
        text = text.replace(f"`{k}`", f"{v:g}" if isinstance(v, float) else str(v))
    return text


def _loss(g: dict, exp: str, loss: pd.DataFrame | None):
    if loss is None:
        return None
    p = loss[loss["experiment"] == exp].pivot_table(index="language", columns="metric", values="value")
    ok = (p["unigram_entropy"] - p["mlm_loss"]) >= g["margin"]
    return ok, int(g["languages"])


def _retrieval(g: dict, exp: str, retrieval: pd.DataFrame | None, baselines: pd.DataFrame | None):
    if retrieval is None or baselines is None:
        return None
    best = retrieval[(retrieval["experiment"] == exp) & (retrieval["metric"] == "mrr")].groupby("language")["value"].max()
    chance = baselines[(baselines["experiment"] == "chance-identical") & (baselines["metric"] == "mrr")
                       ].set_index("language")["value"]
    langs = [l for l in chance.index if l in best.index]
    ok = pd.Series({l: best[l] >= g["factor"] * chance[l] for l in langs}, dtype=bool)
    return ok, int(g["languages"])


def _zero_shot(g: dict, exp: str, transfer: pd.DataFrame | None, baselines: pd.DataFrame | None):
    if transfer is None or baselines is None:
        return None
    t = transfer[(transfer["experiment"] == exp) & (transfer["metric"] == "accuracy") & (transfer["language"] != SOURCE)]
    stats = t.groupby("language")["value"].agg(["mean", "std", "count"])
    majority = baselines[(baselines["experiment"] == "majority-test") & (baselines["metric"] == "accuracy")
                         ].set_index("language")["value"]
    low = stats["mean"] - 2 * stats["std"].fillna(0.0) / stats["count"].pow(0.5)
    ok = pd.Series({l: low[l] >= majority[l] + g["points"] / 100 for l in stats.index if l in majority.index},
                   dtype=bool)
    return ok, math.ceil(g["share"] * len(ok))


def gate_frame(loss: pd.DataFrame | None, retrieval: pd.DataFrame | None, transfer: pd.DataFrame | None,
               baselines: pd.DataFrame | None, spec: dict | None = None) -> pd.DataFrame:
    """gates.csv's rows from the result frames (None: that result does not exist yet, its gate is pending)."""
    spec = spec or load_gates()
    exp = f"bert-{spec['model']}"
    rows = []
    for g in spec["gates"]:
        got = {"loss_below_unigram": lambda: _loss(g, exp, loss),
               "retrieval_above_chance": lambda: _retrieval(g, exp, retrieval, baselines),
               "zero_shot_above_majority": lambda: _zero_shot(g, exp, transfer, baselines)}[g["id"]]()
        row = {"gate": g["id"], "criterion": f"{spec['model']}: {_criterion(g)}"}
        if got is None:
            row.update(value=None, threshold=None, passed=None, languages="")
        else:
            ok, need = got
            row.update(value=int(ok.sum()), threshold=need, passed=bool(ok.sum() >= need),
                       languages=", ".join(sorted(ok.index[ok])))
            row["criterion"] += f" (of {len(ok)})"
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def read_gates(results: str | Path, spec: dict | None = None) -> pd.DataFrame:
    """`gate_frame` of a results folder's CSVs (pretraining_loss, retrieval_bert, transfer, baselines)."""
    results = Path(results)

    def read(name):
        path = results / f"{name}.csv"
        return pd.read_csv(path) if path.exists() else None
    return gate_frame(read("pretraining_loss"), read("retrieval_bert"), read("transfer"), read("baselines"), spec)
