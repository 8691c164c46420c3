"""One home per paper: shared modules never name a paper; the registry finds every paper and its files; training
(stacks, checkpoints, optimiser steps) lives in xlrepro/engine/, but for the exceptions listed below, and job queues
and launchers only there."""
import re
import sys
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


# --- the engine: training happens in xlrepro/engine/ ------------------------------------------------------------
def code_lines(path: Path):
    """(line number, line) of a module's code, comments and docstring-only lines left out (a line that mentions
    `ModelStack(` in prose is no construction)."""
    import ast
    tree = ast.parse(path.read_text())
    prose = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) \
                and isinstance(node.value.value, str):
            prose.update(range(node.lineno, node.end_lineno + 1))
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if n not in prose and not line.lstrip().startswith("#"):
            yield n, line.split("  #")[0]


def outside_engine(pattern: str) -> set[str]:
    """Modules outside xlrepro/engine/ whose code matches `pattern` (paths relative to the package)."""
    rx = re.compile(pattern)
    return {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
            if path.relative_to(PACKAGE).parts[0] != "engine" and any(rx.search(line) for _, line in code_lines(path))}


# What still trains outside the engine, each with the reason; the test fails when an entry is no longer true (delete
# it) or when a module not listed starts to build stacks, save checkpoints or step optimisers.
STACK_BUILDERS = {
    "bench.py": "the benchmark builds stacks with every engine option to time them",
}
CHECKPOINT_WRITERS = {
    "papers/liu2020/pilot.py": "caches the encoded rows (a data cache written with torch.save, no training state)",
}
TRAINING_LOOPS = {  # modules that call an optimiser's step themselves
    "bench.py": "times HF's own training step as the baseline of the fused engine",
    "evaluation/probe.py": "fits a linear probe on frozen features (an evaluation, not model training)",
    "papers/liu2020/transfer_static.py": "fits a classifier on static word vectors (no BERT)",
}
# Handing out jobs to GPUs is the engine's (`xlrepro/engine/queue.py`: torchrun's store, an atomic counter): no queue
# folder, no store, no launcher of ranks or worker module anywhere else
JOB_QUEUE = (r"""/ ["']queue["']|\bqueue\.glob\(|\bstore\.(add|set)\(|\b(TCP|File|Hash|Prefix)Store\("""
             r"""|\brendezvous\(|torch\.distributed\.run""")


def test_stacks_are_built_only_in_the_engine():
    assert outside_engine(r"\bModelStack\(") == set(STACK_BUILDERS)


def test_checkpoints_are_written_only_by_the_engine():
    assert outside_engine(r"\btorch\.save\(") == set(CHECKPOINT_WRITERS)


def test_optimisers_step_only_in_the_engine_but_for_the_listed_loops():
    assert outside_engine(r"\b(optim|opt|optimizer|self\.optimizer)\.step\(\)") == set(TRAINING_LOOPS)


def test_job_queues_live_only_in_the_engine():
    assert outside_engine(JOB_QUEUE) == set()
    workers = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*worker*.py")]
    assert workers == []  # torchrun starts the ranks (`engine.queue.launch`): no worker module of a recipe's own


def test_the_checks_would_catch_a_stack_built_in_a_paper(tmp_path, monkeypatch):
    (tmp_path / "papers").mkdir()
    (tmp_path / "papers" / "x.py").write_text('"""ModelStack( in prose is fine."""\n'
                                              "stack = ModelStack(models, optim, 'cpu')  # built here\n")
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "y.py").write_text("stack = ModelStack(models, optim, 'cpu')\n")
    (tmp_path / "papers" / "q.py").write_text("k = store.add('next', 1)\nfor job in sorted(queue.glob('*.json')):\n    pass\n")
    (tmp_path / "engine" / "q.py").write_text("k = store.add('next', 1)\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    assert outside_engine(r"\bModelStack\(") == {"papers/x.py"}
    assert outside_engine(JOB_QUEUE) == {"papers/q.py"}
