"""The Liu et al. 2020 pilot (`xlrepro.papers.liu2020.pilot`): argument checks, and a CPU smoke run that writes its
learning curve and goes on from its checkpoint."""
import json

import pandas as pd
import pytest

from xlrepro.config import ConfigError
from xlrepro.papers.liu2020 import pilot


@pytest.mark.parametrize("args, message", [
    (["--steps", "0"], "--steps must be a positive"),
    (["--steps", "10", "--eval-every", "11"], "between 1 and --steps"),
    (["--steps", "10", "--device", "tpu"], "cpu, cuda"),
    (["--steps", "10", "--time-limit", "0"], "--time-limit must be a positive"),
    (["--steps", "10", "--lr", "0"], "--lr must be a learning rate between 0 and 1"),
    (["--steps", "10", "--shape", "huge"], "base, medium, mini"),
])
def test_arguments_checked_before_any_work(args, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        pilot.main([*args, "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    assert not (tmp_path / "out").exists() and not (tmp_path / "work").exists()


def test_summary_rows_gates_and_means():
    rows = [{"metric": "mrr", "value": v, "layer": layer, "language": lang}
            for lang, values in (("fr", (0.1, 0.3)), ("de", (0.05, 0.02))) for layer, v in enumerate(values)]
    out = pilot.summary_rows(rows, {"fr": 0.1, "de": 0.03}, {"en": 3.0, "fr": 5.0}, {"en": 6.0, "fr": 6.0})
    get = {(r["metric"], r["language"]): r for r in out}
    assert get[("mrr_best", "fr")]["layer"] == 1 and get[("mrr_best", "de")]["value"] == 0.05
    assert get[("mrr_mean_best", "mean")]["value"] == pytest.approx(0.16) and get[("mrr_mean_best", "mean")]["layer"] == 1
    assert get[("mrr_mean_last", "mean")]["value"] == pytest.approx(0.16)
    assert get[("gate_mrr_languages", "all")]["value"] == 1  # fr 0.3 >= 2 x 0.1; de 0.05 < 2 x 0.03
    assert get[("gate_loss_languages", "all")]["value"] == 1  # en 3.0 <= 6 - 2; fr 5.0 is not


@pytest.mark.slow  # about 25 s on two cores: `make test-all`
def test_smoke_pilot_writes_curve_and_resumes(multilingual_cache, tmp_path):
    work = tmp_path / "work"
    args = ["--steps", "4", "--eval-every", "2", "--smoke", "--no-progress", "--work", str(work)]
    pilot.main([*args, "--out", str(tmp_path / "out")])
    curve = pd.read_csv(tmp_path / "out" / "curve.csv", dtype={"experiment": str})
    assert list(curve.columns) == ["experiment", "seed", "step", "metric", "value", "layer", "language"]
    assert set(curve["experiment"]) == {"pilot-big-w512"} and set(curve["seed"]) == {0}
    assert sorted(curve.loc[curve["metric"] == "mrr_mean_best", "step"]) == [0, 2, 4]
    assert {"train_loss", "mrr", "mrr_low", "mrr_high", "mrr_best", "mrr_mean_last", "mlm_loss", "unigram_entropy",
            "chance_mrr", "gate_mrr_languages", "gate_loss_languages", "train_seconds"} <= set(curve["metric"])
    mrr = curve[(curve["metric"] == "mrr") & (curve["language"] != "mean")]
    assert set(mrr["layer"]) == {0, 1, 2} and set(mrr["language"]) == {"fr", "de", "zh"}
    info = json.loads((tmp_path / "out" / "pilot.json").read_text())
    assert info["steps_done"] == 4 and info["finished"] and info["tokens_per_step"] == 1024
    assert info["device"] and info["train_seconds"] > 0 and len(info["calls"]) == 1
    # a second identical call into an empty results folder: nothing is retrained, the curve comes back
    pilot.main([*args, "--out", str(tmp_path / "again")])
    again = pd.read_csv(tmp_path / "again" / "curve.csv", dtype={"experiment": str})
    pd.testing.assert_frame_equal(again, curve)
    info = json.loads((tmp_path / "again" / "pilot.json").read_text())
    assert [(c["start_step"], c["end_step"]) for c in info["calls"]] == [(0, 4), (4, 4)]
    # another --steps with the same work folder is refused before training
    with pytest.raises(ConfigError, match="--steps 4"):
        pilot.main(["--steps", "6", "--smoke", "--no-progress", "--work", str(work), "--out", str(tmp_path / "x")])
