"""Known answers for the Liu et al. 2020 GPU evaluation (hand-made inputs), and a CPU smoke run of its training and
evaluation through `xlrepro train liu2020`."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from xlrepro.config import ConfigError
from xlrepro.papers.liu2020 import report
from xlrepro.papers.liu2020.evaluate import Task, hashed_subset, shard_tasks
from xlrepro.papers.liu2020.run import evaluate_pos
from xlrepro.papers.liu2020.transfer_static import pair_features


def test_evaluate_pos_known_answer():
    rr = pd.DataFrame({"experiment": "bert-big-w512", "language": ["de"] * 5,
                       "word": ["house", "run", "the", "quickly", "zzz"], "rr": [1.0, 0.5, 0.25, 0.2, 1.0]})
    tags = {"house": "NN", "run": "VB", "the": "DT", "quickly": "RB"}
    out = evaluate_pos(rr, tags).set_index(["experiment", "language", "metric"])["value"]
    assert out["bert-big-w512/open", "de", "mrr"] == pytest.approx((1.0 + 0.5 + 0.2) / 3)
    assert out["bert-big-w512/closed", "de", "mrr"] == pytest.approx(0.25)
    assert out["bert-big-w512/noun", "de", "mrr"] == pytest.approx(1.0)
    assert out["bert-big-w512/adv", "de", "words"] == 1
    assert np.isnan(out["bert-big-w512/adj", "de", "mrr"])
    assert out["bert-big-w512", "de", "untagged"] == 1  # "zzz" has no tag: left out, counted
    assert out["bert-big-w512/verb", "avg", "mrr"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="experiments: bert-big-w512"):
        evaluate_pos(rr, tags, experiment="bert-small-w20")


def test_shard_tasks_cover_each_task_once_and_balance():
    tasks = [Task("retrieval", m, cost=c) for m, c in (("a", 3), ("b", 2), ("c", 2), ("d", 1), ("e", 1))]
    shards = [shard_tasks(tasks, i, 2) for i in range(2)]
    assert sorted(t.model for s in shards for t in s) == ["a", "b", "c", "d", "e"]
    # longest first to the least loaded: a->0 (3), b->1 (2), c->1 (4), d->0 (4), e->0 (5)
    assert [t.model for t in shards[0]] == ["a", "d", "e"] and [t.model for t in shards[1]] == ["b", "c"]
    with pytest.raises(ConfigError, match="0 <= shard < n_shards"):
        shard_tasks(tasks, 2, 2)


def test_hashed_subset_is_nested_and_ordered():
    keys = list(range(100))
    small, big = hashed_subset(keys, 10, "s"), hashed_subset(keys, 30, "s")
    assert len(small) == 10 and len(big) == 30 and set(small) <= set(big) and small == sorted(small)


def test_pair_features_known_answer():
    u, v = torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 1.0]])
    assert pair_features(u, v).tolist() == [[1.0, -2.0, 3.0, 1.0, 2.0, 3.0, 3.0, -2.0]]


class _PositionBert(torch.nn.Module):
    """hidden_states: layer 0 = the token id, layer 1 = the position (a known answer for word_vectors)."""

    def forward(self, input_ids, attention_mask, output_hidden_states=True):
        pos = torch.arange(input_ids.shape[1]).expand_as(input_ids).float()
        return type("O", (), {"hidden_states": (input_ids.float()[..., None], pos[..., None])})()


def test_word_vectors_mean_over_first_contexts():
    from xlrepro.papers.liu2020.bert import word_vectors
    # window 4 -> rows of 2 pieces: [7, 5] [7, 7] [9]; token 7 at positions (with [CLS]) 1, 1, 2
    vec = word_vectors(_PositionBert(), {"xx": [[7, 5, 7, 7, 9]]}, {"xx": {7, 9, 11}}, window=4, max_contexts=2)
    v = vec["xx"]
    assert set(v) == {7, 9}  # 11 never occurs
    assert v[7][0].item() == 7 and v[7][1].item() == pytest.approx(1.0)  # the first two contexts: positions 1, 1
    assert v[9][1].item() == pytest.approx(1.0)


def test_table4_alpha_chosen_on_dev(tmp_path):
    acc = {"en": {"0.0": {"dev": 0.9, "test": 0.8}},
           "de": {"0.0": {"dev": 0.5, "test": 0.4}, "1.0": {"dev": 0.6, "test": 0.3}, "-1.0": {"dev": 0.6, "test": 0.9}}}
    (tmp_path / "transfer").mkdir()
    (tmp_path / "transfer" / "big-w512-half-s0.json").write_text(json.dumps(
        {"model": "big-w512", "mode": "freeze-6", "seed": 0, "accuracy": acc}))
    t = report.table4(tmp_path).set_index(["experiment", "language", "metric"])["value"]
    # tie on dev between -1 and 1: the smaller alpha (-1) wins; its test accuracy is reported, not the best test
    assert t["finetune-half+MDS", "de", "alpha"] == -1.0 and t["finetune-half+MDS", "de", "accuracy"] == 0.9
    assert t["finetune-half", "de", "accuracy"] == 0.4 and t["finetune-half+MDS", "en", "alpha"] == 0.0
    assert report.choose_alpha({"0.0": {"dev": 0.5}, "2.0": {"dev": 0.5}}) == "0.0"


def test_language_information_absent_is_none(tmp_path):
    from xlrepro.papers.liu2020.run import evaluate_language_information
    assert evaluate_language_information(tmp_path) is None
    assert report.transfer_results(tmp_path) is None and report.bert_retrieval_results(["big-w512"], tmp_path) is None


def test_train_parts_check_their_options(capsys):
    from xlrepro.cli import main
    assert main(["train", "liu2020", "--part", "static", "--smoke"]) == 2
    assert "--smoke applies to --part bert or evaluate only; got --part static" in capsys.readouterr().err
    assert main(["train", "liu2020", "--part", "evaluate", "--models", "big-w512"]) == 2
    assert "--models applies to --part bert (or all) only" in capsys.readouterr().err


@pytest.mark.slow
def test_smoke_training_then_evaluation_through_the_cli(multilingual_cache, tmp_path, monkeypatch):
    """`xlrepro train liu2020 --part bert --smoke`, then `--part evaluate --smoke`, on the CPU with tiny BERTs
    (about 3 minutes on 2 cores): the evaluation's files land where the chapters read them, with the training
    records and one record of the evaluation job."""
    from xlrepro.cli import main
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path / "runs"))
    assert main(["train", "liu2020", "--part", "bert", "--smoke", "--device", "cpu", "--time-limit", "120"]) == 0
    assert main(["train", "liu2020", "--part", "evaluate", "--smoke", "--device", "cpu", "--time-limit", "240"]) == 0
    res = tmp_path / "runs" / "liu2020" / "smoke" / "gpu-results"
    for f in ("retrieval/big-w512.csv", "retrieval/big-w512-words.csv", "transfer/big-w512-all-s0.json",
              "transfer/big-w512-half-s0.json", "language/big-w512.csv", "training/big-w20/training.json"):
        assert (res / f).exists(), f
    assert len(list(res.glob("wall-evaluate-*.json"))) == 1
    assert report.table4(res, report.transfer_results(res)) is not None
    assert set(pd.read_csv(res / "retrieval" / "big-w512.csv")["layer"]) == {0, 1, 2}


def test_mds_grid_in_the_claims_shape_and_smoke_results_never_publish(tmp_path):
    import json
    from xlrepro.papers.liu2020.run import mds_long
    grid = pd.DataFrame({"direction": ["en-de", "en-de"], "layer": [3, 3], "alpha": [-1, 2.5],
                         "metric": ["bleu1", "convert_rate"], "value": [1.5, 0.4]})
    out = mds_long(grid)
    assert out["experiment"].tolist() == ["-1.0", "2.5"] and out["language"].tolist() == ["en-de", "en-de"]
    assert set(out["seed"]) == {-1} and out["value"].tolist() == [1.5, 0.4]
    (tmp_path / "training" / "big-w512").mkdir(parents=True)
    (tmp_path / "training" / "big-w512" / "config.json").write_text(json.dumps({"model": {"name": "smoke"}}))
    assert report.check_gpu_results(tmp_path, publish=False)
    with pytest.raises(ValueError, match="smoke run's results"):
        report.check_gpu_results(tmp_path, publish=True)
    assert not report.check_gpu_results(tmp_path / "absent", publish=True)


def test_gpu_record_lists_every_call_in_order_and_the_machines(tmp_path):
    """Each GPU job wrote one wall-<phase>-<unix start>.json (older runs: one wall-<phase>.json per
    phase); the chapter's GPU table lists the calls in the order they ran, and the run record names the machine."""
    import json
    for name, phase, secs in (("wall-evaluate-200.json", "evaluate", 511), ("wall-train-100.json", "train", 480),
                              ("wall-evaluate-300.json", "evaluate", 310)):
        (tmp_path / name).write_text(json.dumps({"phase": phase, "wall_seconds": secs, "exit_code": 0,
                                                 "gpus": ["NVIDIA H200", "NVIDIA H200"]}))
    table = report.gpu_run_record(tmp_path)
    assert table.index.tolist() == ["job: train (100)", "job: evaluate (200)", "job: evaluate (300)"]
    assert table["seconds"].tolist() == ["480", "511", "310"]
    assert report.training_devices(tmp_path) == "2 x NVIDIA H200"
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    for phase in ("evaluate", "train"):
        (legacy / f"wall-{phase}.json").write_text(json.dumps({"phase": phase, "wall_seconds": 1, "exit_code": 0,
                                                               "gpus": []}))
    assert report.gpu_run_record(legacy).index.tolist() == ["job: train", "job: evaluate"]
    assert report.training_devices(legacy) == "none recorded"  # CPU calls and no training records
