"""Verdicts from the published results: the runs' health, every chapter's claims table, the findings page.

The verdicts are a function of three things only: a paper's ``claims.yaml`` (tests, preconditions, nulls, health
rule), the results CSVs of the run the book shows (``book/results/<paper>/``), and :mod:`xlrepro.claims`. So they
can be recomputed without the models: ``xlrepro verdicts`` writes ``health.csv`` and ``claims.csv`` for each paper,
puts each chapter's new claims table in place of the old one in its published notebook (saying when it was
recomputed) and rewrites the findings page. Nothing else of a chapter changes: its tables and figures stay those of
its execution. Nothing here names a paper: a paper gives the frames its chapters' claims read through
``Paper.claims_frames``.
"""
from __future__ import annotations

import datetime as _dt
import html
import os
from pathlib import Path
from typing import Mapping

import pandas as pd

from .claims import INCONCLUSIVE, NOT, OFFLINE, PARTLY, PENDING, REPRODUCED, claims_table, load_claims, read_results
from .config import ConfigError
from .health import assess, load_rules, write_health
from .paths import repo_root

BADGE = {REPRODUCED: "xl-v-reproduced", PARTLY: "xl-v-partly", NOT: "xl-v-not", INCONCLUSIVE: "xl-v-inconclusive",
         OFFLINE: "xl-v-offline", PENDING: "xl-v-pending"}
RECOMPUTED = "xl-verdicts-recomputed"  # the class of the line that says a table was recomputed


def claims_html(table: pd.DataFrame, note: str = "") -> str:
    """A chapter's claims table for readers: the claim with the paper's words folded under it, the criterion, our
    evidence, the verdict (with the precondition where one is declared)."""
    e = html.escape
    rows = []
    for r in table.to_dict("records"):
        quote = str(r.get("quote") or "")
        claim = f"{e(str(r['claim']))} <span class='xl-section'>({e(str(r['section']))})</span>"
        if quote:
            claim += f"<details><summary>the paper's words</summary><blockquote>{e(quote)}</blockquote></details>"
        verdict = f"<span class='xl-verdict {BADGE.get(r['verdict'], '')}'>{e(str(r['verdict']))}</span>"
        if r.get("precondition"):
            met = {"yes": "met", "no": "not met", "pending": "pending"}.get(str(r.get("precondition_met")), "")
            verdict += f"<div class='xl-precondition'>precondition {met}: {e(str(r['precondition']))}</div>"
        rows.append(f"<tr><td>{claim}</td><td>{e(str(r['criterion']))}</td><td>{e(str(r['evidence']))}</td>"
                    f"<td>{verdict}</td></tr>")
    head = "<tr><th>Claim</th><th>Our criterion (fixed before the run)</th><th>Our evidence</th><th>Verdict</th></tr>"
    lead = f"<p class='{RECOMPUTED}'>{e(note)}</p>" if note else ""
    return f"{lead}<table class='xl-claims'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


class ClaimsTable:
    """A claims table that Jupyter shows as `claims_html` (the notebooks' ``display(show_claims(...))``)."""

    def __init__(self, table: pd.DataFrame, note: str = ""):
        self.table, self.note = table, note
        self.data = table  # as a pandas Styler's .data
    def _repr_html_(self) -> str:
        return claims_html(self.table, self.note)

    def __repr__(self) -> str:
        return self.table[["claim", "verdict"]].to_string(index=False)


def show_claims(table: pd.DataFrame) -> ClaimsTable:
    return ClaimsTable(table)


def chapter_frames(paper, chapter: str, folder: Path) -> Mapping[str, pd.DataFrame]:
    """The frames `chapter`'s claims read, from a results folder (the paper's ``claims_frames``, else its CSVs)."""
    if paper.claims_frames is not None:
        return paper.claims_frames(chapter, folder)
    return read_results(folder)


RECIPES = "recipes.json"  # in a results folder: the stronger recipes published beside it, strongest first


def read_recipes(folder: Path) -> list[dict]:
    """The stronger recipes published beside a results folder, strongest first: ``<folder>/recipes.json``, a list of
    {"name", "label", "folder"} and optionally "parts" (what the paper trained with it), the folder relative to
    `folder` and holding the same CSVs for the cells retrained with that recipe. Empty where none is published;
    ConfigError for an entry without those keys or naming a folder that does not exist."""
    import json
    index = Path(folder) / RECIPES
    if not index.is_file():
        return []
    recipes = json.loads(index.read_text())
    for r in recipes:
        if not {"name", "label", "folder"} <= set(r) <= {"name", "label", "folder", "parts"}:
            raise ConfigError(f"{index}: each recipe needs name, label and folder (and may give parts); got "
                              f"{sorted(r)}")
        if not (Path(folder) / r["folder"]).is_dir():
            raise ConfigError(f"{index}: recipe {r['name']!r} names folder {r['folder']!r}, which does not exist")
    return recipes


def recipe_folders(folder: Path) -> list[Path]:
    """The folders of the stronger recipes published beside a results folder (`read_recipes`), strongest first."""
    return [Path(folder) / r["folder"] for r in read_recipes(folder)]


def recipe_frames(paper, chapter: str, folder: Path) -> list[tuple[str, Mapping[str, pd.DataFrame]]]:
    """(label, the frames `chapter`'s claims read there) of each stronger recipe published beside the results folder
    (`read_recipes`), strongest first, for `claims_table`'s ``recipes``. A recipe whose folder lacks the chapter's
    files gives frames without them (its claims read the base results)."""
    return [(r["label"], chapter_frames(paper, chapter, Path(folder) / r["folder"])) for r in read_recipes(folder)]


def recipe_health(paper_name: str, folder: Path) -> list[pd.DataFrame]:
    """The runs' health of each stronger recipe published beside a results folder (`recipe_folders`), strongest
    first: the paper's health rule on the recipe's CSVs and every chapter's frames there, as for the base results
    (`paper_frames`). What its health.csv holds and what its claims leave out."""
    return [paper_frames(paper_name, sub)[1] for sub in recipe_folders(folder)]


def paper_frames(paper_name: str, folder: str | os.PathLike) -> tuple[dict, pd.DataFrame]:
    """({chapter: the frames its claims read}, the runs' health) of one paper's results folder. The health rule
    reads the folder's CSVs and every chapter's derived frames."""
    from .papers import get_paper
    paper, folder = get_paper(paper_name), Path(folder)
    chapters = list(dict.fromkeys(c["chapter"] for c in load_claims(paper.name)))
    frames = {ch: chapter_frames(paper, ch, folder) for ch in chapters}
    every = read_results(folder)
    for f in frames.values():
        every.update({k: v for k, v in f.items() if k not in every})
    return frames, assess(load_rules(paper.name), every)


def recompute(paper_name: str, root: str | os.PathLike | None = None, notebooks: bool = True) -> dict:
    """Health, claims.csv and (with `notebooks`) the published chapters' claims tables of one paper, from
    ``<root>/book/results/<paper>``. Returns {chapter: claims table}."""
    from .papers import get_paper
    paper = get_paper(paper_name)
    root = Path(root) if root is not None else repo_root()
    folder = root / "book" / "results" / paper.name
    frames, health = paper_frames(paper.name, folder)
    chapters = list(frames)
    if len(health):
        write_health(health, folder)
    recipes_health = recipe_health(paper.name, folder)
    for sub, sub_health in zip(recipe_folders(folder), recipes_health):  # each stronger recipe's own health.csv
        if len(sub_health):
            write_health(sub_health, sub)
    tables = {}
    for ch in chapters:
        tables[ch] = claims_table(paper.name, ch, frames[ch], out=folder, health=health,
                                  recipes=recipe_frames(paper, ch, folder), recipe_health=recipes_health)
    if notebooks:
        stamp = _dt.date.today().isoformat()
        for ch, table in tables.items():
            nb = _published_notebook(root, paper, ch)
            if nb is not None:
                refresh_notebook(nb, table, f"Verdicts recomputed on {stamp} by xlrepro verdicts from this "
                                            f"chapter's published results and the claims file; the tables and "
                                            f"figures above are those of the chapter's execution.")
    return tables


def _published_notebook(root: Path, paper, chapter: str) -> Path | None:
    for full in paper.chapters:
        if full.split("/")[-1] == chapter:
            path = root / "book" / f"{full}.ipynb"
            return path if path.is_file() else None
    return None


def refresh_notebook(path: Path, table: pd.DataFrame, note: str) -> bool:
    """Put `table` in place of the output of the published notebook's claims cell (the code cell that calls
    ``claims_table``). Returns False where the notebook has no such cell."""
    import nbformat

    from .atomic import atomic_open
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and "claims_table(" in c.source]
    if not cells:
        return False
    cell = cells[-1]
    shown = ClaimsTable(table, note)
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": shown._repr_html_(),
                                                                 "text/plain": repr(shown)})]
    with atomic_open(path) as f:
        nbformat.write(nb, f)
    return True


def main(papers: list[str] | None = None, notebooks: bool = True) -> list[str]:
    """`xlrepro verdicts`: recompute every paper (or `papers`), then the findings page. Returns lines to print."""
    from .findings import write_findings
    from .papers import papers as registry
    with_claims = [p for p in registry() if (Path(__file__).parent / "papers" / p / "claims.yaml").is_file()]
    for name in papers or []:  # a shared part of the book (the multilingual lab, the appendix) tests no claim
        if name not in with_claims:
            raise ConfigError(f"{name} has no claims to recompute; valid choices: {', '.join(with_claims)}")
    names = papers or with_claims
    lines = []
    for name in names:
        tables = recompute(name, notebooks=notebooks)
        counts = pd.concat(tables.values())["verdict"].value_counts().to_dict()
        lines.append(f"{name}: " + ", ".join(f"{n} {v}" for v, n in counts.items()))
    write_findings()
    return lines
