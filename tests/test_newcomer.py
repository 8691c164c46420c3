"""What a newcomer meets first on a CPU machine: a chapter that cannot run here says why in one line (exit status 2)
before a kernel starts, bad -p values too, and leaves no folder; a corrupt cache file names itself and the fix;
SIGTERM leaves no scratch folder; two identical runs do not run at once; counts read "1 model", "2 models"."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import xlrepro.papers.dufter2020.grid as grid
from xlrepro.atomic import CorruptFile, LockHeld, locked, read_json
from xlrepro.cli import check_value, exploratory_dir, main
from xlrepro.config import ConfigError, plural
from xlrepro.paths import repo_root


def _never(*args, **kwargs):
    raise AssertionError("a kernel started")


@pytest.fixture
def runs(monkeypatch, tmp_path):
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr("papermill.execute_notebook", _never)
    monkeypatch.setattr(grid, "run_grid", _never)
    monkeypatch.setattr("xlrepro.papers.dufter2020.report.run_grid", _never)
    return tmp_path / "runs"


@pytest.fixture
def cpu(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr(grid, "available_devices", lambda: ["cpu"])


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr(grid, "available_devices", lambda: ["cuda:0"])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


def test_readme_rerun_on_a_cpu_stops_before_a_kernel_with_the_gpu_command(capsys, runs, cpu):
    assert main(["run", "dufter2020/architecture", "-p", "seeds", "[0,42]"]) == 2
    err = _one_line(capsys)
    # Table 1: 16 model IDs, 2 seeds each, none trained
    assert "needs 32 models (table1) that no run has trained here" in err
    assert "on a GPU: xlrepro train dufter2020 --ids 0 1 2 4 5 6 7 8 15 16 17 3 9 18 19 30 --seeds 0 42 --compile" in err
    assert "--allow-cpu" in err and "-p epochs 1" in err
    assert not runs.exists()  # nothing was made
    with pytest.raises(AssertionError, match="a kernel started"):  # asked for: it runs
        main(["run", "dufter2020/architecture", "-p", "seeds", "[0,42]", "--allow-cpu"])


def test_a_cpu_run_with_some_trained_models_shows_them(runs, cpu):
    """One trained model is something to show: the chapter runs and lists the others as awaiting a GPU."""
    from xlrepro.papers.dufter2020.report import chapter_run

    run = chapter_run("dufter2020", seeds=[0])
    first = run.members(["0"])[0]
    (grid.member_dir(run.root, first)).mkdir(parents=True)
    (grid.member_dir(run.root, first) / "metrics.json").write_text(json.dumps({"metrics": {"mu": 1.0}}))
    with pytest.raises(AssertionError, match="a kernel started"):
        main(["run", "dufter2020/architecture", "-p", "seeds", "[0]"])


def test_paper_profile_without_the_pbc_files_names_them_and_the_variable(capsys, runs, gpu, monkeypatch, tmp_path):
    monkeypatch.setenv("XLREPRO_PBC_DIR", str(tmp_path / "pbc"))
    for argv in (["-p", "profile", "paper"], ["-p", "profile", "paper", "-p", "epochs", "1", "-p", "seeds", "[0]"]):
        assert main(["run", "dufter2020/architecture", *argv]) == 2
        err = _one_line(capsys)
        assert str(tmp_path / "pbc" / "eng-x-bible-easytoread.txt") in err and "eng-x-bible-kingjames.txt" in err
        assert "set XLREPRO_PBC_DIR" in err
    (tmp_path / "pbc").mkdir()
    for name in ("eng-x-bible-easytoread.txt", "eng-x-bible-kingjames.txt"):
        (tmp_path / "pbc" / name).write_text("")
    with pytest.raises(AssertionError, match="a kernel started"):  # the files are there: it runs
        main(["run", "dufter2020/architecture", "-p", "profile", "paper", "-p", "epochs", "1"])
    assert not (runs / "dufter2020" / "exploratory").exists() or \
        not any(p.name != ".locks" for p in (runs / "dufter2020" / "exploratory").iterdir())


@pytest.mark.parametrize("name, value, message", [
    ("seeds", "notalist", "parameter seeds must be a list, like its default [0, 42, 43, 100, 101]; got 'notalist'"),
    ("seeds", "[0,", "parameter seeds: '[0,' is not a Python literal"),
    ("seeds", "[0, -1]", "seeds must be non-negative integers; got [0, -1]"),
    ("large_seeds", "[]", "parameter large_seeds: seeds must be a non-empty list"),
    ("profile", "3", "parameter profile must be a string"),
    ("profile", "lab2", "unknown profile 'lab2'; valid choices: lab, paper"),
    ("epochs", "-1", "epochs must be None (the paper's setting) or a positive integer; got -1"),
    ("batch_size", "2.5", "batch_size must be None (the paper's setting) or a positive integer; got 2.5"),
    ("time_limit", "0", "time_limit must be None or a positive number of seconds; got 0"),
])
def test_bad_values_stop_in_one_line_before_a_kernel_and_leave_no_folder(capsys, runs, gpu, name, value, message):
    t = time.perf_counter()
    assert main(["run", "dufter2020/architecture", "-p", name, value]) == 2
    assert message in _one_line(capsys)
    assert not runs.exists()
    assert time.perf_counter() - t < 60


@pytest.mark.parametrize("default, value, ok", [
    ("[0, 42]", [1], True), ("[0, 42]", (1, 2), True), ("[0, 42]", "1", False), ("[0, 42]", 1, False),
    ("False", True, True), ("False", 1, False), ("1000", 10, True), ("1000", True, False), ("1000", 1.5, False),
    ("0.5", 1, True), ('"lab"', "x", True), ('"lab"', 1, False), ("None", 7, True), ("None", "[1,", False),
])
def test_values_take_the_type_of_the_declared_default(default, value, ok):
    if ok:
        check_value("some/chapter", "x", value, default)
    else:
        with pytest.raises(ConfigError, match="chapter some/chapter: parameter x"):
            check_value("some/chapter", "x", value, default)


def test_a_failed_kernel_is_one_line(capsys, runs, gpu, monkeypatch):
    from papermill.exceptions import PapermillExecutionError

    def fail(notebook, output, **kwargs):
        Path(output).write_text("{}")
        raise PapermillExecutionError(4, 7, "x", "ValueError", "boom", ["a", "b"])
    monkeypatch.setattr("papermill.execute_notebook", fail)
    assert main(["run", "dufter2020/engineering"]) == 1
    assert _one_line(capsys) == "xlrepro: chapter dufter2020/engineering stopped in cell [7]: ValueError: boom"
    assert not (runs / "dufter2020" / "exploratory").exists()  # the folders it made, empty, are gone


def test_corrupt_cache_json_names_the_file_and_the_fix(tmp_path):
    from xlrepro.data.multilingual import read_manifest
    from xlrepro.papers.dufter2020.lab import lab_cache, load_lab

    folder = lab_cache("lab", tmp_path)
    folder.mkdir(parents=True)
    (folder / "corpus.json").write_text('{"corpus": {"a": 1}, "train": ["a sent')  # cut short
    with pytest.raises(CorruptFile) as err:
        load_lab("lab", tmp_path)
    assert str(folder / "corpus.json") in str(err.value)
    assert "delete it and run `xlrepro prepare --profile lab`" in str(err.value)
    from xlrepro.data.multilingual import CACHE_SUBDIR, MANIFEST
    (tmp_path / CACHE_SUBDIR).mkdir()
    (tmp_path / CACHE_SUBDIR / MANIFEST).write_text("{")
    with pytest.raises(CorruptFile, match="xlrepro prepare --multilingual"):
        read_manifest(tmp_path)
    (tmp_path / "ok.json").write_text('{"a": [1, 2]}')
    assert read_json(tmp_path / "ok.json", "") == {"a": [1, 2]}


def test_a_corrupt_cached_dictionary_is_computed_again(tmp_path, monkeypatch):
    import xlrepro.papers.liu2020.lab as liu_lab

    seen = []
    monkeypatch.setattr(liu_lab, "test_dictionaries",
                        lambda plan, counts, tok, langs: seen.append(langs) or ({"de": [("a", "b")]}, liu_lab.pd.DataFrame()))
    monkeypatch.setattr("xlrepro.runkeys.run_key", lambda spec: "k")

    class Plan:
        dictionary = type("D", (), {})()
    (tmp_path / "k.json").write_text('{"pairs": {"de": [["a", ')  # cut short
    pairs, _ = liu_lab.cached_dictionaries(Plan(), {"en": {}, "de": {}}, None, root=tmp_path)
    assert pairs == {"de": [("a", "b")]} and seen == [["de"]]
    assert json.loads((tmp_path / "k.json").read_text())["pairs"] == {"de": [["a", "b"]]}  # rewritten whole


def test_sigterm_removes_the_scratch_folder(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    code = ("import sys, time, papermill\nfrom pathlib import Path\n"
            "def slow(notebook, output, **kw):\n"
            "    Path(output).write_text('{}'); print('started', flush=True); time.sleep(120)\n"
            "papermill.execute_notebook = slow\n"
            "from xlrepro.cli import main\nsys.exit(main(['run', 'dufter2020/engineering']))\n")
    env = {**os.environ, "TMPDIR": str(scratch), "XLREPRO_RUNS": str(tmp_path / "runs")}
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=repo_root(), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    assert [p.name[:12] for p in scratch.iterdir()] == ["xlrepro-run-"]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "stopped by SIGTERM" in err
    assert list(scratch.iterdir()) == []
    assert not (tmp_path / "runs" / "dufter2020" / "exploratory").exists()


def test_a_second_identical_run_stops_in_one_line_while_the_first_runs(capsys, runs, gpu):
    key = exploratory_dir("dufter2020/engineering", {}).name
    with locked(runs / "dufter2020" / ".locks" / key):  # the first run holds its lock
        assert main(["run", "dufter2020/engineering"]) == 2
        assert "another `xlrepro run dufter2020/engineering` with these parameters is running" in _one_line(capsys)
    with pytest.raises(AssertionError, match="a kernel started"):  # the first ended: the second runs
        main(["run", "dufter2020/engineering"])


def test_locked_without_waiting_raises_while_another_holder_has_it(tmp_path):
    with locked(tmp_path / "x"):
        with pytest.raises(LockHeld):
            with locked(tmp_path / "x", wait=False):
                pass
    with locked(tmp_path / "x", wait=False):
        pass


def test_counts_agree_with_their_nouns(capsys, runs, cpu):
    assert [plural(n, "model") for n in (0, 1, 2)] == ["0 models", "1 model", "2 models"]
    assert main(["train", "dufter2020", "--ids", "0", "--seeds", "0"]) == 2
    assert "training 1 model of dufter2020" in capsys.readouterr().err
    from xlrepro.papers.dufter2020.report import chapter_run
    chapter_run("dufter2020", seeds=[0]).train(["0"])
    assert "1 model awaits a GPU run (0/0)" in capsys.readouterr().out


def test_a_multilingual_chapter_on_a_cpu_names_the_command_for_the_gpu(capsys, runs, cpu, monkeypatch, tmp_path):
    monkeypatch.setenv("XLREPRO_CACHE", str(tmp_path / "cache"))  # no encoder pretrained there
    assert main(["run", "wu2019/q3_language_id"]) == 2
    err = _one_line(capsys)
    assert "pretraining mini-mBERT (20000 steps; on a GPU: xlrepro pretrain mini-mbert)" in err and "--allow-cpu" in err
    assert not runs.exists()


# ---- the README's commands ----------------------------------------------------------------------------------------


def _shell_lines(path: Path) -> list[str]:
    """The command lines of a Markdown file's ```bash blocks, comments and continuation lines joined."""
    import re
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip() if not line.lstrip().startswith("#") else ""
            if line:
                lines.append(line)
    return lines


@pytest.mark.parametrize("doc", ["README.md", "docs/offline_node.md"])
def test_every_xlrepro_and_make_command_of_the_docs_parses(doc):
    """Each `xlrepro ...` of the document is accepted by the command line's parser (the options exist, the choices
    are valid) and each `make <target>` is a target of the Makefile."""
    import re
    import shlex

    from xlrepro.cli import build_parser
    root = repo_root()
    targets = set(re.findall(r"^([a-z][\w-]*):", (root / "Makefile").read_text(), re.M))
    seen = {"xlrepro": 0, "make": 0}
    for line in _shell_lines(root / doc):
        for part in re.split(r"&&|;", line):
            words = shlex.split(part)
            while words and "=" in words[0]:  # VAR=value prefixes
                words = words[1:]
            if words[:1] == ["xlrepro"]:
                seen["xlrepro"] += 1
                build_parser().parse_args(words[1:])  # SystemExit (status 2) on a bad option
            elif words[:1] == ["make"]:
                seen["make"] += 1
                assert words[1] in targets, f"{doc}: make {words[1]} is no target"
    assert seen["make"] >= 2 and (seen["xlrepro"] >= 5 or doc != "README.md"), seen


def test_readme_reproduce_on_a_cpu_stops_in_one_line_before_anything(capsys, runs, cpu):
    """`make reproduce` (`xlrepro reproduce`) and its variants on a machine without a GPU: exit status 2, one line
    that names the first step needing a GPU, nothing written; the dry run prints the plan."""
    assert main(["reproduce"]) == 2
    assert _one_line(capsys) == ("xlrepro: xlrepro train dufter2020 needs a GPU and this machine has none; run on a "
                                 "GPU machine, or --only a chapter with --skip-train to publish from runs already here")
    assert main(["reproduce", "--only", "k2020", "--deadline", "3600"]) == 2
    assert "xlrepro train k2020 --part pilot needs a GPU" in _one_line(capsys)
    assert main(["reproduce", "--only", "dufter2020/architecture", "--gpus", "0,1"]) == 2
    assert "--gpus '0,1': valid choices are a count such as 2 or indices such as 0,1 (this machine has 0 GPU(s))" \
        in _one_line(capsys)
    assert not runs.exists()
    assert main(["reproduce", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("xlrepro reproduce: ") and " 1. train dufter2020 " in out and "publish liu2020/" in out


def test_readme_publish_on_a_cpu_without_models_stops_in_one_line(capsys, runs, cpu):
    assert main(["run", "dufter2020/architecture", "--publish"]) == 2
    err = _one_line(capsys)
    assert "no run has trained here" in err and "xlrepro train dufter2020" in err
    assert not runs.exists()
