"""Zero-shot cross-lingual transfer experiments (Wu & Dredze 2019, Q1 and Q2) on the lab stand-ins.

Data: the verse-pair section task (`xlrepro.tasks.sections`); encoder: mini-mBERT (`xlrepro.training.mini_mbert`);
mechanics: `xlrepro.training.finetune`. The plan (seeds, learning-rate grid, recipe, frozen depths) is declared once in
`xlrepro/papers/wu2019/experiments.yaml`. Every fine-tuning run is cached as one JSON file under
runs/wu2019/<model>/..., so a chapter, the CLI (`xlrepro train wu2019`) and an interrupted run share results.

Test sets are the pairs present in every language (`parallel_keys`), so they are translations of each other,
as XNLI's are.

`task` picks the pair task (`xlrepro.tasks.pairs`): "sections" (the default, the chapters' published numbers) or
"paraphrase" (same verse in two editions of one language or not; en, fr, es, de, it, tl only). A paraphrase lab
keeps its runs in a folder of its own (runs/wu2019/<model>-paraphrase) and records the task in every run's
configuration; the section task's folders and run keys are those it had before the paraphrase task existed.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import torch

from xlrepro import atomic
from xlrepro.config import ConfigError, check_seeds, choose, plural
from xlrepro.data.multilingual import check_language
from xlrepro.engine.models import device_name
from xlrepro.paths import runs_dir
from xlrepro.runkeys import run_key
from xlrepro.tasks.pairs import DEFAULT_PAIR_TASK, check_pair_task, pair_task, run_config_task
from xlrepro.tasks.sections import majority_class
from xlrepro.training.finetune import FinetuneConfig, encode_pairs, evaluate, finetune

from .constants import PARTS
from .plan import (PROBE_KEYS, RECIPE_KEYS, TransferPlan, load_plan,  # noqa: F401  (read as transfer.<name>)
                   mini_mbert_for)


def ensure_mini_mbert(plan: TransferPlan, model: str = "lab", device=None) -> Path:
    """The encoder's folder in the cache, pretraining it first where it is missing (resumable)."""
    from xlrepro.training.mini_mbert import pretrain

    config, max_sentences = mini_mbert_for(plan, model)
    out = config.default_dir()
    if not (out / "training.json").exists():
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        print(f"mini-mBERT '{model}' is not in the cache ({out}): pretraining it now on {device} "
              f"({config.steps} steps)")
        pretrain(config, device, max_sentences_per_language=max_sentences)
    return out


class TransferLab:
    """One encoder, the section task in every language, and the cache of fine-tuning results.

    `max_train_pairs` / `max_test_pairs` shrink the data (smoke runs; they go into the cache folder's name),
    `languages` restricts the test languages (the training language is always included; default: every language
    the task has), `task` is the pair task ("sections" or "paraphrase", see the module's docstring).
    """

    def __init__(self, plan: TransferPlan | None = None, model: str = "lab", *, device=None,
                 languages=None, max_train_pairs: int | None = None, max_test_pairs: int | None = None,
                 epochs: int | None = None, root: Path | None = None, progress: bool = True,
                 task: str = DEFAULT_PAIR_TASK):
        from xlrepro.training.mini_mbert import load_mini_mbert

        try:
            self.task = pair_task(task)
            self.plan = plan or load_plan()
            self.languages = [self.task.check_language(check_language(lang))
                              for lang in (languages or self.task.languages)]
            self.task.check_language(self.plan.train_language)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.model = model
        if self.plan.train_language not in self.languages:
            self.languages.insert(0, self.plan.train_language)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model_dir = ensure_mini_mbert(self.plan, model, self.device)
        self.encoder, self.tokenizer = load_mini_mbert(self.model_dir)
        self.max_train_pairs, self.max_test_pairs, self.epochs = max_train_pairs, max_test_pairs, epochs
        shrunk = (max_train_pairs, max_test_pairs, epochs) != (None, None, None)
        name = f"{model}-tr{max_train_pairs}-te{max_test_pairs}-e{epochs}" if shrunk else model
        if self.task.name != DEFAULT_PAIR_TASK:
            name = f"{name}-{self.task.name}"
        self.root = Path(root or runs_dir() / "wu2019" / name)
        self.progress = progress
        self._data: dict = {}
        self._test_keys = None
        self.pending_runs: list[tuple[str, int]] = []  # (language, seed) of in-language runs awaiting a GPU

    source = "train"  # as opposed to published.PublishedLab, which reads the published results
    task = pair_task(DEFAULT_PAIR_TASK)  # the instance's own, set in __init__

    def notice(self) -> str:
        """Nothing to say: this lab trains (or reads its own fine-tuning cache)."""
        return ""

    def save(self, frame: pd.DataFrame, path) -> Path:
        """Write a results frame (`xlrepro.results.write_csv`)."""
        from xlrepro.results import write_csv
        return write_csv(frame, path)

    def run_notes(self) -> dict:
        return {"source": "trained in this execution, or read from its fine-tuning cache"}

    @property
    def depth(self) -> int:
        return self.encoder.config.num_hidden_layers

    # --- data ---------------------------------------------------------------------------------------------------
    @property
    def n_labels(self) -> int:
        return len(self.task.labels)

    def pairs(self, lang: str, split: str) -> pd.DataFrame:
        if split == "test":  # translations of each other: the keys present in every test language
            if self._test_keys is None:
                self._test_keys = self.task.parallel_keys(self.languages, "test")
            return self.task.pairs(lang, "test", keys=self._test_keys, max_pairs=self.max_test_pairs)
        limit = self.max_train_pairs if split == "train" else self.max_test_pairs
        return self.task.pairs(lang, split, max_pairs=limit)

    def data(self, lang: str, split: str):
        key = (lang, split)
        if key not in self._data:
            self._data[key] = encode_pairs(self.tokenizer, self.pairs(lang, split), self.plan.recipe.get("max_length", 128))
        return self._data[key]

    def majority_baseline(self) -> pd.DataFrame:
        """Accuracy of always predicting the majority label of the English train pairs, per test language."""
        majority = majority_class(self.pairs(self.plan.train_language, "train")["label"])
        rows = [{"experiment": "majority", "seed": -1, "language": lang, "metric": "accuracy",
                 "value": float((self.pairs(lang, "test")["label"] == majority).mean())} for lang in self.languages]
        return pd.DataFrame(rows)

    # --- runs -----------------------------------------------------------------------------------------------------
    def config(self, lr: float, seed: int, **kw) -> FinetuneConfig:
        """The plan's recipe with this learning rate and seed; any other field of FinetuneConfig may be overridden."""
        recipe = dict(self.plan.recipe)
        if self.epochs is not None:
            recipe["epochs"] = self.epochs
        return FinetuneConfig(**{**recipe, **kw, "lr": float(lr), "seed": int(seed)})

    def run_config(self, config: FinetuneConfig, train_lang: str) -> dict:
        """Everything that determines a fine-tuning run's numbers: the recipe, the training language, the encoder
        (its folder and pretraining config) and the data limits. Its hash names the run's cache file."""
        encoder = json.loads((self.model_dir / "config.json").read_text()) if (self.model_dir / "config.json").exists() \
            else None
        return {"finetune": config.to_json(), "train_language": train_lang, "encoder": self.model_dir.name,
                "encoder_config": encoder, "max_train_pairs": self.max_train_pairs,
                "max_test_pairs": self.max_test_pairs, **run_config_task(self.task.name)}

    def _path(self, config: FinetuneConfig, train_lang: str) -> Path:
        key = run_key(self.run_config(config, train_lang))
        return self.root / "finetune" / train_lang / config.mode / f"lr{config.lr:g}-seed{config.seed}-{key}.json"

    def run(self, config: FinetuneConfig, train_lang: str | None = None, test_langs=None) -> dict:
        """Fine-tune on `train_lang`'s train pairs (default: the plan's), test on `test_langs` (default: every
        language); cached. Returns {"config", "train_language", "dev_accuracy", "test": {lang: {accuracy,
        macro_f1}}, "history", "device"}."""
        train_lang = check_language(train_lang or self.plan.train_language)
        test_langs = list(test_langs or self.languages)
        path = self._path(config, train_lang)
        with atomic.locked(path):  # parallel --shard processes: one runs a job, the others then read it
            return self._run_unlocked(config, train_lang, test_langs, path)

    def _run_unlocked(self, config: FinetuneConfig, train_lang: str, test_langs: list[str], path: Path) -> dict:
        if path.exists():
            result = json.loads(path.read_text())
            if set(test_langs) <= set(result["test"]):
                return result
        model, history = finetune(config, self.encoder, self.data(train_lang, "train"), self.n_labels,
                                  dev=self.data(train_lang, "dev"), device=self.device, progress=self.progress)
        test = {}
        for lang in test_langs:
            acc, f1 = evaluate(model, self.data(lang, "test"), self.device, self.n_labels)
            test[lang] = {"accuracy": acc, "macro_f1": f1}
        result = {"config": config.to_json(), "train_language": train_lang, "dev_accuracy": history["dev_accuracy"][-1],
                  "test": test, "history": history, "device": device_name(self.device)}
        atomic.write_json(path, result)
        return result

    def selection(self) -> pd.DataFrame:
        """English-dev accuracy of each learning rate of the grid (fine-tune all, seed 0)."""
        rows = [{"lr": lr, "dev_accuracy": self.run(self.config(lr, 0))["dev_accuracy"]} for lr in self.plan.lr_grid]
        return pd.DataFrame(rows)

    def selected_lr(self) -> float:
        sel = self.selection()
        return float(sel.loc[sel["dev_accuracy"].idxmax(), "lr"])

    def _long(self, experiment: str, result: dict, seed: int, languages) -> list[dict]:
        """Long rows of a run's test scores in `languages` only (in that order): a cached run may hold more (the
        English in-language run is the English zero-shot run, tested in every language)."""
        return [{"experiment": experiment, "seed": seed, "language": lang, "metric": metric, "value": value}
                for lang in languages for metric, value in result["test"][lang].items()]

    def zero_shot(self, seeds=None) -> pd.DataFrame:
        """Fine-tune all on English with the selected learning rate; test in every language (their Table 3)."""
        return self._frame(self.jobs("zero-shot", seeds=seeds), "zero-shot")

    @property
    def full_size(self) -> bool:
        """The published encoder on the whole data (no smoke limits)."""
        return self.model == "lab" and (self.max_train_pairs, self.max_test_pairs, self.epochs) == (None, None, None)

    def cached(self, config: FinetuneConfig, train_lang: str, test_langs=None) -> bool:
        """Whether the run has a result in the cache for every language of `test_langs` (default: all)."""
        path = self._path(config, train_lang)
        if not path.exists():
            return False
        return set(test_langs or self.languages) <= set(json.loads(path.read_text())["test"])

    def in_language(self, languages=None, train_missing: bool | None = None) -> pd.DataFrame:
        """The supervised upper bound: fine-tune on each language's own train pairs (the plan's
        `in_language_seeds`, the English-selected learning rate: no per-language selection), test on its test pairs.

        train_missing: run the fine-tunings that are not cached (default: yes, except for the published encoder at
        full size on a CPU, where the missing runs are listed in `pending_runs` and the frame holds those that
        exist: `xlrepro train wu2019 --part in-language` makes them on a GPU)."""
        if train_missing is None:
            train_missing = not (self.full_size and self.device.type == "cpu")
        jobs = self.jobs("in-language", languages)
        if not train_missing:
            missing = [(train, config.seed) for config, train, tests in jobs if not self.cached(config, train, tests)]
            self.pending_runs += [m for m in missing if m not in self.pending_runs]
            if missing:
                print(f"{plural(len(missing), 'in-language run')} await{'s' if len(missing) == 1 else ''} a GPU run: "
                      f"xlrepro train wu2019 --part in-language")
            jobs = [j for j in jobs if (j[1], j[0].seed) not in missing]
        return self._frame(jobs, "in-language")

    def frozen(self, seeds=None) -> pd.DataFrame:
        """Their Q2: fine-tune with the bottom n layers frozen, and the feature-based variant, per language; with
        the fine-tune-all runs (experiment "all") they are compared against."""
        return self._frame(self.jobs("zero-shot", seeds=seeds) + self.jobs("frozen", seeds=seeds))

    def _frame(self, jobs, experiment: str | None = None) -> pd.DataFrame:
        """Run (or read from the cache) `jobs`; long rows named `experiment`, else after each config's mode."""
        rows = []
        for config, train, tests in jobs:
            result = self.run(config, train, tests)
            rows += self._long(experiment or config.mode, result, config.seed, tests or self.languages)
        return pd.DataFrame(rows)

    def jobs(self, part: str, languages=None, seeds=None) -> list[tuple[FinetuneConfig, str, list[str] | None]]:
        """(config, training language, test languages) of every fine-tuning run of a part of the plan; `seeds`
        (default: the plan's) for the zero-shot and frozen runs, `languages` (default: all) for in-language."""
        train = self.plan.train_language
        if part == "select":
            return [(self.config(lr, 0), train, None) for lr in self.plan.lr_grid]
        seeds = check_seeds(seeds if seeds is not None else self.plan.seeds)
        lr = self.selected_lr()
        out = []
        if part in ("zero-shot", "all"):
            out += [(self.config(lr, s), train, None) for s in seeds]
        if part in ("frozen", "all"):
            for s in seeds:
                out += [(self.config(lr, s, freeze=n), train, None) for n in self.plan.freeze_levels(self.depth)]
                out.append((self.config(self.plan.feature_lr, s, feature_based=True), train, None))
        if part in ("in-language", "all"):
            out += [(self.config(lr, s), lang, [lang]) for s in check_seeds(self.plan.in_language_seeds)
                    for lang in (languages or self.languages)]
        return out

    def timings(self) -> pd.DataFrame:
        """Seconds per cached fine-tuning run, with the device."""
        rows = []
        for path in sorted(self.root.glob("finetune/*/*/*.json")):
            r = json.loads(path.read_text())
            run = f"lr{r['config']['lr']:g}-seed{r['config']['seed']}"  # the file name without its run key
            rows.append({"train_language": r["train_language"], "mode": path.parent.name, "run": run,
                         "steps": r["history"]["steps"], "seconds": r["history"]["seconds"], "device": r["device"]})
        return pd.DataFrame(rows)


def run_part(part: str, lab: TransferLab, languages=None, shard: tuple[int, int] = (0, 1)) -> pd.DataFrame:
    """Run one part of the plan (the CLI's `xlrepro train wu2019 --part ... --shard i/n`): its fine-tuning jobs
    with index % n == i, so that n processes (e.g. a few per GPU) share a part. Every part but `select` needs the
    selected learning rate, which it computes first where the `select` runs are not cached yet."""
    choose("part", part, PARTS)
    i, n = shard
    if not 0 <= i < n:
        raise ConfigError(f"shard {i}/{n}: need 0 <= i < n")
    for k, (config, train_lang, test_langs) in enumerate(lab.jobs(part, languages)):
        if k % n == i:
            lab.run(config, train_lang, test_langs)
    return lab.timings()


def paper_chapter_lab(chapter: str | None, *, model: str = "lab", languages=None, max_train_pairs=None,
                      max_test_pairs=None, epochs=None, results=None, device=None, publish: bool = False,
                      source: str = "auto", task: str = DEFAULT_PAIR_TASK):
    """`chapter_lab` under profile="paper", with the released mBERT: Q1 (Table 3), Q2 (Figure 1's XNLI panel) and
    Q4 (sub-word overlap against XNLI transfer) get an `xnli.XnliLab` (MultiNLI and XNLI), Q3 a
    `language_id.LanguageIdLab` (Wikipedia paragraphs; `languages` picks among its language folders). The results
    folder: `results`, else book/results/wu2019/paper when publishing, else the run folder's results/
    (runs/wu2019/paper/...), never the lab's. What a chapter's paper path leaves out of the paper's figure
    (`constants.PAPER_LEFT_OUT`) is said in the lab's notice; a chapter without a paper path stops with a one-line
    ConfigError naming what is missing (`constants.PAPER_MISSING`)."""
    from xlrepro.results import results_dir

    from .constants import PAPER_LEFT_OUT, PAPER_MISSING
    from .xnli import XnliLab, mark_results, resolve_paths

    if chapter in PAPER_MISSING:
        raise ConfigError(PAPER_MISSING[chapter])
    if model != "lab":
        raise ConfigError(f"the paper profile's encoder is mBERT ($XLREPRO_MBERT or the hub), not the plan's model "
                          f"{model!r}: leave model at 'lab'")
    if source == "published":
        raise ConfigError("source='published' renders the lab profile's published results; the paper profile "
                          "trains: use source='train' or 'auto'")
    if task != DEFAULT_PAIR_TASK:
        raise ConfigError(f"task={task!r} is a lab stand-in; the paper profile's task is XNLI")
    if chapter == "q3_language_id":
        from .language_id import LanguageIdLab, resolve_wiki_paths

        lab = LanguageIdLab(resolve_wiki_paths(languages=languages), device=device)
        print("source: features (the paper profile: mBERT, frozen, on Wikipedia paragraphs)")
        data = {"language_id": str(lab.paths.wiki)}
    else:
        lab = XnliLab(resolve_paths(), languages=languages, max_train_pairs=max_train_pairs,
                      max_test_pairs=max_test_pairs, epochs=epochs, device=device)
        print("source: train (the paper profile: mBERT, MultiNLI and XNLI)")
        data = {"xnli_train": str(lab.paths.multinli), "xnli_test": str(lab.paths.xnli)}
    lab.left_out = PAPER_LEFT_OUT.get(chapter, "")
    folder = Path(results) if results else results_dir("wu2019") / "paper" if publish else lab.root / "results"
    folder.mkdir(parents=True, exist_ok=True)
    mark_results(folder, lab.paths.encoder, **data)
    return lab, folder


def chapter_lab(profile: str = "lab", model: str = "lab", languages=None, max_train_pairs=None, max_test_pairs=None,
                epochs=None, results=None, device=None, publish: bool = False, *, chapter: str | None = None,
                seeds=None, probe: dict | None = None, source: str = "auto", task: str = DEFAULT_PAIR_TASK):
    """The lab and the results folder of a Wu & Dredze chapter: `results` if given, else book/results/wu2019 for
    the published run (`publish=True`), else a folder beside the run, so that no other run overwrites the book's.

    source: "train" (fine-tune, or read the fine-tuning cache), "published" (render from the published CSVs, a
    `published.PublishedLab`; only for the published run at its defaults, else ConfigError) or "auto" (published
    only where `published.choose_source`'s conditions hold and the chapter would otherwise train on a CPU).
    `chapter`, `seeds` and `probe` (Q3's probe sizes) are needed to decide it; the choice is printed.
    task: the pair task (`xlrepro.tasks.pairs.PAIR_TASKS`); only the default has published results, so another task
    always trains (or reads its own fine-tuning cache).
    profile: "lab" (the stand-ins above) or "paper" (`paper_chapter_lab`: the released mBERT on MultiNLI and XNLI
    for Q1, Q2 and Q4, on Wikipedia paragraphs for Q3)."""
    from xlrepro.config import check_profile
    from xlrepro.results import results_dir

    from .published import SOURCES, PublishedLab, choose_source

    check_profile(profile)
    choose("source", source, SOURCES)
    try:
        check_pair_task(task)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if task != DEFAULT_PAIR_TASK:
        if source == "published":
            raise ConfigError(f"source='published' has the {DEFAULT_PAIR_TASK} task's results only; "
                              f"task={task!r} needs source='train' or 'auto'")
        source = "train"
    if profile == "paper":
        return paper_chapter_lab(chapter, model=model, languages=languages, max_train_pairs=max_train_pairs,
                                 max_test_pairs=max_test_pairs, epochs=epochs, results=results, device=device,
                                 publish=publish, source=source, task=task)
    if chapter is None:
        if source == "published":
            raise ConfigError("source='published' needs the chapter's name (chapter=...)")
        chosen, why = "train", "no chapter named"
    else:
        chosen, why = choose_source(chapter, source, publish=publish, device=device, profile=profile, model=model,
                                    languages=languages, max_train_pairs=max_train_pairs,
                                    max_test_pairs=max_test_pairs, epochs=epochs, results=results, seeds=seeds,
                                    probe=probe)
    print(f"source: {chosen} ({why})")
    if chosen == "published":
        lab = PublishedLab(chapter, reason=why)
        return lab, lab.folder
    lab = TransferLab(model=model, device=device, languages=languages, max_train_pairs=max_train_pairs,
                      max_test_pairs=max_test_pairs, epochs=epochs, progress=False, task=task)
    folder = Path(results) if results else results_dir("wu2019") if publish else lab.root / "results"
    folder.mkdir(parents=True, exist_ok=True)
    return lab, folder
