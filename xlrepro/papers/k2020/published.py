"""Re-rendering the K et al. (2020) chapters from their published results, where the trained cells are not here.

The published run trained the B-BERT cells on GPU machines (runs/k2020/lab); its results are the long CSVs of
book/results/k2020. On a machine without those cells a chapter would show every experiment as pending, so its
published text could not be re-rendered after a template change. `choose_source` decides, by the rules of Wu &
Dredze's chapters (`xlrepro.papers.wu2019.published.choose_source`), whether a chapter reads the published CSVs
instead of the cells: "runs" always reads the cells; "published" reads the CSVs, and only for the published run
(`publish`), with every parameter at its default and the chapter's files in the folder; "auto" (the default) picks
"published" only where those conditions hold, on a CPU, and no cell of the chapter is trained here.

`ChapterFrames` is what a chapter reads, whichever the source: the results, the experiments still pending, the
folder it writes to, and `save`, which writes (runs) or checks that the frame the chapter rebuilt is byte-identical
to the published file and writes nothing (published).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from xlrepro.config import ConfigError, choose

from .constants import CHAPTERS

NAME = "k2020"
SOURCES = ("auto", "runs", "published")
# the published CSVs each chapter reads (book/results/k2020/<name>.csv); the first is the chapter's results
FILES = {"linguistic": ("linguistic", "overlap"), "architecture": ("architecture",),
         "input_objective": ("input_objective", "tokenization"), "mixed_pairs": ("mixed_pairs",)}
# The run whose results book/results/k2020/*.csv hold: the chapters' published execution (its run records), the
# devices that trained its cells and the commit it ran.
PUBLISHED_RUN = {"date": "2026-11-27", "devices": "NVIDIA H100 80GB HBM3, NVIDIA H200", "commit": "8823996"}
# The chapter parameters of the published run, at their defaults (the notebooks' parameters cell)
DEFAULTS = {"profile": "lab", "train": False, "experiments": None, "overlap": True, "seeds": None, "results": None}


def differing_parameters(**parameters) -> list[str]:
    """The chapter parameters that differ from the published run's defaults, as 'name=value' (empty: none)."""
    unknown = [k for k in parameters if k not in DEFAULTS]
    if unknown:
        raise ConfigError(f"unknown chapter parameter {', '.join(unknown)}; valid choices: {', '.join(DEFAULTS)}")
    return [f"{k}={v!r}" for k, v in parameters.items() if v != DEFAULTS[k]]


def trained_here(chapter: str, profile: str = "lab") -> list[str]:
    """The chapter's experiments with at least one evaluated seed under runs/k2020/<profile>."""
    from .bbert import Cell
    from .config import experiments_of, load_plan
    from .constants import PARTS

    plan = load_plan()
    names = dict.fromkeys(n for p in PARTS[chapter] for n in experiments_of(plan, p))
    done = []
    for name in names:
        cell = Cell(plan, profile, name)
        if any(cell.evaluated(s) for s in cell.seeds):
            done.append(name)
    return done


def choose_source(chapter: str, source: str = "auto", *, publish: bool = False, device: str | None = None,
                  folder: str | Path | None = None, **parameters) -> tuple[str, str]:
    """("runs" or "published", why). `source`: "runs" reads the trained cells; "published" reads the published
    CSVs (`FILES`) and raises ConfigError unless `publish`, every parameter at the published run's default
    (`differing_parameters`) and the files in `folder` (default book/results/k2020); "auto" picks "published" only
    when those hold, the device is a CPU and no cell of the chapter is trained here (`trained_here`), else "runs"."""
    from xlrepro.devices import default_device
    from xlrepro.results import results_dir

    choose("source", source, SOURCES)
    choose("chapter", chapter, CHAPTERS)
    differing = differing_parameters(**parameters)
    if source == "runs":
        return "runs", "source='runs'"
    folder = Path(folder) if folder is not None else results_dir(NAME)
    from xlrepro.results import published_blockers, published_or
    from xlrepro.runrecord import shown
    missing = [f"{n}.csv" for n in FILES[chapter] if not (folder / f"{n}.csv").is_file()]
    decided = published_or(source, chapter, published_blockers(publish=publish, differing=differing, missing=missing,
                                                               where=shown(folder)), "runs")
    if decided is not None:
        return decided
    device = str(device or default_device())
    if not device.startswith("cpu"):
        return "runs", f"a {device} machine reads (or, with xlrepro train {NAME}, trains) the cells"
    done = trained_here(chapter, parameters.get("profile", "lab"))
    if done:
        return "runs", f"{len(done)} of the chapter's experiments are trained here"
    return "published", f"this machine has no GPU and none of the chapter's trained cells (runs/{NAME}/lab)"


@dataclass
class ChapterFrames:
    """What a chapter reads: `results` (every cell with its majority/<cell> baselines), `todo` (experiments without
    results), `names` (the chapter's experiments at its profile), `folder` (where it writes: claims.csv, its run
    record and, from the runs, its results), `source` ("runs" or "published"), `why`, and `not_run` (experiment ->
    why: the chapter's experiments its profile does not run, `config.not_run`)."""
    chapter: str
    profile: str
    source: str
    why: str
    names: list
    folder: Path
    results: pd.DataFrame
    todo: list
    overlap_wanted: bool = True
    _published_record: dict = field(default_factory=dict)
    not_run: dict = field(default_factory=dict)

    def save(self, frame: pd.DataFrame, name: str) -> Path | None:
        """From the runs: `frame` into `<folder>/<name>.csv` (nothing where it is empty). From the published
        results: nothing is written; `frame` must be the published file byte for byte as `write_csv` writes it
        (else RuntimeError: the chapter would show numbers other than the published ones)."""
        from .bbert import RESULT_COLUMNS
        from .report import save

        if self.source == "runs":
            return save(frame, self.folder, name)
        path = self.folder / f"{name}.csv"
        out = frame[RESULT_COLUMNS].copy()
        out["experiment"] = out["experiment"].astype(str)
        if out.to_csv(index=False) != path.read_text():
            raise RuntimeError(f"{path.name}: the frame the chapter rebuilt differs from the published file")
        return path

    def overlap(self, names, name: str) -> pd.DataFrame:
        """The word-piece overlap rows of `names` (`report.overlap_rows`, from the cells' tokenizers; empty when
        the chapter's `overlap` is False), or, from the published results, `<name>.csv`'s rows of `names`."""
        from .bbert import RESULT_COLUMNS
        from .report import overlap_rows

        if self.source == "runs":
            return overlap_rows(names, self.profile) if self.overlap_wanted else pd.DataFrame(columns=RESULT_COLUMNS)
        frame = _read(self.folder / f"{name}.csv")
        return frame[frame["experiment"].isin(list(names))].reset_index(drop=True)

    def notice(self) -> str:
        """The Markdown line at the chapter's top where it is rendered from the published results (else empty)."""
        if self.source == "runs":
            return ""
        run = PUBLISHED_RUN
        files = ", ".join(f"`{n}.csv`" for n in FILES[self.chapter])
        return (f"**Rendered from the published results** of {run['date']} (commit {run['commit']}; cells trained "
                f"on {run['devices']}): this execution read {files} of `book/results/{NAME}` and trained nothing, "
                f"because {self.why}. Rerun `xlrepro run {NAME}/{self.chapter} --publish` where the trained cells "
                f"are (runs/{NAME}/lab) to read them instead.")

    def run_notes(self) -> dict:
        """Fields for the run record: from the runs, what the published models cost (`report.compute_notes`); from
        the published results, where the numbers come from, with the published run's costs as its record gave
        them (the training records are not in the published results)."""
        from .report import compute_notes

        if self.source == "runs":
            return compute_notes(self.results, self.names, self.profile)
        run = PUBLISHED_RUN
        kept = {k: self._published_record[k] for k in ("pre-training", "fine-tuning") if k in self._published_record}
        return {"training devices": f"{run['devices']} (the published run)", **kept,
                "source": f"published results of {run['date']} (commit {run['commit']}), re-rendered; nothing "
                          f"trained"}

    def cost(self) -> list:
        """What the chapter shows of each table's cost: [caption, frame] from the runs' training records (nothing
        where none is trained); from the published results, which hold the fine-tunings' seconds but not the
        pre-training records, the fine-tuning columns alone, with a line saying so."""
        from IPython.display import Markdown

        from .report import CHAPTER_TABLES, COST_CAPTION, cost_by_table

        cost = cost_by_table(self.results, self.names, CHAPTER_TABLES[self.chapter], self.profile)
        if not len(cost):
            return []
        caption = COST_CAPTION
        if self.source == "published":
            cost = cost.drop(columns=["pre-training worker-min", "models with a training record"])
            caption += (f". *Pre-training not re-rendered:* its minutes per table need the cells' training records "
                        f"(runs/{NAME}/lab), which the published results do not hold; the run record gives the "
                        f"published run's total")
        return [Markdown(caption), cost.style.hide(axis="index").format(precision=1)]


def _read(path: Path) -> pd.DataFrame:
    from xlrepro.results import read_csv

    return read_csv(path)


def chapter_frames(chapter: str, profile: str = "lab", source: str = "auto", *, train: bool = False,
                   experiments=None, seeds=None, overlap: bool = True, results=None, publish: bool = False,
                   folder: str | Path | None = None, device: str | None = None) -> ChapterFrames:
    """Everything a chapter's setup cell does before it shows anything: the parameters checked (`source` among
    `SOURCES`, then `choose_source`'s conditions), then the chapter's results read from the trained cells
    (`report.collect`, trained first where `train`: the smoke profile only) or from the published CSVs in `folder`
    (default book/results/k2020; only for `publish`), and saved (runs) or checked against the published file."""
    from .bbert import RESULT_COLUMNS
    from .config import experiments_of, load_plan, not_run
    from .constants import PARTS
    from .report import chapter_folder, collect, missing

    choose("chapter", chapter, CHAPTERS)
    choose("source", source, SOURCES)
    if train and profile != "smoke":
        raise ConfigError("the chapters train only the smoke profile; train the lab cells with xlrepro train k2020")
    chosen, why = choose_source(chapter, source, publish=publish, device=device, folder=folder, profile=profile,
                                train=train, experiments=experiments, seeds=seeds, overlap=overlap, results=results)
    plan = load_plan()
    skipped = not_run(plan, PARTS[chapter], profile)
    names = list(dict.fromkeys(n for p in PARTS[chapter] for n in experiments_of(plan, p) if n not in skipped)) \
        if experiments is None else list(experiments)
    if chosen == "published":
        from xlrepro.results import results_dir

        out = Path(folder) if folder is not None else results_dir(NAME)
        ours = _read(out / f"{chapter}.csv")
        record = out / f"run_record_{chapter}.json"
        kept = json.loads(record.read_text()) if record.is_file() else {}
    else:
        out = chapter_folder(chapter, profile, results, publish)
        ours = collect(names, profile, train=train, seeds=seeds)
        kept = {}
    frames = ChapterFrames(chapter, profile, chosen, why, names, out,
                           ours if len(ours) else pd.DataFrame(columns=RESULT_COLUMNS), missing(ours, names),
                           overlap, kept, skipped)
    frames.save(frames.results, chapter)
    return frames
