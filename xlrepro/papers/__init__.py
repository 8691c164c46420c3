"""The book's entries, one subpackage each, discovered here: the papers, and the parts the papers share.

A paper's package (``xlrepro/papers/<paper>/``) holds its ``experiments.yaml``, its transcribed
``reference.csv``, its own code, and a module-level ``PAPER = Paper(...)`` in its ``__init__.py`` that says what it
offers: title, chapters (notebooks, in book order), how to add and check its ``xlrepro train <paper>`` arguments,
and the commands of its published run. Adding a paper = one folder + its notebooks + its ``_toc.yml`` entries.
A part of the book that serves every paper (the multilingual lab, the appendix on how the runs were made) is an
entry of kind "shared": the same ``PAPER`` with chapters, checks and commands, but no paper to cite, no claims, no
reference numbers, and no ``xlrepro train`` of its own unless it declares one.
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


KINDS = ("paper", "shared")  # a paper of the book; a part that serves every paper (no citation, claims or reference)


@dataclass(frozen=True)
class Paper:
    """One entry of the book: a paper (kind "paper") or a part the papers share (kind "shared")."""
    name: str = field(metadata={"help": "the package's name, e.g. 'smith2021' (for a paper also its notebooks' and "
                                        "results' folder, and its key in references.bib)"})
    title: str = field(metadata={"help": "authors, year and title (a shared part: what it shows)"})
    chapters: tuple[str, ...] = field(metadata={"help": "chapter names '<folder>/<notebook>' in book order"})
    add_train_arguments: Callable[[argparse.ArgumentParser], None] | None = field(
        default=None, metadata={"help": "adds the options of `xlrepro train <paper>` to its subparser; None (with "
                                        "prepare_train None): the entry has no `xlrepro train`"})
    prepare_train: Callable[[argparse.Namespace], Callable[[], str]] | None = field(
        default=None, metadata={"help": "checks every option (raising ConfigError) and returns the training to run, "
                                        "which returns the line to print"})
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
                          "prepare --profile paper` gets them); a chapter left out needs none. A paper path run as "
                          "a package function, outside any chapter, is a key '<paper>/<module>.<function>', "
                          "which `xlrepro prepare --only` accepts as it does a chapter"})
    order: int = field(default=100, metadata={"help": "position in the book"})
    reads: dict[str, tuple[str, ...]] = field(
        default_factory=dict,
        metadata={"help": "chapter -> the chapters of other entries whose published results it reads: `xlrepro "
                          "reproduce` publishes it after them when they are in its plan"})
    claims_frames: Callable[[str, object], dict] | None = field(
        default=None, metadata={"help": "(chapter, results folder) -> the frames that chapter's claims read, by "
                                        "artifact name (the chapter notebook calls the same); None: the folder's CSVs"})
    kind: str = field(default="paper", metadata={"help": f"one of {', '.join(KINDS)}"})

    def __post_init__(self):
        choose("kind", self.kind, KINDS)
        for key in self.resources:
            if key not in self.chapters and not (key.startswith(f"{self.name}/") and "." in key.split("/", 1)[1]):
                raise ConfigError(f"entry {self.name}: resources key {key!r} is neither a chapter nor a package "
                                  f"function '{self.name}/<module>.<function>'")
        if (self.add_train_arguments is None) != (self.prepare_train is None):
            raise ConfigError(f"entry {self.name}: add_train_arguments and prepare_train go together (both or "
                              f"neither)")


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
    owners = {}
    for paper in found:
        for chapter in paper.chapters:
            if chapter in owners:
                raise ConfigError(f"chapter {chapter} is registered by both {owners[chapter]} and {paper.name}")
            owners[chapter] = paper.name
    return {p.name: p for p in sorted(found, key=lambda p: (p.order, p.name))}


def papers(kind: str | None = None) -> dict[str, Paper]:
    """Every entry of the book in book order, or only those of `kind` ("paper": the papers; "shared": the parts
    they share)."""
    if kind is not None:
        choose("kind", kind, KINDS)
    return {n: p for n, p in _discover().items() if kind is None or p.kind == kind}


def get_paper(name: str) -> Paper:
    """The entry called `name`; an unknown name raises ConfigError naming the valid ones."""
    return papers()[choose("paper", name, papers())]


def paper_of_chapter(chapter: str) -> Paper | None:
    """The entry a chapter ('<folder>/<notebook>') belongs to, or None."""
    return next((p for p in papers().values() if chapter in p.chapters), None)


def package_of(name: str) -> str:
    """The import name of a paper's package (for its data files)."""
    return f"{__name__}.{get_paper(name).name}"
