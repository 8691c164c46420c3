"""The Liu et al. 2020 chapters' figures, one function per figure of the paper (seaborn on matplotlib).

Each function takes the long results frames the chapters write (`retrieval.csv`, `retrieval_bert.csv`,
`transfer.csv`, `word2vec_windows.csv`, `pos.csv`, `language_id.csv`, `mds_grid.csv`) and returns a matplotlib
Figure; the chapter cell that calls it carries the caption (with the paper's figure number) in its cell metadata.
The paper's figures survive only as captions and prose, so no paper numbers are drawn except where a table gives
them (S Table 1). Panels that are compared share their y-axis.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

SIZES = ("small", "big")
SIZE_LABELS = {"small": "small corpus (the paper's 200k)", "big": "big corpus (the paper's 1000k)"}


def model_label(experiment: str) -> str:
    """'bert-big-w20' -> 'BERT, window 20'; 'word2vec-small-w256' -> 'Word2Vec, window 256'; 'glove-big' -> 'GloVe'."""
    parts = experiment.split("-")
    name = {"bert": "BERT", "word2vec": "Word2Vec", "glove": "GloVe"}.get(parts[0], parts[0])
    window = next((p[1:] for p in parts[1:] if p.startswith("w") and p[1:].isdigit()), None)
    return f"{name}, window {window}" if window else name


def size_of(experiment: str) -> str:
    return next((s for s in SIZES if f"-{s}" in experiment), "")


def _theme():
    import seaborn as sns
    return sns.axes_style("whitegrid")


def last_layer(bert: pd.DataFrame) -> pd.DataFrame:
    """The rows of each BERT's last layer (its largest layer number), without the layer column."""
    last = bert.groupby("experiment")["layer"].transform("max")
    return bert[bert["layer"] == last].drop(columns="layer")


def _interval_frame(df: pd.DataFrame) -> pd.DataFrame:
    """experiment, language, mrr, low, high (one row each) from MRR rows with their bootstrap interval."""
    wide = df[df["metric"].isin(["mrr", "mrr_low", "mrr_high"])].pivot_table(
        index=["experiment", "language"], columns="metric", values="value", aggfunc="first").reset_index()
    return wide.rename(columns={"mrr_low": "low", "mrr_high": "high"})


def _bars(ax, df: pd.DataFrame, hue_order, languages, palette=None) -> None:
    """Grouped bars of df (hue, language, mrr, low, high) with the bootstrap interval as error bars; seaborn draws
    the bars, the intervals (not seaborn's own statistics) are added at its dodged positions."""
    import seaborn as sns

    sns.barplot(df, x="language", y="mrr", hue="hue", order=languages, hue_order=hue_order, errorbar=None,
                palette=palette, ax=ax)
    w = 0.8 / len(hue_order)  # seaborn dodges the hue levels inside a band of width 0.8 around each x position
    for k, h in enumerate(hue_order):
        sub = df[df["hue"] == h].set_index("language")
        x = np.arange(len(languages)) - 0.4 + w * (k + 0.5)
        m = np.array([sub["mrr"].get(l, np.nan) for l in languages], dtype=float)
        lo = np.array([sub["low"].get(l, np.nan) for l in languages], dtype=float)
        hi = np.array([sub["high"].get(l, np.nan) for l in languages], dtype=float)
        ax.errorbar(x, m, yerr=[m - lo, hi - m], fmt="none", ecolor="black", elinewidth=0.8, capsize=2)


def mrr_static_vs_bert(static: pd.DataFrame, bert: pd.DataFrame | None, chance: dict[str, float] | None = None):
    """S Fig 1a/1b (L Figs 1 and 3): MRR per language of Word2Vec, GloVe and BERT (window 512, last layer), one
    panel per corpus size; error bars: 95 % bootstrap intervals over the dictionary words."""
    frames = [static] + ([last_layer(bert[bert["experiment"].str.endswith("-w512")])] if bert is not None else [])
    df = _interval_frame(pd.concat(frames, ignore_index=True))
    df["hue"], df["size"] = df["experiment"].map(model_label), df["experiment"].map(size_of)
    return _mrr_by_size(df, ("Word2Vec", "GloVe", "BERT, window 512"), "MRR (en → language)", chance)


def transfer_bars(transfer: pd.DataFrame, experiments_by_size: dict[str, list[str]], ylabel: str,
                  majority: dict[str, float] | None = None):
    """Zero-shot accuracy per language, one panel per corpus size; bars: mean over seeds, error bars: std; with
    `majority`, each language's majority class marked across its bars."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    languages = list(dict.fromkeys(transfer["language"]))
    with _theme():
        fig, axes = plt.subplots(1, len(experiments_by_size), figsize=(6 * len(experiments_by_size), 4), sharey=True,
                                 squeeze=False)
        for ax, (size, exps) in zip(axes[0], experiments_by_size.items()):
            sub = transfer[transfer["experiment"].isin(exps) & (transfer["metric"] == "accuracy")]
            sub = sub.assign(model=sub["experiment"].map(model_label))
            order = [model_label(e) for e in exps if e in set(sub["experiment"])]
            sns.barplot(sub, x="language", y="value", hue="model", order=languages, hue_order=order,
                        errorbar="sd", capsize=0.1, err_kws={"linewidth": 1}, ax=ax)
            level_marks(ax, majority, languages, "majority class")
            ax.set(title=SIZE_LABELS.get(size, size), xlabel="", ylabel=ylabel)
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=3, frameon=False)
        fig.tight_layout()
    return fig


def transfer_static_vs_bert(transfer: pd.DataFrame, majority: dict[str, float] | None = None):
    """S Fig 2a/2b (L Figs 2 and 4): zero-shot accuracy of BERT (window 512) and the static embeddings."""
    return transfer_bars(transfer, {s: [f"word2vec-{s}", f"glove-{s}", f"bert-{s}-w512"] for s in SIZES},
                         "zero-shot accuracy (mean ± std over seeds)", majority)


def mrr_per_layer(bert: pd.DataFrame, chance: dict[str, float] | None = None):
    """Not in the paper: each BERT's MRR at every layer (0 = embeddings), mean over the languages; with `chance`,
    the mean chance MRR over the same languages as a dashed line."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    sub = bert[bert["metric"] == "mrr"].groupby(["experiment", "layer"], as_index=False)["value"].mean()
    sub["model"] = sub["experiment"].map(lambda e: f"{size_of(e)}, {model_label(e).split(', ')[1]}")
    with _theme():
        fig, ax = plt.subplots(figsize=(7, 3.8))
        sns.lineplot(sub, x="layer", y="value", hue="model", marker="o", ax=ax)
        if chance:
            langs = [l for l in set(bert["language"]) if l in chance]
            ax.axhline(float(np.mean([chance[l] for l in langs])), color="black", linestyle="--", linewidth=1,
                       label="chance MRR (mean)")
        ax.set(xlabel="layer (0: embeddings)", ylabel="MRR, mean over languages")
        ax.legend(fontsize=8, title="corpus, BERT window")
        fig.tight_layout()
    return fig


def mrr_window(bert: pd.DataFrame, chance: dict[str, float] | None = None):
    """S Fig 3 (L Fig 5): MRR per language of BERT with a 512- and a 20-token window (last layer), per size."""
    df = _interval_frame(last_layer(bert))
    df["hue"], df["size"] = df["experiment"].map(model_label), df["experiment"].map(size_of)
    return _mrr_by_size(df, ("BERT, window 512", "BERT, window 20"), "MRR (en → language), last layer", chance)


def transfer_window(transfer: pd.DataFrame, majority: dict[str, float] | None = None):
    """L Fig 6: zero-shot accuracy with window 512 and 20 per size (a, b), and the drop 512 → 20 per language and
    size (c; positive: the short window is worse), mean over seeds."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    acc = transfer[(transfer["metric"] == "accuracy") & transfer["experiment"].str.startswith("bert-")]
    means = acc.groupby(["experiment", "language"], sort=False)["value"].mean()
    drops = []
    for size in SIZES:
        a, b = f"bert-{size}-w512", f"bert-{size}-w20"
        if a in means.index.get_level_values(0) and b in means.index.get_level_values(0):
            d = (means[a] - means[b]).rename("drop").reset_index()
            drops.append(d.assign(size=size))
    languages = list(dict.fromkeys(acc["language"]))
    with _theme():
        fig, axes = plt.subplots(1, 3, figsize=(16, 4), gridspec_kw={"width_ratios": [1, 1, 1]})
        for ax, size in zip(axes[:2], SIZES):
            sub = acc[acc["experiment"].isin([f"bert-{size}-w512", f"bert-{size}-w20"])]
            sub = sub.assign(model=sub["experiment"].map(model_label))
            sns.barplot(sub, x="language", y="value", hue="model", order=languages,
                        hue_order=["BERT, window 512", "BERT, window 20"], errorbar="sd", capsize=0.1,
                        err_kws={"linewidth": 1}, ax=ax)
            level_marks(ax, majority, languages, "majority class")
            ax.set(title=SIZE_LABELS[size], xlabel="", ylabel="zero-shot accuracy")
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=3, frameon=False)
        if drops:
            sns.barplot(pd.concat(drops), x="language", y="drop", hue="size", order=languages, hue_order=list(SIZES),
                        ax=axes[2])
            axes[2].axhline(0, color="black", linewidth=0.8)
        axes[2].set(title="drop 512 → 20 (mean over seeds)", xlabel="", ylabel="accuracy(512) − accuracy(20)")
        fig.tight_layout()
    return fig


def word2vec_windows(w2v: pd.DataFrame, chance: dict[str, float] | None = None):
    """S Fig 4: MRR per language of Word2Vec on the small corpus with windows 5 (the default), 128 and 256."""
    import matplotlib.pyplot as plt

    df = _interval_frame(w2v)
    df["hue"] = df["experiment"].map(lambda e: model_label(e) if "-w" in e else "Word2Vec, window 5 (default)")
    hue_order = [h for h in ("Word2Vec, window 5 (default)", "Word2Vec, window 128", "Word2Vec, window 256")
                 if h in set(df["hue"])]
    languages = sorted(set(df["language"]))
    with _theme():
        fig, ax = plt.subplots(figsize=(9, 4))
        _bars(ax, df, hue_order, languages)
        level_marks(ax, chance, languages, "chance MRR")
        ax.set(xlabel="", ylabel="MRR (en → language), small corpus")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=3, frameon=False)
        fig.tight_layout()
    return fig


def pos_classes(pos: pd.DataFrame, paper: pd.DataFrame, model: str = "bert-big-w512"):
    """S Table 1 as bars: MRR per part-of-speech class, mean over languages; ours beside the paper's avg column."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from .pos import CLASSES

    ours = pos[(pos["metric"] == "mrr") & (pos["language"] != "avg") & pos["experiment"].str.startswith(model + "/")]
    ours = ours.assign(cls=ours["experiment"].str.split("/").str[1]).groupby("cls")["value"].mean()
    theirs = paper[paper["language"] == "avg"].assign(cls=lambda d: d["experiment"].str.split("/").str[1]
                                                      ).set_index("cls")["mean"]
    df = pd.DataFrame([{"class": c, "source": s, "MRR": v.get(c, np.nan)}
                       for c in CLASSES for s, v in (("ours (mean over languages)", ours),
                                                     ("paper (avg over de es ar fr ru tr)", theirs))])
    with _theme():
        fig, ax = plt.subplots(figsize=(8, 3.8))
        sns.barplot(df, x="class", y="MRR", hue="source", order=list(CLASSES), ax=ax)
        ax.set(xlabel="", ylabel="MRR (en → language)")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=3, frameon=False)
        fig.tight_layout()
    return fig


def language_id(ident: pd.DataFrame):
    """L §4.1: nearest-mean language identification accuracy at every layer, one line per language; chance is one
    over the number of languages (dashed)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    n = ident["language"].nunique()
    with _theme():
        fig, ax = plt.subplots(figsize=(7, 3.8))
        sns.lineplot(ident, x="layer", y="value", hue="language", marker="o", ax=ax)
        ax.axhline(1 / n, color="grey", linestyle="--", linewidth=0.8, label=f"chance (1/{n})")
        ax.set(xlabel="layer (0: embeddings)", ylabel="accuracy", ylim=(0, 1.02))
        ax.legend(fontsize=7, ncol=2, loc="lower right")
        fig.tight_layout()
    return fig


def mds_heatmaps(grid: pd.DataFrame, metric: str, stand_ins: dict[str, str] | None = None):
    """L Fig 7 (metric convert_rate) / L Fig 8 (bleu1): the metric over layer × alpha, one heat map per direction
    (the paper shows en → el; our stand-in for el is named in the panel title), one colour scale for all panels."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    if metric not in ("convert_rate", "bleu1"):
        raise ValueError(f"unknown metric {metric!r}; valid choices: convert_rate, bleu1")
    sub = grid[grid["metric"] == metric].assign(alpha=lambda d: d["experiment"].astype(float))
    directions = list(dict.fromkeys(sub["language"]))
    cols = min(4, len(directions))
    rows = -(-len(directions) // cols)
    vmin, vmax = (0.0, 1.0) if metric == "convert_rate" else (0.0, float(sub["value"].max() or 1.0))
    stand_ins = stand_ins or {}
    with _theme():
        fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows), squeeze=False, sharex=True,
                                 sharey=True)
        for ax, d in zip(axes.flat, directions):
            m = sub[sub["language"] == d].pivot_table(index="layer", columns="alpha", values="value")
            sns.heatmap(m.sort_index(ascending=False), vmin=vmin, vmax=vmax, cmap="viridis", ax=ax, cbar=False,
                        annot=m.size <= 40, fmt=".2g")
            name = "-".join(f"{l} (for {stand_ins[l]})" if l in stand_ins else l for l in d.split("-"))
            ax.set(title=name, xlabel="alpha", ylabel="layer")
        for ax in list(axes.flat)[len(directions):]:
            ax.axis("off")
        fig.colorbar(plt.cm.ScalarMappable(norm=plt.Normalize(vmin, vmax), cmap="viridis"), ax=axes,
                     label={"convert_rate": "convert rate", "bleu1": "BLEU-1"}[metric], shrink=0.8)
    return fig


def level_marks(ax, levels: dict[str, float] | None, languages, label: str) -> None:
    """A baseline per language (chance MRR, the majority class) as a short black bar across the language's group of
    bars, labelled once in the legend; nothing where `levels` is None."""
    if not levels:
        return
    drawn = [(k, levels[lang]) for k, lang in enumerate(languages) if lang in levels]
    for n, (k, level) in enumerate(drawn):
        ax.hlines(level, k - 0.45, k + 0.45, colors="black", linestyles="--", linewidth=1.2,
                  label=label if n == 0 else None)


def _mrr_by_size(df: pd.DataFrame, hues, ylabel: str, chance: dict[str, float] | None = None):
    """MRR bars per language, one panel per corpus size (shared y axis), the models present among `hues`; with
    `chance`, each language's chance MRR marked across its bars."""
    import matplotlib.pyplot as plt

    hue_order = [h for h in hues if h in set(df["hue"])]
    languages = sorted(set(df["language"]))
    with _theme():
        fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
        for ax, size in zip(axes, SIZES):
            _bars(ax, df[df["size"] == size], hue_order, languages)
            level_marks(ax, chance, languages, "chance MRR")
            ax.set(title=SIZE_LABELS[size], xlabel="", ylabel=ylabel)
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=3, frameon=False)
        fig.tight_layout()
    return fig


def loss_curves(curves: pd.DataFrame, entropy: float, hue: str = "experiment", gap: float = 2.0):
    """Training loss against steps (one line per `hue`), with the mean unigram entropy over the languages (the loss
    of a model that knows only token frequencies) and the gate's level `gap` nats below it."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    with _theme():
        fig, ax = plt.subplots(figsize=(7, 3.8))
        sns.lineplot(curves, x="step", y="value", hue=hue, ax=ax, linewidth=1)
        ax.axhline(entropy, color="black", linestyle="--", linewidth=1, label="unigram entropy (mean)")
        ax.axhline(entropy - gap, color="grey", linestyle=":", linewidth=1, label=f"{gap:g} nats below it (gate)")
        ax.set(xlabel="optimizer step", ylabel="MLM loss (nats)")
        ax.legend(fontsize=8)
        fig.tight_layout()
    return fig
