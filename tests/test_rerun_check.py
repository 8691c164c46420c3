"""A model retrained alone is set beside the published grid's number for the same (model, seed)."""
import json

import pandas as pd
import pytest

from xlrepro.papers.dufter2020.engines import linear_check, rerun_check


def _write(folder, exp, seed, metrics, **extra):
    d = folder / exp / str(seed)
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({"experiment": exp, "seed": seed, "metrics": metrics, **extra}))


def test_rerun_check_sets_each_metric_beside_the_published_value(tmp_path):
    published = tmp_path / "table1.csv"
    pd.DataFrame({"experiment": ["0", "0", "0", "1"], "seed": [0, 0, 42, 0], "metric": ["mu", "ppl_train", "mu", "mu"],
                  "value": [0.50, 10.0, 0.60, 0.1]}).to_csv(published, index=False)
    runs = tmp_path / "rerun"
    _write(runs, "0", 0, {"mu": 0.625, "ppl_train": 9.5}, compile="none", stack_size=1)
    _write(runs, "0", 42, {"mu": 0.60, "ppl_train": 1.0}, compile="regional", stack_size=3)
    got = rerun_check([runs], published, metrics=("mu",))
    assert got[["model", "seed"]].values.tolist() == [["0", 0], ["0", 42]]
    assert got["difference"].tolist() == pytest.approx([0.125, 0.0])
    assert got["alone_engine"].tolist() == ["eager, stack of 1", "compiled (regional), stack of 3"]
    with pytest.raises(KeyError, match="seed 42: no published ppl_train"):  # never a silent gap
        rerun_check([runs], published, metrics=("mu", "ppl_train"))
    (runs / "0" / "42" / "metrics.json").unlink()
    both = rerun_check([runs], published, metrics=("mu", "ppl_train"))
    assert both.loc[both["metric"] == "ppl_train", "difference"].tolist() == pytest.approx([-0.5])


def test_reruns_from_several_folders_come_together(tmp_path):
    published = tmp_path / "table1.csv"
    pd.DataFrame({"experiment": ["0"], "seed": [0], "metric": ["mu"], "value": [0.5]}).to_csv(published, index=False)
    _write(tmp_path / "eager", "0", 0, {"mu": 0.25}, compile="none", stack_size=1)
    _write(tmp_path / "compiled", "0", 0, {"mu": 0.75}, compile="regional", stack_size=1)
    got = rerun_check([tmp_path / "eager", tmp_path / "compiled"], published, metrics=("mu",))
    assert sorted(zip(got["alone_engine"], got["difference"])) == [("compiled (regional), stack of 1", 0.25),
                                                                    ("eager, stack of 1", -0.25)]


def _linear_case(tmp_path, mm_values):
    """Published model 0, seeds 1 and 2: 1.0 and 3.0 (std sqrt 2); the baddbmm rerun 1.5 and 3.5."""
    published, runs = tmp_path / "table1.csv", tmp_path / "metrics.csv"
    pd.DataFrame({"experiment": ["0", "0"], "seed": [1, 2], "metric": ["m", "m"], "value": [1.0, 3.0]}).to_csv(
        published, index=False)
    pd.DataFrame({"linear": ["baddbmm", "baddbmm", "mm", "mm"], "experiment": ["0"] * 4, "seed": [1, 2, 1, 2],
                  "metric": ["m"] * 4, "value": [1.5, 3.5, *mm_values]}).to_csv(runs, index=False)
    return linear_check(runs, published)


def test_the_linear_check_applies_both_criteria(tmp_path):
    one, two, verdict = _linear_case(tmp_path, [2.0, 3.0])  # |diff| 1 and 0: mean 0.5 as baddbmm's; means 2.5 both
    assert one.loc["m", "ratio"] == pytest.approx(1.0) and two.loc[("0", "m"), "difference"] == pytest.approx(0.0)
    assert verdict == {"criterion_1": True, "criterion_2": True, "failed_pairs": 0, "pairs": 1, "adopted": True}
    one, two, verdict = _linear_case(tmp_path, [0.0, 5.0])  # |diff| 1 and 2: 3x baddbmm's 0.5; means still equal
    assert one.loc["m", "ratio"] == pytest.approx(3.0)
    assert (verdict["criterion_1"], verdict["criterion_2"], verdict["adopted"]) == (False, True, False)
    one, two, verdict = _linear_case(tmp_path, [2.0, 4.5])  # |diff| 1, 1.5 (2.5x); means 3.25 vs 2.5 < sqrt 2
    assert two.loc[("0", "m"), "difference"] == pytest.approx(0.75)
    assert two.loc[("0", "m"), "published_std"] == pytest.approx(2 ** 0.5) and verdict["criterion_2"]
    one, two, verdict = _linear_case(tmp_path, [3.0, 4.5])  # means 3.75 vs 2.5: 1.25 < 1.414 still holds
    assert verdict["criterion_2"]
    one, two, verdict = _linear_case(tmp_path, [3.5, 4.5])  # means 4.0 vs 2.5: 1.5 > 1.414
    assert (verdict["criterion_2"], verdict["failed_pairs"], verdict["adopted"]) == (False, 1, False)


def test_the_linear_check_refuses_a_model_without_a_published_row(tmp_path):
    published, runs = tmp_path / "table1.csv", tmp_path / "metrics.csv"
    pd.DataFrame({"experiment": ["0"], "seed": [1], "metric": ["m"], "value": [1.0]}).to_csv(published, index=False)
    pd.DataFrame({"linear": ["baddbmm", "mm"], "experiment": ["0", "0"], "seed": [1, 7], "metric": ["m", "m"],
                  "value": [1.0, 1.0]}).to_csv(runs, index=False)
    with pytest.raises(KeyError, match="published row"):
        linear_check(runs, published)


def _linear2(values: dict[str, list[float]]) -> pd.DataFrame:
    """Models 0/0, 0/1, 1/0, 1/1 (metric mu) of each run, in that order."""
    from xlrepro.papers.dufter2020.engines import LINEAR2_RUNS
    models = [("0", 0), ("0", 1), ("1", 0), ("1", 1)]
    return pd.DataFrame([{"run": r, "linear": LINEAR2_RUNS[r], "experiment": e, "seed": s, "metric": "mu", "value": v}
                         for r, vs in values.items() for (e, s), v in zip(models, vs)])


# published seeds 0 and sqrt(2) apart: a seed std of 1 for both IDs
PUBLISHED2 = pd.DataFrame([{"experiment": e, "seed": s, "metric": "mu", "value": v}
                           for e in ("0", "1") for s, v in ((0, 0.0), (1, 2 ** 0.5))])


def test_the_second_linear_check_measures_its_null_within_each_engine():
    from xlrepro.papers.dufter2020.engines import linear_check2
    # within each engine the runs are 1 std apart, across engines 0.5: mm moves less than a rerun does
    same = _linear2({"baddbmm-1": [0] * 4, "baddbmm-2": [1] * 4, "mm-1": [0.5] * 4, "mm-2": [1.5] * 4})
    table, verdict = linear_check2(same, PUBLISHED2)
    assert table.loc["mu"].tolist() == [pytest.approx(1.0), pytest.approx(0.5), pytest.approx(0.5), True]
    assert verdict == {"adopted": True, "failed_metrics": []}
    # mm 3 std away from baddbmm in both runs: 3 times a rerun's distance, above 1.5
    shifted = _linear2({"baddbmm-1": [0] * 4, "baddbmm-2": [1] * 4, "mm-1": [3] * 4, "mm-2": [4] * 4})
    table, verdict = linear_check2(shifted, PUBLISHED2)
    assert table.loc["mu", "ratio"] == pytest.approx(3.0) and verdict == {"adopted": False, "failed_metrics": ["mu"]}
    # one diverged seed (100 std off in one run) moves neither median
    diverged = _linear2({"baddbmm-1": [100, 0, 0, 0], "baddbmm-2": [1] * 4, "mm-1": [0.5] * 4, "mm-2": [1.5] * 4})
    assert linear_check2(diverged, PUBLISHED2)[0].loc["mu", "ratio"] == pytest.approx(0.5)


def test_the_second_linear_check_needs_its_four_runs_and_a_published_spread():
    from xlrepro.papers.dufter2020.engines import linear_check2
    three = _linear2({"baddbmm-1": [0] * 4, "baddbmm-2": [1] * 4, "mm-1": [0.5] * 4})
    with pytest.raises(ValueError, match="needs the runs baddbmm-1, baddbmm-2, mm-1, mm-2; got baddbmm-1, baddbmm-2, mm-1"):
        linear_check2(three, PUBLISHED2)
    flat = PUBLISHED2.assign(value=1.0)  # no spread over the published seeds: nothing to measure against
    four = _linear2({"baddbmm-1": [0] * 4, "baddbmm-2": [1] * 4, "mm-1": [0.5] * 4, "mm-2": [1.5] * 4})
    with pytest.raises(ValueError, match="published seed std above 0"):
        linear_check2(four, flat)


def test_the_second_linear_check_refuses_a_run_folder_with_untrained_models(tmp_path):
    from xlrepro.papers.dufter2020.engines import collect_linear2
    with pytest.raises(FileNotFoundError, match="25 of 25 models not trained"):
        collect_linear2(tmp_path)


def test_the_second_linear_check_collects_its_four_runs(tmp_path):
    from xlrepro.papers.dufter2020.config import load_chapter
    from xlrepro.papers.dufter2020.engines import LINEAR2_IDS, LINEAR2_RUNS, collect_linear2
    from xlrepro.papers.dufter2020.grid import grid_members, member_dir
    chapter = load_chapter()
    members = grid_members(chapter, list(LINEAR2_IDS), list(chapter.seeds))
    for i, run in enumerate(LINEAR2_RUNS):
        for m in members:
            folder = member_dir(tmp_path / run / "dufter2020" / "lab", m)
            folder.mkdir(parents=True)
            (folder / "metrics.json").write_text(json.dumps({"metrics": {"mu": i + m.seed / 1000}}))
    df = collect_linear2(tmp_path)
    assert list(df.columns) == ["run", "linear", "experiment", "seed", "metric", "value"]
    assert len(df) == 4 * 25 and set(df["experiment"]) == set(LINEAR2_IDS)
    mm2 = df[(df["run"] == "mm-2") & (df["experiment"] == "4") & (df["seed"] == 42)]
    assert mm2[["linear", "value"]].values.tolist() == [["mm", 3.042]]


def test_the_second_linear_check_records_where_and_how_long_its_runs_trained(tmp_path):
    from xlrepro.papers.dufter2020.engines import LINEAR2_RUNS, linear2_record, main
    with pytest.raises(FileNotFoundError, match="no stack timing record"):
        linear2_record(tmp_path, "abc1234", "2 x H200")
    for i, run in enumerate(LINEAR2_RUNS):
        stack = tmp_path / run / "dufter2020" / "lab" / "stacks" / "k"
        stack.mkdir(parents=True)
        # trained on 2026-01-02 (UTC), the last one a day later
        (stack / "timing.json").write_text(json.dumps({"members": ["0/0", "0/42"], "steps": 100,
                                                       "train_seconds": 10.0 + i, "steps_per_second": 10.0,
                                                       "device": "NVIDIA H200",
                                                       "timeline": {"trained": 1767355200 + 86400 * (i == 3)}}))
        model = tmp_path / run / "dufter2020" / "lab" / "0" / "0" / "key"
        model.mkdir(parents=True)
        (model / "metrics.json").write_text(json.dumps({"torch": "2.11.0+cu130"}))
    record = linear2_record(tmp_path, "abc1234", "2 x H200")
    assert (record["commit"], record["machine"], record["torch"], record["date"]) == (
        "abc1234", "2 x H200", "2.11.0+cu130", "2026-01-03")
    assert [(s["run"], s["linear"], s["models"], s["train_seconds"]) for s in record["stacks"]] == [
        ("baddbmm-1", "baddbmm", 2, 10.0), ("baddbmm-2", "baddbmm", 2, 11.0), ("mm-1", "mm", 2, 12.0),
        ("mm-2", "mm", 2, 13.0)]
    with pytest.raises(SystemExit):  # a published check names its code and machine
        main(["--linear2", str(tmp_path), str(tmp_path / "m.csv")])
    other = tmp_path / "mm-2" / "dufter2020" / "lab" / "0" / "42" / "key"
    other.mkdir(parents=True)
    (other / "metrics.json").write_text(json.dumps({"torch": "2.12.0"}))
    with pytest.raises(ValueError, match="torch 2.11.0\\+cu130, 2.12.0"):
        linear2_record(tmp_path, "abc1234", "2 x H200")


def test_the_second_linear_check_writes_its_metrics_and_record_side_by_side(tmp_path, monkeypatch):
    from xlrepro.papers.dufter2020 import engines
    frame = pd.DataFrame([{"run": "mm-1", "linear": "mm", "experiment": "0", "seed": 0, "metric": "mu",
                           "value": 0.5}])
    monkeypatch.setattr(engines, "collect_linear2", lambda folder: frame)
    monkeypatch.setattr(engines, "linear2_record", lambda folder, commit, machine: {"commit": commit,
                                                                                   "machine": machine})
    out = tmp_path / "check" / "metrics.csv"
    assert engines.main(["--linear2", str(tmp_path), str(out), "--commit", "abc1234", "--machine", "2 x H200"]) == 0
    assert pd.read_csv(out, dtype={"experiment": str}).to_dict("records") == frame.to_dict("records")
    assert json.loads((out.parent / "timing.json").read_text()) == {"commit": "abc1234", "machine": "2 x H200"}
