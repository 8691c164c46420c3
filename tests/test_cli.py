"""The command line: bad parameters name the valid choices; `train` hands the grid what it was asked for."""
import pytest

import xlrepro.training.grid as grid
from xlrepro.cli import main


def test_workers_per_gpu_must_be_positive(capsys):
    assert main(["train", "dufter2020", "--workers-per-gpu", "0"]) == 2
    assert "--workers-per-gpu must be 1 or more; got 0" in capsys.readouterr().err


def test_unknown_chapter_names_the_valid_ones(capsys):
    assert main(["run", "dufter2020/nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown chapter 'dufter2020/nope'" in err and "dufter2020/architecture" in err


@pytest.mark.parametrize("workers, compile_flag", [(1, []), (2, ["--compile"])])
def test_train_passes_devices_and_the_compile_switch(monkeypatch, workers, compile_flag):
    seen = {}

    def fake_run_grid(chapter, ids, seeds, **kwargs):
        seen.update(kwargs, chapter=chapter, ids=ids, seeds=seeds)
        return True

    monkeypatch.setattr(grid, "run_grid", fake_run_grid)
    monkeypatch.setattr(grid, "available_devices", lambda: ["cuda:0", "cuda:1"])
    args = ["train", "dufter2020", "--ids", "0", "21", "--seeds", "0", "42", "--workers-per-gpu", str(workers)]
    assert main(args + compile_flag) == 0
    assert seen["devices"] == ["cuda:0", "cuda:1"] * workers
    assert (seen["chapter"], seen["ids"], seen["seeds"]) == ("dufter2020", ["0", "21"], [0, 42])
    assert seen["compile"] == (True if compile_flag else None)  # an argument, never an environment variable
