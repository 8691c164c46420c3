"""Where we differ from Wu & Dredze, and why: `xlrepro.differences` on each chapter's numbers beside the paper's.

Each chapter compares what the paper prints for the task ours stands in for (XNLI): Q1 the zero-shot accuracy per
language (Table 3, mBERT), Q2 the frozen-layer variants per language (Figure 1b, XNLI), Q3 language identification
(§5.3's "around 96%"), Q4 none (Figure 3 prints no numbers; its accuracies are Q1's). Our accuracies are fractions,
the paper's percent: ours are scaled to percent. The paper gives no standard deviation, so a gap is measured in our
seeds' standard deviation; a gap within the paper's printed rounding (0.05 points) is not listed. Known causes:
this package's ``differences.yaml``. `pending_note` names fine-tuning runs of the plan that have no result yet.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from xlrepro import differences as shared
from xlrepro.config import choose, plural
from xlrepro.reference import paper_numbers

CHAPTERS = ("q1_zero_shot", "q2_layers", "q3_language_id", "q4_subword_overlap")
KEYS = ("experiment", "metric", "language")
ROUNDING = 0.05  # the paper prints one decimal of a percent
PAPER_DEPTH = 12  # mBERT's layers: the paper freezes 0, 3, 6, 9 of them
NAMES = {"accuracy": "accuracy %"}


def load_causes(path=None):
    """The known causes: ``differences.yaml`` of this package, or the YAML file at `path`."""
    return shared.load_causes(__package__ if path is None else path)


def _percent(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(value=100 * pd.to_numeric(df["value"]))


def comparison(chapter: str, results, depth: int = 4) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ours, paper) long frames with `KEYS` for a chapter; `results` is the chapter's results folder or a mapping
    artifact -> frame; `depth` the encoder's layers (our frozen depth n is the paper's n * 12 / depth). Ours keep
    only the accuracies the paper has a number for (same experiment, metric and language)."""
    choose("chapter", chapter, CHAPTERS)
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be the encoder's number of layers (a positive integer); got {depth!r}")

    def read(name: str) -> pd.DataFrame:
        if isinstance(results, dict):
            return results.get(name, pd.DataFrame(columns=["experiment", "seed", "language", "metric", "value"]))
        from xlrepro.results import read_csv
        path = Path(results) / f"{name}.csv"
        return read_csv(path) if path.exists() else pd.DataFrame(columns=["experiment", "seed", "language",
                                                                         "metric", "value"])

    empty = pd.DataFrame(columns=[*KEYS, "seed", "value"]), pd.DataFrame(columns=[*KEYS, "mean", "std"])
    if chapter == "q1_zero_shot":
        ours = read("zero_shot")
        ours = ours[(ours["experiment"] == "zero-shot") & (ours["metric"] == "accuracy")]
        paper = paper_numbers("wu2019", "Table 3")
        paper = paper[paper["experiment"] == "mBERT/zero-shot"].assign(experiment="zero-shot")
    elif chapter == "q2_layers":
        ours = read("frozen")
        ours = ours[ours["metric"] == "accuracy"]
        rename = {"feature-based": "mBERT/feature-based",
                  **{f"freeze-{n}": f"mBERT/freeze-{round(n * PAPER_DEPTH / depth)}" for n in range(depth + 1)}}
        ours = ours[ours["experiment"].isin(rename)]
        paper = paper_numbers("wu2019", "Figure 1b")
        back = {v: k for k, v in rename.items()}
        paper = paper[paper["experiment"].isin(back)].assign(experiment=lambda d: d["experiment"].map(back))
    elif chapter == "q3_language_id":
        probe = read("language_id")
        if probe.empty:
            return empty
        # the paper gives one number for all layers: ours, the mean over layers per seed
        ours = (probe[probe["metric"] == "accuracy"].groupby("seed", as_index=False)["value"].mean()
                .assign(experiment="language-id", metric="accuracy", language="all"))
        paper = paper_numbers("wu2019", "Section 5.3").assign(experiment="language-id")
    else:
        return empty
    if ours.empty:
        return empty
    return _percent(ours[[*KEYS, "seed", "value"]]), paper[[*KEYS, "mean", "std"]]


EMPTY = {"q4_subword_overlap": "The paper's Figure 3 prints no numbers, so none is put beside ours here; the "
                               "zero-shot accuracies this chapter correlates with overlap are compared with the "
                               "paper's Table 3 in Q1."}


def where_we_differ(chapter: str, results, depth: int = 4, k: float = 2.0, causes=None):
    """The chapter's "Where we differ" table (`xlrepro.differences.differences_markdown`), or a sentence saying why
    there is nothing to compare."""
    from IPython.display import Markdown

    ours, paper = comparison(chapter, results, depth)
    if chapter in EMPTY:
        return Markdown(EMPTY[chapter])
    if ours.empty:
        return Markdown("No results of ours to compare yet: the chapter's runs are pending.")
    labels = {"zero-shot": "(mBERT zero-shot, Table 3)", "language-id": "(mean over layers; §5.3)",
              **{e: f"(paper: {e.replace('freeze-', 'Lay ') if e.startswith('freeze') else 'Feat'}, Figure 1b)"
                 for e in ours["experiment"].unique() if e.startswith("freeze") or e == "feature-based"}}
    if chapter == "q2_layers":  # the paper's depth label of our frozen depth
        labels.update({f"freeze-{n}": f"(paper: Lay {round(n * PAPER_DEPTH / depth)}, Figure 1b)"
                       for n in range(depth + 1)})
    if causes is None:  # the known causes are the lab's stand-ins: none of them applies to paper-profile numbers
        from .constants import results_profile
        causes = () if results_profile(results) == "paper" else load_causes()
    return shared.differences_markdown(ours, paper, causes, labels, k, NAMES,
                                       ROUNDING, KEYS, digits=lambda metric, mean: 1, legend=True)


def pending_note(lab) -> str:
    """Markdown naming the in-language runs of the plan (its `in_language_seeds`) without results, with the GPU
    command; "" when none is missing."""
    missing = getattr(lab, "pending_runs", [])
    if not missing:
        return ""
    langs = sorted({lang for lang, _ in missing})
    seeds = sorted({s for _, s in missing})
    return (f"**In-language upper bound: {plural(len(missing), 'run')} pending the GPU run** (seeds "
            f"{', '.join(map(str, seeds))} in {plural(len(langs), 'language')}); the table above averages the seeds "
            f"that exist. On a GPU: "
            f"`xlrepro train wu2019 --part in-language`, then rerun this chapter.")
