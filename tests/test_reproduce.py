"""`xlrepro reproduce`: its arguments, its plan, the dry run, the deadline, resuming, and the refusal without a GPU.
The steps never run here: a fake runner with known durations on a fake clock stands in for them."""
from __future__ import annotations

import json
import os

import pytest

from xlrepro import cli as C
from xlrepro import reproduce as R
from xlrepro.cli import main
from xlrepro.config import ConfigError

CLI = R.Cli(main=C.main, run_chapter=C.run_chapter, chapter_parameters=C.chapter_parameters,
            build_parser=C.build_parser, value=C._value)


@pytest.fixture(autouse=True)
def runs(tmp_path, monkeypatch):
    """An empty runs folder (the state file lives there) and a fixed commit."""
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(R, "_commit", lambda: "c0ffee")
    return tmp_path / "runs"


# ---- arguments --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["--only", "nope"], "unknown paper 'nope'; valid choices: dufter2020, multilingual, wu2019, k2020, liu2020, appendix"),
    (["--only", "k2020/nope"], "valid choices: k2020/linguistic, k2020/architecture, k2020/input_objective, "
                               "k2020/mixed_pairs"),
    (["--deadline", "0"], "--deadline must be a positive number of seconds; got 0.0"),
    (["--only", "k2020", "-p", "nope", "1"], "no chapter of the plan has the parameter 'nope'"),
])
def test_bad_arguments_stop_in_one_line_naming_the_choices(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(R, "run_step", lambda *a, **k: pytest.fail("a step ran"))
    assert main(["reproduce", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("value, available, expected", [
    (None, 2, [0, 1]), ("1", 2, [0]), ("2", 4, [0, 1]), ("0,2", 4, [0, 2]), ("3", 4, [0, 1, 2]),
])
def test_gpus_takes_a_count_or_indices(value, available, expected):
    assert R.check_gpus(value, available) == expected


@pytest.mark.parametrize("value, available", [("0", 2), ("3", 2), ("0,0", 2), ("2", 1), ("a", 2), ("0,", 2),
                                               ("-1", 2)])
def test_gpus_refuses_what_the_machine_lacks(value, available):
    with pytest.raises(ConfigError, match="valid choices are a count such as 2 or indices such as 0,1"):
        R.check_gpus(value, available)


# ---- the plan ---------------------------------------------------------------------------------------------------


def test_only_a_chapter_plans_its_papers_training_then_that_chapter():
    only = R.parse_only(["k2020/linguistic"])
    assert only == {"k2020": {"k2020/linguistic"}}
    steps = R.make_plan(CLI, only)
    assert [(s.kind, s.argv) for s in steps] == [
        ("train", ("train", "k2020", "--part", "pilot")),
        ("train", ("train", "k2020", "--part", "all")),
        ("publish", ("run", "k2020/linguistic", "--publish")),
    ]
    assert [s.needs_gpu for s in steps] == [True, True, False]
    assert [s.takes_time_limit for s in steps] == [True, True, False]


def test_only_keeps_book_order_and_a_whole_paper_wins_over_its_chapter():
    only = R.parse_only(["liu2020", "multilingual/lab", "dufter2020/setup", "dufter2020"])
    assert only == {"dufter2020": None, "multilingual": {"multilingual/lab"}, "liu2020": None}
    steps = R.make_plan(CLI, only, skip_train=True)
    assert [s.chapter for s in steps][:2] == ["dufter2020/setup", "dufter2020/architecture"]
    assert all(s.kind == "publish" for s in steps)
    wu = R.make_plan(CLI, {"wu2019": None})
    assert [s.argv for s in wu if s.kind == "train"] == [
        ("pretrain", "mini-mbert"), ("train", "wu2019", "--part", "all"),
        ("train", "wu2019", "--part", "zero-shot", "--task", "paraphrase")]
    assert wu[1].takes_time_limit is False  # `xlrepro train wu2019` has no --time-limit


def test_a_training_several_papers_need_is_planned_once():
    steps = R.make_plan(CLI, {"dufter2020": None, "multilingual": None, "wu2019": None})
    trains = [s.argv for s in steps if s.kind == "train"]
    assert trains.count(("pretrain", "mini-mbert")) == 1
    # planned where the first paper (in book order) needs it: among Dufter & Schuetze's training steps
    assert trains.index(("pretrain", "mini-mbert")) < trains.index(("train", "wu2019", "--part", "all"))


def test_parameters_go_to_the_chapters_that_declare_them():
    declared = {"k2020/linguistic": {"seeds": {}}, "k2020/architecture": {}}
    cli = R.Cli(C.main, C.run_chapter, declared.__getitem__, C.build_parser, C._value)
    steps = R.make_plan(cli, {"k2020": {"k2020/linguistic", "k2020/architecture"}}, {"seeds": [0]}, skip_train=True)
    assert [(s.chapter, s.parameters) for s in steps] == [("k2020/linguistic", (("seeds", [0]),)),
                                                          ("k2020/architecture", ())]
    assert steps[0].command() == "xlrepro run k2020/linguistic --publish -p seeds [0]"


def test_recorded_time_reads_the_published_records(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "_results", lambda folder: tmp_path / folder)
    (tmp_path / "dufter2020").mkdir()
    (tmp_path / "dufter2020" / "runtime.csv").write_text(
        "experiment,seed,stack,metric,value\n0,-1,1,train_seconds,600\n0,-1,1,steps,99\n5,-1,2,train_seconds,1200\n")
    (tmp_path / "dufter2020" / "run_record_architecture.json").write_text(json.dumps(
        {"training devices": "NVIDIA H200", "executed on": "CPU (x86_64, 2 cores)", "wall time (s)": 15.7}))
    seconds, text = R.recorded_time("dufter2020")
    assert seconds == 1800
    assert text == "about 30 GPU-minutes on H200 (the stacks' training, dufter2020/runtime.csv)"
    assert R.chapter_wall_time("dufter2020/architecture") == (15.7, "CPU (x86_64, 2 cores)")
    assert R.chapter_wall_time("dufter2020/setup") == (None, "")
    (tmp_path / "k2020").mkdir()
    for chapter, minutes in (("a", 100), ("b", 20)):
        (tmp_path / "k2020" / f"run_record_{chapter}.json").write_text(json.dumps(
            {"training devices": "NVIDIA H100 80GB HBM3", "pre-training": f"{minutes} worker-minutes for its models"}))
    assert R.recorded_time("k2020") == (None, "pre-training: about 120 worker-minutes on H100 (summed over its "
                                              "chapters' run records)")
    assert R.recorded_time("liu2020") == (None, "unknown (no published record of its training time)")


def test_dry_run_prints_the_plan_and_runs_nothing(capsys, monkeypatch):
    monkeypatch.setattr(R, "run_step", lambda *a, **k: pytest.fail("a step ran"))
    monkeypatch.setattr(R, "gpu_count", lambda: 0)  # a dry run on a machine without a GPU is fine
    assert main(["reproduce", "--dry-run", "--only", "k2020/mixed_pairs", "--deadline", "600"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "xlrepro reproduce: 3 steps, deadline 600 s"
    assert out[1].split() == ["1.", "train", "k2020", "xlrepro", "train", "k2020", "--part", "pilot"]
    assert out[2].startswith("    GPU; recorded: pre-training: about ") and out[2].endswith("; to do")
    assert out[5].split() == ["3.", "publish", "k2020/mixed_pairs", "xlrepro", "run", "k2020/mixed_pairs", "--publish"]
    assert out[6].startswith("    CPU or GPU; recorded: ") and out[6].endswith(" (its run record); to do")
    assert out[4] == "    GPU; recorded: counted with k2020's first training step; to do"
    assert not (R.state_path()).exists()


# ---- running: deadline and resume -------------------------------------------------------------------------------


class FakeMachine:
    """A clock that advances only when a step 'runs' for its known duration (a time-limited step stops at its
    limit, as the trainers do)."""

    def __init__(self, durations):
        self.now, self.durations, self.calls = 0.0, durations, []

    def clock(self):
        return self.now

    def runner(self, step, limit):
        self.calls.append((step.key, limit))
        took = self.durations[step.key]
        self.now += took if limit is None else min(took, limit)
        return 0


def steps():
    return [R.Step("train", "dufter2020", ("train", "dufter2020"), needs_gpu=True, takes_time_limit=True),
            R.Step("publish", "dufter2020", ("run", "dufter2020/setup", "--publish"), chapter="dufter2020/setup",
                   estimate_s=100),
            R.Step("publish", "dufter2020", ("run", "dufter2020/architecture", "--publish"),
                   chapter="dufter2020/architecture", estimate_s=600)]


DURATIONS = {"train dufter2020": 400, "run dufter2020/setup --publish": 100,
             "run dufter2020/architecture --publish": 600}


def test_the_deadline_stops_before_a_step_that_does_not_fit(tmp_path, capsys):
    fake = FakeMachine(DURATIONS)
    out = R.execute(steps(), deadline=1000, runner=fake.runner, clock=fake.clock, state_file=tmp_path / "s.json")
    # the training got the 1000 s less the margin, finished in 400 s; the setup chapter took 100 s; 500 s are left,
    # and the architecture chapter took 600 s in the published run: it is not started
    assert fake.calls == [("train dufter2020", 1000 - R.MARGIN_S), ("run dufter2020/setup --publish", None)]
    assert [s.key for s in out.done] == ["train dufter2020", "run dufter2020/setup --publish"]
    assert [s.key for s in out.left] == ["run dufter2020/architecture --publish"]
    assert out.reason == "xlrepro run dufter2020/architecture --publish took 600 s in the published run; 500 s are left"
    assert R.report(out, 3) == 3
    printed = capsys.readouterr().out
    assert "2 steps done now, 0 done before, 1 left of 3" in printed
    assert "  left: xlrepro run dufter2020/architecture --publish" in printed


def test_a_training_cut_at_its_time_limit_is_left_for_the_next_call(tmp_path):
    fake = FakeMachine({**DURATIONS, "train dufter2020": 5000})
    out = R.execute(steps(), deadline=1000, runner=fake.runner, clock=fake.clock, state_file=tmp_path / "s.json")
    assert fake.calls == [("train dufter2020", 970)]
    assert out.done == [] and len(out.left) == 3
    assert out.reason == "xlrepro train dufter2020 reached its time limit (it resumes on the next run)"
    assert R.load_state(tmp_path / "s.json") == {}
    late = FakeMachine(DURATIONS)  # no step starts with less than a minute left
    out = R.execute(steps(), deadline=R.MIN_STEP_S - 1, runner=late.runner, clock=late.clock,
                    state_file=tmp_path / "t.json")
    assert late.calls == [] and out.reason == f"{R.MIN_STEP_S - 1} s left before the deadline"


def test_a_second_call_skips_what_the_first_finished(tmp_path, runs, capsys):
    state = tmp_path / "s.json"
    first = FakeMachine(DURATIONS)
    R.execute(steps(), deadline=1000, runner=first.runner, clock=first.clock, state_file=state)
    second = FakeMachine(DURATIONS)
    out = R.execute(steps(), deadline=1000, runner=second.runner, clock=second.clock, state_file=state)
    # the training had a time limit, so its trainer checks again (it skips what is trained); the setup chapter, up to
    # date with the runs, is skipped; the architecture chapter now fits (1000 - 400 = 600 s left)
    assert second.calls == [("train dufter2020", 970), ("run dufter2020/architecture --publish", None)]
    assert [s.key for s in out.skipped] == ["run dufter2020/setup --publish"]
    assert "= xlrepro run dufter2020/setup --publish  (done by an earlier run)" in capsys.readouterr().out
    # an exploratory run changes nothing published
    (runs / "dufter2020" / "exploratory" / "abc").mkdir(parents=True)
    (runs / "dufter2020" / "exploratory" / "abc" / "x.json").write_text("{}")
    assert R.runs_fingerprint("dufter2020") == 0.0
    # a new file in the paper's runs makes its published chapters stale: they are published again
    (runs / "dufter2020" / "metrics.json").write_text("{}")
    future = R.load_state(state)["run dufter2020/setup --publish"]["runs"] + 10
    os.utime(runs / "dufter2020" / "metrics.json", (future, future))
    third = FakeMachine(DURATIONS)
    R.execute(steps(), runner=third.runner, clock=third.clock, state_file=state)  # no deadline: no time limit
    assert [k for k, _ in third.calls] == ["train dufter2020", "run dufter2020/setup --publish",
                                           "run dufter2020/architecture --publish"]
    # a training that ran without a time limit ran to its end: skipped from now on, at this commit
    fourth = FakeMachine(DURATIONS)
    out = R.execute(steps(), runner=fourth.runner, clock=fourth.clock, state_file=state)
    assert fourth.calls == [] and len(out.skipped) == 3
    fifth = FakeMachine(DURATIONS)  # another commit: everything again
    R.execute(steps(), runner=fifth.runner, clock=fifth.clock, state_file=state, commit="other")
    assert [k for k, _ in fifth.calls] == list(DURATIONS)


def test_a_failed_step_leaves_the_rest_of_its_paper_and_the_other_papers_go_on(tmp_path, capsys):
    calls = []
    other = R.Step("publish", "k2020", ("run", "k2020/linguistic", "--publish"), chapter="k2020/linguistic")

    def runner(step, limit):
        calls.append(step.key)
        return 1 if step.paper == "dufter2020" else 0
    out = R.execute([*steps(), other], runner=runner, state_file=tmp_path / "s.json")
    assert calls == ["train dufter2020", "run k2020/linguistic --publish"]
    assert [s.key for s in out.failed] == ["train dufter2020"]
    assert [s.key for s in out.left] == [s.key for s in steps()]
    assert [s.key for s in out.done] == ["run k2020/linguistic --publish"]
    assert R.report(out, 4) == 1
    printed = capsys.readouterr().out
    assert "xlrepro train dufter2020 exited with status 1; the rest of dufter2020 is left" in printed
    assert "stopped: failed: xlrepro train dufter2020" in printed


# ---- no GPU -----------------------------------------------------------------------------------------------------


def test_without_a_gpu_it_refuses_in_one_line_before_doing_anything(capsys, monkeypatch, runs):
    monkeypatch.setattr(R, "gpu_count", lambda: 0)
    monkeypatch.setattr(R, "run_step", lambda *a, **k: pytest.fail("a step ran"))
    assert main(["reproduce", "--only", "dufter2020/setup"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("xlrepro: xlrepro train dufter2020 needs a GPU and this machine has none") \
        and err.count("\n") == 1
    assert main(["reproduce", "--gpus", "1", "--only", "liu2020"]) == 2  # --gpus names a GPU the machine lacks
    assert "valid choices are a count such as 2 or indices such as 0,1 (this machine has 0 GPU(s))" in \
        capsys.readouterr().err
    assert not runs.exists()


def test_without_a_gpu_publishing_alone_runs(capsys, monkeypatch):
    monkeypatch.setattr(R, "gpu_count", lambda: 0)
    ran = []
    monkeypatch.setattr(R, "run_step", lambda step, limit, cli, allow_cpu=False: ran.append((step.key, limit)) or 0)
    assert main(["reproduce", "--skip-train", "--only", "dufter2020/setup"]) == 0
    assert ran == [("run dufter2020/setup --publish", None)]
    assert "1 steps done now, 0 done before, 0 left of 1" in capsys.readouterr().out


# ---- the training parts the plan runs ---------------------------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["train", "dufter2020", "--part", "table3", "--ids", "0"], "--ids applies to --part grid only; got --part table3"),
    (["train", "dufter2020", "--part", "table4", "--seeds", "0", "--epochs", "2"],
     "--seeds, --epochs applies to --part grid only"),
    (["train", "dufter2020", "--part", "table3", "--time-limit", "0"], "--time-limit must be a positive number"),
    (["train", "dufter2020", "--part", "table3-pilot", "--ids", "0"],
     "--ids applies to --part grid only; got --part table3-pilot"),
    (["train", "dufter2020", "--part", "table3-pilot", "--finetune-processes", "3"],
     "--finetune-processes applies to --part table3 only; got --part table3-pilot"),
    (["train", "dufter2020", "--part", "table3-pilot"], "would train on the CPU"),
    (["train", "dufter2020", "--part", "table3-pilot", "--recipe", "paper-rate"],
     "--recipe applies to --part table3 only; got --part table3-pilot"),
    (["train", "dufter2020", "--part", "table3", "--recipe", "fast"],
     "--recipe must name one of the pilot's variants (experiments.yaml table3_pilot): paper-rate, long-warmup; "
     "got 'fast'"),
    (["train", "liu2020", "--part", "evaluate", "--time-limit", "-5"], "--time-limit must be positive; got -5.0"),
])
def test_the_training_parts_check_their_options_before_anything(argv, message, capsys, monkeypatch):
    monkeypatch.setattr("xlrepro.papers.dufter2020.real_languages.main", lambda *a: pytest.fail("it trained"))
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_every_training_command_of_the_registry_parses():
    """The commands the plan runs are valid command lines of this CLI (their options exist)."""
    from xlrepro.papers import papers
    parser = C.build_parser()
    for paper in papers().values():
        for command in paper.reproduce:
            parser.parse_args(list(command))
    assert ("train", "dufter2020", "--part", "table3") in papers()["dufter2020"].reproduce
    assert ("train", "liu2020", "--part", "evaluate") in papers()["liu2020"].reproduce


def test_a_chapter_that_reads_another_is_published_after_it():
    def pub(chapter):
        return R.Step("publish", chapter.split("/")[0], ("run", chapter, "--publish"), chapter=chapter)
    steps = [pub("a/x"), pub("a/y"), R.Step("train", "b", ("train", "b")), pub("b/z"), pub("b/w")]
    out = R.after_what_they_read(steps, {"a/x": ("b/z",)})
    assert [s.chapter for s in out] == ["a/y", None, "b/z", "a/x", "b/w"]
    # a source outside the plan, or one already before it: nothing moves
    assert R.after_what_they_read(steps, {"a/x": ("c/q",)}) == steps
    assert R.after_what_they_read(steps, {"b/w": ("a/x",)}) == steps


def test_the_table3_pilot_part_pretrains_then_writes_its_results_where_the_chapter_reads_them(tmp_path, monkeypatch,
                                                                                               capsys):
    import pandas as pd

    from xlrepro.papers.dufter2020 import real_languages as rl
    pilot = rl.load_pilot()
    calls = []
    results = pd.DataFrame([{"experiment": f"{m}@{v.name}", "seed": 0, "metric": metric, "language": "all",
                             "value": value} for v in pilot.variants for m in pilot.models
                            for metric, value in (("pretrain_loss", 3.0), ("unigram_entropy", 6.31),
                                                  ("unigram_entropy_joint", 7.41))])
    curves = pd.DataFrame([{"experiment": "0@paper-rate", "seed": 0, "metric": "mlm_loss", "step": 50, "value": 7.0}])
    monkeypatch.setattr(rl, "prepare", lambda *a, **k: None)
    monkeypatch.setattr(rl, "run_pilot", lambda *a, **k: calls.append(k) or True)
    monkeypatch.setattr(rl, "collect_pilot", lambda *a, **k: (results, curves))
    monkeypatch.setattr("xlrepro.paths.repo_root", lambda: tmp_path)
    assert main(["train", "dufter2020", "--part", "table3-pilot", "--allow-cpu", "--time-limit", "60"]) == 0
    assert calls and calls[0]["time_limit"] == 60
    out = tmp_path / "book" / "results" / "dufter2020"
    assert pd.read_csv(out / "table3_pilot.csv")["value"].tolist() == results["value"].tolist()
    assert (out / rl.PILOT_CURVES_CSV).exists()
    assert f"{rl.PILOT_CHOSEN}: paper-rate" in capsys.readouterr().out
    # stopped by the time limit: nothing written, the command says how to resume
    (out / "table3_pilot.csv").unlink()
    monkeypatch.setattr(rl, "run_pilot", lambda *a, **k: False)
    assert main(["train", "dufter2020", "--part", "table3-pilot", "--allow-cpu"]) == 0
    assert not (out / "table3_pilot.csv").exists() and "run the same command again" in capsys.readouterr().out
