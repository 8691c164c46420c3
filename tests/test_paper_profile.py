"""-p profile paper of every chapter: it runs (the Parallel Bible Corpus chapters, Wu & Dredze's Table 3) or stops
before a kernel starts, in one line naming what is missing, with exit status 2; it never falls back to the lab."""
from __future__ import annotations

import pytest

from xlrepro.cli import main
from xlrepro.papers import papers
from xlrepro.papers.k2020 import PAPER_MISSING as K_MISSING
from xlrepro.papers.liu2020 import PAPER_MISSING as LIU_MISSING


@pytest.fixture
def no_kernel(monkeypatch, tmp_path):
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr("papermill.execute_notebook", lambda *a, **k: pytest.fail("a kernel started"))


@pytest.mark.parametrize("chapter", papers()["k2020"].chapters + papers()["liu2020"].chapters)
def test_chapters_without_a_paper_path_stop_in_one_line(capsys, no_kernel, chapter):
    assert main(["run", chapter, "-p", "profile", "paper"]) == 2
    err = capsys.readouterr().err
    missing = (K_MISSING if chapter.startswith("k2020/") else LIU_MISSING).format(chapter=chapter)
    assert err == f"xlrepro: {missing}\n"
    assert "$XLREPRO_WIKI_DIR" in err and "Use -p profile lab" in err


def test_the_lab_profile_is_not_stopped(capsys, no_kernel, monkeypatch):
    from xlrepro.papers.liu2020 import check_chapter

    assert check_chapter("liu2020/static_vs_bert", {"profile": "lab"}, False) is None
    assert papers()["k2020"].check_chapter("k2020/linguistic", {"profile": "smoke"}, False) is None
