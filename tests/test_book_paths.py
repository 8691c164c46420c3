"""The book speaks only of the project: no absolute paths of the machine it ran on, no files outside the
repository, no wording about how the work was organised. Scans every text file under book/."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
TEXT = (".ipynb", ".md", ".csv", ".json", ".log", ".txt", ".yml", ".yaml")

ABSOLUTE = re.compile(r"(?<![\w.])(/work/|/home/|/root/|/tmp/|/Users/|[A-Za-z]:\\\\|[A-Za-z]:\\(?=\w))")
OUTSIDE = re.compile(r"\bANCHORS\.md\b|\bBRIEF\.md\b")  # notes that live beside the repository, not in it
WORDING = re.compile(r"\bsessions?\b|\bcalls? \d+\b|\bdevice calls?\b|\b(?:this|one|same|earlier|later) call\b"
                     r"|\bissues?\b", re.I)


def problems(text: str) -> list[tuple[int, str, str]]:
    """(line number, what, the line) for every offending line of `text`."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        for what, rx in (("absolute path", ABSOLUTE), ("file outside the repository", OUTSIDE),
                         ("run-log wording", WORDING)):
            if rx.search(line):
                out.append((i, what, line.strip()[:160]))
    return out


def notebook_text(path: Path) -> str:
    """Sources and outputs of a notebook, one text (so that line numbers refer to this text)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    parts = []
    for k, cell in enumerate(nb.get("cells", [])):
        parts.append(f"# cell {k}\n" + "".join(cell.get("source", [])))
        for o in cell.get("outputs", []):
            parts.append("".join(o.get("text", [])))
            for mime, data in o.get("data", {}).items():
                if mime.startswith("text/") or mime == "application/json":
                    parts.append(data if isinstance(data, str) else "".join(data) if isinstance(data, list)
                                 else json.dumps(data))
    parts.append("# metadata\n" + json.dumps(nb.get("metadata", {}), indent=1))  # papermill records its paths there
    return "\n".join(parts)


def book_files() -> list[Path]:
    return sorted(p for p in BOOK.rglob("*") if p.is_file() and p.suffix in TEXT and "_build" not in p.parts)


def test_book_has_files():
    assert len(book_files()) > 10


@pytest.mark.parametrize("line, bad", [
    ("run folder: /work/main/runs/dufter2020", True), ("PosixPath('/home/me/x')", True),
    ("see ANCHORS.md", True), ("trained in session 4", True), ("(device call 3)", True),
    ("issue 5 asked for it", True), ("not in this call.", True), ("see docs_notes/gpu_runs.md", False), ("C:\\Users\\me", True), ("book/results/dufter2020/table1.csv", False),
    ("mean over 5 seeds", False), ("tissue", False), ("a/tmp/b is relative", False),
])
def test_problems_known_answers(line, bad):
    assert bool(problems(line)) == bad


@pytest.mark.parametrize("path", book_files(), ids=lambda p: str(p.relative_to(BOOK)))
def test_no_paths_or_run_log_wording(path):
    text = notebook_text(path) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8", errors="replace")
    found = problems(text)
    assert not found, f"{path.relative_to(ROOT)}:\n" + "\n".join(f"  line {i}: {what}: {line}" for i, what, line in found)


def test_run_record(tmp_path, monkeypatch):
    from xlrepro import runrecord as R
    monkeypatch.setenv("XLREPRO_ROOT", str(tmp_path / "repo"))
    (tmp_path / "repo" / "runs" / "a").mkdir(parents=True)
    assert R.shown(tmp_path / "repo" / "runs" / "a") == "runs/a"
    assert R.shown(tmp_path / "elsewhere" / "x.csv") == "<outside the repository>/x.csv"
    assert R.git_commit(tmp_path) == "unknown"  # not a git checkout
    for k, dev in enumerate(["NVIDIA H200", "NVIDIA H200", "NVIDIA H100 80GB HBM3"]):
        (tmp_path / "repo" / "runs" / "a" / f"m{k}").mkdir()
        (tmp_path / "repo" / "runs" / "a" / f"m{k}" / "metrics.json").write_text(f'{{"device": "{dev}"}}')
    rec = R.run_record("p", "ch", tmp_path / "repo" / "runs" / "a", started=0)
    assert rec["training devices"] == "NVIDIA H100 80GB HBM3, NVIDIA H200"
    assert rec["wall time (s)"] > 0 and rec["chapter"] == "ch"
    path = R.save_run_record(rec, tmp_path / "out")
    assert path.name == "run_record_ch.json" and json.loads(path.read_text())["paper"] == "p"
    assert R.run_record("p", "ch", None)["training devices"] == "none recorded"
    assert not problems(path.read_text())  # the record itself names no machine path


def test_run_record_times_the_whole_kernel_even_when_imported_late():
    """A chapter that imports xlrepro.runrecord in its last cell still records its whole run: the wall time counts
    from the process's start, not from the import."""
    import subprocess
    import sys
    code = ("import time; time.sleep(1.2); t = time.time()\n"
            "from xlrepro import runrecord\n"
            "print(t - runrecord._STARTED)")  # the record's wall time counts from _STARTED
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout.strip()) >= 1.2


FOLDED = {"parameters", "hide-input", "remove-input", "hide-cell", "remove-cell"}


def unfolded_cells(notebook: dict) -> list[str]:
    """Ids of code cells whose source the book would show: plumbing stays folded away (the parameters cell shows)."""
    return [c.get("id", "?") for c in notebook["cells"]
            if c["cell_type"] == "code" and not FOLDED & set(c.get("metadata", {}).get("tags", []))]


def test_unfolded_cells_known_answers():
    cell = lambda *tags: {"cell_type": "code", "id": "x", "metadata": {"tags": list(tags)} if tags else {}}
    text = {"cell_type": "markdown", "id": "m", "metadata": {}}
    assert unfolded_cells({"cells": [cell(), text, cell("hide-input"), cell("parameters")]}) == ["x"]
    assert unfolded_cells({"cells": [cell("remove-input"), cell("hide-input", "hide-output"), text]}) == []


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").rglob("*.ipynb")), ids=lambda p: p.stem)
def test_every_chapter_folds_its_code_away(path):
    assert unfolded_cells(json.loads(path.read_text())) == [], f"{path.name}: tag these cells hide-input"
