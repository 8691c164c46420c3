"""Re-rendering the Wu & Dredze chapters from their published results, where the fine-tuning cache is gone.

The published run (`PUBLISHED_RUN`) fine-tuned mini-mBERT on a GPU machine; its results are the long CSVs of
book/results/wu2019. Its encoder and fine-tuning runs are not kept, so on a CPU a chapter at the published settings
could only retrain (days). `choose_source` decides, in one place, whether a chapter is rendered from the published
CSVs instead: only for the published run (`publish=True`, results into book/results/wu2019), only when every
parameter equals the published run's default, only on a CPU, and only where the chapter would otherwise have to
train. Any other configuration trains (or stops at the CPU guard of `xlrepro run`): published numbers are never
shown for another configuration.

`PublishedLab` has the methods of `transfer.TransferLab` that the chapters call (`zero_shot`, `in_language`,
`majority_baseline`, `frozen`) and reads them from the CSVs, and the paraphrase task's results where the published run
has them (`paraphrase`, None otherwise: `OPTIONAL_FILES`); `save` checks that a frame the chapter would write is
byte-identical to the published file instead of writing it. `notice` is the Markdown the chapter shows at its top.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from xlrepro.config import ConfigError, choose, plural

SOURCES = ("auto", "train", "published")
CHAPTERS = ("q1_zero_shot", "q2_layers", "q3_language_id", "q4_subword_overlap")
# the published CSVs each chapter reads (book/results/wu2019/<name>.csv)
FILES = {"q1_zero_shot": ("zero_shot",), "q2_layers": ("frozen",), "q3_language_id": ("language_id",),
         "q4_subword_overlap": ("overlap", "zero_shot")}
# published CSVs a chapter shows where they exist and reports pending where not (the paraphrase task's results,
# `constants.PARAPHRASE_ARTIFACT`): never a condition of rendering from the published results
OPTIONAL_FILES = {"q1_zero_shot": ("paraphrase",), "q2_layers": (), "q3_language_id": (),
                  "q4_subword_overlap": ("paraphrase",)}
# The run whose results book/results/wu2019/*.csv hold: the machine that fine-tuned them (every run from one mini-mBERT,
# trained and fine-tuned in one GPU run) and the commit it ran.
PUBLISHED_RUN = {"date": "2026-11-26", "device": "2 x NVIDIA H200", "commit": "96cd505"}


def differing_parameters(plan, *, profile="lab", model="lab", languages=None, max_train_pairs=None,
                         max_test_pairs=None, epochs=None, results=None, seeds=None, probe=None) -> list[str]:
    """The chapter parameters that differ from the published run's defaults, as 'name=value' (empty: none).
    `seeds` None or the plan's seeds; `probe` None or a dict of the plan's probe sizes (None values: the plan's)."""
    out = [f"{k}={v!r}" for k, v, d in (("profile", profile, "lab"), ("model", model, "lab"))
           if v != d]
    out += [f"{k}={v!r}" for k, v in (("languages", languages), ("max_train_pairs", max_train_pairs),
                                      ("max_test_pairs", max_test_pairs), ("epochs", epochs), ("results", results))
            if v is not None]
    if seeds is not None and [int(s) for s in seeds] != [int(s) for s in plan.seeds]:
        out.append(f"seeds={list(seeds)!r}")
    for k, v in (probe or {}).items():
        choose("probe size", k, list(plan.probe))
        if v is not None and v != plan.probe[k]:
            out.append(f"{k}={v!r}")
    return out


def training_needed(chapter: str, plan=None) -> str | None:
    """The full-size training a chapter at the published settings would start here: the published encoder's
    pretraining, or (Q1, Q2, Q4) its fine-tuning runs; None where the cache holds them."""
    from xlrepro.paths import runs_dir

    from .plan import load_plan, mini_mbert_for

    choose("chapter", chapter, CHAPTERS)
    config, _ = mini_mbert_for(plan or load_plan(), "lab")
    if not (config.default_dir() / "training.json").exists():
        return f"pretraining mini-mBERT ({config.steps} steps)"
    if chapter != "q3_language_id" and not any((runs_dir() / "wu2019" / "lab" / "finetune").glob("*/*/*.json")):
        return "the wu2019 fine-tuning runs at the plan's settings"
    return None


def choose_source(chapter: str, source: str = "auto", *, publish: bool = False, device: str | None = None,
                  folder: str | Path | None = None, plan=None, **parameters) -> tuple[str, str]:
    """("train" or "published", why). `source`: "train" always trains; "published" renders from the published
    CSVs and raises ConfigError unless the conditions below hold; "auto" picks "published" only when they hold and
    the chapter would otherwise train on a CPU. Conditions: `publish`, every parameter (`differing_parameters`) at
    the published run's default, and the chapter's published CSVs in `folder` (default book/results/wu2019)."""
    from xlrepro.results import results_dir

    from .plan import load_plan

    choose("source", source, SOURCES)
    choose("chapter", chapter, CHAPTERS)
    plan = plan or load_plan()
    if source == "train":
        return "train", "source='train'"
    folder = Path(folder) if folder is not None else results_dir("wu2019")
    missing = [f"{n}.csv" for n in FILES[chapter] if not (folder / f"{n}.csv").exists()]
    return _decide(source, chapter, publish=publish, differing=differing_parameters(plan, **parameters),
                   missing=missing, where="book/results/wu2019", device=device,
                   needed=lambda: training_needed(chapter, plan), cached="the fine-tuning cache holds this chapter's runs",
                   absent="the published run's fine-tuning cache")


def _decide(source: str, chapter: str, *, publish: bool, differing: list[str], missing: list[str], where: str,
            device, needed, cached: str, absent: str) -> tuple[str, str]:
    """The rules `choose_source` and `lab_source` share, once `source` is not "train": what blocks rendering from the
    published files (not the published run, a parameter off its default, a file missing), then, for "auto", a GPU
    (which retrains) and `needed()` (the training the chapter would start here, for want of `absent`; None: the cache
    holds it, `cached`)."""
    from xlrepro.devices import default_device

    from xlrepro.results import published_blockers, published_or
    decided = published_or(source, chapter, published_blockers(publish=publish, differing=differing, missing=missing,
                                                               where=where), "train")
    if decided is not None:
        return decided
    device = str(device or default_device())
    if not device.startswith("cpu"):
        return "train", f"a {device} device retrains"
    need = needed()
    if need is None:
        return "train", cached
    return "published", f"this machine has no GPU and not {absent} (retraining would begin with {need})"


class PublishedLab:
    """The published results of one chapter, with the `TransferLab` methods the chapters call.

    Trains and loads nothing (no encoder, no tokenizer): the depth and the encoder's folder name come from the plan's
    `lab` encoder config. `pending_runs` lists the plan's in-language runs that the published results lack.
    """

    source = "published"

    def __init__(self, chapter: str, plan=None, folder: str | Path | None = None, reason: str = "",
                 run: dict | None = None):
        from xlrepro.data.multilingual import LANGUAGES
        from xlrepro.paths import runs_dir
        from xlrepro.results import results_dir

        from .plan import load_plan, mini_mbert_for

        self.chapter = choose("chapter", chapter, CHAPTERS)
        self.plan = plan or load_plan()
        self.folder = Path(folder) if folder is not None else results_dir("wu2019")
        missing = [f"{n}.csv" for n in FILES[chapter] if not (self.folder / f"{n}.csv").exists()]
        if missing:
            raise ConfigError(f"no published {', '.join(missing)} in {self.folder.name}: nothing to render from")
        self.reason, self.run_info = reason, dict(run or PUBLISHED_RUN)
        self.model = "lab"
        config, _ = mini_mbert_for(self.plan, "lab")
        self.model_dir, self.depth = config.default_dir(), config.size.layers
        self.languages = list(LANGUAGES)
        if self.plan.train_language not in self.languages:
            self.languages.insert(0, self.plan.train_language)
        self.root = runs_dir() / "wu2019" / "lab"  # where the fine-tuning runs would be (absent here)
        self.pending_runs: list[tuple[str, int]] = []
        self._frames: dict[str, pd.DataFrame] = {}
        self._test_keys = None

    # --- the data (no model needed) ----------------------------------------------------------------------------
    def pairs(self, lang: str, split: str) -> pd.DataFrame:
        """The section task's verse pairs, as `TransferLab.pairs` gives them at the published settings."""
        from xlrepro.tasks.sections import parallel_keys, verse_pairs

        if split == "test":
            if self._test_keys is None:
                self._test_keys = parallel_keys(self.languages, "test")
            return verse_pairs(lang, "test", keys=self._test_keys)
        return verse_pairs(lang, split)

    # --- the published CSVs ------------------------------------------------------------------------------------
    def read(self, name: str) -> pd.DataFrame:
        """book/results/wu2019/<name>.csv (one of this chapter's files), read once."""
        from xlrepro.results import read_csv

        choose("published file", name, FILES[self.chapter] + OPTIONAL_FILES[self.chapter])
        if name not in self._frames:
            self._frames[name] = read_csv(self.folder / f"{name}.csv")
        return self._frames[name].copy()

    def _rows(self, name: str, experiments) -> pd.DataFrame:
        df = self.read(name)
        return df[df["experiment"].isin(list(experiments))].reset_index(drop=True)

    def _check_seeds(self, seeds) -> None:
        if seeds is not None and [int(s) for s in seeds] != [int(s) for s in self.plan.seeds]:
            raise ConfigError(f"the published results hold seeds {self.plan.seeds}; got seeds={list(seeds)}")

    def zero_shot(self, seeds=None) -> pd.DataFrame:
        self._check_seeds(seeds)
        return self._rows("zero_shot", ["zero-shot"])

    def majority_baseline(self) -> pd.DataFrame:
        return self._rows("zero_shot", ["majority"])

    def in_language(self, languages=None, train_missing=None) -> pd.DataFrame:
        """The published in-language rows; the plan's (language, seed) runs they lack go to `pending_runs`."""
        if train_missing:
            raise ConfigError("a chapter rendered from the published results trains nothing (train_missing=True)")
        rows = self._rows("zero_shot", ["in-language"])
        have = set(zip(rows["language"], rows["seed"].astype(int)))
        missing = [(lang, int(s)) for s in self.plan.in_language_seeds for lang in (languages or self.languages)
                   if (lang, int(s)) not in have]
        self.pending_runs += [m for m in missing if m not in self.pending_runs]
        if missing:
            print(f"{plural(len(missing), 'in-language run')} await{'s' if len(missing) == 1 else ''} a GPU run: "
                  f"xlrepro train wu2019 --part in-language")
        return rows

    def frozen(self, seeds=None) -> pd.DataFrame:
        self._check_seeds(seeds)
        return self.read("frozen")

    def language_id(self) -> pd.DataFrame:
        return self.read("language_id")

    def overlap(self) -> pd.DataFrame:
        return self.read("overlap")

    def paraphrase(self) -> pd.DataFrame | None:
        """The paraphrase task's published results (`paraphrase.py`'s contract), or None where the published run
        has none yet (its runs are pending)."""
        from .constants import PARAPHRASE_ARTIFACT as ARTIFACT

        return self.read(ARTIFACT) if (self.folder / f"{ARTIFACT}.csv").exists() else None

    def save(self, frame: pd.DataFrame, path: str | Path) -> Path:
        """Nothing is written: `frame` must be what the published file holds, byte for byte as `write_csv` would
        write it (else RuntimeError: the chapter would show numbers other than the published ones)."""
        path = Path(path)
        out = frame.copy()
        if "experiment" in out.columns:
            out["experiment"] = out["experiment"].astype(str)
        if out.to_csv(index=False) != path.read_text():
            raise RuntimeError(f"{path.name}: the frame the chapter rebuilt differs from the published file")
        return path

    # --- what the chapter says ---------------------------------------------------------------------------------
    def notice(self) -> str:
        run = self.run_info
        present = [n for n in OPTIONAL_FILES[self.chapter] if (self.folder / f"{n}.csv").exists()]
        files = ", ".join(f"`{n}.csv`" for n in FILES[self.chapter] + tuple(present))
        return (f"**Rendered from the published results** of {run['date']} ({run['device']}, commit "
                f"{run['commit']}): this execution read {files} of `book/results/wu2019` and trained nothing, "
                f"because {self.reason or 'source=published was asked for'}. Sections that need the model itself are "
                f"marked as not re-rendered. Rerun on a GPU with `xlrepro run wu2019/{self.chapter} --publish` to "
                f"retrain.")

    def not_rendered(self, what: str) -> str:
        return (f"*Not re-rendered:* {what} The published results do not hold it; `xlrepro run "
                f"wu2019/{self.chapter} --publish` on a GPU retrains and shows it.")

    def run_notes(self) -> dict:
        """Fields for the run record: where the numbers come from."""
        run = self.run_info
        return {"source": f"published results of {run['date']} (commit {run['commit']}), re-rendered; nothing "
                          f"trained", "training devices": f"{run['device']} (the published run)"}


# ------------------------------------------------------------------ the multilingual lab chapter (the plan's encoder)
# What the lab chapter shows of the encoder, kept beside its results by the published run (book/results/multilingual):
# the pretraining record (`training.json` of `mini_mbert.pretrain`) and the retrieval table.
LAB_FILES = ("mini_mbert_training.json", "retrieval.csv")
LAB_RETRIEVAL_SENTENCES = 1000  # the published run's retrieval sample


def lab_source(source: str = "auto", *, publish: bool = False, model: str = "lab", languages=None,
               retrieval_sentences: int = LAB_RETRIEVAL_SENTENCES, device: str | None = None,
               folder: str | Path | None = None, plan=None) -> tuple[str, str]:
    """("train" or "published", why) for the multilingual/lab chapter, by `choose_source`'s rules: "published"
    renders the encoder's card and the retrieval table from the published run's files (`LAB_FILES`) only for the
    published run (`publish`) at its defaults (model "lab", every language, `LAB_RETRIEVAL_SENTENCES`), and ("auto")
    only on a CPU without the encoder in the cache, where the chapter would otherwise pretrain it."""
    from xlrepro.paths import repo_root

    from .plan import load_plan, mini_mbert_for

    choose("source", source, SOURCES)
    if source == "train":
        return "train", "source='train'"
    folder = Path(folder) if folder is not None else repo_root() / "book" / "results" / "multilingual"
    differing = [f"{k}={v!r}" for k, v, d in (("model", model, "lab"), ("languages", languages, None),
                                              ("retrieval_sentences", retrieval_sentences, LAB_RETRIEVAL_SENTENCES))
                 if v != d]
    config, _ = mini_mbert_for(plan or load_plan(), "lab")
    pretraining = f"pretraining mini-mBERT ({config.steps} steps)"
    return _decide(source, "multilingual/lab", publish=publish, differing=differing,
                   missing=[n for n in LAB_FILES if not (folder / n).exists()], where="book/results/multilingual",
                   device=device, cached="the encoder is in the cache", absent="the published encoder",
                   needed=lambda: None if (config.default_dir() / "training.json").exists() else pretraining)
