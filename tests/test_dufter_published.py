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
    # the line names the artifact it speaks of, so that another table of the chapter does not seem covered
    assert line.startswith("Left out of Table 1's means and figures below")
    assert without_failed(frame, tmp_path, "fig6")[1].startswith("Left out of Figure 6's means")
    from xlrepro.health import artifact_label
    assert artifact_label("table10") == "Table 10's" and artifact_label("linguistic") == "this chapter's"
    same, none = without_failed(frame, tmp_path, "table2")  # not covered there
    assert none is None and len(same) == 3
    untouched, no_record = without_failed(frame, tmp_path / "nowhere", "table1")
    assert no_record is None and untouched is frame


def knn_published_folder(tmp_path):
    """knn_replace's published CSVs, by hand: Figure 7's curves (models 0 and 30, seeds 0 and 42, two steps, µ =
    step / 100 + seed / 1000), Table 1 (models 0, 30 and 1, which the chapter does not show), Table 10 without its
    250-epoch model, the neighbour table's precision, and health.csv marking model 0 seed 0 failed for fig7 and
    table10 only."""
    folder = tmp_path / "published"
    folder.mkdir()
    curve = "".join(f"{e},{s},{t},mu,{t / 100 + s / 1000}\n" for e in ("0", "30") for s in (0, 42) for t in (0, 91))
    (folder / "fig7.csv").write_text("experiment,seed,step,metric,value\n" + curve)
    (folder / "table1.csv").write_text("experiment,seed,metric,value\n0,0,mu,0.1\n1,0,mu,0.2\n30,0,mu,0.3\n")
    (folder / "table10.csv").write_text("experiment,seed,metric,value\n0,0,mu,0.05\n0,42,mu,0.6\n17,0,mu,0.01\n")
    (folder / "knn_table.csv").write_text("experiment,seed,metric,value\n30,-1,precision,0.5\n")
    (folder / "health.csv").write_text(
        "rule,experiment,seed,value,status,reason,covers\n"
        "diverged,0,0,543.0,failed,diverged: ppl_train 543.0,fig7;table10\n"
        "diverged,0,42,9.9,ok,,fig7;table10\n")
    return folder


def test_knn_replace_renders_from_its_published_csvs(tmp_path):
    from xlrepro.papers.dufter2020.report import without_failed
    from xlrepro.results import read_csv

    folder = knn_published_folder(tmp_path)
    run = chapter_run("dufter2020", results=folder, source="published", published=folder)
    run.train = lambda *a, **k: pytest.fail("the published source trains nothing")
    data = chapter_frames(run, "knn_replace", ["0", "30"])
    assert len(data.frame) == 8 and data.folder == folder
    # the chapter's own run first, then the run that wrote Table 3's files (report.PUBLISHED_OWN_RUN)
    assert data.notice() == (
        "Rendered from the published results of 2026-11-27 (commit 1096fc6): fig7.csv, table1.csv, table10.csv, "
        "knn_table.csv, table4.csv; and of 2026-11-28 (commit afe3c14): table3.csv, "
        "table3_pretraining.csv; and of 2026-11-28 (commit afe3c14, collected at 5946f11): table3_pilot.csv; nothing "
        "trained or loaded from runs/.")
    assert data.record_notes() == {
        "source": "published results of 2026-11-27 (commit 1096fc6); 2026-11-28 (commit afe3c14); 2026-11-28 "
                  "(commit afe3c14, collected at 5946f11), re-rendered; "
                  "nothing trained", "training devices": "NVIDIA H200 (the published runs)"}
    assert data.results("table1", ["0", "30"])["value"].tolist() == [0.1, 0.3]  # model 1 is not the chapter's
    ten = data.results("table10", ["0", "17", "17-250"], train=False)
    assert ten["experiment"].tolist() == ["0", "0", "17"] and run.pending_experiments() == ["17-250"]

    before = {n: (folder / f"{n}.csv").read_text() for n in ("fig7", "table10", "knn_table")}
    data.save(data.frame, "fig7")
    data.save(ten, "table10")
    data.save(read_csv(folder / "knn_table.csv"), "knn_table")
    assert {n: (folder / f"{n}.csv").read_text() for n in before} == before  # nothing written over them
    with pytest.raises(RuntimeError, match="knn_table.csv: the frame the chapter rebuilt differs"):
        data.save(pd.DataFrame([{"experiment": "30", "seed": -1, "metric": "precision", "value": 0.4}]), "knn_table")

    curves, line = without_failed(data.frame, data.folder, "fig7")
    assert len(curves) == 6 and not ((curves.experiment == "0") & (curves.seed == 0)).any()
    assert line.endswith("model 0, seed 0 (diverged: ppl_train 543.0)")
    kept10, _ = without_failed(ten, data.folder, "table10")
    assert kept10["value"].tolist() == [0.6, 0.01]
    table1, none = without_failed(data.results("table1", ["0", "30"]), data.folder, "table1")  # not marked there
    assert none is None and len(table1) == 2


def test_table10_from_the_runs_is_never_trained_by_the_chapter(tmp_path):
    run = runs_folder(tmp_path)
    data = chapter_frames(run, "comparability", ["0"])
    run.train = lambda *a, **k: pytest.fail("Table 10's models are not trained by the chapter")
    frame = data.results("table10", ["0", "17"], train=False)
    assert set(frame["experiment"]) == {"0"} and run.pending_experiments() == ["17"]


def test_published_output_shows_the_published_tables_under_one_line(tmp_path, monkeypatch, capsys):
    import nbformat

    from xlrepro.papers.dufter2020.report import published_output
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("display(neighbour_summary(report))")
    cell.outputs = [nbformat.v4.new_output("display_data", {"text/html": "<table>a</table>", "text/plain": "a"}),
                    nbformat.v4.new_output("stream", text="not shown"),
                    nbformat.v4.new_output("display_data", {"text/html": "<table>b</table>", "text/plain": "b"})]
    nb.cells = [nbformat.v4.new_code_cell("other()"), cell]
    (tmp_path / "book" / "dufter2020").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "book" / "dufter2020" / "knn_replace.ipynb")
    monkeypatch.setattr("xlrepro.paths.repo_root", lambda: tmp_path)
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj.data))
    published_output("knn_replace", "neighbour_summary(", "The neighbour table", "the prepared table", tables=True)
    assert shown == ["<table>a</table>", "<table>b</table>"]
    assert capsys.readouterr().out == ("The neighbour table needs the prepared table, which the published results do "
                                       "not hold: shown as published on 2026-11-27 (commit 1096fc6), not redrawn.\n")
    published_output("knn_replace", "no_such_call(", "Figure 9")
    assert capsys.readouterr().out.endswith("(the published chapter has no such figure: knn_replace.ipynb)\n")


def test_knn_replace_published_checks(tmp_path, monkeypatch):
    from xlrepro.papers.dufter2020.knn_chapter import check_word_order
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path / "no-runs"))
    monkeypatch.setattr("xlrepro.devices.default_device", lambda: "cpu")
    with pytest.raises(ConfigError, match="needs 10 models \\(fig7\\)"):
        check_chapter("dufter2020/knn_replace", {}, allow_cpu=False)
    check_chapter("dufter2020/knn_replace", {"source": "published"}, allow_cpu=False)  # book/results has its CSVs
    with pytest.raises(ConfigError, match="word_order must be 'published'; got 'compute'"):
        check_chapter("dufter2020/knn_replace", {"source": "published", "word_order": "compute"}, allow_cpu=False)
    with pytest.raises(ConfigError, match="valid choices: published, compute"):
        check_word_order("cache")
    check_word_order("compute", "runs")
