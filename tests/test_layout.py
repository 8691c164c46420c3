"""One home per paper: shared modules never name a paper; the registry finds every paper and its files."""
import re
from pathlib import Path

import pytest

from xlrepro.config import ConfigError
from xlrepro.papers import get_paper, papers

PACKAGE = Path(__file__).resolve().parents[1] / "xlrepro"
PAPER_NAMES = re.compile(r"dufter2020|wu2019|k2020|liu2020|Fake-English|fake_english")


def test_no_module_outside_the_papers_names_a_paper():
    offenders = [f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
                 for path in PACKAGE.rglob("*.py") if "papers" not in path.relative_to(PACKAGE).parts
                 for n, line in enumerate(path.read_text().splitlines(), 1) if PAPER_NAMES.search(line)]
    assert offenders == []


def test_the_check_would_catch_a_paper_name():
    assert PAPER_NAMES.search('load_chapter("dufter2020")') and not PAPER_NAMES.search("load_chapter(name)")


def test_every_paper_has_its_files_and_chapters():
    root = PACKAGE.parent
    for name, paper in papers().items():
        assert (PACKAGE / "papers" / name / "experiments.yaml").is_file()
        assert (PACKAGE / "papers" / name / "reference.csv").is_file()
        for chapter in paper.chapters:
            assert (root / "notebooks" / f"{chapter}.ipynb").is_file(), chapter
            assert f"file: book/{chapter}" in (root / "_toc.yml").read_text(), chapter


def test_unknown_paper_names_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown paper 'devlin2019'; valid choices: dufter2020, wu2019, k2020"):
        get_paper("devlin2019")
