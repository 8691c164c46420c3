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
        import os
        seen.update(kwargs, chapter=chapter, ids=ids, seeds=seeds, compile=os.environ.get("XLREPRO_COMPILE"))
        return True

    monkeypatch.setattr(grid, "run_grid", fake_run_grid)
    monkeypatch.setattr(grid, "available_devices", lambda: ["cuda:0", "cuda:1"])
    monkeypatch.setenv("XLREPRO_COMPILE", "0")  # restored after the test (the CLI sets it for --compile)
    args = ["train", "dufter2020", "--ids", "0", "21", "--seeds", "0", "42", "--workers-per-gpu", str(workers)]
    assert main(args + compile_flag) == 0
    assert seen["devices"] == ["cuda:0", "cuda:1"] * workers
    assert (seen["chapter"], seen["ids"], seen["seeds"]) == ("dufter2020", ["0", "21"], [0, 42])
    assert seen["compile"] == ("1" if compile_flag else "0")


def test_run_publishes_the_notebook_only_when_it_succeeds(monkeypatch, tmp_path):
    import papermill

    from xlrepro.cli import run_chapter

    def fake_execute(src, out, parameters, **kw):
        if parameters.get("fail"):
            open(out, "w").write("half")
            raise RuntimeError("kernel died")
        assert out.endswith(".ipynb")  # papermill writes into a temp notebook beside the published one
        open(out, "w").write(f"ran with {parameters}")

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    out = tmp_path / "book" / "architecture.ipynb"
    assert run_chapter("dufter2020/architecture", {"seeds": [0]}, out) == out
    assert out.read_text() == "ran with {'seeds': [0]}"
    with pytest.raises(RuntimeError, match="kernel died"):
        run_chapter("dufter2020/architecture", {"fail": True}, out)
    assert out.read_text() == "ran with {'seeds': [0]}" and [p.name for p in out.parent.iterdir()] == [out.name]
