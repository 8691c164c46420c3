"""The chapters' notebooks hold their prose, calls and display: a code cell of more than MAX_SHARED_LINES lines that
two notebooks share belongs in the package as one call (as `xlrepro.papers.liu2020.report.chapter_setup` and
`xlrepro.papers.dufter2020.report.chapter_setup` do). Parameters cells are exempt: papermill needs them literal."""
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_SHARED_LINES = 10


def code_cells(nb) -> list[str]:
    """The sources of a notebook's code cells but its parameters cell, stripped, trailing spaces removed per line."""
    return ["\n".join(line.rstrip() for line in c.source.strip().splitlines()) for c in nb.cells
            if c.cell_type == "code" and "parameters" not in c.get("metadata", {}).get("tags", [])]


def shared_cells(notebooks: dict[str, list[str]], max_lines: int = MAX_SHARED_LINES) -> dict[str, list[str]]:
    """{cell source: the notebooks holding it} for every code cell longer than `max_lines` lines that more than one
    notebook holds. `notebooks`: name -> its code cells (`code_cells`)."""
    holders: dict[str, list[str]] = {}
    for name, cells in notebooks.items():
        for source in dict.fromkeys(cells):
            if len(source.splitlines()) > max_lines:
                holders.setdefault(source, []).append(name)
    return {source: names for source, names in holders.items() if len(names) > 1}


def _cell(source: str, tags=()) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = list(tags)
    return cell


def test_shared_cells_finds_long_cells_in_two_notebooks_only():
    long = "\n".join(f"x{i} = {i}" for i in range(11))      # 11 lines
    short = "\n".join(f"y{i} = {i}" for i in range(10))     # 10 lines: allowed
    a = nbformat.v4.new_notebook(cells=[_cell(long, ["parameters"]), _cell(long + "  \n\n"), _cell(short)])
    b = nbformat.v4.new_notebook(cells=[_cell(long), _cell(short), _cell(long, ["parameters"])])
    c = nbformat.v4.new_notebook(cells=[_cell(long, ["parameters"])])
    assert code_cells(c) == []
    found = shared_cells({"a": code_cells(a), "b": code_cells(b), "c": code_cells(c)})
    assert found == {long: ["a", "b"]}
    assert shared_cells({"a": code_cells(a), "c": code_cells(c)}) == {}  # a parameters cell is no shared cell
    assert shared_cells({"a": [long, long]}) == {}                       # twice in one notebook: not shared


@pytest.mark.parametrize("folder", ["notebooks"])
def test_no_two_notebooks_share_a_long_code_cell(folder):
    notebooks = {str(p.relative_to(ROOT)): code_cells(nbformat.read(p, as_version=4))
                 for p in sorted((ROOT / folder).rglob("*.ipynb"))}
    assert len(notebooks) > 10
    found = shared_cells(notebooks)
    assert not found, "code cells shared by notebooks (make each one package call):\n" + "\n".join(
        f"{', '.join(names)}:\n{source}" for source, names in found.items())
