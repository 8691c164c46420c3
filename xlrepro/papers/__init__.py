"""The papers of the book, one subpackage each, discovered here.

A paper's package (``xlrepro/papers/<paper>/``) holds its ``experiments.yaml``, its transcribed
``reference.csv``, its own code, and a module-level ``PAPER = Paper(...)`` in its ``__init__.py`` that says what it
offers: title, chapters (notebooks, in book order), how to add and check its ``xlrepro train <paper>`` arguments,
and the commands of its published run. Adding a paper = one folder + its notebooks + its ``_toc.yml`` entries.
Shared machinery (everything outside this folder) never names a paper.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from ..config import ConfigError, choose


@dataclass(frozen=True)
class Paper:
    name: str = field(metadata={"help": "the package's name, e.g. 'smith2021' (also the notebooks' folder)"})
    title: str = field(metadata={"help": "authors, year and title"})
    chapters: tuple[str, ...] = field(metadata={"help": "chapter names '<folder>/<notebook>' in book order"})
    add_train_arguments: Callable[[argparse.ArgumentParser], None] = field(
        metadata={"help": "adds the options of `xlrepro train <paper>` to its subparser"})
    prepare_train: Callable[[argparse.Namespace], Callable[[], str]] = field(
        metadata={"help": "checks every option (raising ConfigError) and returns the training to run, which "
                          "returns the line to print"})
    reproduce: tuple[tuple[str, ...], ...] = field(
        default=(), metadata={"help": "the CLI commands that train the published run, in order"})
    pending_training: Callable[[str, dict], str | None] = field(
        default=lambda chapter, parameters: None,
        metadata={"help": "(chapter, notebook parameters, `publish` among them where the chapter declares it) -> "
                          "what full-size training running it would start, or None (smoke size, trained already, "
                          "or rendered from the published results)"})
    check_chapter: Callable[[str, dict, bool], None] = field(
        default=lambda chapter, parameters, allow_cpu: None,
        metadata={"help": "(chapter, notebook parameters as `pending_training` gets them, allow_cpu) -> None, called "
                          "before a kernel starts; raises a one-line ConfigError for a value out of range, or when "
                          "the chapter cannot run on this machine: a missing input file (and the variable that "
                          "names its folder), or models that only a GPU run trains (and the command to run there)"})
    prepare: Callable[[str], object] | None = field(
        default=None, metadata={"help": "profile -> prepares the paper's data cache (`xlrepro prepare`)"})
    resources: dict[str, tuple[str, ...]] = field(
        default_factory=dict,
        metadata={"help": "chapter -> the names of `xlrepro.resources.RESOURCES` its paper profile needs (`xlrepro "
                          "prepare --profile paper` gets them); a chapter left out needs none"})
    order: int = field(default=100, metadata={"help": "position in the book"})
    claims_frames: Callable[[str, object], dict] | None = field(
        default=None, metadata={"help": "(chapter, results folder) -> the frames that chapter's claims read, by "
                                        "artifact name (the chapter notebook calls the same); None: the folder's CSVs"})


@lru_cache(maxsize=None)
def _discover() -> dict[str, Paper]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            paper = getattr(importlib.import_module(f"{__name__}.{info.name}"), "PAPER", None)
            if isinstance(paper, Paper):
                if paper.name != info.name:
                    raise ConfigError(f"xlrepro/papers/{info.name}: PAPER.name is {paper.name!r}; "
                                      f"it must be the folder's name")
                found.append(paper)
    return {p.name: p for p in sorted(found, key=lambda p: (p.order, p.name))}


def papers() -> dict[str, Paper]:
    """Every paper of the book, in book order."""
    return dict(_discover())


def get_paper(name: str) -> Paper:
    """The paper called `name`; an unknown name raises ConfigError naming the valid ones."""
    return papers()[choose("paper", name, papers())]


def paper_of_chapter(chapter: str) -> Paper | None:
    """The paper a chapter ('<folder>/<notebook>') belongs to, or None."""
    return next((p for p in papers().values() if chapter in p.chapters), None)


def package_of(name: str) -> str:
    """The import name of a paper's package (for its data files)."""
    return f"{__name__}.{get_paper(name).name}"
