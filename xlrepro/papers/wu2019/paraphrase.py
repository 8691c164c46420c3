"""The paraphrase task in the Wu & Dredze chapters (Q1, Q4): its results contract, read back and rendered.

Results contract. ``book/results/wu2019/paraphrase.csv`` (artifact ``paraphrase``), long format
experiment, seed, language, metric, value, written by the Q1 chapter of the published run once the task's
fine-tuning runs exist (``xlrepro train wu2019 --part zero-shot --task paraphrase``, under
runs/wu2019/<model>-paraphrase/); a chapter never trains them. Experiments (`EXPERIMENTS`):

- ``zero-shot``: fine-tuned on English (the learning rate selected on English dev, as for the section task), tested
  on each language's test pairs; one row per seed, metrics accuracy and macro_f1;
- ``majority``: always the majority label of the English train pairs (seed -1, accuracy; 50 % by construction);
- ``lexical``: the word-overlap baseline of the task card (word-set Jaccard above a threshold chosen on English dev,
  `xlrepro.tasks.paraphrase.lexical_accuracy`), computed on the very pairs tested (seed -1, accuracy); at the full
  size it is the task card's ``lexical_acc`` of the test split;
- ``overlap``: the share of each test set's word pieces seen in the English train pairs, by type and by token
  (seed -1, metrics p_type and p_token, percent), for Q4;
- ``in-language`` (optional, shown where present): the plan trains none for this task.

Where the fine-tuning cache is gone (a CPU re-render of the published run, `published.PublishedLab`), the chapters
read the file back; where it does not exist, they say the runs are pending, with `COMMAND`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .constants import PARAPHRASE_ARTIFACT as ARTIFACT

EXPERIMENTS = ("zero-shot", "majority", "lexical", "overlap", "in-language")
REQUIRED_EXPERIMENTS = ("zero-shot", "majority", "lexical", "overlap")
COMMAND = "xlrepro train wu2019 --part zero-shot --task paraphrase"
LONG = ["experiment", "seed", "language", "metric", "value"]


def check_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` if it holds the contract's columns and required experiments, else ValueError naming them."""
    missing = [c for c in LONG if c not in frame.columns]
    if missing:
        raise ValueError(f"paraphrase results lack columns {missing}; required: {', '.join(LONG)}")
    unknown = sorted(set(frame["experiment"].astype(str)) - set(EXPERIMENTS))
    if unknown:
        raise ValueError(f"paraphrase results have unknown experiments {unknown}; valid: {', '.join(EXPERIMENTS)}")
    absent = [e for e in REQUIRED_EXPERIMENTS if e not in set(frame["experiment"])]
    if absent:
        raise ValueError(f"paraphrase results lack experiments {absent}; required: {', '.join(REQUIRED_EXPERIMENTS)}")
    return frame


# ------------------------------------------------------------------------------------------------- from the runs
def paraphrase_lab(lab, seeds=None):
    """The paraphrase-task twin of a section-task `transfer.TransferLab` (same encoder, limits and device; the task's
    languages among the lab's), or None when its zero-shot runs (the learning-rate selection and every seed) are not
    all in the cache: the chapter then reports them pending and trains nothing."""
    from xlrepro.tasks.pairs import pair_task

    from .transfer import TransferLab

    task = pair_task("paraphrase")
    languages = [lang for lang in lab.languages if lang in task.languages]
    plab = TransferLab(lab.plan, lab.model, device=lab.device, languages=languages,
                       max_train_pairs=lab.max_train_pairs, max_test_pairs=lab.max_test_pairs, epochs=lab.epochs,
                       progress=False, task="paraphrase")
    if not all(plab.cached(c, t, tests) for c, t, tests in plab.jobs("select")):
        return None  # checked first: `jobs("zero-shot")` selects the learning rate, which would train
    if not all(plab.cached(c, t, tests) for c, t, tests in plab.jobs("zero-shot", seeds=seeds)):
        return None
    return plab


def lexical_baseline(plab) -> pd.DataFrame:
    """The task card's word-overlap baseline on the pairs `plab` tests: threshold chosen on English dev, accuracy on
    each language's test pairs (experiment "lexical", seed -1)."""
    from xlrepro.tasks.paraphrase import choose_threshold, lexical_accuracy, lexical_scores

    src = plab.plan.train_language
    dev = plab.pairs(src, "dev")
    threshold = choose_threshold(lexical_scores(dev, src), dev["label"])
    rows = []
    for lang in plab.languages:
        test = plab.pairs(lang, "test")
        rows.append({"experiment": "lexical", "seed": -1, "language": lang, "metric": "accuracy",
                     "value": lexical_accuracy(lexical_scores(test, lang), test["label"], threshold)})
    return pd.DataFrame(rows)


def overlap_rows(plab) -> pd.DataFrame:
    """Word pieces of each target test set seen in the English train pairs (`subword_overlap`, percent), long."""
    from xlrepro.evaluation.overlap import subword_overlap

    def pieces(pairs):
        texts = pairs["first"].tolist() + pairs["second"].tolist()
        return [e.tokens for e in plab.tokenizer.encode_batch(texts, add_special_tokens=False)]

    src = plab.plan.train_language
    english = pieces(plab.pairs(src, "train"))
    rows = []
    for lang in plab.languages:
        if lang == src:
            continue
        o = subword_overlap(english, pieces(plab.pairs(lang, "test")))
        rows += [{"experiment": "overlap", "seed": -1, "language": lang, "metric": m, "value": float(o[m])}
                 for m in ("p_type", "p_token")]
    return pd.DataFrame(rows)


def card_mismatches(lexical: pd.DataFrame, card: pd.DataFrame, tolerance: float = 1e-9) -> list[str]:
    """Languages where the lexical baseline computed on the tested pairs differs from the task card's (test split,
    ``paraphrase/<default negatives>``, metric lexical_acc), as 'lang: ours vs card'; a language the card lacks too."""
    from xlrepro.tasks.paraphrase import DEFAULT_NEGATIVES

    rows = card[(card["experiment"] == f"paraphrase/{DEFAULT_NEGATIVES}") & (card["split"] == "test")
                & (card["metric"] == "lexical_acc")].set_index("language")["value"]
    out = []
    for r in lexical.itertuples():
        if r.language not in rows.index or abs(float(rows[r.language]) - r.value) > tolerance:
            out.append(f"{r.language}: {r.value:.4f} vs card {rows.get(r.language, float('nan')):.4f}")
    return out


def results_from_runs(plab, seeds=None, card: str | Path | None = None) -> pd.DataFrame:
    """The contract's frame from a paraphrase lab whose runs are cached (`paraphrase_lab`). At the full size the
    lexical baseline must equal the task card's (`card`, default book/results/tasks/paraphrase_card.csv), else
    RuntimeError: the tested pairs are not the card's."""
    from xlrepro.paths import repo_root

    lexical = lexical_baseline(plab)
    card = Path(card) if card is not None else repo_root() / "book" / "results" / "tasks" / "paraphrase_card.csv"
    if getattr(plab, "full_size", False) and card.exists():
        bad = card_mismatches(lexical, pd.read_csv(card))
        if bad:
            raise RuntimeError(f"the word-overlap baseline on the tested pairs differs from the task card's: "
                               f"{'; '.join(bad)}; regenerate the card (python -m xlrepro.tasks.paraphrase)")
    frame = pd.concat([plab.zero_shot(seeds), plab.majority_baseline(), lexical, overlap_rows(plab)],
                      ignore_index=True)
    return check_frame(frame[LONG])


def chapter_results(lab, seeds=None) -> pd.DataFrame | None:
    """The paraphrase results a chapter shows, or None while they are pending: from the published file for a
    `published.PublishedLab`, else from the cached runs (never trained here)."""
    if getattr(lab, "profile", "lab") == "paper":
        return None  # the paraphrase task is a lab stand-in (Bible editions); the paper profile has XNLI
    if getattr(lab, "source", "train") == "published":
        frame = lab.paraphrase()
        return None if frame is None else check_frame(frame)
    plab = paraphrase_lab(lab, seeds)
    return None if plab is None else results_from_runs(plab, seeds)


def forget_stale(lab, folder: str | Path) -> Path | None:
    """While this execution has no paraphrase results (`chapter_results` None), remove a paraphrase.csv left in its
    results folder by an earlier run, so that the claims never read numbers this run did not make; the published
    re-render (which reads the file) removes nothing. Returns the removed path, if any."""
    path = Path(folder) / f"{ARTIFACT}.csv"
    if getattr(lab, "source", "train") == "published" or not path.exists():
        return None
    path.unlink()
    print(f"removed {path.name} of an earlier run: this execution has no paraphrase runs")
    return path


def summary_text(frame: pd.DataFrame, source: str = "en") -> str:
    """Sentences from the numbers: in how many targets the zero-shot mean beats the word-overlap baseline, and the
    range of the gains (points); the same against the majority baseline; and, where the frame holds the source
    language, its own accuracy beside its word-overlap baseline (the fine-tuning language's own ceiling)."""
    check_frame(frame)
    acc = _accuracy(frame, "zero-shot")["mean"]
    zero = acc.drop(source, errors="ignore")
    lexical = _accuracy(frame, "lexical")["mean"]
    gain = 100 * (zero - lexical.reindex(zero.index))
    over_majority = 100 * (zero - _accuracy(frame, "majority")["mean"].reindex(zero.index))
    above = int((gain > 0).sum())
    text = (f"Zero-shot accuracy (mean over seeds) is above the word-overlap baseline in {above} of {len(gain)} target "
            f"languages, by {gain.min():+.1f} ({gain.idxmin()}) to {gain.max():+.1f} ({gain.idxmax()}) points; the "
            f"claims below ask for 2 points beyond 2 standard errors in each. Against the majority baseline it is "
            f"{over_majority.min():+.1f} ({over_majority.idxmin()}) to {over_majority.max():+.1f} "
            f"({over_majority.idxmax()}) points.")
    if source in acc.index and source in lexical.index:
        verb = "above" if acc[source] > lexical[source] else "below"
        text += (f" On {source} itself, the language it was fine-tuned on, it reaches {100 * acc[source]:.1f} %, "
                 f"{verb} the word-overlap baseline's {100 * lexical[source]:.1f} %.")
    return text


def run_notes(lab, frame: pd.DataFrame | None) -> dict:
    """The run record's line on the paraphrase task: pending, read from the published file, or the run folder of its
    fine-tuning runs (beside the section task's, ``<name>-paraphrase``) with the devices they record."""
    if frame is None:
        return {"paraphrase task": f"pending the GPU run ({COMMAND})"}
    if getattr(lab, "source", "train") == "published":
        return {"paraphrase task": f"{ARTIFACT}.csv of the published run, re-rendered"}
    from xlrepro.runrecord import shown, training_devices

    root = Path(lab.root).with_name(f"{Path(lab.root).name}-paraphrase")
    devices = ", ".join(training_devices(root)) or "not recorded"
    return {"paraphrase task": f"fine-tuning runs in {shown(root)}, trained on {devices}"}


def pending_text(chapter: str) -> str:
    """What a chapter says while the runs do not exist."""
    return (f"**Pending the GPU run.** The paraphrase task's fine-tuning runs do not exist yet; they are made by "
            f"`{COMMAND}` (3 learning rates on English dev, then 3 seeds, in their own run folder "
            f"`runs/wu2019/lab-paraphrase/`), after which `xlrepro run wu2019/{chapter} --publish` shows them here and "
            f"writes `book/results/wu2019/{ARTIFACT}.csv`. Until then this chapter reports the section task only, and "
            f"the paraphrase claims below are pending.")


# ------------------------------------------------------------------------------------------------- rendering
def _accuracy(frame: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """mean and std over seeds of one experiment's accuracy, per language."""
    a = frame[(frame["experiment"] == experiment) & (frame["metric"] == "accuracy")]
    return a.groupby("language")["value"].agg(["mean", "std"])


def summary_table(frame: pd.DataFrame, sections: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per language (English first, then the targets by zero-shot accuracy): paraphrase zero-shot mean ± std over
    seeds, its gain over the word-overlap baseline, the majority and word-overlap baselines, in-language where
    present, and the section task's zero-shot mean ± std (`sections`: its long frame) beside them. Percent."""
    from xlrepro.results import fmt

    check_frame(frame)
    zero, lexical, majority = (_accuracy(frame, e) for e in ("zero-shot", "lexical", "majority"))
    order = [l for l in zero.index if l == "en"] + list(zero.drop("en", errors="ignore")
                                                        .sort_values("mean", ascending=False).index)
    cols = {
        "zero-shot %": [fmt(100 * zero.loc[l, "mean"], 100 * zero.loc[l, "std"], 1) for l in order],
        "gain over word overlap (points)": [f"{100 * (zero.loc[l, 'mean'] - lexical['mean'].get(l, np.nan)):+.1f}"
                                    for l in order],
        "word-overlap baseline %": [fmt(100 * lexical["mean"].get(l, np.nan), None, 1) for l in order],
        "majority %": [fmt(100 * majority["mean"].get(l, np.nan), None, 1) for l in order],
    }
    if "in-language" in set(frame["experiment"]):
        upper = _accuracy(frame, "in-language")
        cols["in-language %"] = [fmt(100 * upper["mean"].get(l, np.nan), None, 1) for l in order]
    if sections is not None:
        sec = _accuracy(sections, "zero-shot")
        cols["section task: zero-shot %"] = [
            fmt(100 * sec.loc[l, "mean"], 100 * sec.loc[l, "std"], 1) if l in sec.index else "–" for l in order]
    return pd.DataFrame(cols, index=pd.Index(order, name="language"))


def plot(frame: pd.DataFrame, title: str = "Paraphrase task, mini-mBERT: zero-shot transfer from English"):
    """Zero-shot accuracy per language (bars: mean, error bars: std over seeds) with the word-overlap baseline
    (black ticks) and the majority baseline (dashed line). Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    check_frame(frame)
    acc = frame[frame["metric"] == "accuracy"].assign(value=lambda d: 100 * d["value"])
    zero = acc[acc["experiment"] == "zero-shot"]
    means = zero.groupby("language")["value"].mean()
    order = [l for l in means.index if l == "en"] + list(means.drop("en", errors="ignore")
                                                         .sort_values(ascending=False).index)
    fig, ax = plt.subplots(figsize=(7.5, 3))
    sns.barplot(data=zero, x="language", y="value", order=order, errorbar="sd", capsize=0.2, color="C0",
                label="zero-shot (from English)", ax=ax)
    lexical = acc[acc["experiment"] == "lexical"].groupby("language")["value"].mean().reindex(order)
    ax.scatter(np.arange(len(order)), lexical, color="black", marker="_", s=300, zorder=3,
               label="word-overlap baseline")
    majority = acc[acc["experiment"] == "majority"]["value"].mean()
    ax.axhline(majority, color="grey", ls="--", label="majority class")
    ax.set_ylim(40, 100)
    ax.set_xlabel("language")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)  # beside the bars, not on them
    fig.tight_layout()
    return fig


def overlap_correlation(frame: pd.DataFrame, source: str = "en") -> pd.DataFrame:
    """Pearson r and p over the target languages of p_type / p_token with the seed-mean zero-shot accuracy, and
    with its gain over the word-overlap baseline. Columns: overlap, against, languages, r, p."""
    from scipy import stats

    check_frame(frame)
    zero = _accuracy(frame, "zero-shot")["mean"].drop(source, errors="ignore")
    gain = zero - _accuracy(frame, "lexical")["mean"].reindex(zero.index)
    rows = []
    for metric in ("p_type", "p_token"):
        o = frame[(frame["experiment"] == "overlap") & (frame["metric"] == metric)].groupby("language")["value"].mean()
        for against, y in (("zero-shot accuracy", zero), ("zero-shot − word overlap", gain)):
            langs = [l for l in y.index if l in o.index and not np.isnan(y[l])]
            if len(langs) < 3:
                raise ValueError(f"only {len(langs)} target languages with overlap and accuracy; a correlation needs 3")
            r, p = stats.pearsonr(o[langs], y[langs])
            rows.append({"overlap": metric, "against": against, "languages": len(langs), "r": float(r),
                         "p": float(p)})
    return pd.DataFrame(rows)


def read(folder: str | Path) -> pd.DataFrame | None:
    """``<folder>/paraphrase.csv`` (checked), or None where it does not exist."""
    from xlrepro.results import read_csv

    path = Path(folder) / f"{ARTIFACT}.csv"
    return check_frame(read_csv(path)) if path.exists() else None
