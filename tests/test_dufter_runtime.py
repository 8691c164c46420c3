"""Dufter & Schütze: the stacks' timings as runtime.csv's long rows (xlrepro/papers/dufter2020/report.py)."""
import json

from xlrepro.papers.dufter2020.report import load_timings, runtime_long


def _timing(root, key, members, steps, seconds):
    folder = root / "stacks" / key
    folder.mkdir(parents=True)
    (folder / "timing.json").write_text(json.dumps({
        "members": members, "size": "small", "steps": steps, "train_seconds": seconds,
        "steps_per_second": steps / seconds, "device": "cpu"}))


def test_two_stacks_of_the_same_models_keep_rows_of_their_own(tmp_path):
    # two stacks train model 21b (other seeds): their rows differ by `stack`, numbered in the folders' order
    _timing(tmp_path, "bbb", ["21b/seed1", "21b/seed2"], 100, 50.0)
    _timing(tmp_path, "aaa", ["21b/seed0", "30/seed0", "21b/seed3"], 200, 25.0)
    long = runtime_long(load_timings(tmp_path))
    assert list(long.columns) == ["experiment", "seed", "stack", "metric", "value"]
    assert long.values.tolist() == [
        ["21b,30", -1, 1, "models", 3], ["21b", -1, 2, "models", 2],
        ["21b,30", -1, 1, "steps", 200], ["21b", -1, 2, "steps", 100],
        ["21b,30", -1, 1, "train_seconds", 25.0], ["21b", -1, 2, "train_seconds", 50.0],
        ["21b,30", -1, 1, "steps_per_second", 8.0], ["21b", -1, 2, "steps_per_second", 2.0]]
    assert not long.duplicated(["experiment", "seed", "stack", "metric"]).any()
