"""The grid on a CPU: stacks plan, an interrupted run resumes, bad parameters name the valid choices."""
import json

import pytest

from xlrepro.config import ConfigError, check_seeds
from xlrepro.papers.dufter2020.config import load_chapter
from xlrepro.papers.dufter2020.report import chapter_run
from xlrepro.engine.planner import stack_compile
from xlrepro.papers.dufter2020.grid import (grid_members, is_done, member_dir, parse_max_stack, plan_stacks,
                                            run_grid)

TINY = dict(epochs=2, max_sentences=24, batch_size=8)


def test_plan_groups_by_size_corpus_and_training():
    ch = load_chapter("dufter2020")
    members = grid_members(ch, ["0", "1", "15", "21", "18"], [0, 42], large_seeds=[0])
    stacks = plan_stacks(members, {"small": 3, "base": 1})
    keys = sorted(tuple(m.key for m in s) for s in stacks)
    assert keys == [("0/0", "1/0"), ("0/42", "1/42"), ("15/0",), ("18/0", "18/42"), ("21/0", "21/42")]


def test_compiled_stacks_are_larger_on_a_gpu(monkeypatch):
    ch = load_chapter("dufter2020")
    members = grid_members(ch, ["0", "1", "2", "4", "5", "6", "7", "8", "3", "9", "15", "16"], list(ch.seeds))
    sizes = lambda: sorted(len(s) for s in plan_stacks(members))
    assert sizes() == [1] * 10 + [16, 17, 17]  # the eager engine: at most 20 small or 1 base model per stack, equal
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    sizes = lambda: sorted(len(s) for s in plan_stacks(members, compile=True))
    monkeypatch.setattr("torch.cuda.device_count", lambda: 1)
    gpu = lambda gb: type("Props", (), {"total_memory": gb * 2**30})
    monkeypatch.setattr("torch.cuda.get_device_properties", lambda i: gpu(139))  # an H200
    assert sizes() == [5, 5, 50]  # fused and compiled: up to 50 small or 5 base models
    two_gpus = sorted(len(s) for s in plan_stacks(members, gpus=2, compile=True))
    assert two_gpus == [5, 5, 25, 25]  # the 50 small models are split so that both GPUs work
    monkeypatch.setattr("torch.cuda.get_device_properties", lambda i: gpu(79))  # an H100: 50 ran out of memory
    assert sizes() == [5, 5, 25, 25]
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert sizes() == [1] * 10 + [16, 17, 17]  # no compiling on the CPU


def test_interrupted_training_resumes(tmp_path):
    args = dict(root=tmp_path, device="cpu", progress=False, **TINY)
    assert run_grid("dufter2020", ["0", "3"], [0], time_limit=0.01, **args) is False
    assert list(tmp_path.glob("stacks/*/checkpoint.pt"))  # stopped at a checkpoint, nothing marked done
    ch = load_chapter("dufter2020")
    member = lambda e: grid_members(ch, [e], [0], **TINY)[0]
    assert not is_done(tmp_path, member("0"))
    assert run_grid("dufter2020", ["0", "3"], [0], **args) is True
    assert not list(tmp_path.glob("stacks/*/checkpoint.pt"))
    result = json.loads((member_dir(tmp_path, member("3")) / "metrics.json").read_text())
    assert result["steps"] == 2 * (48 // 8)  # 24 sentences in two languages, batch 8, 2 epochs
    saved = json.loads((member_dir(tmp_path, member("3")) / "config.json").read_text())
    assert saved["key"] == member("3").run_key and saved["config"]["experiment"]["inv_order"] is True
    assert set(result["metrics"]) >= {"mu", "align_l0", "retr_l8", "trans_l0", "ppl_train", "ppl_dev"}
    curve = json.loads((member_dir(tmp_path, member("0")) / "curve.json").read_text())
    assert curve[0]["step"] == 0 and curve[-1]["step"] == result["steps"]
    # a finished grid is not trained again
    assert run_grid("dufter2020", ["0", "3"], [0], **args) is True
    check_vocabulary_record(tmp_path, ch, member("3"))


def check_vocabulary_record(root, ch, m):
    """The run records its vocabulary (not in its key); load_model checks it against the cache's tokenizer."""
    import shutil

    from tokenizers import Tokenizer

    from xlrepro.papers.dufter2020.lab import load_lab
    from xlrepro.papers.dufter2020.report import UNFINGERPRINTED, VocabularyMismatch, load_model
    from xlrepro.tokenization import vocab_fingerprint
    lab = load_lab("lab")
    fp = vocab_fingerprint(lab.fe.tokenizer)
    folder = member_dir(root, m)
    saved, result = (json.loads((folder / f).read_text()) for f in ("config.json", "metrics.json"))
    assert saved["recorded"] == {"vocabulary": fp} and result["vocabulary"] == fp
    assert "vocabulary" not in json.dumps(saved["config"]) and saved["key"] == m.run_key == folder.name
    loaded = load_model(root, ch, m, lab.fe.vocab_size, lab.fe.tokenizer)
    assert loaded.note is None and not loaded.model.training
    # the same pieces with two ids swapped: another vocabulary, named in the error beside the run's
    j = json.loads(lab.fe.tokenizer.to_str())
    v = j["model"]["vocab"]
    a, b = sorted(v, key=v.get)[10:12]
    v[a], v[b] = v[b], v[a]
    other = Tokenizer.from_str(json.dumps(j))
    with pytest.raises(VocabularyMismatch, match=f"{fp}.*{vocab_fingerprint(other)}"):
        load_model(root, ch, m, lab.fe.vocab_size, other)
    # a run from before fingerprints (no record in either file): loads, with the note for the chapter
    shutil.copytree(root, root.parent / f"{root.name}-old", dirs_exist_ok=True)
    old = member_dir(root.parent / f"{root.name}-old", m)
    for f in ("config.json", "metrics.json"):
        d = json.loads((old / f).read_text())
        d.pop("recorded", None), d.pop("vocabulary", None)
        (old / f).write_text(json.dumps(d))
    loaded = load_model(root.parent / f"{root.name}-old", ch, m, lab.fe.vocab_size, other)
    assert loaded.note == f"model {m.key}: {UNFINGERPRINTED}"


def test_max_stack_option_spreads_the_base_models_evenly():
    assert parse_max_stack(["base=3", "small=7"]) == {"base": 3, "small": 7}
    for bad in ("huge=3", "base=0", "base=x", "base"):
        with pytest.raises(ConfigError, match=r"SIZE one of \['base', 'small'\]"):
            parse_max_stack([bad])
    ch = load_chapter("dufter2020")
    members = grid_members(ch, ["15", "16", "17"], list(ch.seeds))  # 15 models, in the order 15/0, 15/42, ...
    stacks = plan_stacks(members, parse_max_stack(["base=3"]), gpus=3)
    keys = [tuple(m.key for m in s) for s in stacks]
    # five stacks of three would leave a GPU idle: six stacks (a multiple of 3 GPUs), dealt in turn
    assert keys == [("15/0", "16/42", "17/43"), ("15/42", "16/43", "17/100"), ("15/43", "16/100", "17/101"),
                    ("15/100", "16/101"), ("15/101", "17/0"), ("16/0", "17/42")]
    assert [len(s) for s in plan_stacks(members, parse_max_stack(["base=3"]), gpus=4)] == [2] * 7 + [1]
    assert [len(s) for s in plan_stacks(members, {"base": 5}, gpus=2)] == [4, 4, 4, 3]  # not 5 + 5 | 5
    assert [len(s) for s in plan_stacks(members, {"base": 5}, gpus=1)] == [5, 5, 5]
    assert [len(s) for s in plan_stacks(members[:2], {"base": 5}, gpus=4)] == [1, 1]  # never an empty stack


def test_the_longest_stacks_are_handed_out_first():
    from xlrepro.papers.dufter2020.grid import _cost

    ch = load_chapter("dufter2020")
    members = grid_members(ch, ["0", "15", "17-250", "21", "18"], list(ch.seeds))
    stacks = plan_stacks(members, {"small": 50, "base": 5}, gpus=2)
    order = [(s[0].exp.id, len(s)) for s in sorted(stacks, key=lambda s: _cost(s, True), reverse=True)]
    # 3 x 250 and 2 x 250 BERT-base epochs, then 3 x 100 and 2 x 100; 21 trains 200 epochs on half the corpus
    # (the same updates as 100 epochs of 0); the untrained models last
    assert order == [("17-250", 3), ("17-250", 2), ("15", 3), ("15", 2), ("0", 3), ("21", 3), ("0", 2), ("21", 2),
                     ("18", 5)]


def test_a_stack_of_one_model_is_compiled_when_asked(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert stack_compile(True, "cuda:0", 2) == "regional"
    assert stack_compile(True, "cuda:0", 1, "small") == "regional"  # with persistent reductions off (next test)
    assert stack_compile(True, "cuda:0", 1, "base") == "regional"  # BERT-base alone compiles (and runs 2x faster)
    assert stack_compile(None, "cuda:0", 1, "base") is None  # compiling is still asked for
    assert stack_compile(None, "cuda:0", 3) is None
    monkeypatch.setattr("xlrepro.engine.planner.ONE_MODEL_COMPILES", ("base",))
    assert stack_compile(True, "cuda:0", 1, "small") is None  # a size left out trains eagerly
    with pytest.raises(ValueError, match="valid values are"):
        stack_compile("fast", "cuda:0", 1)  # a bad value still fails, whatever the stack's size


def test_only_a_stack_of_one_small_model_turns_persistent_reductions_off(monkeypatch):
    """Its attention backward took minutes to compile with them (H200): the stack of one BERT-small model alone gets
    `Levers(persistent_reductions=False)`, which reaches torch.compile as an Inductor option; other stacks keep the
    default levers (None) unless `linear` asks for others."""
    from xlrepro.papers.dufter2020 import grid
    from xlrepro.papers.dufter2020.lab import load_lab
    from xlrepro.engine.fused_bert import Levers, inductor_options

    assert inductor_options(Levers(persistent_reductions=False)) == {"triton.persistent_reductions": False}
    assert inductor_options(Levers(persistent_reductions=False, autotune=True)) == {
        "max_autotune_gemm": True, "triton.persistent_reductions": False}
    seen = []

    class Built(Exception):
        pass

    def model_stack(*args, levers=None, **kwargs):  # records the levers, then stops before any training
        seen.append(levers)
        raise Built

    monkeypatch.setattr(grid, "new_stack", model_stack)
    ch, lab = load_chapter("dufter2020"), load_lab()
    members = lambda ids, seeds: grid_members(ch, ids, seeds, epochs=1, max_sentences=8, batch_size=4)
    for ms, linear in [(members(["0"], [0]), "baddbmm"), (members(["0"], [0, 42]), "baddbmm"),
                       (members(["15"], [0]), "baddbmm"), (members(["0"], [0, 42]), "mm")]:
        run = grid.StackRun(ch, ms, lab, "/tmp/unused", "cpu", epochs=1, max_sentences=8, batch_size=4, linear=linear)
        with pytest.raises(Built):
            run._new_stack()
    assert seen == [Levers(persistent_reductions=False), None, None, Levers(linear="mm")]


def test_bad_parameters_name_the_valid_choices():
    ch = load_chapter("dufter2020")
    with pytest.raises(ConfigError, match="unknown model ID '99'; valid choices: 0, 1, 2"):
        ch.experiment("99")
    with pytest.raises(ConfigError, match=r"valid layers are 0\.\.12"):
        ch.check_layer(ch.experiment("0"), 13)
    with pytest.raises(ConfigError, match="non-empty list of integers"):
        check_seeds(0)
    with pytest.raises(ConfigError, match="non-empty list"):
        check_seeds("[0, 42]")
    with pytest.raises(ConfigError, match="unknown profile 'wiki'; valid choices: lab, paper"):
        chapter_run("dufter2020", profile="wiki")
    with pytest.raises(ConfigError, match="unknown chapter"):
        load_chapter("dufter2021")
    with pytest.raises(ValueError, match="epochs must be None"):
        chapter_run("dufter2020", epochs=0)


def test_only_the_published_run_writes_the_book_results():
    published, full, smoke = chapter_run("dufter2020", publish=True), chapter_run("dufter2020"), \
        chapter_run("dufter2020", epochs=1)
    assert published.results.parts[-3:] == ("book", "results", "dufter2020")
    assert full.results == full.root / "results" and "book" not in full.results.parts  # full settings, not published
    assert smoke.results.is_relative_to(smoke.root) and smoke.root != full.root


def test_the_chapters_setup_call_binds_the_run_its_chapter_and_the_labels(capsys):
    from xlrepro.papers.dufter2020.report import chapter_setup

    run, ch, labels = chapter_setup(seeds=[0, 42], large_seeds=[0], epochs=1, publish=False)
    assert (run.seeds, run.large_seeds, run.epochs) == ([0, 42], [0], 1) and ch is run.chapter
    assert labels["0"] == "original" and labels["15"] == "overparam"
    line = capsys.readouterr().out
    assert line.startswith("run folder: ") and line.rstrip().endswith("| seeds: [0, 42] | BERT-base seeds: [0]")
    with pytest.raises(ConfigError, match="unknown profile 'wiki'"):
        chapter_setup(profile="wiki")


def test_a_changed_setting_gets_a_new_run_key_and_the_same_setting_the_same_key():
    from dataclasses import replace

    ch = load_chapter("dufter2020")
    key = lambda chapter=ch, **kw: grid_members(chapter, ["0"], [0], **kw)[0].run_key
    assert key() == key()  # deterministic
    assert len({key(), key(epochs=2), key(batch_size=8), key(max_sentences=10)}) == 4
    other_lr = replace(ch, sizes={**ch.sizes, "small": replace(ch.sizes["small"], lr=1e-3)})
    other_warmup = replace(ch, training=replace(ch.training, warmup_steps=51))
    assert key(other_lr) != key() and key(other_warmup) != key()
    assert grid_members(ch, ["0"], [42])[0].run_key != key()  # another seed
    assert grid_members(ch, ["1"], [0])[0].run_key != key()  # another experiment
    renamed = replace(ch, experiments={**ch.experiments, "0": replace(ch.experiments["0"], description="renamed")})
    assert key(renamed) == key()  # the description changes no number


def test_a_resumed_grid_plans_the_same_stacks_when_some_are_done(tmp_path, monkeypatch):
    """Stacks are planned from every requested model: finishing one stack must not re-cut the others (their
    checkpoints are found by the stack's key). Two GPUs: 6 models are cut into stacks of 3, handed out by the
    engine's queue (here in this process)."""
    from xlrepro.papers.dufter2020 import grid

    planned = []
    monkeypatch.setattr(grid, "load_lab", lambda profile: None)
    monkeypatch.setattr(grid, "StackRun", lambda ch, stack, *a, **k: planned.append([m.key for m in stack])
                        or type("Run", (), {"run": lambda self, *a: True})())
    run = lambda: grid.run_grid("dufter2020", ["0", "1", "2"], [0, 42], root=tmp_path, device="cpu", gpus=2,
                                max_stack={"small": 4}, progress=False, **TINY)
    assert run()  # every job ran (the fake StackRun writes no results, so the queue reports them done)
    assert sorted(planned) == [["0/0", "1/0", "2/0"], ["0/42", "1/42", "2/42"]]  # dealt in turn
    for m in grid.grid_members(load_chapter("dufter2020"), ["0", "1", "2"], [0], **TINY):  # one stack finished
        grid.member_dir(tmp_path, m).mkdir(parents=True)
        (grid.member_dir(tmp_path, m) / "metrics.json").write_text("{}")
    planned.clear()
    run()
    assert planned == [["0/42", "1/42", "2/42"]]  # the same stack as before (not re-cut into 2 + 1)
    with pytest.raises(ConfigError, match="gpus must be an integer >= 1"):
        grid.run_grid("dufter2020", ["0"], [0], root=tmp_path, gpus=0, **TINY)


def test_the_linear_option_is_a_speed_switch(tmp_path):
    """`linear="mm"` (the bias outside the batched product) trains the same models to rounding, says so in each
    metrics.json, and a bad value fails before any work, naming the valid choices."""
    tiny = dict(epochs=1, max_sentences=8, batch_size=4, device="cpu", progress=False)
    with pytest.raises(ConfigError, match="--linear takes one of baddbmm, mm; got 'bmm'"):
        run_grid("dufter2020", ["0"], [0], root=tmp_path / "bad", linear="bmm", **tiny)
    assert not (tmp_path / "bad").exists()
    for linear in ("baddbmm", "mm"):
        assert run_grid("dufter2020", ["0", "3"], [0], root=tmp_path / linear, linear=linear, **tiny)
    for m in grid_members(load_chapter("dufter2020"), ["0", "3"], [0], epochs=1, max_sentences=8, batch_size=4):
        a, b = (json.loads((member_dir(tmp_path / linear, m) / "metrics.json").read_text())
                for linear in ("baddbmm", "mm"))
        assert (a["linear"], b["linear"]) == ("baddbmm", "mm")
        assert a["metrics"] == pytest.approx(b["metrics"], rel=1e-4)
        assert a["metrics"]["ppl_dev"] > 10  # a real evaluation, not an empty dictionary


def test_the_command_line_multiplies_with_the_bias_inside_unless_told_otherwise():
    from xlrepro.cli import build_parser
    parse = build_parser().parse_args
    assert parse(["train", "dufter2020", "--ids", "0"]).linear == "baddbmm"
    assert parse(["train", "dufter2020", "--ids", "0", "--linear", "mm"]).linear == "mm"
    with pytest.raises(SystemExit):
        parse(["train", "dufter2020", "--ids", "0", "--linear", "bmm"])


def test_table5_keeps_longer_runs_apart_from_the_papers_100_epochs(tmp_path):
    """Table 5's per-model times: 100-epoch models beside the paper's, the 250-epoch model 17-250 in a row of its own;
    no-parallel models (200 epochs on half the corpus) count as 100 passes over it."""
    import pandas as pd

    from xlrepro.papers.dufter2020.report import corpus_epochs, load_timings, table5_for_readers

    assert corpus_epochs(["17-250/0"]) == 250
    assert corpus_epochs(["21/0", "21b/0"]) == corpus_epochs(["0/0"]) == 100
    for name, members, size, seconds in (("a", ["15/0", "16/0"], "base", 600.0), ("b", ["17-250/0"], "base", 1200.0),
                                         ("c", ["0/0", "21/0"], "small", 120.0)):
        (tmp_path / "stacks" / name).mkdir(parents=True)
        (tmp_path / "stacks" / name / "timing.json").write_text(json.dumps({
            "members": members, "size": size, "steps": 10, "train_seconds": seconds, "steps_per_second": 1.0,
            "device": "cpu"}))
    paper = pd.DataFrame({"experiment": ["small-bible", "base-bible"], "metric": "runtime_minutes", "mean": [35, 240]})
    table, _ = table5_for_readers(load_timings(tmp_path), paper)
    per_model = table["ours: training time per model (stack time / models)"]
    assert per_model["BERT-base, Bible, 100 epochs"] == "5.0 min"  # 600 s over 2 models, the 250-epoch run left out
    assert per_model["BERT-base, Bible, 250 epochs"] == "20.0 min"
    assert per_model["BERT-small, Bible, 100 epochs"] == "1.0 min"
    assert table.loc["BERT-base, Bible, 250 epochs", "paper: time per model (one GTX 1080Ti)"] != "∼240 min"
