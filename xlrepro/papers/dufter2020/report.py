"""Rendering for the Dufter & Schütze chapters: results of a run as tidy frames and figures (claims: xlrepro.claims).

The notebooks call these functions; each figure function returns a matplotlib Figure.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from xlrepro.config import check_profile, check_seeds
from xlrepro.devices import default_device
from xlrepro.results import results_dir, stats

from .config import Chapter, load_chapter
from .grid import grid_members, is_done, member_dir, run_grid, run_root

TABLE1_METRICS = ["mu", "align_l0", "retr_l0", "trans_l0", "align_l8", "retr_l8", "trans_l8", "ppl_train", "ppl_dev"]
# The metrics' names for readers (§2.2): what the book's tables and figures show instead of the codes.
METRIC_NAMES = {"mu": "µ", "align_l0": "alignment F1, layer 0", "retr_l0": "retrieval ρ, layer 0",
                "trans_l0": "translation τ, layer 0", "align_l8": "alignment F1, layer 8",
                "retr_l8": "retrieval ρ, layer 8", "trans_l8": "translation τ, layer 8",
                "ppl_train": "perplexity, train", "ppl_dev": "perplexity, dev"}


def table_for_readers(ours, paper, ids, labels) -> "pd.DataFrame":
    """Table 1/2 as a reader sees it: one row per model (ID and description), each cell ours (mean ± std over
    seeds) with the paper's number in parentheses, columns named by METRIC_NAMES."""
    from xlrepro.tables import paired_table

    table = paired_table(ours, paper, ids, TABLE1_METRICS, METRIC_NAMES)
    table.index = [f"{i} {labels[i]}" for i in ids]
    table.index.name = "model"
    return table


@dataclass
class ChapterRun:
    """What a notebook's parameters select: the run folder, the seeds per model size, where results go.

    Only the published run (`publish=True`: `make reproduce`, `xlrepro run ... --publish`) writes
    `book/results/<paper>/`; any other run writes to `results` or beside its own run folder.
    """

    chapter: Chapter
    profile: str
    seeds: list[int]
    large_seeds: list[int]
    epochs: int | None
    max_sentences: int | None
    batch_size: int | None
    root: Path
    results: Path
    # models the chapter needs but did not train: full-size training on a CPU waits for a GPU (see `train`)
    pending: list = field(default_factory=list)

    def seeds_of(self, exp_id: str) -> list[int]:
        return self.seeds if self.chapter.experiment(exp_id).size == "small" else self.large_seeds

    def train(self, ids, time_limit: float | None = None, allow_cpu: bool = False) -> None:
        """Train the models of `ids` that are not done. At the paper's size on a CPU (days of work) nothing is
        trained unless `allow_cpu`: the missing models are listed in `pending`, and the chapter shows the rest."""
        full = (self.epochs, self.max_sentences, self.batch_size) == (None, None, None)
        if full and default_device() == "cpu" and not allow_cpu:
            todo = [m for m in self.members(ids) if not is_done(self.root, m)]
            self.pending += [m for m in todo if m not in self.pending]
            if todo:
                print(f"{len(todo)} models await a GPU run ({', '.join(m.key for m in todo)}); on a GPU: "
                      f"xlrepro train {self.chapter.name} --ids {' '.join(dict.fromkeys(m.exp.id for m in todo))} "
                      f"--compile")
            return
        done = run_grid(self.chapter.name, ids, self.seeds, large_seeds=self.large_seeds, profile=self.profile,
                        root=self.root, epochs=self.epochs, max_sentences=self.max_sentences, time_limit=time_limit,
                        batch_size=self.batch_size)
        if not done:
            raise RuntimeError("the time limit stopped training; run the notebook again to resume from checkpoints")

    def members(self, ids):
        """The run's models with their resolved configurations (which name their folders)."""
        return [m for e in ids for m in grid_members(self.chapter, [e], self.seeds_of(e), self.seeds_of(e),
                                                      self.profile, self.epochs, self.max_sentences, self.batch_size)]

    def trained(self, ids):
        """The models of `ids` that have results (all of them, unless some are `pending`)."""
        return [m for m in self.members(ids) if m not in self.pending]

    def pending_experiments(self, ids=None) -> list[str]:
        """Experiments of `ids` (default: all pending) without a single trained seed: their claims are pending."""
        ids = list(dict.fromkeys(m.exp.id for m in self.pending)) if ids is None else ids
        have = {m.exp.id for m in self.trained(ids)}
        return [e for e in ids if e not in have]

    def results_frame(self, ids) -> pd.DataFrame:
        return load_results(self.root, self.trained(ids))

    def curves_frame(self, ids) -> pd.DataFrame:
        return load_curves(self.root, self.trained(ids))

    def model(self, exp_id: str, seed: int, vocab_size: int):
        """A trained model of the run (weights saved by the grid)."""
        return load_model(self.root, self.chapter, self.members([exp_id])[self.seeds_of(exp_id).index(seed)],
                          vocab_size)


def chapter_run(chapter_name: str, profile: str = "lab", seeds=None, large_seeds=None, epochs=None,
                max_sentences=None, results: str | Path | None = None, batch_size=None,
                publish: bool = False) -> ChapterRun:
    """Validate a notebook's parameters (errors name the valid choices) and locate its run and results folder."""
    chapter = load_chapter(chapter_name)
    check_profile(profile)
    seeds = check_seeds(list(chapter.seeds) if seeds is None else seeds)
    large_seeds = seeds if large_seeds is None else check_seeds(large_seeds)
    for name, value in (("epochs", epochs), ("max_sentences", max_sentences), ("batch_size", batch_size)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be None (the paper's setting) or a positive integer; got {value!r}")
    root = run_root(chapter_name, profile, epochs, max_sentences, batch_size)
    folder = Path(results) if results else results_dir(chapter_name) if publish else root / "results"
    return ChapterRun(chapter, profile, seeds, large_seeds, epochs, max_sentences, batch_size, root, folder)


def load_results(root: Path, members) -> pd.DataFrame:
    """Final metrics of the given models (`grid_members`) of a run folder, long format (the results contract)."""
    rows = []
    for m in members:
        path = member_dir(root, m) / "metrics.json"
        if not path.exists():
            raise FileNotFoundError(f"model {m.exp.id} seed {m.seed} has no results for its configuration "
                                    f"(run key {m.run_key}); train it first")
        for metric, value in json.loads(path.read_text())["metrics"].items():
            rows.append({"experiment": m.exp.id, "seed": m.seed, "metric": metric, "value": float(value)})
    return pd.DataFrame(rows)


def load_curves(root: Path, members) -> pd.DataFrame:
    rows = []
    for m in members:
        for point in json.loads((member_dir(root, m) / "curve.json").read_text()):
            step = point.pop("step")
            rows += [{"experiment": m.exp.id, "seed": m.seed, "step": step, "metric": k, "value": float(v)}
                     for k, v in point.items()]
    return pd.DataFrame(rows)


def load_timings(root: Path) -> pd.DataFrame:
    """Wall time and throughput of every trained stack of a run folder."""
    rows = []
    for path in sorted((root / "stacks").glob("*/timing.json")):
        t = json.loads(path.read_text())
        rows.append({"models": len(t["members"]), "size": t["size"], "steps": t["steps"],
                     "train_seconds": t["train_seconds"], "steps_per_second": t["steps_per_second"],
                     "seconds_per_model": t["train_seconds"] / len(t["members"]), "device": t["device"],
                     "experiments": ",".join(sorted({m.split("/")[0] for m in t["members"]}))})
    return pd.DataFrame(rows)


def load_model(root: Path, chapter: Chapter, member, vocab_size: int):
    """A trained model of the run (weights saved by the grid); `member` from `grid_members`."""
    from safetensors.torch import load_model as load_weights

    from xlrepro.models import init_model
    model = init_model(chapter.size(member.exp), vocab_size, member.seed)
    load_weights(model, str(member_dir(root, member) / "model.safetensors"))
    return model.eval()


# ------------------------------------------------------------------------------------------ figures
def plot_summary(ours: pd.DataFrame, paper: pd.DataFrame, ids: list[str], labels: dict[str, str]):
    """Figure 1: layer-8 alignment, retrieval and translation per model; bars ours (mean ± std), dots paper."""
    import matplotlib.pyplot as plt

    metrics = [("align_l8", "alignment F1"), ("retr_l8", "retrieval ρ"), ("trans_l8", "translation τ")]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.27
    x = np.arange(len(ids))
    for k, (m, name) in enumerate(metrics):
        mean = [stats(ours, i, m)[0] for i in ids]
        std = [stats(ours, i, m)[1] for i in ids]
        ax.bar(x + (k - 1) * width, mean, width, yerr=np.nan_to_num(std), label=f"{name} (ours)", capsize=2)
        p = paper[paper["metric"] == m].set_index("experiment")["mean"]
        ax.scatter(x + (k - 1) * width, [p.get(i, np.nan) for i in ids], color="black", marker="_", s=120,
                   zorder=3, label="paper" if k == 0 else None)
    ax.set_xticks(x, [f"{i}: {labels[i]}" for i in ids], fontsize=7, rotation=25, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("layer 8")
    ax.legend(fontsize=7, ncol=4, loc="upper right")
    fig.tight_layout()
    return fig


def plot_token_pca(model, shift: int, specials: np.ndarray, sample: list[int], tokenizer, seed: int = 0):
    """Figure 4: PCA of the layer-0 token embeddings (input embedding matrix) of English and Fake-English."""
    import matplotlib.pyplot as plt

    emb = model.bert.embeddings.word_embeddings.weight.detach().float().cpu().numpy()
    english = np.array([i for i in range(shift) if i not in set(specials.tolist())])
    both = np.concatenate([emb[english], emb[english + shift]])
    centred = both - both.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    xy = centred @ vt[:2].T
    n = len(english)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 8))
    top.scatter(xy[:n, 0], xy[:n, 1], s=2, label="English", alpha=0.6)
    top.scatter(xy[n:, 0], xy[n:, 1], s=2, label="Fake-English", alpha=0.6)
    top.legend(markerscale=5)
    top.set_title("all tokens")
    pos = {t: k for k, t in enumerate(english)}
    for t in sample:
        k = pos[t]
        word = tokenizer.id_to_token(int(t))
        bottom.scatter(*xy[k], color="C0", s=10)
        bottom.scatter(*xy[n + k], color="C1", s=10)
        bottom.annotate(word, xy[k], fontsize=7, color="C0")
        bottom.annotate("::" + word, xy[n + k], fontsize=7, color="C1")
    bottom.set_title("a sample of tokens")
    fig.tight_layout()
    return fig


def position_similarity(model) -> np.ndarray:
    pos = model.bert.embeddings.position_embeddings.weight.detach().float()
    pos = torch.nn.functional.normalize(pos, dim=1)
    return (pos @ pos.T).cpu().numpy()


def plot_position_similarity(models: dict[str, object], slots: int = 256):
    """Figures 5/8: cosine similarity of position embeddings (0-127 English, 128-255 Fake-English under lang-pos)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 4), squeeze=False)
    for ax, (title, model) in zip(axes[0], models.items()):
        im = ax.imshow(position_similarity(model)[:slots, :slots], vmin=-1, vmax=1, cmap="viridis")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("position id")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8)
    return fig


def plot_curves(curves: pd.DataFrame, ids: list[str], labels: dict[str, str]):
    """Figure 6: multilinguality and perplexity against training steps, median and interquartile range over seeds."""
    import matplotlib.pyplot as plt

    panels = [("retr_l0", "retr_l8", "trans_l0", "trans_l8", "mu"), ("ppl_train", "ppl_dev")]
    # panels that are compared share their axes: the same step range per model, the same scale per row
    fig, axes = plt.subplots(2, len(ids), figsize=(5 * len(ids), 6.5), squeeze=False, sharex="col", sharey="row")
    for col, exp in enumerate(ids):
        sub = curves[curves["experiment"] == str(exp)]
        if sub.empty:  # not trained yet: say so instead of drawing empty axes
            for row in range(2):
                axes[row][col].text(0.5, 0.5, f"model {exp}: awaits its GPU run", ha="center", va="center",
                                    transform=axes[row][col].transAxes)
            axes[0][col].set_title(f"{exp}: {labels[str(exp)]}")
            continue
        for row, metrics in enumerate(panels):
            ax = axes[row][col]
            for m in metrics:
                # median and interquartile range over seeds: one seed that did not learn stays visible in the band
                # without dragging the line (a mean ± std does, and runs below 0 on a log scale)
                g = sub[sub["metric"] == m].groupby("step")["value"]
                mid, low, high = g.median(), g.quantile(0.25), g.quantile(0.75)
                ax.plot(mid.index, mid.values, label=m, lw=2 if m == "mu" else 1)
                ax.fill_between(mid.index, low, high, alpha=0.2)
            if row == 1:
                ax.set_yscale("log")
                ax.set_xlabel("training step")
            ax.legend(fontsize=7)
        axes[0][col].set_title(f"{exp}: {labels[str(exp)]}")
    fig.tight_layout()
    return fig
