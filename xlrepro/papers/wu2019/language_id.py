"""Wu & Dredze's §6 (Figure 2) on the paper's own resources (the paper profile): language identification from each
layer of the released mBERT, frozen, on Wikipedia text.

Each example is one paragraph of a Wikipedia article (a line of a wikiextractor document body); its feature at a
layer is the mean of that layer's vectors over every position of ``[CLS] pieces [SEP]`` (`layer_features`, cut at
128 pieces), and one linear classifier per layer is trained over the languages (`probe_layers`: Adam, lr 1e-3,
10 epochs, learning rate halved on plateau; the Q3 chapter's probe). The paper pools the first two sentences of a
paragraph over 99 languages; we pool the paragraph, over the languages present in the Wikipedia folder.

Resources: the encoder ($XLREPRO_MBERT, else the hub id) and wikiextractor output, one folder a language
($XLREPRO_WIKI_DIR/<lang>/AA/wiki_00 ...; `xlrepro prepare --profile paper --dry-run` says how to make it). Of each
language the first ``POOL * (train + test)`` paragraphs in file order are read (the plan's probe sizes: a few
megabytes, not the dump) and shuffled with a fixed seed; the train examples are the first of them, the test examples
the last, so no paragraph is in both, though train and test paragraphs may come from the same article.

    lab = LanguageIdLab(resolve_wiki_paths(languages=["en", "de", "fr"]))
    folder = language_id(resolve_wiki_paths(), train_per_language=2000, test_per_language=1000, seeds=[0, 1, 2])
"""
from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from xlrepro.config import ConfigError, check_seeds, choose
from xlrepro.paths import runs_dir
from xlrepro.resources import load_encoder, locate, mbert_encoder, read_wikiextractor

from .plan import TransferPlan, load_plan

POOL = 10  # paragraphs read per example wanted, before the shuffle
SHUFFLE_SEED = 0
RESULTS = "language_id.csv"  # the file name the Q3 chapter writes


@dataclass(frozen=True)
class WikiPaths:
    encoder: str  # a hub id or a folder written by save_pretrained
    wiki: Path  # the folder holding one wikiextractor output folder per language
    languages: tuple[str, ...]  # the language folders used


def resolve_wiki_paths(encoder: str | os.PathLike | None = None, wiki: str | os.PathLike | None = None,
                       languages=None) -> WikiPaths:
    """The resources of the language-identification probe: the arguments where given, else $XLREPRO_MBERT (or the
    hub id) and $XLREPRO_WIKI_DIR (or the prepared cache). languages: language folders of the Wikipedia folder
    (default: all of them; at least two). A missing folder raises a one-line ConfigError."""
    folder = Path(wiki) if wiki is not None else locate("wikipedia")
    if folder is None and os.environ.get("XLREPRO_WIKI_DIR"):
        folder = Path(os.environ["XLREPRO_WIKI_DIR"])  # found, but without the registry's marker (en/)
    if folder is None or not folder.is_dir():
        where = "$XLREPRO_WIKI_DIR unset, not prepared" if folder is None else f"{folder} does not exist"
        raise ConfigError(f"the paper profile's language identification needs Wikipedia text, one wikiextractor "
                          f"folder per language ({where}): set XLREPRO_WIKI_DIR as `xlrepro prepare --profile paper "
                          f"--dry-run` describes (wikipedia)")
    present = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    chosen = [choose("Wikipedia language", lang, present) for lang in (languages or present)]
    if len(set(chosen)) < 2:
        raise ConfigError(f"language identification needs at least two languages; {folder} gives {chosen}")
    return WikiPaths(mbert_encoder(encoder), folder, tuple(dict.fromkeys(chosen)))


def paragraphs(folder: Path, n: int) -> list[str]:
    """The first `n` non-empty paragraphs (lines of document bodies) of a wikiextractor folder, in file order."""
    lines = (line.strip() for doc in read_wikiextractor(folder) for line in doc.text.split("\n"))
    return list(itertools.islice((line for line in lines if line), n))


class LanguageIdLab:
    """The frozen encoder and per-language Wikipedia paragraphs; the Q3 chapter's `lab` under the paper profile.

    It has what the chapter reads of the lab's `TransferLab`: `languages`, `depth`, `encoder`, `tokenizer` (a
    `tokenizers.Tokenizer`, as `layer_features` wants), `device`, `plan` (its ``probe`` sizes), `root`,
    `model_dir`, `source`, `notice`, `run_notes`, `save`, and `sample(lang, split, n)` in place of the chapter's
    verse sampler."""

    source = "train"
    profile = "paper"
    left_out = ""

    def __init__(self, paths: WikiPaths, plan: TransferPlan | None = None, *, pool_size: int | None = None,
                 device=None, root: Path | None = None):
        self.plan = plan or load_plan()
        # paragraphs read per language: POOL times the plan's probe sizes (or `pool_size`)
        self.pool_size = pool_size or POOL * (self.plan.probe["train_per_language"] + self.plan.probe["test_per_language"])
        if not isinstance(self.pool_size, int) or self.pool_size < 2:
            raise ConfigError(f"pool_size must be an integer >= 2; got {pool_size!r}")
        self.paths = paths
        self.languages = list(paths.languages)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.encoder, tokenizer = load_encoder(paths.encoder)
        self.tokenizer = tokenizer.backend_tokenizer
        self.model_dir = Path(paths.encoder)
        self.root = Path(root or runs_dir() / "wu2019" / "paper" / self.model_dir.name)
        self._pools: dict = {}
        self._taken: dict = {}

    @property
    def depth(self) -> int:
        return self.encoder.config.num_hidden_layers

    def sample(self, lang: str, split: str, n: int) -> list[str]:
        """`n` paragraphs of `lang` for `split`: of the language's first `pool_size` paragraphs, shuffled with a
        fixed seed, the first `n` for "train" and the last `n` for "test", so the two splits never share a paragraph
        (a ConfigError where they would: the pool is too small for both)."""
        choose("split", split, ("train", "test"))
        choose("language", lang, self.languages)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ConfigError(f"paragraphs per language must be a positive integer; got {n!r}")
        if lang not in self._pools:
            pool = paragraphs(self.paths.wiki / lang, self.pool_size)
            order = np.random.RandomState(SHUFFLE_SEED).permutation(len(pool))
            self._pools[lang] = [pool[i] for i in order]
        pool = self._pools[lang]
        taken = self._taken.setdefault(lang, {})
        taken[split] = n
        if sum(taken.values()) > len(pool):
            raise ConfigError(f"Wikipedia {lang!r} ({self.paths.wiki / lang}) gives {len(pool)} paragraphs (of the "
                              f"first {self.pool_size}); {' + '.join(f'{v} {k}' for k, v in taken.items())} are "
                              f"asked for: ask for fewer (train_per_language, test_per_language)")
        return pool[:n] if split == "train" else pool[len(pool) - n:]

    def notice(self) -> str:
        from .xnli import _shown

        return (f"**Paper profile.** Encoder `{_shown(self.paths.encoder)}`, frozen; one example a Wikipedia "
                f"paragraph (`{_shown(self.paths.wiki)}`) in {len(self.languages)} languages "
                f"({', '.join(self.languages)}). The paper pools two sentences over 99 languages.")

    def run_notes(self) -> dict:
        from .xnli import _shown

        return {"source": "paper profile: features computed in this execution", "encoder": _shown(self.paths.encoder),
                "text": _shown(self.paths.wiki)}

    def mark(self, folder) -> Path:
        """Record in a results folder that its numbers are the paper profile's (`xnli.mark_results`)."""
        from .xnli import mark_results

        return mark_results(folder, self.paths.encoder, language_id=str(self.paths.wiki))

    def save(self, frame: pd.DataFrame, path) -> Path:
        from xlrepro.results import write_csv
        return write_csv(frame, path)

    def features(self, train_per_language: int, test_per_language: int, batch_size: int = 32) -> dict:
        """{"train"|"test": {lang: [layers + 1, N, hidden] mean-pooled features}} (`layer_features`)."""
        from xlrepro.evaluation.probe import layer_features

        encoder = self.encoder.to(self.device)
        sizes = (("train", train_per_language), ("test", test_per_language))
        return {split: {lang: layer_features(encoder, self.tokenizer, self.sample(lang, split, n), device=self.device,
                                             batch_size=batch_size)
                        for lang in self.languages} for split, n in sizes}


def language_id(paths: WikiPaths, *, train_per_language: int | None = None, test_per_language: int | None = None,
                seeds=None, device=None, root=None, results=None) -> Path:
    """Run the probe end to end: ``language_id.csv`` (long rows: layer, metric "accuracy", value, seed, experiment
    "language-id"; layer 0 the embeddings) into `results` (default: the run folder's ``results/``). Sizes default to
    the plan's (`experiments.yaml`, ``probe``: 2,000 train and 1,000 test paragraphs a language). Returns the
    results folder."""
    from xlrepro.evaluation.probe import probe_layers

    lab = LanguageIdLab(paths, device=device, root=root)
    seeds = check_seeds(seeds if seeds is not None else lab.plan.seeds)
    n_train = train_per_language or lab.plan.probe["train_per_language"]
    n_test = test_per_language or lab.plan.probe["test_per_language"]
    feats = lab.features(n_train, n_test)
    probe = pd.concat([probe_layers(feats["train"], feats["test"], seed=s, device=lab.device).assign(seed=s)
                       for s in seeds], ignore_index=True).assign(experiment="language-id")
    folder = Path(results) if results is not None else lab.root / "results"
    folder.mkdir(parents=True, exist_ok=True)
    lab.mark(folder)
    lab.save(probe, folder / RESULTS)
    return folder
