"""Wu & Dredze 2019 plan and runs (xlrepro/transfer.py), on the plan's "smoke" encoder and the session's prepared
cache (conftest's `multilingual_cache`; pretraining and every fine-tuning run take seconds on a CPU)."""
import dataclasses
import json
import time

import pytest

import xlrepro.papers.wu2019.transfer as tr
from xlrepro.config import ConfigError, ModelSize
from xlrepro.training.finetune import FinetuneConfig

SMOKE_LANGS = ["en", "fr", "de", "es"]


def test_load_plan_fields():
    plan = tr.load_plan()
    assert plan.train_language == "en"
    assert plan.seeds == [0, 1, 2]
    assert plan.lr_grid == [1e-4, 2e-4, 5e-4]
    assert plan.recipe == {"batch_size": 32, "epochs": 3, "warmup": 0.1, "beta2": 0.99, "weight_decay": 0.01,
                           "max_length": 128}
    assert plan.freeze_fractions == [0, 0.25, 0.5, 0.75]
    assert plan.feature_lr == 1e-3
    assert plan.probe == {"train_per_language": 2000, "test_per_language": 1000}
    assert set(plan.models) == {"lab", "smoke"}
    FinetuneConfig(lr=plan.lr_grid[0], **plan.recipe)  # the recipe is a valid fine-tuning config


def test_freeze_levels():
    plan = tr.load_plan()
    assert plan.freeze_levels(4) == [0, 1, 2, 3]
    assert plan.freeze_levels(12) == [0, 3, 6, 9]  # the paper's mBERT: 0, 3, 6, 9 of 12


def test_mini_mbert_for_the_plan_models():
    plan = tr.load_plan()
    config, max_sentences = tr.mini_mbert_for(plan, "smoke")
    assert config.languages == tuple(SMOKE_LANGS)
    assert config.size == ModelSize("smoke", 32, 2, 2, 64, 1e-3)
    assert (config.vocab_size, config.steps, config.batch_size, max_sentences) == (1000, 30, 32, 300)
    lab_config, lab_max = tr.mini_mbert_for(plan, "lab")
    assert lab_max is None and lab_config.size.hidden == 256 and lab_config.size.layers == 4
    with pytest.raises(ConfigError, match="lab, smoke"):
        tr.mini_mbert_for(plan, "nope")


def test_chapter_lab_checks_the_profile_before_building(monkeypatch):
    def expensive(*a, **kw):
        raise AssertionError("TransferLab was built before the profile was checked")

    monkeypatch.setattr(tr, "TransferLab", expensive)
    with pytest.raises(ConfigError, match="XNLI"):
        tr.chapter_lab(profile="paper")
    with pytest.raises(ConfigError, match="lab, paper"):
        tr.chapter_lab(profile="nope")


# --- a real lab on the smoke encoder ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lab(tmp_path_factory, multilingual_cache):  # the smoke encoder is pretrained once, also for the notebooks
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XLREPRO_RUNS", str(tmp_path_factory.mktemp("xlrepro-wu2019-runs")))
        lab = tr.TransferLab(model="smoke", device="cpu", languages=["fr", "de", "es"], max_train_pairs=48,
                             max_test_pairs=24, epochs=1, progress=False)
        yield lab


def test_lab_setup(lab):
    assert lab.languages == ["en", "fr", "de", "es"]  # the training language comes first
    assert lab.depth == 2
    assert lab.root == tr.runs_dir() / "wu2019" / "smoke-tr48-te24-e1"
    assert (lab.model_dir / "training.json").exists()
    assert lab.config(1e-4, 2) == FinetuneConfig(lr=1e-4, seed=2, batch_size=32, epochs=1, warmup=0.1, beta2=0.99,
                                                 weight_decay=0.01, max_length=128)
    # test sets are translations: the same keys in every language
    keys = {lang: list(zip(*(lab.pairs(lang, "test")[c] for c in ("book", "chapter", "verse")))) for lang in lab.languages}
    assert len(keys["en"]) == 24 and all(k == keys["en"] for k in keys.values())


def test_run_part_rejects_bad_parts_and_shards(lab):
    with pytest.raises(ConfigError, match="select, zero-shot, in-language, frozen, all"):
        tr.run_part("nope", lab)
    for shard in ((2, 2), (3, 2), (-1, 2), (0, 0)):
        with pytest.raises(ConfigError, match="shard"):
            tr.run_part("select", lab, shard=shard)


def test_run_part_shards_the_jobs(lab, monkeypatch):
    ran = []
    monkeypatch.setattr(lab, "run", lambda config, train, tests: ran.append((config.lr, train, tests)))
    tr.run_part("select", lab, shard=(1, 2))
    assert ran == [(2e-4, "en", None)]  # job 1 of [1e-4, 2e-4, 5e-4]
    ran.clear()
    tr.run_part("select", lab, shard=(0, 2))
    assert ran == [(1e-4, "en", None), (5e-4, "en", None)]


def test_jobs_and_the_cache(lab, monkeypatch):
    plan = lab.plan
    select = lab.jobs("select")
    assert select == [(lab.config(lr, 0), "en", None) for lr in plan.lr_grid]

    selection = lab.selection()  # runs the three selection fine-tunings
    assert selection["lr"].tolist() == plan.lr_grid
    for lr, acc in zip(selection["lr"], selection["dev_accuracy"]):
        saved = json.loads(lab._path(lab.config(lr, 0), "en").read_text())
        assert saved["dev_accuracy"] == acc and set(saved["test"]) == set(lab.languages)
        assert saved["config"] == lab.config(lr, 0).to_json()
    best = max(plan.lr_grid, key=lambda lr: (selection.set_index("lr").loc[lr, "dev_accuracy"], -plan.lr_grid.index(lr)))
    lr = lab.selected_lr()
    assert lr == best

    levels = plan.freeze_levels(2)
    assert levels == [0, 1, 2]
    expected = [(lab.config(lr, s), "en", None) for s in plan.seeds]
    for s in plan.seeds:
        expected += [(lab.config(lr, s, freeze=n), "en", None) for n in levels]
        expected.append((lab.config(plan.feature_lr, s, feature_based=True), "en", None))
    assert plan.in_language_seeds == [0, 1, 2]  # the in-language upper bound has the plan's three seeds
    expected += [(lab.config(lr, s), lang, [lang]) for s in plan.in_language_seeds for lang in lab.languages]
    jobs = lab.jobs("all")
    assert jobs == expected
    assert len(jobs) == 3 + 3 * (3 + 1) + 3 * 4
    assert lab.jobs("zero-shot") + lab.jobs("frozen") + lab.jobs("in-language") == jobs
    assert lab.jobs("in-language", ["de"]) == [(lab.config(lr, s), "de", ["de"]) for s in (0, 1, 2)]

    # a cached run is read back, never retrained
    config = lab.config(plan.lr_grid[0], 0)
    path = lab._path(config, "en")

    def no_training(*a, **kw):
        raise AssertionError("a cached run was fine-tuned again")

    monkeypatch.setattr(tr, "finetune", no_training)
    assert lab.run(config) == json.loads(path.read_text())
    assert lab.run(config, "en", ["fr"]) == json.loads(path.read_text())
    # ... but a cached run that lacks a requested test language is run again
    fr_path = lab._path(config, "fr")
    fr_path.parent.mkdir(parents=True, exist_ok=True)
    fr_path.write_text(json.dumps({**json.loads(path.read_text()), "train_language": "fr",
                                   "test": {"fr": {"accuracy": 0.5, "macro_f1": 0.5}}}))
    assert lab.run(config, "fr", ["fr"])["test"] == {"fr": {"accuracy": 0.5, "macro_f1": 0.5}}
    with pytest.raises(AssertionError, match="fine-tuned again"):
        lab.run(config, "fr", ["fr", "de"])


def test_a_feature_based_run_is_cached_under_its_mode(lab):
    config = lab.config(lab.plan.feature_lr, 1, feature_based=True)
    result = lab.run(config, "en", ["en", "es"])
    path = lab._path(config, "en")
    assert path.parent.name == "feature-based" and path.name.startswith("lr0.001-seed1-")
    assert json.loads(path.read_text()) == result
    assert set(result["test"]) == {"en", "es"} and result["history"]["steps"] == 2  # 48 pairs / 32, one epoch
    for scores in result["test"].values():
        assert 0 <= scores["accuracy"] <= 1 and 0 <= scores["macro_f1"] <= 1
    timings = lab.timings()
    assert ("feature-based", "lr0.001-seed1") in set(zip(timings["mode"], timings["run"]))


def test_selected_lr_is_the_best_on_english_dev(lab, monkeypatch):
    import pandas as pd

    grid = lab.plan.lr_grid
    monkeypatch.setattr(lab, "selection", lambda: pd.DataFrame({"lr": grid, "dev_accuracy": [0.3, 0.5, 0.4]}))
    assert lab.selected_lr() == 2e-4
    assert [c.lr for c, _, _ in lab.jobs("zero-shot")] == [2e-4] * 3
    assert [(c.lr, c.mode) for c, _, _ in lab.jobs("frozen") if c.seed == 0] == [
        (2e-4, "freeze-0"), (2e-4, "freeze-1"), (2e-4, "freeze-2"), (1e-3, "feature-based")]
    monkeypatch.setattr(lab, "selection", lambda: pd.DataFrame({"lr": grid, "dev_accuracy": [0.2, 0.6, 0.6]}))
    assert lab.selected_lr() == 2e-4  # ties: the first (smallest) rate


def _run_once(lab):
    lab.run(lab.config(1e-4, 0))


def test_parallel_shards_train_one_job_once(tmp_path, monkeypatch, in_processes):
    lab = object.__new__(tr.TransferLab)  # no encoder: fine-tuning is faked, only the cache matters
    lab.plan, lab.languages, lab.root, lab.device, lab.encoder = tr.load_plan(), ["en", "fr"], tmp_path, "cpu", None
    lab.epochs, lab.progress, lab.data = None, False, lambda lang, split: None
    lab.model_dir, lab.max_train_pairs, lab.max_test_pairs = tmp_path / "encoder", None, None

    def slow_finetune(*a, **kw):
        with open(tmp_path / "trainings", "a") as f:
            f.write("x")
        time.sleep(0.2)
        return None, {"dev_accuracy": [0.5]}

    monkeypatch.setattr(tr, "finetune", slow_finetune)
    monkeypatch.setattr(tr, "evaluate", lambda *a: (0.75, 0.5))
    monkeypatch.setattr(tr, "device_name", lambda device: "cpu")
    assert in_processes(_run_once, [(lab,)] * 3) == [0, 0, 0]
    assert (tmp_path / "trainings").read_text() == "x"
    saved = json.loads(lab._path(lab.config(1e-4, 0), "en").read_text())
    assert saved["test"] == {"en": {"accuracy": 0.75, "macro_f1": 0.5}, "fr": {"accuracy": 0.75, "macro_f1": 0.5}}


def test_any_changed_setting_gets_its_own_cache_file_and_the_same_setting_the_same(lab):
    base = lab.config(1e-4, 0)
    assert lab._path(base, "en") == lab._path(lab.config(1e-4, 0), "en")
    others = [lab.config(1e-4, 0, dropout=0.3), lab.config(1e-4, 0, epochs=5), lab.config(2e-4, 0),
              lab.config(1e-4, 1)]
    paths = {lab._path(c, "en") for c in others} | {lab._path(base, "en"), lab._path(base, "fr")}
    assert len(paths) == 6  # dropout and epochs were ignored by the old cache (and epochs raised TypeError)
    assert lab.config(1e-4, 0, epochs=5).epochs == 5


def test_in_language_without_training_lists_the_missing_runs_as_pending(lab, monkeypatch):
    def no_training(*a, **kw):
        raise AssertionError("train_missing=False fine-tuned a run")

    monkeypatch.setattr(lab, "selected_lr", lambda: 3e-4)  # no other test caches this rate
    monkeypatch.setattr(tr, "finetune", no_training)
    monkeypatch.setattr(lab, "pending_runs", [])
    cached = lab.config(3e-4, 1)
    path = lab._path(cached, "de")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"test": {"de": {"accuracy": 0.5, "macro_f1": 0.4}}}))
    try:
        frame = lab.in_language(["de", "fr"], train_missing=False)
    finally:
        path.unlink()
    assert frame[["experiment", "seed", "language", "metric", "value"]].values.tolist() == [
        ["in-language", 1, "de", "accuracy", 0.5], ["in-language", 1, "de", "macro_f1", 0.4]]
    assert sorted(lab.pending_runs) == [("de", 0), ("de", 2), ("fr", 0), ("fr", 1), ("fr", 2)]
    from xlrepro.papers.wu2019.differences import pending_note
    assert pending_note(lab).startswith("**In-language upper bound: 5 runs pending the GPU run** (seeds 0, 1, 2 in 2 "
                                        "languages)")
    assert "xlrepro train wu2019 --part in-language" in pending_note(lab)


def _bare_lab(tmp_path, languages):
    """A lab without an encoder: only the plan, the languages and the run cache, for the frames read from it."""
    lab = object.__new__(tr.TransferLab)
    lab.plan, lab.languages, lab.root, lab.encoder = tr.load_plan(), list(languages), tmp_path, None
    lab.device = tr.torch.device("cpu")
    lab.epochs, lab.progress, lab.pending_runs, lab.model = None, False, [], "smoke"
    lab.model_dir, lab.max_train_pairs, lab.max_test_pairs = tmp_path / "encoder", None, None
    return lab


def _cache(lab, config, train, test):
    path = lab._path(config, train)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"test": {lang: {"accuracy": acc, "macro_f1": acc - 0.1} for lang, acc in test.items()}}))


def test_in_language_rows_hold_each_run_s_own_language_only(tmp_path, monkeypatch):
    # The English in-language run is the English zero-shot run: its cached result is tested in every language,
    # and only its English scores are in-language ones.
    lab = _bare_lab(tmp_path, ["en", "fr", "de"])
    lab.plan = dataclasses.replace(lab.plan, in_language_seeds=[0])
    monkeypatch.setattr(lab, "selected_lr", lambda: 2e-4)
    monkeypatch.setattr(tr, "finetune", lambda *a, **kw: pytest.fail("a cached run was fine-tuned again"))
    config = lab.config(2e-4, 0)
    _cache(lab, config, "en", {"en": 0.875, "fr": 0.375, "de": 0.25, "es": 0.5})  # es: not one of the lab's
    _cache(lab, config, "fr", {"fr": 0.75})
    _cache(lab, config, "de", {"de": 0.625})

    upper = lab.in_language()
    assert upper[["experiment", "seed", "language", "metric", "value"]].values.tolist() == [
        ["in-language", 0, "en", "accuracy", 0.875], ["in-language", 0, "en", "macro_f1", 0.775],
        ["in-language", 0, "fr", "accuracy", 0.75], ["in-language", 0, "fr", "macro_f1", 0.65],
        ["in-language", 0, "de", "accuracy", 0.625], ["in-language", 0, "de", "macro_f1", 0.525]]
    # the zero-shot frame reads the same English run, in the lab's languages (not the cached es)
    zero = lab.zero_shot(seeds=[0])
    assert zero[zero["metric"] == "accuracy"][["language", "value"]].values.tolist() == [
        ["en", 0.875], ["fr", 0.375], ["de", 0.25]]
