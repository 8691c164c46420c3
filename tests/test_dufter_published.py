"""The Dufter & Schütze chapters' `source` parameter: `report.chapter_frames` gives a chapter the same frame from its
published CSV as from the run folder, an unknown source names the valid choices, and `check_chapter` lets a
published rendering through on a CPU without any trained model."""
import json

import pandas as pd
import pytest

from xlrepro.config import ConfigError
from xlrepro.papers.dufter2020 import check_chapter
from xlrepro.papers.dufter2020.figures import chance_label
from xlrepro.papers.dufter2020.grid import member_dir
from xlrepro.papers.dufter2020.multilinguality import chance_level
from xlrepro.papers.dufter2020.report import chapter_frames, chapter_run
from xlrepro.results import MISSING

SEEDS = [0, 42, 43, 100, 101]  # the chapter's (the published run's) seeds


def runs_folder(tmp_path):
    """A hand-made run folder: models 0 and 21 (Table 2's first two IDs), every seed, µ = seed / 1000 and
    ppl_train = 10 + seed; a two-point curve of µ per model; two stacks' timing records."""
    run = chapter_run("dufter2020", results=tmp_path / "out")
    run.root = tmp_path / "runs"
    for m in run.members(["0", "21"]):
        folder = member_dir(run.root, m)
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps({"metrics": {"mu": m.seed / 1000, "ppl_train": 10 + m.seed}}))
        (folder / "curve.json").write_text(json.dumps([{"step": 0, "mu": 0.0}, {"step": 91, "mu": m.seed / 1000}]))
    for name, members, size, steps, seconds in (("a", ["0/0", "0/42"], "small", 9100, 100.0),
                                                ("b", ["21/0"], "small", 9100, 50.0)):
        (run.root / "stacks" / name).mkdir(parents=True)
        (run.root / "stacks" / name / "timing.json").write_text(json.dumps(
            {"members": members, "size": size, "steps": steps, "train_seconds": seconds,
             "steps_per_second": steps / seconds, "device": "GPU X"}))
    return run


def published_folder(tmp_path, other_model=False):
    """The same numbers as `runs_folder`, as the published long CSVs, written by hand (`other_model`: table2.csv
    also holds a row of model 1, which Table 2 does not show)."""
    folder = tmp_path / "published"
    folder.mkdir()
    rows = "".join(f"{e},{s},mu,{s / 1000}\n{e},{s},ppl_train,{10 + s}.0\n" for e in ("0", "21") for s in SEEDS)
    (folder / "table2.csv").write_text("experiment,seed,metric,value\n" + rows)
    if other_model:  # the chapter reads its own IDs only
        (folder / "table2.csv").write_text((folder / "table2.csv").read_text() + "1,0,mu,0.5\n")
    curve = "".join(f"{e},{s},0,mu,0.0\n{e},{s},91,mu,{s / 1000}\n" for e in ("0", "21") for s in SEEDS)
    (folder / "fig6.csv").write_text("experiment,seed,step,metric,value\n" + curve)
    (folder / "runtime.csv").write_text(
        "experiment,seed,stack,metric,value\n"
        "0,-1,1,models,2.0\n21,-1,2,models,1.0\n0,-1,1,steps,9100.0\n21,-1,2,steps,9100.0\n"
        "0,-1,1,train_seconds,100.0\n21,-1,2,train_seconds,50.0\n"
        "0,-1,1,steps_per_second,91.0\n21,-1,2,steps_per_second,182.0\n")
    return folder


def test_published_frames_equal_the_runs_frames(tmp_path):
    runs = runs_folder(tmp_path)
    published = chapter_run("dufter2020", results=tmp_path / "out2", source="published",
                            published=published_folder(tmp_path, other_model=True))
    for chapter in ("comparability", "training_dynamics"):
        a = chapter_frames(runs, chapter, ["0", "21"]).frame
        b = chapter_frames(published, chapter, ["0", "21"]).frame
        pd.testing.assert_frame_equal(a, b, check_dtype=False)
    assert len(a) == 2 * 5 * 2 and runs.pending == [] and published.pending == []

    a, b = chapter_frames(runs, "setup").frame, chapter_frames(published, "setup").frame
    assert list(a["device"]) == ["GPU X", "GPU X"] and list(b["device"]) == [MISSING, MISSING]  # not in runtime.csv
    pd.testing.assert_frame_equal(a.drop(columns="device"), b.drop(columns="device"), check_dtype=False)
    assert list(b["seconds_per_model"]) == [50.0, 50.0] and list(b["size"]) == ["small", "small"]


def test_published_save_checks_the_file_and_writes_only_elsewhere(tmp_path):
    folder = published_folder(tmp_path)
    run = chapter_run("dufter2020", results=folder, source="published", published=folder)
    data = chapter_frames(run, "comparability", ["0", "21"])
    before = (folder / "table2.csv").read_text()
    data.save(data.frame, "table2")  # the same frame: nothing written over the published file
    assert (folder / "table2.csv").read_text() == before
    with pytest.raises(RuntimeError, match="differs from the published file"):
        data.save(data.frame.assign(value=1.0), "table2")
    notes = data.record_notes()
    assert notes["source"].startswith("published results of ") and notes["source"].endswith(
        "re-rendered; nothing trained")
    elsewhere = chapter_run("dufter2020", results=tmp_path / "copy", source="published", published=folder)
    out = chapter_frames(elsewhere, "comparability", ["0", "21"])
    assert out.save(out.frame, "table2").read_text() == before  # a copy beside the other results


def test_a_model_missing_from_the_published_file_is_pending(tmp_path):
    run = chapter_run("dufter2020", source="published", published=published_folder(tmp_path))
    chapter_frames(run, "comparability", ["0", "21", "21b"])
    assert run.pending_experiments() == ["21b"]


def test_unknown_source_names_the_valid_choices():
    with pytest.raises(ConfigError, match="valid choices: runs, published"):
        chapter_run("dufter2020", source="cache")
    with pytest.raises(ConfigError, match="valid choices: runs, published"):
        check_chapter("dufter2020/architecture", {"source": "cache"}, allow_cpu=False)
    with pytest.raises(ConfigError, match="seeds=\\[0\\]"):  # the published run has the paper's seeds only
        chapter_run("dufter2020", seeds=[0], source="published")


def test_check_chapter_lets_published_through_without_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path / "no-runs"))
    monkeypatch.setattr("xlrepro.devices.default_device", lambda: "cpu")
    with pytest.raises(ConfigError, match="train"):  # the runs' source needs the models
        check_chapter("dufter2020/architecture", {}, allow_cpu=False)
    check_chapter("dufter2020/architecture", {"source": "published"}, allow_cpu=False)  # book/results has table1.csv


def test_chance_levels():
    assert chance_level("retr_l8") == 1 / 10_000 and chance_level("trans_l0") == 1 / 2_043
    assert chance_level("mu") == pytest.approx((2 / 10_000 + 2 / 2_043) / 4)
    assert chance_level("align_l8") is None and chance_level("ppl_dev") is None
    assert chance_label(["align_l8", "retr_l8", "trans_l8"]) == "chance: ρ 1/10,000, τ 1/2,043"
    assert chance_label(["ppl_train", "ppl_dev"]) is None


def test_without_failed_drops_the_runs_health_marks_failed_for_that_artifact(tmp_path):
    import pandas as pd

    from xlrepro.papers.dufter2020.report import without_failed
    pd.DataFrame([
        {"rule": "diverged", "experiment": "0", "seed": 0, "value": 543.0, "status": "failed",
         "reason": "diverged: ppl_train 543.0", "covers": "table1;fig6"},
        {"rule": "diverged", "experiment": "0", "seed": 42, "value": 9.9, "status": "ok", "reason": "",
         "covers": "table1;fig6"}]).to_csv(tmp_path / "health.csv", index=False)
    frame = pd.DataFrame({"experiment": ["0", "0", "3"], "seed": [0, 42, 0], "metric": "mu", "value": [0.05, 0.6, 0.4]})
    kept, line = without_failed(frame, tmp_path, "table1")
    assert kept["value"].tolist() == [0.6, 0.4]  # model 3's seed 0 is not model 0's
    assert line.endswith("model 0, seed 0 (diverged: ppl_train 543.0)")
    same, none = without_failed(frame, tmp_path, "table2")  # not covered there
    assert none is None and len(same) == 3
    untouched, no_record = without_failed(frame, tmp_path / "nowhere", "table1")
    assert no_record is None and untouched is frame
