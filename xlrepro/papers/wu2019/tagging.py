"""What Wu & Dredze's two tagging tasks on the released mBERT share (Table 4 NER, `ner.NerLab`; Table 5 POS,
`pos.PosLab`): the encoder and run folder, the fine-tuning recipe, one cached run per (learning rate, seed), the
learning rate selected on English dev over the paper's grid, and the zero-shot rows. A task says how it reads its
sentences and scores a model (`train_data`, `dev_score`, `test_score`) and names its metric."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import torch

from xlrepro import atomic
from xlrepro.config import ConfigError, check_seeds, choose
from xlrepro.models import device_name
from xlrepro.paths import runs_dir
from xlrepro.resources import load_encoder
from xlrepro.runkeys import run_key
from xlrepro.training.finetune import FinetuneConfig
from xlrepro.training.token_finetune import finetune_tokens

from .plan import TransferPlan, load_plan


class TaggingLab:
    """Base of the tasks fine-tuned on English and tested zero-shot. Subclasses set TASK ("ner" | "pos" | "mldoc" |
    "parsing"), METRIC (the dev metric: "f1" | "accuracy" | "las"), TABLE (the paper's table, for docstrings) and
    LANGUAGES (their test languages), and define `train_data`, `dev_score`, `test_score` (or `test_scores`) and
    `run_config`, and `fit` where the model is not a token tagger; `self.tags` must be set before a run."""

    TASK = METRIC = TABLE = ""
    RESULTS = ""  # the results file's name (default <task>.csv)
    LANGUAGES: dict = {}

    def __init__(self, paths, plan: TransferPlan | None = None, *, languages=None,
                 max_train_sentences: int | None = None, max_test_sentences: int | None = None,
                 epochs: int | None = None, device=None, root: Path | None = None, progress: bool = False):
        self.plan = plan or load_plan()
        for name, value in (("max_train_sentences", max_train_sentences),
                            ("max_test_sentences", max_test_sentences), ("epochs", epochs)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ConfigError(f"{name} must be None or a positive integer; got {value!r}")
        what = f"{self.TASK.upper()} language"
        self.languages = [choose(what, lang, self.LANGUAGES) for lang in (languages or self.LANGUAGES)]
        if "en" not in self.languages:
            self.languages.insert(0, "en")
        self.paths = paths
        self.max_train, self.max_test, self.epochs = max_train_sentences, max_test_sentences, epochs
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.encoder, self.tokenizer = load_encoder(paths.encoder)
        self.pad_id = self.tokenizer.pad_token_id or 0
        shrunk = (max_train_sentences, max_test_sentences, epochs) != (None, None, None)
        name = Path(paths.encoder).name + (f"-tr{max_train_sentences}-te{max_test_sentences}-e{epochs}"
                                           if shrunk else "")
        self.root = Path(root or runs_dir() / "wu2019" / "paper" / name)
        self.progress = progress
        self._sentences: dict = {}

    # --- what a task defines ------------------------------------------------------------------------------------
    def train_data(self, max_length: int):
        raise NotImplementedError

    def dev_score(self, model) -> float:
        raise NotImplementedError

    def test_score(self, model, lang: str) -> float:
        raise NotImplementedError

    def run_config(self, config: FinetuneConfig) -> dict:
        raise NotImplementedError

    def fit(self, config: FinetuneConfig):
        """The fine-tuned model and its history; the tagging tasks' token fine-tuning unless a task says otherwise
        (MLDoc's [CLS] classifier, the parser's biaffine heads)."""
        train, _ = self.train_data(config.max_length)
        return finetune_tokens(config, self.encoder, train, len(self.tags), pad_id=self.pad_id, device=self.device,
                               progress=self.progress)

    def test_scores(self, model, lang: str) -> dict[str, float]:
        """Each metric of a language's test set (a task with several, as parsing's UAS and LAS, overrides this)."""
        return {self.METRIC: self.test_score(model, lang)}

    # --- runs -----------------------------------------------------------------------------------------------------
    def config(self, lr: float, seed: int) -> FinetuneConfig:
        recipe = dict(self.plan.recipe)
        if self.epochs is not None:
            recipe["epochs"] = self.epochs
        return FinetuneConfig(**{**recipe, "lr": float(lr), "seed": int(seed)})

    def run(self, config: FinetuneConfig) -> dict:
        """Fine-tune on English; the metric on English dev and on each language's test set; cached per config."""
        key = run_key(self.run_config(config))
        path = self.root / self.TASK / "en" / f"lr{config.lr:g}-seed{config.seed}-{key}.json"
        with atomic.locked(path):
            if path.exists():
                result = json.loads(path.read_text())
                if set(self.languages) <= set(result["test"]):
                    return result
            model, history = self.fit(config)
            result = {"config": config.to_json(), f"dev_{self.METRIC}": self.dev_score(model),
                      "test": {lang: self.test_scores(model, lang) for lang in self.languages},
                      "history": history, "device": device_name(self.device), "run_config": self.run_config(config)}
            atomic.write_json(path, result)
            return result

    def selection(self) -> pd.DataFrame:
        """English dev score of each learning rate of the paper's grid, seed 0."""
        dev = f"dev_{self.METRIC}"
        return pd.DataFrame([{"lr": lr, dev: self.run(self.config(lr, 0))[dev]} for lr in self.plan.paper["lr_grid"]])

    def zero_shot(self, seeds=None) -> pd.DataFrame:
        """The paper's table: long rows (experiment "zero-shot", seed, language, metric, value) at the selected lr."""
        seeds = check_seeds(seeds if seeds is not None else self.plan.seeds)
        sel = self.selection()
        lr = float(sel.loc[sel[f"dev_{self.METRIC}"].idxmax(), "lr"])
        rows = []
        for seed in seeds:
            result = self.run(self.config(lr, seed))
            rows += [{"experiment": "zero-shot", "seed": seed, "language": lang, "metric": metric, "value": value}
                     for lang in self.languages for metric, value in result["test"][lang].items()]
        return pd.DataFrame(rows)

    def write_table(self, results, seeds, **data) -> Path:
        """``<name>_selection.csv`` (lr, dev score: not a long results frame) and ``<name>.csv`` (the zero-shot long
        rows) into `results` (default: the run folder's ``results/``), marked as the paper profile's with the
        encoder and `data` (what the task read); <name> is `RESULTS`'s stem, else the task's. Returns the folder."""
        from xlrepro.results import write_csv

        from .xnli import mark_results
        folder = Path(results) if results is not None else self.root / "results"
        folder.mkdir(parents=True, exist_ok=True)
        mark_results(folder, self.paths.encoder, **data)
        name = Path(self.RESULTS).stem if self.RESULTS else self.TASK
        with atomic.atomic_path(folder / f"{name}_selection.csv") as tmp:
            self.selection().to_csv(tmp, index=False)
        write_csv(self.zero_shot(seeds), folder / f"{name}.csv")
        return folder
