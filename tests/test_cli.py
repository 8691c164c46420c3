"""The command line: every argument is checked before anything trains; bad ones name the valid choices; only
--publish writes into book/."""
import subprocess
from pathlib import Path

import pytest

import xlrepro.cli as cli
import xlrepro.papers.dufter2020.grid as grid
import xlrepro.papers.wu2019.transfer as transfer
import xlrepro.training.mini_mbert as mini_mbert
from xlrepro.cli import main
from xlrepro.paths import repo_root


def _never(*args, **kwargs):
    raise AssertionError("training started although an argument was bad")


@pytest.fixture
def no_training(monkeypatch):
    """Any training or pretraining fails the test."""
    monkeypatch.setattr(grid, "run_grid", _never)
    monkeypatch.setattr("xlrepro.papers.dufter2020.report.run_grid", _never)
    monkeypatch.setattr("xlrepro.engine.queue.launch", _never)
    monkeypatch.setattr(transfer, "TransferLab", _never)
    monkeypatch.setattr(transfer, "run_part", _never)
    monkeypatch.setattr(mini_mbert, "pretrain", _never)
    monkeypatch.setattr("papermill.execute_notebook", _never)


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr(grid, "available_devices", lambda: ["cuda:0", "cuda:1"])


@pytest.fixture
def cpu(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr(grid, "available_devices", lambda: ["cpu"])


def test_workers_per_gpu_must_be_positive(capsys, no_training, gpu):
    assert main(["train", "dufter2020", "--workers-per-gpu", "0"]) == 2
    assert "--workers-per-gpu must be 1 or more; got 0" in capsys.readouterr().err


def test_epochs_must_be_positive(capsys, no_training, gpu):
    assert main(["train", "dufter2020", "--epochs", "0"]) == 2
    assert "--epochs must be 1 or more; got 0" in capsys.readouterr().err


def test_unknown_model_id_names_the_valid_ones(capsys, no_training, gpu):
    assert main(["train", "dufter2020", "--ids", "0", "99"]) == 2
    assert "unknown model ID '99'; valid choices: 0, 1, 2" in capsys.readouterr().err


def test_unknown_paper_names_the_valid_ones(capsys, no_training):
    with pytest.raises(SystemExit) as err:
        main(["train", "devlin2019"])
    assert err.value.code == 2
    assert "dufter2020" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--part", "bogus"], "invalid choice: 'bogus' (choose from 'select', 'zero-shot', 'in-language', 'frozen', 'all')"),
    (["--part", "all", "--model", "huge"], "invalid choice: 'huge' (choose from 'lab', 'smoke')"),
])
def test_wu_bad_choices_fail_before_anything_loads(capsys, no_training, args, message):
    with pytest.raises(SystemExit) as err:
        main(["train", "wu2019", *args])
    assert err.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--part", "all", "--shard", "4/4"], "--shard must be I/N with 0 <= I < N"),
    (["--part", "all", "--shard", "two"], "--shard must be I/N"),
    (["--part", "in-language", "--languages", "en", "xx"], "unknown language 'xx'; valid choices: en"),
    (["--part", "zero-shot", "--languages", "fr"], "--languages applies to --part in-language"),
])
def test_wu_bad_values_fail_before_anything_loads(capsys, no_training, gpu, args, message):
    assert main(["train", "wu2019", *args]) == 2
    assert message in capsys.readouterr().err


def test_bench_unknown_case_names_the_valid_ones(capsys):
    from xlrepro.bench import CASES, ENGINES
    assert tuple(CASES) == cli.BENCH_CASES and tuple(ENGINES) == cli.BENCH_ENGINES
    with pytest.raises(SystemExit):
        main(["bench", "--cases", "huge"])
    err = capsys.readouterr().err
    assert "invalid choice: 'huge'" in err and "'small', 'base', 'mbert', 'base-ragged'" in err


@pytest.mark.parametrize("args, message", [(["--steps", "0"], "--steps must be an integer >= 1; got 0"),
                                           (["--repeats", "0"], "--repeats must be an integer >= 1; got 0"),
                                           (["--budget-s", "-5"], "--budget-s must be positive")])
def test_bench_bad_numbers_fail_before_anything_runs(capsys, monkeypatch, args, message):
    import xlrepro.bench

    monkeypatch.setattr(xlrepro.bench, "write_bench", lambda *a, **k: pytest.fail("the benchmark started"))
    assert main(["bench", "--cases", "base", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["train", "dufter2020"],
    ["train", "wu2019", "--part", "select"],
    ["pretrain", "mini-mbert"],
])
def test_full_size_training_on_a_cpu_needs_allow_cpu(capsys, no_training, cpu, argv):
    assert main(argv) == 2
    assert "--allow-cpu" in capsys.readouterr().err
    with pytest.raises(AssertionError, match="training started"):  # asked for: it trains
        main(argv + ["--allow-cpu"])


def test_smoke_sizes_train_on_a_cpu(monkeypatch, cpu):
    seen = []
    monkeypatch.setattr(mini_mbert, "pretrain", lambda config, device, **kw: seen.append((config.steps, device))
                        or Path("/nowhere"))
    assert main(["pretrain", "mini-mbert", "--steps", "30"]) == 0
    assert seen == [(30, "cpu")]


def test_chapter_at_full_size_on_a_cpu_trains_nothing_and_lists_what_awaits_a_gpu(capsys, no_training, cpu, tmp_path,
                                                                                  monkeypatch):
    from xlrepro.papers.dufter2020.report import chapter_run

    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path))  # nothing trained there
    monkeypatch.setattr("xlrepro.papers.dufter2020.report.default_device", lambda: "cpu")
    run = chapter_run("dufter2020", seeds=[0, 42])
    run.train(["0", "1"])  # `no_training` makes any training fail
    assert [m.key for m in run.pending] == ["0/0", "0/42", "1/0", "1/42"]
    assert "4 models await a GPU run" in capsys.readouterr().out
    assert run.pending_experiments() == ["0", "1"] and run.results_frame(["0", "1"]).empty
    with pytest.raises(AssertionError, match="training started"):  # smoke parameters: it trains
        chapter_run("dufter2020", seeds=[0], epochs=1).train(["0"])


@pytest.mark.parametrize("workers, compile_flag", [(1, []), (2, ["--compile"])])
def test_train_on_several_gpus_starts_torchrun_with_the_same_command(monkeypatch, capsys, gpu, workers,
                                                                    compile_flag):
    """Two GPUs: one rank a slot (GPUs x workers), each running the same command line under torchrun."""
    launched = []
    monkeypatch.setattr("xlrepro.engine.queue.launch", lambda argv, nproc: launched.append((argv, nproc)) or 0)
    monkeypatch.setattr(grid, "run_grid", _never)  # the ranks train, not this process
    args = ["train", "dufter2020", "--ids", "0", "21", "--seeds", "0", "42", "--workers-per-gpu", str(workers)]
    assert main(args + compile_flag) == 0
    assert launched == [(args + compile_flag, 2 * workers)]
    launched.clear()
    assert main(["train", "dufter2020", "--ids", "0", "--data-parallel"]) == 0  # one rank a GPU
    assert launched == [(["train", "dufter2020", "--ids", "0", "--data-parallel"], 2)]
    assert main(["train", "dufter2020", "--data-parallel", "--workers-per-gpu", "2"]) == 2
    assert main(["train", "dufter2020", "--part", "table3", "--data-parallel"]) == 2  # the grid's option
    capsys.readouterr()
    assert main(["train", "dufter2020", "--finetune-processes", "2"]) == 2  # table3's option
    assert "--finetune-processes applies to --part table3 only; got --part grid" in capsys.readouterr().err
    assert main(["train", "dufter2020", "--part", "table3", "--finetune-processes", "0"]) == 2
    assert "--finetune-processes must be 1 or more; got 0" in capsys.readouterr().err


@pytest.mark.parametrize("compile_flag", [[], ["--compile"]])
def test_train_on_one_gpu_or_one_rank_passes_the_plan_and_the_compile_switch(monkeypatch, gpu, compile_flag):
    seen = {}

    def fake_run_grid(chapter, ids, seeds, **kwargs):
        seen.update(kwargs, chapter=chapter, ids=ids, seeds=seeds)
        return True

    monkeypatch.setattr(grid, "run_grid", fake_run_grid)
    monkeypatch.setattr("xlrepro.engine.queue.launch", _never)
    monkeypatch.setattr(grid, "available_devices", lambda: ["cuda:0"])
    args = ["train", "dufter2020", "--ids", "0", "21", "--seeds", "0", "42"]
    assert main(args + compile_flag) == 0
    assert seen["gpus"] == 1 and not seen["data_parallel"]
    assert (seen["chapter"], seen["ids"], seen["seeds"]) == ("dufter2020", ["0", "21"], [0, 42])
    assert seen["compile"] == (True if compile_flag else None)  # an argument, never an environment variable
    assert seen["epochs"] is None  # each experiment's own number of epochs
    assert main(args + ["--epochs", "3"]) == 0
    assert seen["epochs"] == 3
    # rank 1 of torchrun's 4 (2 GPUs x 2 workers): the plan deals the stacks over the 2 GPUs
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setattr(grid, "available_devices", lambda: ["cuda:0", "cuda:1"])
    assert main(args + ["--workers-per-gpu", "2"]) == 0
    assert seen["gpus"] == 2


def test_unknown_chapter_names_the_valid_ones(capsys):
    assert main(["run", "dufter2020/nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown chapter 'dufter2020/nope'" in err and "dufter2020/architecture" in err


def test_unknown_notebook_parameter_names_the_chapters_parameters(capsys, no_training):
    assert main(["run", "dufter2020/architecture", "-p", "seed", "[0]"]) == 2
    err = capsys.readouterr().err
    assert "chapter dufter2020/architecture has no parameter 'seed'" in err
    assert "valid choices: profile, seeds, large_seeds, epochs" in err


def _record(monkeypatch, fail=False):
    calls = []

    def execute(notebook, output, parameters, **kwargs):
        calls.append({"output": Path(output), "parameters": parameters})
        Path(output).write_text("{}")
        if fail:
            raise KeyboardInterrupt
    monkeypatch.setattr("papermill.execute_notebook", execute)
    return calls


def test_readme_rerun_writes_outside_the_book(monkeypatch, tmp_path, capsys, gpu):
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path / "runs"))
    calls = _record(monkeypatch)
    book = repo_root() / "book"
    before = set(book.rglob("*"))
    status = lambda: subprocess.run(["git", "status", "--porcelain", "--", str(book)], capture_output=True,
                                    text=True, cwd=repo_root()).stdout
    git_before = status()
    assert main(["run", "dufter2020/architecture", "-p", "seeds", "[0,42]"]) == 0
    out = Path(capsys.readouterr().out.strip())
    key_dir = tmp_path / "runs" / "dufter2020" / "exploratory"
    assert out.parent.parent == key_dir and out.name == "architecture.ipynb" and out.exists()
    assert calls[0]["parameters"] == {"seeds": [0, 42], "results": str(out.parent / "results")}
    assert not calls[0]["output"].is_relative_to(book)
    assert set(book.rglob("*")) == before
    # the same chapter and parameters reuse the key; others get their own folder
    main(["run", "dufter2020/architecture", "-p", "seeds", "[0,42]"])
    main(["run", "dufter2020/architecture", "-p", "seeds", "[0]"])
    assert len(list(key_dir.iterdir())) == 2
    assert status() == git_before  # git sees no change under book/


def test_publish_writes_the_book_and_warns_on_other_parameters(monkeypatch, tmp_path, capsys, gpu):
    calls = _record(monkeypatch)
    out = tmp_path / "book" / "dufter2020" / "architecture.ipynb"
    assert main(["run", "dufter2020/architecture", "--publish", "--output", str(out)]) == 0
    assert calls[-1]["parameters"] == {"publish": True} and out.exists()
    assert "warning" not in capsys.readouterr().err
    assert main(["run", "dufter2020/architecture", "--publish", "-p", "seeds", "[0]", "--output", str(out)]) == 0
    assert calls[-1]["parameters"] == {"seeds": [0], "publish": True}
    assert "warning: publishing dufter2020/architecture with non-default parameters" in capsys.readouterr().err


def test_interrupted_run_leaves_no_temporary_file(monkeypatch, tmp_path, gpu):
    calls = _record(monkeypatch, fail=True)
    out = tmp_path / "book" / "dufter2020" / "architecture.ipynb"
    with pytest.raises(KeyboardInterrupt):
        main(["run", "dufter2020/architecture", "--publish", "--output", str(out)])
    assert not calls[0]["output"].is_relative_to(tmp_path)  # executed outside the book
    assert not calls[0]["output"].exists()  # and removed
    assert list(tmp_path.rglob("*")) == []  # nor the folders it made for its output


def test_reproduce_trains_each_paper_then_publishes_its_chapters(capsys):
    assert main(["reproduce", "--dry-run", "-p", "profile", "lab"]) == 0
    lines = [ln.split(None, 3)[3] for ln in capsys.readouterr().out.splitlines()[1::2]]  # the steps' commands
    assert lines[0] == "xlrepro train dufter2020"
    assert "xlrepro run dufter2020/architecture --publish -p profile 'lab'" in lines
    assert "xlrepro run multilingual/lab --publish" in lines  # it has no `profile`
    # the shared parts in book order: the lab's encoder before the papers that fine-tune it, the appendix last
    assert lines.index("xlrepro pretrain mini-mbert") < lines.index("xlrepro run multilingual/lab --publish") \
        < lines.index("xlrepro train wu2019 --part all")
    assert lines[-1] == "xlrepro run dufter2020/engineering --publish"
    assert lines.index("xlrepro train wu2019 --part all") > lines.index("xlrepro run dufter2020/training_dynamics "
                                                                        "--publish -p profile 'lab'")
    # knn_replace reads Wu & Dredze's overlap.csv: published after the chapter that writes it
    assert lines.index("xlrepro run dufter2020/knn_replace --publish -p profile 'lab'") == \
        lines.index("xlrepro run wu2019/q4_subword_overlap --publish -p profile 'lab'") + 1
    assert main(["reproduce", "--dry-run", "-p", "nope", "1"]) == 2


def test_papers_lists_the_registry(capsys):
    assert main(["papers", "--chapters"]) == 0
    assert capsys.readouterr().out.split() == [f"{p}" for p in
                                                ["dufter2020/setup", "dufter2020/architecture",
                                                 "dufter2020/comparability", "dufter2020/training_dynamics", "dufter2020/knn_replace",
                                                 "multilingual/lab", "wu2019/q1_zero_shot", "wu2019/q2_layers",
                                                 "wu2019/q3_language_id", "wu2019/q4_subword_overlap",
                                                 "k2020/linguistic", "k2020/architecture", "k2020/input_objective",
                                                 "k2020/mixed_pairs",
                                                 "liu2020/static_vs_bert", "liu2020/context_window",
                                                 "liu2020/part_of_speech", "liu2020/language_information",
                                                 "dufter2020/engineering"]]  # the book's order (_toc.yml)
    assert main(["papers"]) == 0
    names = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert names == ["dufter2020", "multilingual", "wu2019", "k2020", "liu2020", "appendix"]


def test_verdicts_of_a_shared_part_name_the_papers_with_claims(capsys):
    assert main(["verdicts", "appendix", "--no-notebooks"]) == 2
    assert capsys.readouterr().err.strip() == ("xlrepro: appendix has no claims to recompute; valid choices: "
                                               "dufter2020, wu2019, k2020, liu2020")


def test_train_lists_the_papers_only(capsys):
    with pytest.raises(SystemExit):
        main(["train", "appendix"])
    assert "invalid choice: 'appendix' (choose from 'dufter2020', 'wu2019', 'k2020', 'liu2020')" in \
        capsys.readouterr().err
