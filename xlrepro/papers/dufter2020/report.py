"""Rendering for the Dufter & Schütze chapters: results of a run as tidy frames and figures (claims: xlrepro.claims).

The notebooks call these functions; each figure function returns a matplotlib Figure.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch

from xlrepro.config import ConfigError, check_profile, check_seeds, plural
from xlrepro.devices import default_device
from xlrepro.health import without_failed  # noqa: F401 - the chapters leave failed runs out of their means
from xlrepro.results import MISSING, results_dir, stats

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
    # where the chapter's frames come from (`SOURCES`; `chapter_frames`) and the published results folder
    source: str = "runs"
    published: Path | None = None

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
                print(f"{plural(len(todo), 'model')} await{'s' if len(todo) == 1 else ''} a GPU run "
                      f"({', '.join(m.key for m in todo)}); on a GPU: {self.train_command(todo)}")
            return
        done = run_grid(self.chapter.name, ids, self.seeds, large_seeds=self.large_seeds, profile=self.profile,
                        root=self.root, epochs=self.epochs, max_sentences=self.max_sentences, time_limit=time_limit,
                        batch_size=self.batch_size)
        if not done:
            raise RuntimeError("the time limit stopped training; run the notebook again to resume from checkpoints")

    def train_command(self, members) -> str:
        """The `xlrepro train` command that trains `members` (at the paper's settings) on a GPU."""
        ids = " ".join(dict.fromkeys(m.exp.id for m in members))
        extra = "" if self.profile == "lab" else f" --profile {self.profile}"
        if self.seeds != list(self.chapter.seeds):
            extra += " --seeds " + " ".join(map(str, self.seeds))
        if self.large_seeds != self.seeds:
            extra += " --large-seeds " + " ".join(map(str, self.large_seeds))
        return f"xlrepro train {self.chapter.name} --ids {ids}{extra} --compile"

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

    def model(self, exp_id: str, seed: int, lab) -> "LoadedModel":
        """A trained model of the run (weights saved by the grid) and its note (`load_model`); `lab` the chapter's
        `LabData` (`load_lab`), whose tokenizer is checked against the vocabulary the model was trained with."""
        if not hasattr(lab, "fe"):
            raise TypeError(f"pass the chapter's LabData (load_lab(profile)), not {type(lab).__name__}: its tokenizer "
                            f"is checked against the model's vocabulary")
        return load_model(self.root, self.chapter, self.members([exp_id])[self.seeds_of(exp_id).index(seed)],
                          lab.fe.vocab_size, lab.fe.tokenizer)


def chapter_run(chapter_name: str, profile: str = "lab", seeds=None, large_seeds=None, epochs=None,
                max_sentences=None, results: str | Path | None = None, batch_size=None,
                publish: bool = False, source: str = "runs", published: str | Path | None = None) -> ChapterRun:
    """Validate a notebook's parameters (errors name the valid choices) and locate its run and results folder.

    `source` (`SOURCES`): "runs" reads (and trains) the run folder; "published" reads the published results
    (`published`, default book/results/<paper>), which hold the lab profile at the paper's settings and seeds only:
    any other value of those parameters is a ConfigError."""
    from xlrepro.config import choose

    chapter = load_chapter(chapter_name)
    choose("source", source, SOURCES)
    check_profile(profile)
    seeds = check_seeds(list(chapter.seeds) if seeds is None else seeds)
    large_seeds = seeds if large_seeds is None else check_seeds(large_seeds)
    for name, value in (("epochs", epochs), ("max_sentences", max_sentences), ("batch_size", batch_size)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ConfigError(f"{name} must be None (the paper's setting) or a positive integer; got {value!r}")
    if source == "published":
        differ = [f"{k}={v!r}" for k, v, default in (
            ("profile", profile, "lab"), ("seeds", seeds, list(chapter.seeds)),
            ("large_seeds", large_seeds, list(chapter.seeds)), ("epochs", epochs, None),
            ("max_sentences", max_sentences, None), ("batch_size", batch_size, None)) if v != default]
        if differ:
            raise ConfigError(f"source='published' reads the published run (profile 'lab', the paper's settings and "
                              f"seeds {list(chapter.seeds)}); got {', '.join(differ)}. Use source='runs'")
    root = run_root(chapter_name, profile, epochs, max_sentences, batch_size)
    folder = Path(results) if results else results_dir(chapter_name) if publish else root / "results"
    published = Path(published) if published is not None else results_dir(chapter_name)
    return ChapterRun(chapter, profile, seeds, large_seeds, epochs, max_sentences, batch_size, root, folder,
                      source=source, published=published)


class ChapterSetup(NamedTuple):
    """What a chapter's setup cell binds: ``run, ch, labels = chapter_setup(...)``."""
    run: ChapterRun
    chapter: Chapter
    labels: dict[str, str]  # model ID -> its description, the label of tables and figures


def chapter_setup(profile: str = "lab", seeds=None, large_seeds=None, epochs=None, max_sentences=None,
                  results: str | Path | None = None, batch_size=None, publish: bool = False,
                  source: str = "runs") -> ChapterSetup:
    """The setup cell of every chapter that selects a run, from its parameters cell: `chapter_run` (the parameters
    checked, the run and results folders located), the chapter's configuration and each model ID's label; prints
    where the run (or, with source "published", the published results) and its results are and the seeds."""
    from xlrepro.runrecord import shown
    run = chapter_run("dufter2020", profile, seeds, large_seeds, epochs, max_sentences, results, batch_size,
                      publish=publish, source=source)
    ch = run.chapter
    read = ("run folder:", shown(run.root)) if source == "runs" else ("published results:", shown(run.published))
    print(*read, "| results:", shown(run.results), "| seeds:", run.seeds, "| BERT-base seeds:", run.large_seeds)
    return ChapterSetup(run, ch, {e: ch.experiment(e).description for e in ch.experiments})


SOURCES = ("runs", "published")
# The published long CSV (book/results/dufter2020/<name>.csv) that holds each chapter's frame, as the chapter writes
# it from the runs.
PUBLISHED_FILES = {"setup": "runtime", "architecture": "table1", "comparability": "table2",
                   "training_dynamics": "fig6", "knn_replace": "fig7"}
# The other published CSVs a chapter reads beside its frame (`ChapterFrames.results`, and knn_replace's neighbour
# table, Table 3 and Table 4, which it reads as the runs' chapter does).
PUBLISHED_ALSO = {"knn_replace": ("table1", "table10", "knn_table", "table3", "table3_pretraining", "table3_pilot",
                                   "table4")}
# Published CSVs that another run than their chapter's wrote: (date, commit). Table 3's pilot and then Table 3 under
# the variant the pilot chose (`xlrepro train dufter2020 --part table3-pilot`, then `--part table3 --recipe
# long-warmup`, two H200s), both at one commit; experiments.yaml made that variant the default at the next. The
# pilot's results were collected again from its run folder's records (with each model's GPU time) at a later commit.
TABLE3_RUN = ("2026-11-28", "afe3c14")
PUBLISHED_OWN_RUN = {"table3": TABLE3_RUN, "table3_pretraining": TABLE3_RUN,
                     "table3_pilot": ("2026-11-28", "afe3c14, collected at 5946f11")}
# The execution of each chapter that read the runs and wrote its published CSVs (its run record): the trained models
# themselves (runs/dufter2020/lab) are not kept with the book.
PUBLISHED_RUN = {"setup": ("2026-11-27", "8823996"), "architecture": ("2026-11-27", "8823996"),
                 "comparability": ("2026-11-26", "c224707"), "training_dynamics": ("2026-11-27", "8823996"),
                 "knn_replace": ("2026-11-27", "1096fc6")}
PUBLISHED_DEVICE = "NVIDIA H200"


@dataclass
class ChapterFrames:
    """What a chapter shows, from the runs or from its published CSV (`chapter_frames`).

    `frame`: the results (Tables 1 and 2: `load_results`), the curves (Figures 6 and 7: `load_curves`) or the
    stacks' timings (setup: `load_timings`). Other results a chapter shows come from `results`."""

    run: ChapterRun
    chapter: str
    frame: pd.DataFrame

    @property
    def published(self) -> bool:
        return self.run.source == "published"

    @property
    def folder(self) -> Path:
        """Where the chapter reads the results that other commands write (Table 3's table3.csv): the published
        results, else the run's results folder."""
        return self.run.published if self.published else self.run.results

    def results(self, name: str, ids, train: bool = True, time_limit: float | None = None) -> pd.DataFrame:
        """The final metrics (`load_results`'s frame) of the models of `ids`, which the chapter saves as <name>.csv.

        From the runs, the missing models are trained first (`ChapterRun.train`), or with `train=False` only marked
        pending, for models too costly for a chapter to start (Table 10's); from the published results, the rows of
        `ids` in <published>/<name>.csv (experiments it lacks are pending; none when the file is absent)."""
        from xlrepro.results import read_csv

        if not self.published:
            if train:
                self.run.train(ids, time_limit)
            else:
                todo = [m for m in self.run.members(ids) if not is_done(self.run.root, m)]
                self.run.pending += [m for m in todo if m not in self.run.pending]
            return self.run.results_frame(ids)
        path = self.run.published / f"{name}.csv"
        frame = read_csv(path) if path.exists() else pd.DataFrame(columns=["experiment", "seed", "metric", "value"])
        return rows_of(self.run, frame, ids)

    def save(self, frame: pd.DataFrame, name: str) -> Path:
        """`frame` as <results>/<name>.csv. From the published results nothing is written over them: the frame must
        equal the published file (else RuntimeError: the chapter would show other numbers than the published ones),
        and it is copied only into a results folder other than the published one."""
        from xlrepro.results import read_csv, write_csv

        path = self.run.results / f"{name}.csv"
        if not self.published:
            return write_csv(frame, path)
        source = self.run.published / f"{name}.csv"
        try:
            pd.testing.assert_frame_equal(frame.reset_index(drop=True).astype({"experiment": str}),
                                          read_csv(source), check_dtype=False)
        except AssertionError as err:
            raise RuntimeError(f"{name}.csv: the frame the chapter rebuilt differs from the published file: "
                               f"{str(err).splitlines()[0]}") from None
        return path if path.resolve() == source.resolve() else write_csv(frame, path)

    def notice(self) -> str:
        """One line on where the chapter's numbers come from (empty for the runs)."""
        if not self.published:
            return ""
        parts = [f"of {date} (commit {commit}): {', '.join(files)}" for (date, commit), files in self._runs().items()]
        return f"Rendered from the published results {'; and '.join(parts)}; nothing trained or loaded from runs/."

    def _runs(self) -> dict[tuple[str, str], list[str]]:
        """(date, commit) of each published run the chapter reads -> its files, the chapter's own run first."""
        runs: dict[tuple[str, str], list[str]] = {}
        for n in (PUBLISHED_FILES[self.chapter], *PUBLISHED_ALSO.get(self.chapter, ())):
            runs.setdefault(PUBLISHED_OWN_RUN.get(n, PUBLISHED_RUN[self.chapter]), []).append(f"{n}.csv")
        return runs

    def not_rendered(self, what: str, needs: str = "the trained models") -> str:
        """The one line a part that only the runs can draw shows instead, from the published chapter."""
        return not_rendered(self.chapter, what, needs)

    def published_figure(self, marker: str, what: str) -> None:
        """Show the figure the published chapter (book/dufter2020/<chapter>.ipynb) drew in its cell whose code holds
        `marker` (e.g. "fig = figure4("), under the line `not_rendered(what)`; a line saying so where it has none."""
        published_output(self.chapter, marker, what)

    def record_notes(self) -> dict | None:
        """Fields for the run record (`show_run_record`'s `notes`): where the numbers come from."""
        if not self.published:
            return None
        runs = self._runs()
        source = "; ".join(f"{date} (commit {commit})" for date, commit in runs)
        return {"source": f"published results of {source}, re-rendered; nothing trained",
                "training devices": f"{PUBLISHED_DEVICE} (the published run{'s' if len(runs) > 1 else ''})"}


def not_rendered(chapter: str, what: str, needs: str = "the trained models") -> str:
    """The one line a part of `chapter` that only the runs can draw shows instead, from the published chapter."""
    date, commit = PUBLISHED_RUN[chapter]
    return (f"{what} needs {needs}, which the published results do not hold: shown as published on {date} "
            f"(commit {commit}), not redrawn.")


def published_output(chapter: str, marker: str, what: str, needs: str = "the trained models",
                     tables: bool = False) -> None:
    """Show what the published chapter (book/dufter2020/<chapter>.ipynb) displayed in its cell whose code holds
    `marker`, under the line `not_rendered(chapter, what, needs)`: its first figure, or with `tables` every table
    (HTML) it displayed; a line saying so where it has none."""
    import base64

    import nbformat
    from IPython.display import HTML, Image, display

    from xlrepro.paths import repo_root

    print(not_rendered(chapter, what, needs))
    path = repo_root() / "book" / "dufter2020" / f"{chapter}.ipynb"
    cells = nbformat.read(path, as_version=4).cells if path.exists() else []
    mime = "text/html" if tables else "image/png"
    for cell in cells:
        if cell.cell_type == "code" and marker in cell.source:
            shown = [out["data"][mime] for out in cell.get("outputs", []) if mime in out.get("data", {})]
            for data in shown if tables else shown[:1]:
                display(HTML(data) if tables else Image(data=base64.b64decode(data)))
            if shown:
                return
    print(f"(the published chapter has no such {'table' if tables else 'figure'}: {path.name})")


def rows_of(run: ChapterRun, frame: pd.DataFrame, ids) -> pd.DataFrame:
    """The rows of a published long frame whose experiment is one of `ids` (all, for None); the models of the
    experiments it lacks join `run.pending` (their claims pending)."""
    if ids is None:
        return frame
    frame = frame[frame["experiment"].astype(str).isin([str(i) for i in ids])].reset_index(drop=True)
    have = set(frame["experiment"].astype(str))
    run.pending += [m for m in run.members([i for i in ids if str(i) not in have]) if m not in run.pending]
    return frame


def timings_from_runtime(runtime: pd.DataFrame, chapter: Chapter | None = None) -> pd.DataFrame:
    """`load_timings`'s frame from its long rows (`runtime_long`, runtime.csv): the size and epochs of each stack
    come from its experiments' configuration; runtime.csv does not record the GPU, so `device` is MISSING."""
    chapter = chapter or load_chapter()
    if not len(runtime):
        return pd.DataFrame()
    wide = (runtime.pivot_table(index=["stack", "experiment"], columns="metric", values="value", aggfunc="first")
            .reset_index().sort_values("stack"))
    rows = []
    for _, r in wide.iterrows():
        exps = str(r["experiment"]).split(",")
        sizes = {chapter.experiment(e).size for e in exps if e in chapter.experiments}
        rows.append({"stack": int(r["stack"]), "models": int(r["models"]), "size": sizes.pop() if len(sizes) == 1
                     else MISSING, "steps": int(r["steps"]), "epochs": corpus_epochs([f"{e}/0" for e in exps], chapter),
                     "train_seconds": float(r["train_seconds"]), "steps_per_second": float(r["steps_per_second"]),
                     "seconds_per_model": float(r["train_seconds"]) / int(r["models"]), "device": MISSING,
                     "experiments": str(r["experiment"])})
    return pd.DataFrame(rows)


def chapter_frames(run: ChapterRun, chapter: str, ids=None, time_limit: float | None = None) -> ChapterFrames:
    """The frame `chapter` (setup, architecture, comparability, training_dynamics, knn_replace) shows, from
    `run.source`.

    "runs": the models of `ids` are trained where missing (`ChapterRun.train`) and read from the run folder
    (`load_results`, `load_curves`; setup: `load_timings`). "published": the same frame read from the chapter's
    published CSV (`PUBLISHED_FILES`) in `run.published`, its rows of `ids` (default: all); nothing is trained, and
    experiments of `ids` the file lacks are `run.pending`'s (their claims pending)."""
    from xlrepro.config import choose
    from xlrepro.results import read_csv

    choose("chapter", chapter, list(PUBLISHED_FILES))
    if run.source == "runs":
        if chapter == "setup":
            frame = load_timings(run.root)
        else:
            run.train(ids, time_limit)
            frame = run.curves_frame(ids) if chapter in ("training_dynamics", "knn_replace") else run.results_frame(ids)
        return ChapterFrames(run, chapter, frame)
    path = run.published / f"{PUBLISHED_FILES[chapter]}.csv"
    if not path.exists():
        raise ConfigError(f"source='published': no {path.name} in {path.parent} to render chapter {chapter} from")
    frame = read_csv(path)
    if chapter == "setup":
        frame = timings_from_runtime(frame, run.chapter)
    else:
        frame = rows_of(run, frame, ids)
    data = ChapterFrames(run, chapter, frame)
    print(data.notice())
    return data


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


def corpus_epochs(members, chapter: Chapter | None = None) -> float:
    """How many passes over the whole two-language corpus a stack's models train: their experiments' epochs, halved
    for no-parallel models (Table 2: half of the corpus for each language, twice the epochs, the same steps).
    `members`: keys "<ID>/<seed>"; an ID the chapter does not know counts as the default 100 epochs."""
    chapter = chapter or load_chapter()
    passes = [(e.epochs / 2 if e.no_parallel else e.epochs) if (e := chapter.experiments.get(m.split("/")[0]))
              else 100 for m in members]
    return max(passes) if passes else 100


def load_timings(root: Path) -> pd.DataFrame:
    """Wall time and throughput of every trained stack of a run folder, with its models' epochs (`corpus_epochs`);
    `stack` numbers the stacks from 1 in the order of their folders' names."""
    rows = []
    for i, path in enumerate(sorted((root / "stacks").glob("*/timing.json")), 1):
        t = json.loads(path.read_text())
        rows.append({"stack": i, "models": len(t["members"]), "size": t["size"], "steps": t["steps"],
                     "epochs": corpus_epochs(t["members"]),
                     "train_seconds": t["train_seconds"], "steps_per_second": t["steps_per_second"],
                     "seconds_per_model": t["train_seconds"] / len(t["members"]), "device": t["device"],
                     "experiments": ",".join(sorted({m.split("/")[0] for m in t["members"]}))})
    return pd.DataFrame(rows)


RUNTIME_METRICS = ("models", "steps", "train_seconds", "steps_per_second")


def runtime_long(timings: pd.DataFrame) -> pd.DataFrame:
    """`load_timings` as the long rows of runtime.csv: per stack (column `stack`), its models, steps, training time
    and throughput, under the experiment IDs it trained (e.g. "15,16"). Several stacks can train the same IDs (other
    seeds), so `stack` is part of a row's key; `seed` is -1."""
    return (timings.assign(experiment=timings["experiments"], seed=-1)
            .melt(id_vars=["experiment", "seed", "stack"], value_vars=list(RUNTIME_METRICS), var_name="metric"))


def table5_for_readers(timings: pd.DataFrame, paper: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 5 for a reader: per model size, the models trained, the stacks' training time per model, and the
    paper's single-GPU time per model; and the stacks one per row with human column names (for a collapsed block).

    `timings`: `load_timings`; `paper`: the paper's Table 5 (long: experiment, metric, mean). The stacks shared GPUs,
    so a stack's time divided by its models is a share of a GPU, not a speed. The paper's times are for 100 epochs;
    models trained longer (17-250 of Table 10) get rows of their own, without a paper number."""
    sizes = {"small": ("BERT-small, Bible", "small-bible"), "base": ("BERT-base, Bible", "base-bible")}
    minutes = paper[paper["metric"] == "runtime_minutes"].set_index("experiment")["mean"]
    if len(timings) and "epochs" not in timings:
        timings = timings.assign(epochs=100)
    rows = []
    for size, (label, exp) in sizes.items():
        t = timings[timings["size"] == size] if len(timings) else timings
        for epochs in sorted({100, *(t["epochs"] if len(t) else [])}):
            e = t[t["epochs"] == epochs] if len(t) else t
            models = int(e["models"].sum()) if len(e) else 0
            rows.append({"model": f"{label}, {epochs:g} epochs", "models trained": models, "stacks": len(e),
                         "ours: training time per model (stack time / models)":
                             f"{e['train_seconds'].sum() / models / 60:.1f} min" if models else "not trained yet",
                         "paper: time per model (one GTX 1080Ti)":
                             f"∼{minutes[exp]:.0f} min" if exp in minutes and epochs == 100 else MISSING})
    if "base-wikipedia" in minutes:
        rows.append({"model": "BERT-base, Wikipedia (§5)", "models trained": 0, "stacks": 0,
                     "ours: training time per model (stack time / models)": "not run (no Wikipedia offline)",
                     "paper: time per model (one GTX 1080Ti)": f"∼{minutes['base-wikipedia'] / 60 / 24:.1f} days"})
    stacks = timings.rename(columns={"experiments": "model IDs", "size": "size", "models": "models",
                                     "steps": "steps", "train_seconds": "training time (s)",
                                     "steps_per_second": "steps / s (whole stack)",
                                     "seconds_per_model": "seconds per model", "device": "GPU"})
    if len(stacks):
        stacks = stacks[["model IDs", "size", "models", "steps", "training time (s)", "steps / s (whole stack)",
                         "seconds per model", "GPU"]].round(1)
    return pd.DataFrame(rows).set_index("model"), stacks


# Runs trained before vocabularies were fingerprinted (the published grid) lost their vocabulary's id order: HF's
# trainer numbered pieces in a hash order that changes with every training (xlrepro.tokenization). Measured on the
# lab corpus: 92 to 534 of the 2,048 ids (median 494) and up to 5 pieces differed between two of 11 trainings.
UNFINGERPRINTED = ("trained before vocabularies were fingerprinted: its vocabulary's id order is lost, so token labels "
                   "may differ for up to a quarter of pieces (between two trainings of the vocabulary on the same "
                   "corpus, 92 to 534 of 2,048 ids changed)")


class VocabularyMismatch(RuntimeError):
    """A run's recorded vocabulary is not the one of the cache it is read with."""


class LoadedModel(NamedTuple):
    """A trained model and, for runs without a recorded vocabulary, the note a chapter shows beside its figure."""
    model: object
    note: str | None


def run_vocabulary(folder: Path) -> str | None:
    """The fingerprint of the vocabulary a run was trained with (config.json, else metrics.json); None for runs made
    before it was recorded."""
    for name, get in (("config.json", lambda d: d.get("recorded", {}).get("vocabulary")),
                      ("metrics.json", lambda d: d.get("vocabulary"))):
        path = Path(folder) / name
        if path.exists() and get(json.loads(path.read_text())):
            return get(json.loads(path.read_text()))
    return None


def load_model(root: Path, chapter: Chapter, member, vocab_size: int, tokenizer) -> LoadedModel:
    """A trained model of the run (weights saved by the grid); `member` from `grid_members`; `tokenizer` the English
    tokenizer of the cache the chapter reads (`load_lab(...).fe.tokenizer`).

    The run's recorded vocabulary fingerprint must be the tokenizer's (else VocabularyMismatch, naming both); a run
    without one loads with the note UNFINGERPRINTED."""
    from safetensors.torch import load_model as load_weights

    from xlrepro.engine.models import init_model
    from xlrepro.tokenization import vocab_fingerprint

    folder = member_dir(root, member)
    recorded, current = run_vocabulary(folder), vocab_fingerprint(tokenizer)
    if recorded is not None and recorded != current:
        raise VocabularyMismatch(
            f"model {member.key} (run key {member.run_key}) was trained with vocabulary {recorded}, but the cache's "
            f"tokenizer is vocabulary {current}: its token ids mean other pieces. Read it with the cache it was "
            f"trained on, or retrain it on this one")
    model = init_model(chapter.size(member.exp), vocab_size, member.seed)
    load_weights(model, str(folder / "model.safetensors"))
    return LoadedModel(model.eval(), None if recorded else f"model {member.key}: {UNFINGERPRINTED}")


# ------------------------------------------------------------------------------------------ figures
# The figures live in figures.py, one function per figure of the paper; these names are kept for the chapters.
from .figures import figure1 as plot_summary, figure4 as plot_token_pca, figure6 as plot_curves  # noqa: E402,F401
from .figures import position_similarity  # noqa: E402,F401

