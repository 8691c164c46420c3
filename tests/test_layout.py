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
    for name in papers("paper"):
        assert (PACKAGE / "papers" / name / "experiments.yaml").is_file()
        assert (PACKAGE / "papers" / name / "reference.csv").is_file()
    for name, paper in papers().items():  # the shared parts too
        for chapter in paper.chapters:
            assert (root / "notebooks" / f"{chapter}.ipynb").is_file(), chapter
            assert f"file: book/{chapter}" in (root / "_toc.yml").read_text(), chapter


def test_the_registry_holds_the_papers_and_the_parts_they_share_in_book_order():
    assert list(papers()) == ["dufter2020", "multilingual", "wu2019", "k2020", "liu2020", "appendix"]
    assert list(papers("paper")) == ["dufter2020", "wu2019", "k2020", "liu2020"]
    assert list(papers("shared")) == ["multilingual", "appendix"]
    with pytest.raises(ConfigError, match="unknown kind 'part'; valid choices: paper, shared"):
        papers("part")


def test_the_shared_chapters_belong_to_their_own_entries_under_their_old_names():
    from xlrepro.papers import paper_of_chapter

    assert paper_of_chapter("multilingual/lab").name == "multilingual"
    assert paper_of_chapter("dufter2020/engineering").name == "appendix"
    assert paper_of_chapter("wu2019/q1_zero_shot").name == "wu2019"
    assert paper_of_chapter("dufter2020/setup").name == "dufter2020"
    assert "multilingual/lab" not in get_paper("wu2019").chapters
    assert "dufter2020/engineering" not in get_paper("dufter2020").chapters
    every = [c for p in papers().values() for c in p.chapters]
    assert len(every) == len(set(every)) == 19  # each chapter has one entry
    # the lab's own check before a kernel starts: the smoke encoder never waits for a GPU run
    assert get_paper("multilingual").pending_training("multilingual/lab", {"model": "smoke"}) is None
    assert get_paper("appendix").pending_training("dufter2020/engineering", {}) is None  # it trains nothing


def test_a_shared_part_trains_only_with_both_train_callbacks():
    from xlrepro.papers import Paper

    part = Paper(name="glossary", title="A glossary", chapters=(), kind="shared")
    assert part.add_train_arguments is None and part.prepare_train is None
    with pytest.raises(ConfigError, match="add_train_arguments and prepare_train go together"):
        Paper(name="glossary", title="A glossary", chapters=(), kind="shared", prepare_train=lambda a: None)
    with pytest.raises(ConfigError, match="unknown kind 'part'; valid choices: paper, shared"):
        Paper(name="glossary", title="A glossary", chapters=(), kind="part")


def test_unknown_paper_names_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown paper 'devlin2019'; valid choices: dufter2020, multilingual, "
                                          "wu2019, k2020, liu2020, appendix"):
        get_paper("devlin2019")
