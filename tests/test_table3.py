"""Dufter & Schütze Table 3 on real languages (`xlrepro.papers.dufter2020.real_languages`)."""
from dataclasses import replace

import numpy as np
import pytest

from xlrepro.config import ConfigError
from xlrepro.papers.dufter2020 import real_languages as rl


VOCAB = rl.Vocabularies(("en", "de", "hi"), (300, 301, 299))


def test_vocabularies_lie_end_to_end_and_pad_to_a_multiple_of_8():
    assert VOCAB.offsets.tolist() == [0, 300, 601]
    assert VOCAB.rows == 904  # 900 ids + 4 unused rows


def test_german_pieces_shift_and_specials_stay_english_without_shift_special():
    ids = [2, 10, 11, 3]  # [CLS] a b [SEP] in German's own ids
    assert VOCAB.to_model(ids, 1, shift_special=False, inv_order=False).tolist() == [2, 310, 311, 3]
    assert VOCAB.to_model(ids, 1, shift_special=True, inv_order=False).tolist() == [302, 310, 311, 303]
    assert VOCAB.to_model(ids, 2, shift_special=False, inv_order=False).tolist() == [2, 611, 612, 3]


def test_inv_order_reverses_each_segment_of_a_pair_between_specials():
    ids = [2, 10, 11, 12, 3, 20, 21, 3]  # [CLS] a b c [SEP] d e [SEP]
    assert VOCAB.to_model(ids, 0, False, inv_order=True).tolist() == [2, 12, 11, 10, 3, 21, 20, 3]


def test_inv_order_applies_to_german_only():
    cfg = rl.load_config(smoke=True)
    assert cfg.inv_order_language == "de"
    exp = rl.table3_experiment("3", cfg)
    assert exp.inv_order
    # pretrain_set and encoded reverse a language only when it is the inv-order language
    assert [exp.inv_order and lang == cfg.inv_order_language for lang in cfg.languages] == [False, True, False]


def test_model_30_draws_from_the_five_nearest_and_others_keep_k():
    cfg = rl.load_config()
    assert rl.table3_experiment("30", cfg).knn_k == 5
    assert rl.table3_experiment("30", cfg).mask_probs == (0.5, 0.1, 0.1, 0.3)
    assert not rl.table3_experiment("8", cfg).knn_replace


def test_config_rejects_an_english_inv_order_and_bad_shards():
    with pytest.raises(ConfigError, match="target language"):
        rl.Table3Config(inv_order_language="en")
    with pytest.raises(ConfigError, match="between 1 and 12"):
        rl.shard_stacks(rl.load_config(), 13)


def test_shards_cover_every_model_once():
    stacks = rl.shard_stacks(rl.load_config(), 4)
    flat = sorted(m for s in stacks for m in s)
    assert len(flat) == 12 and len(set(flat)) == 12 and [len(s) for s in stacks] == [3, 3, 3, 3]


@pytest.mark.slow
def test_tiny_end_to_end_run_writes_table3(tmp_path):
    root = tmp_path / "run"
    assert rl.main(["--smoke", "--device", "cpu", "--root", str(root), "--shard", "3/4"]) == 0
    out = tmp_path / "table3.csv"
    assert rl.main(["--smoke", "--root", str(root), "--collect", str(out)]) == 0
    import pandas as pd
    df = pd.read_csv(out, dtype={"experiment": str})
    # shard 3 of 4: members 3, 7, 11 of (0,0) (0,42) (0,43) (3,0) ... (30,43)
    assert sorted(set(zip(df.experiment, df.seed))) == [("3", 0), ("30", 43), ("8", 42)]
    pretraining = {"pretrain_loss", "unigram_entropy", "unigram_entropy_joint", "pretrain_gpu_seconds"}
    assert set(df.metric) == {"accuracy", "macro_f1", "majority", "finetune_lr", "finetune_seconds"} | pretraining
    assert set(df.language) == {"en", "de", "hi", "all"}
    assert set(df[df.language == "all"].metric) == pretraining
    assert df[df.metric.isin(["accuracy", "macro_f1", "majority", "finetune_lr"])].value.between(0, 1).all()
    # knowing the language can only lower the unigram entropy; every member has one final loss
    levels = df[df.language == "all"].pivot_table(index=["experiment", "seed"], columns="metric", values="value")
    assert (levels.unigram_entropy < levels.unigram_entropy_joint).all() and (levels.pretrain_loss > 0).all()
    # the curves beside table3.csv: every record of every member, in the results format
    curves = pd.read_csv(tmp_path / rl.CURVES_CSV, dtype={"experiment": str})
    assert list(curves.columns) == ["experiment", "seed", "metric", "step", "value"]
    assert sorted(set(zip(curves.experiment, curves.seed))) == [("3", 0), ("30", 43), ("8", 42)]
    # the fine-tuning rate of each run: the smoke recipe's, for English (the source language)
    lr = df[df.metric == "finetune_lr"]
    assert len(lr) == 3 and set(lr.language) == {"en"} and set(lr.value) == {rl.load_config(smoke=True).finetune.lr}
    # the same test keys in every language: the majority baseline is one number
    assert df[df.metric == "majority"].value.nunique() == 1
    # the pretraining loss of each member, recorded every LOSS_EVERY steps and at the last step
    import json
    (curve,) = [json.loads(p.read_text()) for p in (root / "stacks").glob("*/pretrain_loss.json")]
    assert curve["members"] == ["3/0", "8/42", "30/43"]
    steps = sorted(map(int, curve["loss"]))
    assert steps[-1] == json.loads(next((root / "stacks").glob("*/timing.json")).read_text())[-1]["total_steps"]
    assert all(len(v) == 3 and all(x > 0 for x in v) for v in curve["loss"].values())


def test_chapter_table3_shows_mean_and_std_over_seeds_beside_the_paper(tmp_path):
    import pandas as pd
    from xlrepro.papers.dufter2020.knn_chapter import table3_frame
    from xlrepro.reference import paper_numbers
    paper = paper_numbers("dufter2020", "Table 3")
    assert table3_frame(tmp_path / "absent.csv", paper) is None
    rows = [("0", s, "accuracy", l, v) for s, v in ((0, 0.5), (42, 0.7)) for l in ("en", "de", "hi")]
    rows += [("0", s, "majority", l, 0.25) for s in (0, 42) for l in ("en", "de", "hi")]
    pd.DataFrame(rows, columns=["experiment", "seed", "metric", "language", "value"]).to_csv(tmp_path / "t.csv",
                                                                                             index=False)
    t = table3_frame(tmp_path / "t.csv", paper)
    assert t.loc[("0", "ours"), "English"] == "0.60 ± 0.14 (n=2)"
    assert t.loc[("majority", "ours"), "Hindi (zero-shot)"] == "0.25"
    assert t.loc[("mBERT", "paper (Hu et al. 2020, not run here)"), "German (zero-shot)"] == "0.70"


@pytest.mark.parametrize("grouped", [False, True])
def test_epoch_order_is_a_permutation_seeded_by_seed_and_epoch(grouped):
    lengths = np.random.default_rng(0).integers(3, 100, size=1000)
    order = rl.epoch_order(lengths, 42, 3, 16, grouped)
    assert sorted(order.tolist()) == list(range(1000))
    assert np.array_equal(order, rl.epoch_order(lengths, 42, 3, 16, grouped))
    assert not np.array_equal(order, rl.epoch_order(lengths, 43, 3, 16, grouped))
    assert not np.array_equal(order, rl.epoch_order(lengths, 42, 4, 16, grouped))


def test_length_grouped_order_sorts_each_mega_batch_and_puts_the_longest_batch_first():
    # 8 sentences, batches of 2: HF's mega-batch is min(8 // (2 * 4), 50) = 1 batch, so every batch is sorted
    # by decreasing length; then the longest sentence (length 8) trades places with the first sentence of the first
    # batch, so the batch it left may be the one batch out of order
    lengths = np.arange(1, 9)
    order = rl.epoch_order(lengths, 0, 0, 2, True)
    batches = lengths[order].reshape(4, 2)
    assert batches[0, 0] == 8
    assert (batches[:, 0] >= batches[:, 1]).sum() >= 3


def test_length_grouped_batches_are_narrower_and_alike_across_the_models_of_a_stack():
    # verse-like lengths: a shuffled batch is padded to near the longest verse; grouped batches to near their own
    lengths = np.random.default_rng(1).integers(10, 110, size=25_600)
    B = 256
    def widths(seed, grouped):
        return lengths[rl.epoch_order(lengths, seed, 0, B, grouped)][: len(lengths) // B * B].reshape(-1, B).max(1)
    plain, grouped = widths(0, False), widths(0, True)
    assert plain.mean() > 100 and grouped.mean() < 70  # the lengths average 60
    # two seeds at the same step sit at the same place of their sorted mega-batches: widths within a few pieces
    assert np.abs(widths(0, True) - widths(42, True))[1:].mean() < 5


@pytest.mark.slow
def test_fine_tuning_parts_need_the_pretrained_shard_and_together_finish_it(tmp_path):
    root = tmp_path / "run"
    with pytest.raises(ConfigError, match="pretrained first: run it with --pretrain-only"):
        rl.main(["--smoke", "--device", "cpu", "--root", str(root), "--shard", "3/4", "--finetune-part", "0/2"])
    with pytest.raises(ConfigError, match="exclude each other"):
        rl.main(["--smoke", "--root", str(root), "--pretrain-only", "--finetune-part", "1/2"])
    with pytest.raises(ConfigError, match="--finetune-part takes I/N"):
        rl.main(["--smoke", "--root", str(root), "--finetune-part", "2/2"])
    assert rl.main(["--smoke", "--device", "cpu", "--root", str(root), "--shard", "3/4", "--pretrain-only"]) == 0
    metrics = lambda: sorted(p.parent.parent.name + "/" + p.parent.parent.parent.name
                             for p in root.glob("*/*/*/metrics.json"))
    assert metrics() == []  # pretrained, nothing fine-tuned
    assert rl.main(["--smoke", "--device", "cpu", "--root", str(root), "--shard", "3/4", "--finetune-part", "1/2"]) == 0
    assert metrics() == ["42/8"]  # member 1 of (3,0) (8,42) (30,43)
    assert rl.main(["--smoke", "--device", "cpu", "--root", str(root), "--shard", "3/4", "--finetune-part", "0/2"]) == 0
    assert metrics() == ["0/3", "42/8", "43/30"]


def test_the_learning_rate_is_chosen_on_english_dev_alone(tmp_path, monkeypatch):
    """A stand-in fine-tuning whose accuracies are known per rate: the rate best on English dev gives the run's test
    results, a tie keeps the grid's earlier rate, every rate's results are kept in a file of their own (a cut call
    resumes from them), and a passed deadline stops before the next rate."""
    from dataclasses import replace
    from types import SimpleNamespace

    import xlrepro.training.finetune as ft_module
    cfg = rl.load_config(smoke=True)
    rl.prepare(cfg, smoke=True, root=tmp_path, progress=False)
    trained = []  # the rate of every fine-tuning run

    def fake_finetune(config, model, train, n_labels, **kw):
        trained.append(config.lr)
        return SimpleNamespace(lr=config.lr, position_offset=None), {"seconds": 1.0}

    def fake_evaluate(clf, data, device, n_labels):
        assert data.split == "test" or data.lang == "en"  # the choice reads English dev alone
        return (dev_accuracy if data.split == "dev" else test_accuracy)[clf.lr], 0.1

    monkeypatch.setattr(ft_module, "finetune", fake_finetune)
    monkeypatch.setattr(ft_module, "evaluate", fake_evaluate)
    test_accuracy = {1e-5: 0.2, 1e-4: 0.7, 1e-3: 0.9}
    for k, (grid, dev_accuracy, chosen) in enumerate((
            ((1e-5, 1e-4, 1e-3), {1e-5: 0.3, 1e-4: 0.6, 1e-3: 0.4}, 1e-4),  # not the best on test (1e-3)
            ((1e-4, 1e-5), {1e-5: 0.5, 1e-4: 0.5}, 1e-4))):                  # a tie: the grid's first
        c = replace(cfg, finetune=replace(cfg.finetune, lr_grid=grid))
        stack = rl.Table3Stack(c, [("0", 0)], tmp_path / str(k), smoke=True)
        monkeypatch.setattr(stack, "encoded", lambda exp, lang, split, max_pairs, keys=None: SimpleNamespace(
            labels=np.array([0, 1, 1]), split=split, lang=lang))
        trained.clear()
        assert stack.finetune_member(0, model=None, progress=False, deadline=0.0) is None and trained == []
        out = stack.finetune_member(0, model=None, progress=False)
        assert trained == list(grid)
        assert out["lr_selection"] == {"dev_accuracy": {f"{lr:g}": dev_accuracy[lr] for lr in grid}, "language": "en",
                                       "lr": chosen}
        assert out["finetune"]["lr"] == chosen and out["finetune_seconds"] == len(grid)
        assert out["accuracy"] == {l: test_accuracy[chosen] for l in ("en", "de", "hi")}
        assert sorted(p.name for p in stack.member_dir(0).glob("finetune-lr*.json")) == sorted(
            f"finetune-lr{lr:g}.json" for lr in grid)
        trained.clear()
        assert stack.finetune_member(0, model=None, progress=False) == out and trained == []  # resumed from the files
    # without a grid: the recipe's one rate, no dev set, no selection record, no per-rate file
    stack = rl.Table3Stack(cfg, [("0", 0)], tmp_path / "plain", smoke=True)
    monkeypatch.setattr(stack, "encoded", lambda exp, lang, split, max_pairs, keys=None: SimpleNamespace(
        labels=np.array([0, 1, 1]), split=split, lang=lang))
    test_accuracy[cfg.finetune.lr] = 0.4
    out = stack.finetune_member(0, model=None, progress=False)
    assert "lr_selection" not in out and out["finetune"]["lr"] == cfg.finetune.lr
    assert out["accuracy"] == {"en": 0.4, "de": 0.4, "hi": 0.4} and not list(stack.member_dir(0).glob("finetune-*"))


def test_table3_plan_pretrains_each_shard_on_a_gpu_and_deals_one_fine_tuning_per_member():
    cfg = rl.load_config()  # 4 models x 3 seeds: two shards of six
    pretrain, finetune = rl.plan_table3(cfg, shards=2, gpus=2)
    assert [(j.shard, j.gpu, j.part) for j in pretrain] == [(0, 0, None), (1, 1, None)]
    assert [(j.shard, j.part, j.gpu) for j in finetune] == (
        [(0, (j, 6), j % 2) for j in range(6)] + [(1, (j, 6), j % 2) for j in range(6)])
    assert finetune[7].argv() == ["--shard", "1/2", "--finetune-part", "1/6"] and finetune[7].name == "shard1-finetune1"
    assert pretrain[1].argv() == ["--shard", "1/2", "--pretrain-only"]
    one, _ = rl.plan_table3(cfg, shards=3, gpus=1)
    assert [j.gpu for j in one] == [0, 0, 0]
    with pytest.raises(ConfigError, match="gpus must be 1 or more"):
        rl.plan_table3(cfg, shards=2, gpus=0)


def test_table3_runs_every_pretraining_before_any_fine_tuning_at_most_n_at_once_per_gpu(tmp_path):
    """A stand-in child that records what runs at once: both GPUs pretrain side by side, every fine-tuning starts
    after both, and no GPU holds more than 2 fine-tunings at a time; a failed pretraining leaves its shard's
    fine-tunings unstarted and the run unfinished."""
    import threading
    import time as clock
    lock, running, events, peak = threading.Lock(), {}, [], {}

    def fake(job, seconds_left, log, env):
        with lock:
            running[job.gpu] = running.get(job.gpu, 0) + 1
            peak[(job.gpu, job.part is None)] = max(peak.get((job.gpu, job.part is None), 0), running[job.gpu])
            events.append(("start", job.name))
        clock.sleep(0.05)
        with lock:
            running[job.gpu] -= 1
            events.append(("end", job.name))
        return 1 if job.name == fail else 0

    fail = None
    assert rl.run_table3(shards=2, gpus=2, processes=2, logs=tmp_path, run=fake)
    starts = [n for e, n in events if e == "start"]
    last_pretrain_end = max(i for i, (e, n) in enumerate(events) if e == "end" and "pretrain" in n)
    first_finetune = min(i for i, (e, n) in enumerate(events) if e == "start" and "finetune" in n)
    assert last_pretrain_end < first_finetune and len(starts) == 14
    assert peak[(0, True)] == peak[(1, True)] == 1 and peak[(0, False)] == peak[(1, False)] == 2
    events.clear()
    fail = "shard1-pretrain"
    assert not rl.run_table3(shards=2, gpus=2, processes=2, logs=tmp_path, run=fake)
    assert not [n for e, n in events if e == "start" and n.startswith("shard1-finetune")]
    assert len([n for e, n in events if e == "start" and n.startswith("shard0-finetune")]) == 6
    with pytest.raises(ConfigError, match="processes must be 1 or more"):
        rl.run_table3(processes=0, logs=tmp_path, run=fake)


class FakeChild:
    """subprocess.Popen's stand-in: records argv and environment; `wait` blocks until `terminate` unless it is told
    to return at once."""
    made: list = []
    finish_at_once = True

    def __init__(self, argv, env=None, stdout=None, stderr=None):
        import threading
        self.argv, self.env, self.ended = argv, env, threading.Event()
        if FakeChild.finish_at_once:
            self.ended.set()
        FakeChild.made.append(self)

    def wait(self, timeout=None):
        self.ended.wait()
        return 0 if FakeChild.finish_at_once else -15

    def terminate(self):
        self.terminated = True
        self.ended.set()

    def kill(self):
        self.ended.set()


def test_table3_children_get_their_gpu_of_the_visible_ones_the_time_left_the_options_and_a_share_of_the_cores(
        tmp_path, monkeypatch):
    import os
    import subprocess
    import time
    monkeypatch.setattr(subprocess, "Popen", FakeChild)
    monkeypatch.setattr(FakeChild, "made", [])
    monkeypatch.setattr(FakeChild, "finish_at_once", True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert rl.run_table3(shards=2, gpus=2, processes=2, time_limit=500, logs=tmp_path,
                         extra=["--smoke", "--device", "cuda"])
    made = FakeChild.made
    assert len(made) == 2 + 12 and {c.env["OMP_NUM_THREADS"] for c in made} == {"4"}  # 16 cores / (2 GPUs x 2)
    pre = {c.env["CUDA_VISIBLE_DEVICES"]: c.argv for c in made if "--pretrain-only" in c.argv}
    assert sorted(pre) == ["2", "3"] and "0/2" in pre["2"] and "1/2" in pre["3"]
    for c in made:
        assert c.argv[1:3] == ["-m", "xlrepro.papers.dufter2020.real_languages"]
        assert c.argv[-3:] == ["--smoke", "--device", "cuda"]
        assert c.argv[c.argv.index("--time-limit") + 1] == "500"  # counted from the launch:
        assert 0 <= time.time() - float(c.env["XLREPRO_LAUNCHED_AT"]) < 60
    assert (tmp_path / "shard1-finetune5.log").exists()
    with pytest.raises(ConfigError, match="3 GPUs asked, but CUDA_VISIBLE_DEVICES names 2"):
        rl.run_table3(shards=2, gpus=3, logs=tmp_path, extra=["--smoke"])


def test_table3_interrupted_starts_nothing_more_and_stops_its_children(tmp_path, monkeypatch):
    """Ctrl-C while both GPUs pretrain: both children are stopped and no fine-tuning starts."""
    import _thread
    import subprocess
    import threading
    monkeypatch.setattr(subprocess, "Popen", FakeChild)
    monkeypatch.setattr(FakeChild, "made", [])
    monkeypatch.setattr(FakeChild, "finish_at_once", False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        rl.run_table3(shards=2, gpus=2, processes=2, logs=tmp_path, extra=["--smoke", "--device", "cuda"])
    timer.join()
    made = FakeChild.made
    assert len(made) == 2 and all("--pretrain-only" in c.argv and getattr(c, "terminated", False) for c in made)
    assert sorted(c.env["CUDA_VISIBLE_DEVICES"] for c in made) == ["0", "1"]


def test_a_child_s_time_limit_counts_from_the_launch_so_a_late_start_trains_nothing(tmp_path, monkeypatch):
    """A child whose launching command began 100 s ago, with --time-limit 50: its run stops before pretraining."""
    import time
    monkeypatch.setenv("XLREPRO_LAUNCHED_AT", repr(time.time() - 100))
    root = tmp_path / "run"
    assert rl.main(["--smoke", "--device", "cpu", "--root", str(root), "--shard", "3/4", "--time-limit", "50"]) == 3
    assert not list(root.glob("*/*/*/model.safetensors")) and not list(root.glob("stacks/*/timing.json"))


def test_the_final_loss_is_the_mean_of_the_last_tenth_of_the_records_and_at_least_the_last():
    assert rl.FINAL_LOSS_FRACTION == 0.1
    assert rl.final_loss([9.0] * 10 + [4.0, 2.0]) == 3.0  # 12 records: the last ceil(1.2) = 2
    assert rl.final_loss([9.0, 5.0]) == 5.0  # ceil(0.2) = 1: the last record
    assert rl.final_loss([9.0] * 18 + [3.0, 1.0]) == 2.0  # 20 records: the last 2
    with pytest.raises(ValueError, match="no loss records"):
        rl.final_loss([])


def _stack(folder, members, loss, seconds):
    import json
    folder.mkdir(parents=True)
    (folder / "pretrain_loss.json").write_text(json.dumps({"members": members, "loss": loss}))
    (folder / "timing.json").write_text(json.dumps([{"seconds": s} for s in seconds]))


def test_pretraining_curves_read_every_member_of_every_stack_in_step_order(tmp_path):
    _stack(tmp_path / "stacks" / "a", ["0/42", "8/0"], {"100": [7.0, 5.0], "50": [7.5, 6.0]}, [10.0])
    _stack(tmp_path / "stacks" / "b", ["0/0"], {"50": [7.2]}, [4.0])
    curves = rl.pretraining_curves(tmp_path)
    assert curves.values.tolist() == [["0", 0, "mlm_loss", 50, 7.2], ["0", 42, "mlm_loss", 50, 7.5],
                                      ["0", 42, "mlm_loss", 100, 7.0], ["8", 0, "mlm_loss", 50, 6.0],
                                      ["8", 0, "mlm_loss", 100, 5.0]]


def _metrics(root, experiment, seed, acc, seconds, cfg=None):
    import json
    folder = root / experiment / str(seed) / rl.member_key(cfg or rl.load_config(), f"{experiment}/{seed}")
    folder.mkdir(parents=True)
    langs = ("en", "de", "hi")
    (folder / "metrics.json").write_text(json.dumps({
        "experiment": experiment, "seed": seed, "accuracy": {l: acc for l in langs},
        "macro_f1": {l: acc / 2 for l in langs}, "majority": {l: 0.25 for l in langs}, "finetune": {"lr": 2e-5},
        "finetune_seconds": seconds}))


def _stack_dir(root, members, cfg=None):
    """A stack's folder as Table3Stack names it: its members' run keys under `cfg`."""
    from xlrepro.runkeys import run_key
    cfg = cfg or rl.load_config()
    return root / "stacks" / run_key({"members": [rl.member_key(cfg, m) for m in members]})


def test_collect_gives_each_run_its_own_curve_and_share_of_its_stack(tmp_path, monkeypatch):
    # stack a: 0/42 then 8/0, 100 s in two processes (60 + 40); stack b: 8/42 then 0/0, 30 s
    _stack(_stack_dir(tmp_path, ["0/42", "8/0"]), ["0/42", "8/0"], {"50": [7.5, 6.0], "100": [7.4, 5.0]},
           [60.0, 40.0])
    _stack(_stack_dir(tmp_path, ["8/42", "0/0"]), ["8/42", "0/0"], {"50": [6.5, 7.6], "100": [4.0, 7.3]}, [30.0])
    for e, s, acc, sec in (("0", 0, 0.3, 10.0), ("0", 42, 0.4, 20.0), ("8", 0, 0.8, 30.0), ("8", 42, 0.9, 40.0)):
        _metrics(tmp_path, e, s, acc, sec)
    levels = {"0": (7.0, 6.0), "8": (7.1, 6.1)}
    monkeypatch.setattr(rl, "unigram_entropies", lambda cfg, exp, smoke=False, root=None: levels[exp.id])
    df = rl.collect(tmp_path, rl.load_config())
    got = {(e, s, m): v for e, s, m, v in zip(df.experiment, df.seed, df.metric, df.value) if m in
           ("pretrain_loss", "pretrain_gpu_seconds", "unigram_entropy", "unigram_entropy_joint", "finetune_seconds")}
    # 2 records each: the final loss is the last (ceil(0.2) = 1)
    assert got[("0", 42, "pretrain_loss")] == 7.4 and got[("8", 0, "pretrain_loss")] == 5.0
    assert got[("8", 42, "pretrain_loss")] == 4.0 and got[("0", 0, "pretrain_loss")] == 7.3
    assert got[("0", 42, "pretrain_gpu_seconds")] == 50.0 and got[("0", 0, "pretrain_gpu_seconds")] == 15.0
    assert got[("8", 0, "unigram_entropy")] == 6.1 and got[("0", 0, "unigram_entropy_joint")] == 7.0
    assert got[("8", 42, "finetune_seconds")] == 40.0
    # another recipe's run of 0/0 in the same folder (its own keys): each recipe reads its own runs only
    other = replace(rl.load_config(), warmup_steps=7)
    _stack(_stack_dir(tmp_path, ["0/0"], other), ["0/0"], {"50": [6.9]}, [5.0])
    _metrics(tmp_path, "0", 0, 0.99, 1.0, cfg=other)
    again = rl.collect(tmp_path, rl.load_config())
    assert again.sort_values(list(again.columns)).values.tolist() == df.sort_values(list(df.columns)).values.tolist()
    theirs = rl.collect(tmp_path, other)
    assert set(zip(theirs.experiment, theirs.seed)) == {("0", 0)}
    assert theirs[theirs.metric == "pretrain_loss"].value.tolist() == [6.9]
    assert theirs[(theirs.metric == "accuracy") & (theirs.language == "en")].value.tolist() == [0.99]
    # every curve of the folder together: two of 0/0, refused
    with pytest.raises(ConfigError, match="two pretraining curves"):
        rl.pretraining_curves(tmp_path)


def test_unigram_entropies_joint_and_given_the_language_on_a_hand_made_corpus(monkeypatch):
    # English verses hold pieces 5 and 6 equally often, German verses piece 7 alone; [CLS]=2, [SEP]=3, pad 0.
    # Content pieces: en 5, 6, 5, 6 and de 7, 7, 7, 7: joint (1/4, 1/4, 1/2) -> 1.5 ln 2; given the language
    # 1/2 * ln 2 + 1/2 * 0 = 0.5 ln 2.
    ids = np.array([[2, 5, 6, 3], [2, 5, 6, 3], [2, 7, 7, 3], [2, 7, 7, 3]])
    corpus = rl.PretrainSet(ids=ids, lengths=np.array([4, 4, 4, 4]), lang=np.array([0, 0, 1, 1]))
    monkeypatch.setattr(rl, "load_prepared", lambda *a, **k: (None, None, None))
    monkeypatch.setattr(rl, "pretrain_set", lambda *a, **k: corpus)
    cfg = rl.Table3Config(languages=("en", "de"), inv_order_language="de")
    joint, given = rl.unigram_entropies(cfg, rl.table3_experiment("0", rl.load_config()))
    assert joint == pytest.approx(1.5 * np.log(2)) and given == pytest.approx(0.5 * np.log(2))
    # a padded, shorter verse: padding and the specials are not pieces the pretraining predicts
    corpus.ids = np.array([[2, 5, 3, 0], [2, 6, 3, 0], [2, 7, 7, 3], [2, 7, 7, 3]])
    corpus.lengths = np.array([3, 3, 4, 4])
    joint, given = rl.unigram_entropies(cfg, rl.table3_experiment("0", rl.load_config()))
    # en 5, 6 and de 7 x4: joint (1/6, 1/6, 2/3); given: 2/6 * ln 2
    assert joint == pytest.approx(-(2 / 6) * np.log(1 / 6) - (2 / 3) * np.log(2 / 3))
    assert given == pytest.approx(np.log(2) / 3)


PILOT = rl.Table3Pilot(models=("0", "30"), seed=0, margin=2.0, variants=(
    rl.PilotVariant("paper-rate", 1e-4), rl.PilotVariant("long-warmup", 5e-4, warmup_steps=30)))


def _pilot_rows(variant, model, loss, given=6.0):
    return [{"experiment": f"{model}@{variant}", "seed": 0, "metric": m, "language": "all", "value": v}
            for m, v in (("pretrain_loss", loss), ("unigram_entropy", given), ("unigram_entropy_joint", given + 1))]


def test_the_pilot_is_declared_with_the_paper_s_rate_first_and_checked():
    declared = rl.load_pilot()
    assert declared.variants[0].lr == 1e-4 and declared.variants[0].warmup_steps is None
    assert declared.models == ("0", "30") and declared.margin == 2.0
    with pytest.raises(ConfigError, match="distinct names"):
        rl.Table3Pilot(variants=(rl.PilotVariant("a", 1e-4), rl.PilotVariant("a", 2e-4)))
    with pytest.raises(ConfigError, match="lr > 0"):
        rl.Table3Pilot(variants=(rl.PilotVariant("a", 0.0),))
    with pytest.raises(ConfigError, match="folder names"):
        rl.Table3Pilot(variants=(rl.PilotVariant("../x", 1e-4),))
    # the longer warm-up is a tenth of the pretraining's steps
    from xlrepro.data.multilingual import load_verses
    cfg = rl.load_config()
    steps = cfg.epochs * (sum(len(load_verses(l, "train")) for l in cfg.languages) // cfg.batch_size)
    assert declared.variants[1].warmup_steps == round(steps / 10)
    cfg = rl.pilot_config(rl.load_config(), declared.variants[1])
    assert cfg.size["lr"] == 5e-4 and cfg.warmup_steps == 295 and cfg.size["hidden"] == rl.load_config().size["hidden"]
    # --recipe names a variant: its rate and warm-up, nothing else; none leaves the configuration as it is
    assert rl.recipe_config(rl.load_config(), "long-warmup") == cfg
    paper = rl.recipe_config(rl.load_config(), "paper-rate")
    assert paper.size["lr"] == 1e-4 and paper.warmup_steps is None and paper.epochs == rl.load_config().epochs
    assert rl.recipe_config(rl.load_config(), None) == rl.load_config()
    with pytest.raises(ConfigError, match="paper-rate, long-warmup; got 'x'"):
        rl.recipe_config(rl.load_config(), "x")


def test_the_pilot_chooses_the_first_variant_every_model_passes_and_never_one_after_a_variant_not_run():
    import pandas as pd
    # paper-rate: model 30 at 4.5 > 6.0 - 2; long-warmup: both at least 2 below
    results = pd.DataFrame(_pilot_rows("paper-rate", "0", 3.9) + _pilot_rows("paper-rate", "30", 4.5)
                           + _pilot_rows("long-warmup", "0", 3.0) + _pilot_rows("long-warmup", "30", 4.0))
    gate, chosen, outcome = rl.pilot_choice(PILOT, results)
    assert (chosen, outcome) == ("long-warmup", rl.PILOT_CHOSEN)
    assert gate.values.tolist() == [["paper-rate", "0", 3.9, 6.0, True], ["paper-rate", "30", 4.5, 6.0, False],
                                    ["long-warmup", "0", 3.0, 6.0, True], ["long-warmup", "30", 4.0, 6.0, True]]
    # both pass under the paper's rate: it comes first, so it is chosen
    first = pd.DataFrame(_pilot_rows("paper-rate", "0", 3.0) + _pilot_rows("paper-rate", "30", 3.5)
                         + _pilot_rows("long-warmup", "0", 3.0) + _pilot_rows("long-warmup", "30", 3.0))
    assert rl.pilot_choice(PILOT, first)[1:] == ("paper-rate", rl.PILOT_CHOSEN)
    # exactly 2 nats below passes (loss 4.0 against 6.0)
    edge = pd.DataFrame(_pilot_rows("paper-rate", "0", 4.0) + _pilot_rows("paper-rate", "30", 4.0))
    assert rl.pilot_choice(PILOT, edge)[1] == "paper-rate"
    # the paper's rate not run yet: nothing is chosen, even though the second variant passes
    later = pd.DataFrame(_pilot_rows("long-warmup", "0", 3.0) + _pilot_rows("long-warmup", "30", 3.0))
    gate, chosen, outcome = rl.pilot_choice(PILOT, later)
    assert chosen is None and gate.empty and outcome == rl.PILOT_NOT_RUN
    # every variant judged and none passed: said so, not "not run"
    failed = pd.DataFrame(_pilot_rows("paper-rate", "0", 5.0) + _pilot_rows("paper-rate", "30", 3.0)
                          + _pilot_rows("long-warmup", "0", 3.0) + _pilot_rows("long-warmup", "30", 4.5))
    gate, chosen, outcome = rl.pilot_choice(PILOT, failed)
    assert chosen is None and outcome == rl.PILOT_NONE_PASSED and gate.passed.tolist() == [False, True, True, False]
    assert rl.pilot_choice(PILOT, failed.iloc[:0])[2] == rl.PILOT_NOT_RUN


def test_the_table3_run_keys_stay_as_before_without_a_warmup_of_their_own():
    from xlrepro.runkeys import run_key
    # model 0, seed 42 of the rate-grid run (50 warm-up steps, no warmup_steps of its own) and of the published run
    # (the pilot's long-warmup variant, which experiments.yaml made the default): their folders
    # runs/dufter2020-table3/lab/0/42/<key>
    lab = rl.load_config()
    before = replace(lab, warmup_steps=None)
    assert run_key(rl.member_config(before, rl.table3_experiment("0", lab), 42, False)) == "407f75e9366a0089"
    assert run_key(rl.member_config(lab, rl.table3_experiment("0", lab), 42, False)) == "52aa1465ccd18119"
    assert rl.recipe_config(before, "long-warmup") == lab  # what --recipe long-warmup ran
    cfg = rl.load_config(smoke=True)
    exp = rl.table3_experiment("0", cfg)
    assert "warmup_steps" not in rl.member_config(cfg, exp, 0, True)["table3"]
    longer = rl.pilot_config(cfg, rl.PilotVariant("w", cfg.size["lr"], warmup_steps=7))
    assert rl.member_config(longer, exp, 0, True)["table3"]["warmup_steps"] == 7


@pytest.mark.slow
def test_a_tiny_pilot_pretrains_each_variant_in_its_own_folder_with_its_warmup(tmp_path, monkeypatch):
    import pandas as pd
    from xlrepro.engine import pretrain
    root = tmp_path / "run"
    seen = []
    new_stack = pretrain.new_stack
    monkeypatch.setattr(pretrain, "new_stack", lambda models, optim, *a, **k: seen.append(
        (optim.lr, optim.warmup_steps)) or new_stack(models, optim, *a, **k))
    cfg = rl.load_config(smoke=True)
    assert rl.run_pilot(PILOT, cfg, root, "cpu", smoke=True, progress=False)
    chapter_warmup = rl.load_chapter().training.warmup_steps
    assert seen == [(1e-4, chapter_warmup), (5e-4, 30)]
    results, curves = rl.collect_pilot(PILOT, cfg, root, smoke=True)
    assert sorted(set(results.experiment)) == ["0@long-warmup", "0@paper-rate", "30@long-warmup", "30@paper-rate"]
    assert set(curves.experiment) == set(results.experiment)
    # each of a stack's two members is given half its GPU time
    import json
    timing = rl.pilot_finished(PILOT, cfg, root, PILOT.variants[0], smoke=True) / "timing.json"
    half = round(sum(r["seconds"] for r in json.loads(timing.read_text())) / 2, 1)
    gpu = results[(results.metric == "pretrain_gpu_seconds") & results.experiment.str.endswith("@paper-rate")]
    assert gpu.value.tolist() == [half, half]
    # the Table 3 run's own folder holds no pilot stack, so its collect is not disturbed
    assert not (root / "stacks").exists()
    assert rl.run_pilot(PILOT, cfg, root, "cpu", smoke=True, progress=False)  # done: nothing trains again
    assert len(seen) == 2
    # a variant whose stack has not finished (a checkpoint left, as a stopped run leaves it) is not judged
    folder = rl.pilot_finished(PILOT, cfg, root, PILOT.variants[0], smoke=True)
    (folder / "checkpoint.pt").write_bytes(b"")
    results, _ = rl.collect_pilot(PILOT, cfg, root, smoke=True)
    assert sorted(set(results.experiment)) == ["0@long-warmup", "30@long-warmup"]
    assert rl.pilot_choice(PILOT, results)[2] == rl.PILOT_NOT_RUN
    # the records alone (the weights left on the training machine): a stack whose timing reached its last step is
    # finished, one stopped before it is not
    (folder / "checkpoint.pt").unlink()
    weights = [f for m in PILOT.models for f in (rl.pilot_root(root, PILOT.variants[0]) / m).glob("*/*/model.safetensors")]
    assert len(weights) == 2
    for f in weights:
        f.unlink()
    assert rl.pilot_finished(PILOT, cfg, root, PILOT.variants[0], smoke=True) == folder
    record = json.loads((folder / "timing.json").read_text())
    record[-1]["reached_step"] = record[-1]["total_steps"] - 1
    (folder / "timing.json").write_text(json.dumps(record))
    assert rl.pilot_finished(PILOT, cfg, root, PILOT.variants[0], smoke=True) is None
    # a record that says neither step is no evidence of the last one
    (folder / "timing.json").write_text(json.dumps([{"seconds": 1.0}]))
    assert rl.pilot_finished(PILOT, cfg, root, PILOT.variants[0], smoke=True) is None
