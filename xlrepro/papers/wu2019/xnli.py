"""Wu & Dredze's Table 3 on the paper's own data (the paper profile): the released mBERT fine-tuned on English
MultiNLI, selected on English XNLI dev, and tested zero-shot on the XNLI test set of every language.

Resources (`xlrepro.resources`; `xlrepro prepare --profile paper --only wu2019/q1_zero_shot` fetches or names them):
the encoder ($XLREPRO_MBERT, a local folder, else the hub id google-bert/bert-base-multilingual-cased from the hub
cache), MultiNLI's ``multinli_1.0_train.jsonl`` ($XLREPRO_MULTINLI_DIR) and XNLI 1.0's ``xnli.dev.tsv`` and
``xnli.test.tsv`` ($XLREPRO_XNLI_DIR). A missing one stops with a one-line ConfigError; nothing falls back to the
lab's stand-ins.

`XnliLab` has the methods of `transfer.TransferLab` that the Q1 chapter calls (`pairs`, `selection`,
`selected_lr`, `zero_shot`, `in_language`, `majority_baseline`, `save`, `notice`, `run_notes`), so the chapter runs
unchanged under ``-p profile paper``. The fine-tuning mechanics are the lab's (`xlrepro.training.finetune`: the
[CLS] classifier, AdamW with beta2 0.99, linear warm-up and decay); the learning-rate grid is the paper's
(`experiments.yaml`, ``paper.lr_grid``). Every run is cached as one JSON file under
``runs/wu2019/paper/<encoder>[-limits]/finetune/``, beside the lab's ``runs/wu2019/<model>/``, and keyed by a hash of
everything that sets its numbers (recipe, encoder, data files, limits).

    lab = XnliLab(resolve_paths(), languages=["de", "fr"], max_train_pairs=2000)
    table3 = lab.zero_shot([0])                 # long rows: experiment, seed, language, metric, value
    figure1 = lab.frozen([0])                   # Figure 1's XNLI panel: "all", "freeze-n", "feature-based" rows

`figure1` runs the frozen-layers experiment (the embeddings and the bottom n layers frozen, n in the paper's
-1 [nothing frozen], 0, 3, 6, 9) end to end and writes ``frozen.csv``, the file of the Q2 chapter.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from xlrepro import atomic
from xlrepro.config import ConfigError, check_seeds, choose
from xlrepro.models import device_name
from xlrepro.paths import runs_dir
from xlrepro.resources import NLI_LABELS, XNLI_LANGUAGES, load_encoder, locate, mbert_encoder, read_multinli, read_xnli
from xlrepro.runkeys import run_key
from xlrepro.tasks.sections import majority_class
from xlrepro.training.finetune import FinetuneConfig, encode_pairs, evaluate, finetune

from .constants import PROFILE_FILE
from .plan import TransferPlan, load_plan

TRAIN_FILE = "multinli_1.0_train.jsonl"
RESULTS = "zero_shot.csv"  # the file name the Q1 chapter writes, in the paper profile's own folder
FROZEN = "frozen.csv"  # the file name the Q2 chapter writes


@dataclass(frozen=True)
class XnliPaths:
    encoder: str  # a hub id or a folder written by save_pretrained
    multinli: Path  # multinli_1.0_train.jsonl
    xnli: Path  # the folder holding xnli.dev.tsv and xnli.test.tsv


def resolve_paths(encoder: str | os.PathLike | None = None, multinli: str | os.PathLike | None = None,
                  xnli: str | os.PathLike | None = None) -> XnliPaths:
    """The resources of Table 3: the arguments where given, else the registry's (`xlrepro.resources.locate`:
    $XLREPRO_MBERT / $XLREPRO_MULTINLI_DIR / $XLREPRO_XNLI_DIR, then the prepared cache; the encoder, else the hub
    id, which `load_encoder` reads from the hub cache). A data file that cannot be found raises a one-line
    ConfigError naming the variable and `xlrepro prepare`."""
    def folder(name: str, given, files) -> Path:
        path = Path(given) if given is not None else locate(name)
        if path is None or not all((path / f).is_file() for f in files):
            env = {"multinli": "XLREPRO_MULTINLI_DIR", "xnli": "XLREPRO_XNLI_DIR"}[name]
            where = f"not in {given}" if given is not None else f"${env} unset or incomplete, not prepared"
            raise ConfigError(f"the paper profile's Table 3 (mBERT fine-tuned on MultiNLI, tested on XNLI) needs "
                              f"{', '.join(files)} ({where}): set {env} to the folder that holds them, or run "
                              f"`xlrepro prepare --profile paper --only wu2019/q1_zero_shot` on a machine with a "
                              f"network")
        return path
    multinli_dir = folder("multinli", Path(multinli).parent if multinli and Path(multinli).is_file() else multinli,
                          (TRAIN_FILE,))
    xnli_dir = folder("xnli", xnli, ("xnli.dev.tsv", "xnli.test.tsv"))
    return XnliPaths(mbert_encoder(encoder), multinli_dir / TRAIN_FILE, xnli_dir)


def _shown(path_or_id: str | os.PathLike) -> str:
    """A local path as the run record shows paths (relative to the repository, else its name only); a hub id as
    it is."""
    from xlrepro.runrecord import shown

    return shown(path_or_id) if Path(path_or_id).exists() else os.fspath(path_or_id)


def _file_identity(path: Path) -> dict:
    """What identifies a data file in a run key: its name and size (reading a 400 MB file to hash it is not
    worth it; a changed release changes its size)."""
    return {"name": path.name, "bytes": path.stat().st_size}


class XnliLab:
    """mBERT, English MultiNLI for training, XNLI for selection (English dev) and testing (every language).

    languages: XNLI test languages (default: all 15; English is always in). max_train_pairs / max_test_pairs:
    the first MultiNLI pairs / the first test pairs of each language (a smoke run; they go into the run folder's
    name). epochs: the recipe's (3) unless given. root: the run folder (default runs/wu2019/paper/<name>)."""

    source = "train"
    profile = "paper"

    def __init__(self, paths: XnliPaths, plan: TransferPlan | None = None, *, languages=None,
                 max_train_pairs: int | None = None, max_test_pairs: int | None = None, epochs: int | None = None,
                 device=None, root: Path | None = None, progress: bool = False):
        self.plan = plan or load_plan()
        for name, value in (("max_train_pairs", max_train_pairs), ("max_test_pairs", max_test_pairs),
                            ("epochs", epochs)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ConfigError(f"{name} must be None or a positive integer; got {value!r}")
        choose("training language of XNLI", self.plan.train_language, XNLI_LANGUAGES)
        self.languages = [choose("XNLI language", lang, XNLI_LANGUAGES) for lang in (languages or XNLI_LANGUAGES)]
        if self.plan.train_language not in self.languages:
            self.languages.insert(0, self.plan.train_language)
        self.paths = paths
        self.max_train_pairs, self.max_test_pairs, self.epochs = max_train_pairs, max_test_pairs, epochs
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.encoder, tokenizer = load_encoder(paths.encoder)
        self.tokenizer = tokenizer.backend_tokenizer  # a tokenizers.Tokenizer adding [CLS]/[SEP], as encode_pairs needs
        self.model_dir = Path(paths.encoder)  # its .name names the encoder in the chapter's first line
        shrunk = (max_train_pairs, max_test_pairs, epochs) != (None, None, None)
        name = self.model_dir.name + (f"-tr{max_train_pairs}-te{max_test_pairs}-e{epochs}" if shrunk else "")
        self.root = Path(root or runs_dir() / "wu2019" / "paper" / name)
        self.progress = progress
        self._pairs: dict = {}
        self._data: dict = {}
        self.pending_runs: list = []  # XNLI has no per-language training data: no in-language runs await

    # --- what the chapter shows about the run -------------------------------------------------------------------
    left_out = ""  # what a chapter's paper path leaves out of the paper's figure (`constants.PAPER_LEFT_OUT`)

    def notice(self) -> str:
        return (f"**Paper profile.** Encoder `{_shown(self.paths.encoder)}`, fine-tuned on English MultiNLI "
                f"(`{self.paths.multinli.name}`), tested zero-shot on XNLI 1.0 (`{_shown(self.paths.xnli)}`): the "
                f"paper's XNLI experiments on its own data. The verse-pair section task and mini-mBERT are not used."
                + (f" {self.left_out}" if self.left_out else ""))

    def run_notes(self) -> dict:
        return {"source": "paper profile: trained in this execution, or read from its fine-tuning cache",
                "encoder": _shown(self.paths.encoder), "training data": _shown(self.paths.multinli),
                "test data": _shown(self.paths.xnli)}

    def save(self, frame: pd.DataFrame, path) -> Path:
        from xlrepro.results import write_csv
        return write_csv(frame, path)

    @property
    def depth(self) -> int:
        return self.encoder.config.num_hidden_layers

    @property
    def n_labels(self) -> int:
        return len(NLI_LABELS)

    # --- data ---------------------------------------------------------------------------------------------------
    def pairs(self, lang: str, split: str) -> pd.DataFrame:
        """"train": MultiNLI (English only); "dev" / "test": XNLI's pairs of `lang` (columns first, second, label)."""
        choose("split", split, ("train", "dev", "test"))
        if (lang, split) not in self._pairs:
            if split == "train":
                if lang != self.plan.train_language:
                    raise ConfigError(f"the paper profile trains on English MultiNLI only; got language {lang!r}")
                frame = read_multinli(self.paths.multinli, self.max_train_pairs)
            else:
                frame = read_xnli(self.paths.xnli / f"xnli.{split}.tsv", languages=[lang])
                if frame.empty:
                    raise ConfigError(f"{self.paths.xnli / f'xnli.{split}.tsv'} has no pairs in language {lang!r}")
                if split == "test" and self.max_test_pairs is not None:
                    frame = frame.head(self.max_test_pairs)
            self._pairs[(lang, split)] = frame.reset_index(drop=True)
        return self._pairs[(lang, split)]

    def data(self, lang: str, split: str):
        if (lang, split) not in self._data:
            self._data[(lang, split)] = encode_pairs(self.tokenizer, self.pairs(lang, split),
                                                     self.plan.recipe.get("max_length", 128))
        return self._data[(lang, split)]

    def majority_baseline(self) -> pd.DataFrame:
        """Accuracy of always predicting the most frequent MultiNLI training label, per test language."""
        majority = majority_class(self.pairs(self.plan.train_language, "train")["label"])
        return pd.DataFrame([{"experiment": "majority", "seed": -1, "language": lang, "metric": "accuracy",
                              "value": float((self.pairs(lang, "test")["label"] == majority).mean())}
                             for lang in self.languages])

    # --- runs -----------------------------------------------------------------------------------------------------
    def config(self, lr: float, seed: int, **kw) -> FinetuneConfig:
        """The plan's recipe at this learning rate and seed; `kw` sets any other field of FinetuneConfig (e.g.
        ``freeze=3`` or ``feature_based=True``)."""
        recipe = dict(self.plan.recipe)
        if self.epochs is not None:
            recipe["epochs"] = self.epochs
        return FinetuneConfig(**{**recipe, **kw, "lr": float(lr), "seed": int(seed)})

    def run_config(self, config: FinetuneConfig) -> dict:
        """Everything that sets a run's numbers; its hash names the run's file."""
        return {"finetune": config.to_json(), "train_language": self.plan.train_language, "task": "xnli",
                "encoder": self.paths.encoder, "encoder_config": self.encoder.config.to_dict(),
                "train_file": _file_identity(self.paths.multinli),
                "test_files": [_file_identity(self.paths.xnli / f"xnli.{s}.tsv") for s in ("dev", "test")],
                "max_train_pairs": self.max_train_pairs, "max_test_pairs": self.max_test_pairs}

    def _path(self, config: FinetuneConfig) -> Path:
        key = run_key(self.run_config(config))
        return self.root / "finetune" / self.plan.train_language / config.mode / f"lr{config.lr:g}-seed{config.seed}-{key}.json"

    def run(self, config: FinetuneConfig) -> dict:
        """Fine-tune on English MultiNLI, select on English XNLI dev, test in every language; cached. Returns
        {"config", "train_language", "dev_accuracy", "test": {lang: {accuracy, macro_f1}}, "history", "device"}."""
        path = self._path(config)
        with atomic.locked(path):
            if path.exists():
                result = json.loads(path.read_text())
                if set(self.languages) <= set(result["test"]):
                    return result
            train_lang = self.plan.train_language
            model, history = finetune(config, self.encoder, self.data(train_lang, "train"), self.n_labels,
                                      dev=self.data(train_lang, "dev"), device=self.device, progress=self.progress)
            test = {}
            for lang in self.languages:
                acc, f1 = evaluate(model, self.data(lang, "test"), self.device, self.n_labels)
                test[lang] = {"accuracy": acc, "macro_f1": f1}
            result = {"config": config.to_json(), "train_language": train_lang,
                      "dev_accuracy": history["dev_accuracy"][-1], "test": test, "history": history,
                      "device": device_name(self.device), "run_config": self.run_config(config)}
            atomic.write_json(path, result)
            return result

    def selection(self) -> pd.DataFrame:
        """English XNLI dev accuracy of each learning rate of the paper's grid (fine-tune all, seed 0)."""
        return pd.DataFrame([{"lr": lr, "dev_accuracy": self.run(self.config(lr, 0))["dev_accuracy"]}
                             for lr in self.plan.paper["lr_grid"]])

    def selected_lr(self) -> float:
        sel = self.selection()
        return float(sel.loc[sel["dev_accuracy"].idxmax(), "lr"])

    def zero_shot(self, seeds=None) -> pd.DataFrame:
        """Table 3: fine-tune all on English MultiNLI at the selected learning rate, test on XNLI in every
        language; long rows (experiment "zero-shot", seed, language, metric accuracy / macro_f1, value)."""
        seeds = check_seeds(seeds if seeds is not None else self.plan.seeds)
        lr = self.selected_lr()
        rows = []
        for seed in seeds:
            result = self.run(self.config(lr, seed))
            rows += [{"experiment": "zero-shot", "seed": seed, "language": lang, "metric": metric, "value": value}
                     for lang in self.languages for metric, value in result["test"][lang].items()]
        return pd.DataFrame(rows)

    def freeze_levels(self) -> list[int]:
        """The frozen depths of Figure 1: the paper's 0, 3, 6 and 9 of mBERT's 12 layers, the same fractions of
        another encoder's depth (`experiments.yaml`, ``freeze_fractions``); 0 freezes the embeddings only."""
        return self.plan.freeze_levels(self.depth)

    def frozen(self, seeds=None, levels=None, feature_based: bool = True) -> pd.DataFrame:
        """Figure 1's XNLI panel: fine-tune on English MultiNLI at the selected learning rate with the embeddings
        and the bottom n layers frozen, test on XNLI in every language. Long rows as `zero_shot`'s, the experiment
        named by the run's mode: "all" (the paper's n = -1, nothing frozen: Table 3's runs), "freeze-n", and
        "feature-based" (the whole encoder frozen, a learned mix of every hidden state and a classifier, trained at
        the plan's ``feature_lr``; the paper's BiLSTM on top is left out, as in the lab).

        levels: the n to run, -1 for fine-tune-all (default: -1 and `freeze_levels()`, the paper's -1, 0, 3, 6, 9
        on mBERT); each in -1..depth."""
        seeds = check_seeds(seeds if seeds is not None else self.plan.seeds)
        if levels is None:
            levels = [-1, *self.freeze_levels()]
        for n in levels:
            if not isinstance(n, int) or isinstance(n, bool) or not -1 <= n <= self.depth:
                raise ConfigError(f"a frozen depth is -1 (fine-tune all) or 0..{self.depth} (the encoder's layers); "
                                  f"got {n!r}")
        lr = self.selected_lr()
        configs = [self.config(lr, s, freeze=None if n == -1 else n) for s in seeds for n in dict.fromkeys(levels)]
        if feature_based:
            configs += [self.config(self.plan.feature_lr, s, feature_based=True) for s in seeds]
        rows = []
        for config in configs:
            result = self.run(config)
            rows += [{"experiment": config.mode, "seed": config.seed, "language": lang, "metric": metric,
                      "value": value} for lang in self.languages for metric, value in result["test"][lang].items()]
        return pd.DataFrame(rows)

    def in_language(self, languages=None, train_missing=None) -> pd.DataFrame:
        """XNLI 1.0 has no training data in the other languages (their Table 3 shows zero-shot only): no rows."""
        return pd.DataFrame(columns=["experiment", "seed", "language", "metric", "value"])

    def timings(self) -> pd.DataFrame:
        rows = []
        for path in sorted(self.root.glob("finetune/*/*/*.json")):
            r = json.loads(path.read_text())
            rows.append({"train_language": r["train_language"], "mode": path.parent.name,
                         "run": f"lr{r['config']['lr']:g}-seed{r['config']['seed']}",
                         "steps": r["history"]["steps"], "seconds": r["history"]["seconds"], "device": r["device"]})
        return pd.DataFrame(rows)


def mark_results(folder: str | os.PathLike, encoder: str, **data: str) -> Path:
    """Record in a results folder that its numbers are the paper profile's (the encoder, and the data files of each
    table written there, added to what an earlier table recorded), so that readers of the folder
    (`differences.where_we_differ`) do not attach the lab's stand-in causes to them."""
    path = Path(folder) / PROFILE_FILE
    known = json.loads(path.read_text()) if path.is_file() else {}
    atomic.write_json(path, {**known, "profile": "paper", "encoder": _shown(encoder),
                             **{k: _shown(v) for k, v in data.items()}})
    return path


def _selected(paths: XnliPaths, results, **options) -> tuple[XnliLab, Path]:
    """The lab, its results folder (marked as the paper profile's) and ``selection.csv`` (lr, dev_accuracy: not a
    long results frame) written there: what Table 3 and Figure 1 start from."""
    lab = XnliLab(paths, **options)
    folder = Path(results) if results is not None else lab.root / "results"
    folder.mkdir(parents=True, exist_ok=True)
    mark_results(folder, lab.paths.encoder, xnli_train=str(lab.paths.multinli), xnli_test=str(lab.paths.xnli))
    with atomic.atomic_path(folder / "selection.csv") as tmp:
        lab.selection().to_csv(tmp, index=False)
    return lab, folder


def table3(paths: XnliPaths, *, languages=None, seeds=None, max_train_pairs=None, max_test_pairs=None, epochs=None,
           device=None, root=None, results=None) -> Path:
    """Run Table 3 end to end outside a chapter: the selection, the zero-shot runs and the majority baseline,
    written as ``selection.csv`` and ``zero_shot.csv`` into `results` (default: the run folder's ``results/``).
    Returns the results folder."""
    lab, folder = _selected(paths, results, languages=languages, max_train_pairs=max_train_pairs,
                            max_test_pairs=max_test_pairs, epochs=epochs, device=device, root=root)
    lab.save(pd.concat([lab.zero_shot(seeds), lab.majority_baseline()], ignore_index=True), folder / RESULTS)
    return folder


def figure1(paths: XnliPaths, *, levels=None, feature_based: bool = True, languages=None, seeds=None,
            max_train_pairs=None, max_test_pairs=None, epochs=None, device=None, root=None, results=None) -> Path:
    """Run Figure 1's XNLI panel end to end: ``selection.csv`` and ``frozen.csv`` (long rows of `XnliLab.frozen`)
    into `results` (default: the run folder's ``results/``, shared with Table 3, whose fine-tune-all runs it reuses).
    Returns the results folder."""
    lab, folder = _selected(paths, results, languages=languages, max_train_pairs=max_train_pairs,
                            max_test_pairs=max_test_pairs, epochs=epochs, device=device, root=root)
    lab.save(lab.frozen(seeds, levels, feature_based), folder / FROZEN)
    return folder
