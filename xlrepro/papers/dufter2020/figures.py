"""The Dufter & Schütze chapters' figures, one function per figure of the paper (seaborn on matplotlib).

Each function returns a matplotlib Figure; the chapter cell that calls it carries the caption (with the paper's
figure number) in its cell metadata. Panels that are compared share their axes and colour scale, and where the
paper gives numbers (Table 1 for Figures 1 and 6) they are drawn beside ours.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from xlrepro.results import stats

# Figure 1's metrics (layer 8) and Figure 6's, with the names the tables use
FIGURE1_METRICS = {"align_l8": "alignment F1", "retr_l8": "retrieval ρ", "trans_l8": "translation τ"}
CURVE_PANELS = ({"retr_l0": "retrieval ρ, layer 0", "retr_l8": "retrieval ρ, layer 8",
                 "trans_l0": "translation τ, layer 0", "trans_l8": "translation τ, layer 8", "mu": "µ"},
                {"ppl_train": "perplexity, train", "ppl_dev": "perplexity, dev"})


CHANCE_SYMBOLS = {"retr": "ρ", "trans": "τ", "mu": "µ"}


def chance_label(metrics) -> str | None:
    """The legend entry of the chance line of `metrics` (Table 1 codes): each kind's level once, e.g.
    "chance: ρ 1/10,000, τ 1/2,043"; None where none of them has a chance level (`chance_level`)."""
    from .multilinguality import CANDIDATES, chance_level

    parts = {}
    for m in metrics:
        kind = "mu" if m == "mu" else m.split("_")[0]
        if chance_level(m) is not None and kind not in parts:
            parts[kind] = (f"{CHANCE_SYMBOLS[kind]} 1/{CANDIDATES[kind]:,}" if kind in CANDIDATES
                           else f"{CHANCE_SYMBOLS[kind]} {chance_level(m):.4f}")
    return f"chance: {', '.join(parts.values())}" if parts else None


def chance_lines(ax, metrics) -> None:
    """Dashed grey lines at the chance levels of `metrics` on `ax`, one legend entry for them all (`chance_label`).
    At these levels (below 0.001) the lines of a 0-1 axis fall together at its bottom."""
    from .multilinguality import chance_level

    levels = sorted({chance_level(m) for m in metrics} - {None})
    for k, level in enumerate(levels):
        ax.axhline(level, color="grey", ls="--", lw=1, zorder=1, label=chance_label(metrics) if k == 0 else None)


def _theme():
    import seaborn as sns

    return sns.axes_style("whitegrid")


def figure1(ours: pd.DataFrame, paper: pd.DataFrame, ids: list[str], labels: dict[str, str]):
    """Figure 1: layer-8 alignment, retrieval and translation per model; bars ours (mean, std over seeds as error
    bars), black ticks the paper's numbers (its Table 1), a dashed grey line the chance level of retrieval and
    translation (`chance_lines`; alignment F1 has none)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    sub = ours[ours["experiment"].isin(ids) & ours["metric"].isin(FIGURE1_METRICS)].assign(
        metric=lambda d: d["metric"].map(FIGURE1_METRICS), model=lambda d: d["experiment"].map(lambda i: f"{i}: {labels[i]}"))
    order = [f"{i}: {labels[i]}" for i in ids]
    hues = list(FIGURE1_METRICS.values())
    with _theme():
        fig, ax = plt.subplots(figsize=(10, 4.5))
        sns.barplot(sub, x="model", y="value", hue="metric", order=order, hue_order=hues, errorbar="sd",
                    capsize=0.1, err_kws={"linewidth": 1}, ax=ax)
        # seaborn dodges the hue levels inside a band of width 0.8 around each x position
        w = 0.8 / len(hues)
        for k, m in enumerate(FIGURE1_METRICS):
            p = paper[paper["metric"] == m].set_index("experiment")["mean"]
            x = np.arange(len(ids)) - 0.4 + w * (k + 0.5)
            ax.scatter(x, [p.get(i, np.nan) for i in ids], color="black", marker="_", s=200, linewidths=2,
                       zorder=3, label="paper (Table 1)" if k == 0 else None)
        chance_lines(ax, FIGURE1_METRICS)
        ax.set_xticks(range(len(ids)), order, rotation=25, ha="right", fontsize=8)
        ax.set(ylim=(0, 1.05), xlabel="", ylabel="layer 8, ours (mean ± std over seeds)")
        ax.legend(fontsize=8, ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
        fig.tight_layout()
    return fig


def figure4(model, shift: int, specials: np.ndarray, sample: list[int], tokenizer, note: str | None = None):
    """Figure 4: PCA of the layer-0 token embeddings (input embedding matrix) of English and Fake-English; top: all
    tokens, bottom: a sample with each English token beside its Fake-English copy.

    `note` (from `report.load_model`: the model was trained before vocabularies were fingerprinted) is printed under
    the figure. Rows i and i + shift are a true English/Fake-English pair whatever the vocabulary, so the points stand;
    only the labels, read from `tokenizer`, may name another piece than the one the row was trained for."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    emb = model.bert.embeddings.word_embeddings.weight.detach().float().cpu().numpy()  # [V, H]
    english = np.array([i for i in range(shift) if i not in set(specials.tolist())])
    both = np.concatenate([emb[english], emb[english + shift]])  # [2n, H]: English rows, then their copies
    centred = both - both.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    xy = centred @ vt[:2].T  # [2n, 2]
    n = len(english)
    points = pd.DataFrame({"PC 1": xy[:, 0], "PC 2": xy[:, 1], "language": ["English"] * n + ["Fake-English"] * n})
    with _theme():
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.5, 9), sharex=True, sharey=True)
        sns.scatterplot(points, x="PC 1", y="PC 2", hue="language", s=6, alpha=0.6, linewidth=0, ax=top)
        top.set_title("all tokens")
        pos = {t: k for k, t in enumerate(english)}
        for t in sample:
            k, word = pos[t], tokenizer.id_to_token(int(t))
            bottom.scatter(*xy[k], color="C0", s=14)
            bottom.scatter(*xy[n + k], color="C1", s=14)
            bottom.annotate(word, xy[k], fontsize=8, color="C0")
            bottom.annotate("::" + word, xy[n + k], fontsize=8, color="C1")
        bottom.set_title("a sample of tokens (English blue, Fake-English orange)")
        bottom.set(xlabel="PC 1", ylabel="PC 2")
        fig.tight_layout()
        if note:
            import textwrap
            fig.text(0.02, 0.0, textwrap.fill(f"Note: {note}", 95), fontsize=7.5, va="top", ha="left",
                     color="0.25")
    return fig


def position_similarity(model) -> np.ndarray:
    """[P, P] cosine similarity of a model's position embeddings."""
    pos = model.bert.embeddings.position_embeddings.weight.detach().float()  # [P, H]
    pos = torch.nn.functional.normalize(pos, dim=1)
    return (pos @ pos.T).cpu().numpy()


def _position_panels(models: dict[str, object], rows: int, cols: int, size: tuple[float, float], slots: int):
    import matplotlib.pyplot as plt
    import seaborn as sns

    if rows * cols != len(models):
        raise ValueError(f"{len(models)} models for a grid of {rows} x {cols} panels")
    with _theme():
        fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False, sharex=True, sharey=True,
                                 layout="constrained")
        for ax, (title, model) in zip(axes.flat, models.items()):
            # one colour scale for every panel, so that the panels can be compared
            sns.heatmap(position_similarity(model)[:slots, :slots], vmin=-1, vmax=1, cmap="viridis", square=True,
                        xticklabels=32, yticklabels=32, cbar=False, ax=ax)
            ax.set_title(title, fontsize=10)
            ax.set(xlabel="position id", ylabel="position id")
            if slots > 128:  # the border between the English (0-127) and the Fake-English (128-255) ids
                ax.axhline(128, color="white", lw=0.6)
                ax.axvline(128, color="white", lw=0.6)
        # one colour bar for all panels, beside them all, so that every panel keeps the same size
        fig.colorbar(axes.flat[0].collections[0], ax=axes.ravel().tolist(), shrink=0.8, label="cosine similarity")
    return fig


def figure5(models: dict[str, object], slots: int = 256):
    """Figure 5: cosine similarity of the position embeddings of two models, top and bottom (the paper: model 1,
    lang-pos, and model 9, lang-pos with inverted Fake-English)."""
    return _position_panels(models, len(models), 1, (5.5, 4.6 * len(models)), slots)


def figure8(models: dict[str, object], slots: int = 256):
    """Figure 8 (appendix B.3): the same similarity matrices at a larger size, side by side."""
    return _position_panels(models, 1, len(models), (7.5 * len(models), 6.8), slots)


def position_reference(title: str, model, slots: int = 256):
    """One model's position-similarity matrix alone (for a model the paper does not plot, e.g. model 0)."""
    return _position_panels({title: model}, 1, 1, (6, 5), slots)


def figure6(curves: pd.DataFrame, ids: list[str], labels: dict[str, str], paper: pd.DataFrame | None = None):
    """Figure 6: multilinguality and perplexity against training steps, median and interquartile range over seeds.

    Panels of one row share their y-axis (and the columns their steps). Where `paper` (Table 1 of the paper, long:
    experiment, metric, mean) has a model's number, it is drawn as a black cross at that model's last step: the
    paper gives only the end of training. The multilinguality panels draw the chance levels as a dashed grey line
    (`chance_lines`)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    with _theme():
        fig, axes = plt.subplots(2, len(ids), figsize=(5 * len(ids), 6.5), squeeze=False, sharex="col", sharey="row")
        for col, exp in enumerate(ids):
            sub = curves[curves["experiment"] == str(exp)]
            axes[0][col].set_title(f"{exp}: {labels[str(exp)]}")
            if sub.empty:  # not trained yet: say so instead of drawing empty axes
                for row in range(2):
                    axes[row][col].text(0.5, 0.5, f"model {exp}: awaits its GPU run", ha="center", va="center",
                                        transform=axes[row][col].transAxes)
                continue
            last = sub["step"].max()
            for row, names in enumerate(CURVE_PANELS):
                ax = axes[row][col]
                for k, (m, name) in enumerate(names.items()):
                    # median and interquartile range over seeds: one seed that did not learn stays visible in the
                    # band without dragging the line (a mean ± std does, and runs below 0 on a log scale)
                    g = sub[sub["metric"] == m].groupby("step")["value"]
                    mid, low, high = g.median(), g.quantile(0.25), g.quantile(0.75)
                    sns.lineplot(x=mid.index, y=mid.values, label=name, lw=2 if m == "mu" else 1, color=f"C{k}", ax=ax)
                    ax.fill_between(mid.index, low, high, alpha=0.2, color=f"C{k}")
                    if paper is not None:
                        p = paper[(paper["experiment"] == str(exp)) & (paper["metric"] == m)]["mean"]
                        if len(p):
                            ax.scatter([last], [p.iloc[0]], marker="x", color=f"C{k}", s=50, zorder=4,
                                       )
                chance_lines(ax, names)  # the perplexity row has none
                if row == 1:
                    ax.set_yscale("log")
                    ax.set_xlabel("training step")
                ax.legend(fontsize=7)
        if paper is not None:
            fig.text(0.01, 0.005, "×: the paper's number at the end of training (Table 1)", fontsize=8)
        fig.tight_layout()
    return fig


TABLE2_METRICS = ("mu", "retr_l0", "trans_l0", "retr_l8", "trans_l8")


def table2_bars(ours: pd.DataFrame, paper: pd.DataFrame, ids: list[str], metrics=TABLE2_METRICS):
    """Table 2 as bars, one panel per metric: ours (mean over seeds, std as error bars), the paper's means as black
    ticks, the metric's chance level as a dashed grey line (`chance_lines`). `paper`: long (experiment, metric, mean)."""
    import matplotlib.pyplot as plt

    means = paper.set_index(["experiment", "metric"])["mean"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(13, 2.8), sharey=True)
    for ax, metric in zip(axes, metrics):
        mean_std = [stats(ours, e, metric) for e in ids]
        ax.bar(ids, [m for m, _ in mean_std], yerr=[0 if s != s else s for _, s in mean_std], capsize=3)
        ax.scatter(ids, [means.get((e, metric)) for e in ids], color="black", marker="_", s=200, zorder=3,
                   label="paper")
        chance_lines(ax, [metric])
        ax.set_title(metric)
        ax.legend(fontsize=7)
    axes[0].set_ylim(0, 1.05)
    fig.tight_layout()
    return fig
