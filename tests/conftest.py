import multiprocessing
import os
from pathlib import Path

import pytest
import torch

# CI is a 2-core CPU: keep every test single-threaded and offline.
torch.set_num_threads(1)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: Every Bible language a test reads: the smoke encoder's four (transfer tests, wu2019 and multilingual
#: notebooks), plus tr (dropped and merged verses) and zh (characters) for the cleaning and section tests.
TEST_LANGUAGES = ("en", "fr", "de", "es", "tr", "zh", "hi", "ru")  # hi, ru: K et al. 2020


@pytest.fixture(scope="session", autouse=True)
def xlrepro_dirs(tmp_path_factory):
    """XLREPRO_CACHE and XLREPRO_RUNS for the whole session (notebook kernels inherit them): fresh folders, so
    that tests never read or write the repository's cache and runs. XLREPRO_TEST_CACHE names a cache folder to
    keep between sessions instead (faster local runs). Under pytest-xdist the workers share one fresh cache (the
    cache's writes are atomic and locked, as for XLREPRO_TEST_CACHE): the Bible, the lab data, the parsed
    dictionaries and the smoke encoder are prepared once per test run, not once per worker."""
    if os.environ.get("XLREPRO_TEST_CACHE"):
        cache = Path(os.environ["XLREPRO_TEST_CACHE"])
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        cache = tmp_path_factory.getbasetemp().parent / "xlrepro-cache-shared"  # the run's folder, above the workers'
        cache.mkdir(exist_ok=True)
    else:
        cache = tmp_path_factory.mktemp("xlrepro-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XLREPRO_CACHE", str(cache))
        mp.setenv("XLREPRO_RUNS", str(tmp_path_factory.mktemp("xlrepro-runs")))
        yield cache


@pytest.fixture(scope="session")
def multilingual_cache(xlrepro_dirs):
    """The session's cache with the prepared Bible of TEST_LANGUAGES, built once for every test that reads it.

    Under pytest-xdist the workers share the cache and may ask for it at the same time: each language is prepared by
    the worker that takes its lock first (the others go on to the next language), then every worker waits for the
    languages the others are preparing. Two workers thus split the work rather than both doing all of it."""
    from xlrepro.atomic import LockHeld, locked
    from xlrepro.data.multilingual import prepare_multilingual_cache

    lock = lambda lang: xlrepro_dirs / "multilingual" / f"test-bible-{lang}"
    for lang in TEST_LANGUAGES:
        try:
            with locked(lock(lang), wait=False):
                prepare_multilingual_cache(xlrepro_dirs, [lang])
        except LockHeld:
            continue
    for lang in TEST_LANGUAGES:
        with locked(lock(lang)):  # the worker preparing it is done
            pass
    prepare_multilingual_cache(xlrepro_dirs, TEST_LANGUAGES)  # up to date: reads the manifest (or redoes a failed one)
    return xlrepro_dirs


@pytest.fixture(scope="session")
def lab(xlrepro_dirs):
    """The Dufter & Schütze lab data, prepared once into the session's cache (the dufter2020 notebooks reuse it)."""
    from xlrepro.papers.dufter2020.lab import load_lab
    return load_lab()


@pytest.fixture
def in_processes():
    """run(target, [args, ...]): target(*args) in forked processes running at once; their exit codes."""
    def run(target, args_list, timeout=60):
        ctx = multiprocessing.get_context("fork")  # forked: they inherit the test's monkeypatches
        procs = [ctx.Process(target=target, args=tuple(args)) for args in args_list]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout)
        return [p.exitcode for p in procs]
    return run


PAPER_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "paper"
PAPER_VARIABLES = {"XLREPRO_MBERT": "tiny_bert", "XLREPRO_XNLI_DIR": "xnli", "XLREPRO_MULTINLI_DIR": "multinli",
                   "XLREPRO_UD_DIR": "ud", "XLREPRO_WIKI_DIR": "wiki", "XLREPRO_MUSE_DIR": "muse",
                   "XLREPRO_MLDOC_DIR": "mldoc"}


@pytest.fixture
def paper_env_of(monkeypatch, tmp_path):
    """paper_env_of(*variables): point those paper-profile variables at tests/fixtures/paper/ (the others stay
    as they are) and the runs at tmp_path/runs; returns tmp_path."""
    def setup(*variables):
        for v in variables:
            monkeypatch.setenv(v, str(PAPER_FIXTURES / PAPER_VARIABLES[v]))
        monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path / "runs"))
        return tmp_path
    return setup


def pytest_collection_finish(session):
    """Move the objects alive after collection (modules, test items) out of the garbage collector's reach: every
    later full collection then scans only what the tests create (xlrepro.bench calls gc.collect between engines)."""
    import gc
    gc.collect()
    gc.freeze()
