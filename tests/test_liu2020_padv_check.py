"""The padded vocabulary's training check (`xlrepro.papers.liu2020.padv_check`) on hand-made final losses with known
verdicts, its reading of run folders and its CLI, and the switch's way into Liu et al.'s BERT runs (`BertRunConfig`,
`pretrain_bert`): validated, off and invisible in the saved config at 1, its own folder when on."""
import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from xlrepro.config import ConfigError, ModelSize
from xlrepro.engine.fused_bert import Levers
from xlrepro.papers.liu2020 import padv_check
from xlrepro.papers.liu2020.bert import BertRunConfig, pretrain_bert
from xlrepro.papers.liu2020.corpora import LANGUAGES

ENTROPY = 6.2  # nats: about the lab corpus's mean unigram entropy


# --------------------------------------------------------------------------------------------------- the criterion
def test_nearly_equal_means_within_2_se_are_adopted():
    # means 3.00 and 3.00: difference 0 <= 0.02; the pad-1 seeds deviate by 0, +0.02, -0.02: sd
    # sqrt(0.0008 / 2) = 0.02, SE 0.02 / sqrt(3) = 0.011547, 2 SE = 0.023094 > 0
    out = padv_check.check({1: [3.00, 3.02, 2.98], 64: [3.01, 3.00, 2.99]}, ENTROPY)
    assert out["loss_pad1"] == pytest.approx(3.00) and out["loss_pad64"] == pytest.approx(3.00)
    assert out["loss_difference"] == pytest.approx(0.0, abs=1e-12)
    assert out["loss_2se_pad1"] == pytest.approx(0.023094, abs=1e-6)
    assert out["loss_tolerance"] == 0.02 and out["difference_floor"] == 0.005 and out["unigram_entropy"] == ENTROPY
    assert out["precondition"] and out["criterion_1"] and out["criterion_2"]
    assert out["verdict"] == "adopted"


def test_a_difference_over_the_tolerance_is_not_adopted_even_within_2_se():
    # means 3.00 and 3.03: difference 0.03 > 0.02 (criterion 1 fails); sd 0.1, SE 0.057735, 2 SE 0.11547 > 0.03
    # (criterion 2 holds): one failed criterion is enough
    out = padv_check.check({1: [2.9, 3.0, 3.1], 64: [2.93, 3.03, 3.13]}, ENTROPY)
    assert out["loss_difference"] == pytest.approx(0.03)
    assert out["loss_2se_pad1"] == pytest.approx(0.11547, abs=1e-5)
    assert not out["criterion_1"] and out["criterion_2"]
    assert out["verdict"] == "not adopted" and "criterion 1" in out["reason"] and "criterion 2" not in out["reason"]


def test_a_difference_within_the_tolerance_but_beyond_2_se_and_the_floor_is_not_adopted():
    # means 3.000 and 3.010: difference 0.010 <= 0.02 (criterion 1 holds); sd 0.001, SE 0.00057735, 2 SE 0.0011547,
    # and 0.010 is over both 2 SE and the floor 0.005 (criterion 2 fails)
    out = padv_check.check({1: [3.000, 3.001, 2.999], 64: [3.010, 3.011, 3.009]}, ENTROPY)
    assert out["loss_difference"] == pytest.approx(0.010)
    assert out["loss_2se_pad1"] == pytest.approx(0.0011547, abs=1e-7)
    assert out["criterion_1"] and not out["criterion_2"]
    assert out["verdict"] == "not adopted" and "criterion 2" in out["reason"] and "criterion 1" not in out["reason"]


def test_identical_unpadded_seeds_leave_the_floor_of_0_005_nats():
    # three identical pad-1 seeds: SE 0, so 2 SE passes no difference; 0.004 <= 0.005 passes by the floor,
    # 0.006 > 0.005 does not (both within 0.02)
    out = padv_check.check({1: [3.0, 3.0, 3.0], 64: [3.004, 3.004, 3.004]}, ENTROPY)
    assert out["loss_2se_pad1"] == 0.0 and out["loss_difference"] == pytest.approx(0.004)
    assert out["criterion_1"] and out["criterion_2"] and out["verdict"] == "adopted"
    out = padv_check.check({1: [3.0, 3.0, 3.0], 64: [3.006, 3.006, 3.006]}, ENTROPY)
    assert out["criterion_1"] and not out["criterion_2"] and out["verdict"] == "not adopted"


@pytest.mark.parametrize("first", [6.3, ENTROPY])  # above the entropy, and equal to it (not below)
def test_an_unpadded_run_not_below_the_unigram_entropy_makes_the_check_inconclusive(first):
    # the criteria would hold (identical losses: difference 0), but one pad-1 run did not learn
    out = padv_check.check({1: [first, 3.00, 3.02], 64: [first, 3.00, 3.02]}, ENTROPY)
    assert not out["precondition"] and out["criterion_1"] and out["criterion_2"]
    assert out["verdict"] == "inconclusive"
    assert f"{first:.3f}" in out["reason"] and "6.200" in out["reason"]


@pytest.mark.parametrize("losses, message", [
    ({1: [3.0], 64: [3.0, 3.1]}, "at least two seeds of pad_vocab 1; it has 1"),
    ({1: [3.0, 3.1]}, "at least two seeds of pad_vocab 64; it has 0"),
    ({1: [3.0, 3.1], 64: [3.0, 3.1], 8: [3.0, 3.1]}, "valid values: 1, 64"),
])
def test_the_check_needs_two_seeds_of_each_padding(losses, message):
    with pytest.raises(ConfigError, match=message):
        padv_check.check(losses, ENTROPY)


def test_the_final_loss_is_the_mean_of_the_last_five_points():
    curve = [[0, 9.0], [50, 5.0], [100, 4.0], [150, 3.0], [200, 2.0], [250, 1.0]]
    assert padv_check.final_loss(curve) == pytest.approx(3.0)  # (5 + 4 + 3 + 2 + 1) / 5
    with pytest.raises(ConfigError, match="last 5 recorded points; the curve has 4"):
        padv_check.final_loss(curve[:4])


# ----------------------------------------------------------------------------------------------- runs and the CLI
FINAL = {(1, 0): 3.00, (1, 1): 3.02, (1, 2): 2.98, (64, 0): 3.01, (64, 1): 3.00, (64, 2): 2.99}  # the adopted case


def write_run(root, pad, seed, final, **changes):
    """A finished run as `pretrain_bert` leaves it: its saved config and a curve whose last five points are `final`."""
    config = padv_check.configs()[pad, seed]
    folder = padv_check.run_folder(config, root)
    folder.mkdir(parents=True)
    saved = {**config.as_dict(), "languages": list(LANGUAGES), **changes}
    (folder / "config.json").write_text(json.dumps(saved))
    (folder / "training.json").write_text(json.dumps({"losses": [[0, 11.0]] + [[1950 + i, final] for i in range(5)],
                                                      "seconds": 100.0 + seed}))


def test_the_six_runs_are_the_recipe_at_2000_steps_with_both_paddings_in_their_own_folders(tmp_path):
    from xlrepro.papers.liu2020.models import bert_configs
    recipe = bert_configs()["big-w512"]  # experiments.yaml's bert on the big corpus, window 512
    runs = padv_check.configs()
    assert list(runs) == [(1, 0), (64, 0), (1, 1), (64, 1), (1, 2), (64, 2)]
    for (pad, seed), config in runs.items():
        assert (config.steps, config.seed, config.pad_vocab) == (2000, seed, pad)
        assert replace(config, steps=recipe.steps, seed=recipe.seed, pad_vocab=1) == recipe  # nothing else changed
    folders = {padv_check.run_folder(c, tmp_path) for c in runs.values()}
    assert len(folders) == 6
    assert padv_check.run_folder(runs[64, 1], tmp_path) == tmp_path / "seed1" / "big-w512-padv64"


def test_training_goes_in_pairs_and_stops_at_a_run_left_unfinished(tmp_path, monkeypatch):
    trained = []

    def fake_pretrain(config, device, *, root, **kwargs):
        trained.append((config.pad_vocab, config.seed))
        folder = config.folder(root)
        folder.mkdir(parents=True)
        if (config.pad_vocab, config.seed) != (64, 1):  # cut short by the time limit
            (folder / "training.json").write_text("{}")
        return folder

    monkeypatch.setattr(padv_check, "pretrain_bert", fake_pretrain)
    monkeypatch.setattr(padv_check, "training_rows", lambda root: None)
    lines = padv_check.train("cuda", root=tmp_path)
    assert trained == [(1, 0), (64, 0), (1, 1), (64, 1)] and "checkpointed" in lines[-1]
    assert padv_check.missing_runs(tmp_path) == ["pad_vocab 64, seed 1", "pad_vocab 1, seed 2", "pad_vocab 64, seed 2"]


@pytest.mark.parametrize("args, message", [
    (["--device", "cuda"], "--device applies to --train only"),
    (["--time-limit", "60"], "--time-limit applies to --train only"),
    (["--train", "--device", "cpu"], "valid choices: cuda"),
])
def test_arguments_checked_before_any_work(args, message, tmp_path, monkeypatch):
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path / "runs"))
    with pytest.raises(ConfigError, match=message):
        padv_check.main([*args, "--out", str(tmp_path / "out")])
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is a file"):
        padv_check.main(["--out", str(tmp_path / "file")])
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_check_json_is_written_only_once_all_six_runs_are_finished(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(padv_check, "mean_unigram_entropy", lambda root=None: ENTROPY)
    root = tmp_path / "runs" / "liu2020" / "lab" / "padv_check"
    out = tmp_path / "out"
    for key, final in FINAL.items():
        if key != (64, 2):
            write_run(root, *key, final)
    padv_check.main(["--out", str(out)])
    assert "1 of the 6 runs are not finished (pad_vocab 64, seed 2)" in capsys.readouterr().out
    assert not out.exists()
    write_run(root, 64, 2, FINAL[64, 2])
    padv_check.main(["--out", str(out)])
    result = json.loads((out / "check.json").read_text())
    assert result["verdict"] == "adopted" and result["steps"] == 2000 and result["seeds"] == [0, 1, 2]
    assert result["final_losses"] == {f"pad{p}-seed{s}": v for (p, s), v in FINAL.items()}
    assert result["train_seconds"]["pad64-seed2"] == 102.0
    assert result["loss_2se_pad1"] == pytest.approx(0.023094, abs=1e-6)  # as in the adopted case above


def test_a_run_of_another_config_is_not_read(tmp_path):
    write_run(tmp_path, 1, 0, 3.0, steps=8000)
    with pytest.raises(ConfigError, match="holds a run of another config"):
        padv_check.final_losses(tmp_path)


# -------------------------------------------------------------------------------------- the switch in Liu's runs
@pytest.mark.parametrize("kwargs, message", [
    ({"pad_vocab": 0, "compile": True}, "pad_vocab must be a whole number of rows >= 1"),
    ({"pad_vocab": True, "compile": True}, "pad_vocab must be a whole number of rows >= 1"),
    ({"pad_vocab": 2.5, "compile": True}, "pad_vocab must be a whole number of rows >= 1"),
    ({"pad_vocab": 64}, "valid values with compile=False: 1"),
])
def test_bert_run_config_refuses_a_bad_padding(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        BertRunConfig(**kwargs)


def test_an_unpadded_config_saves_as_before_and_a_padded_one_gets_its_own_folder(tmp_path):
    # the keys every saved config.json had before the switch existed
    before = {"size", "window", "model", "steps", "tokens_per_step", "warmup", "alpha", "seed", "mlm_probability",
              "weight_decay", "max_chapters", "compile"}
    assert set(BertRunConfig().as_dict()) == before
    assert set(BertRunConfig(compile=True, pad_vocab=64).as_dict()) == before | {"pad_vocab"}
    assert BertRunConfig(compile=True, pad_vocab=64).as_dict()["pad_vocab"] == 64
    assert BertRunConfig(compile=True).folder(tmp_path) == tmp_path / "big-w512"
    assert BertRunConfig(compile=True, pad_vocab=64).folder(tmp_path) == tmp_path / "big-w512-padv64"
    assert BertRunConfig(size="small", window=20, compile=True, pad_vocab=8).name == "small-w20-padv8"


def test_the_published_runs_configs_are_what_their_configs_save():
    """The four published BERTs (records of the GPU runs) keep matching their configs: a rerun resumes them."""
    from xlrepro.papers.liu2020.models import bert_configs
    from xlrepro.results import results_dir
    for name, config in bert_configs().items():
        record = json.loads((results_dir("liu2020") / "gpu_run" / f"{name}-training.json").read_text())
        assert record["config"] == json.loads(json.dumps({**config.as_dict(), "languages": list(LANGUAGES)}))


@pytest.mark.parametrize("pad, levers, name", [(1, None, "big-w512"), (64, Levers(pad_vocab=64), "big-w512-padv64")])
def test_pretrain_bert_passes_the_padding_to_the_trainer_and_saves_it_only_when_on(pad, levers, name, tmp_path,
                                                                                   monkeypatch):
    from xlrepro.engine import pretrain
    asked = {}

    def stop(*args, **kwargs):  # the trainer stopped by its time limit before any step
        asked.update(kwargs)
    monkeypatch.setattr(pretrain, "train_sampled_mlm", stop)
    ids = torch.full((4, 8), 5, dtype=torch.int32)  # [rows, width]: two rows for each of two languages
    lengths = torch.full((4,), 8, dtype=torch.int32)
    config = BertRunConfig(model=ModelSize("tiny", 16, 1, 2, 32, 1e-3), steps=2, tokens_per_step=512, compile=True,
                           pad_vocab=pad)
    out = pretrain_bert(config, root=tmp_path, progress=False, languages=("en", "fr"),
                        rows=(ids, lengths, np.array([0, 2, 4])))
    assert out == tmp_path / name and not (out / "training.json").exists()
    assert asked["levers"] == levers and asked["compile"]
    saved = json.loads((out / "config.json").read_text())
    assert ("pad_vocab" in saved) == (pad != 1) and saved.get("pad_vocab", 1) == pad
