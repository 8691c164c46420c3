"""K et al. (2020) cells of one shape share a stack: padded vocabularies, length-grouped draws, the stack plan, and
a cell that trains the same alone and beside two cells with other vocabularies (CPU, smoke sizes)."""
import dataclasses
import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from xlrepro.config import ConfigError


def smoke_plan(**pretrain):
    from xlrepro.papers.k2020.config import load_plan
    plan = load_plan()
    prof = plan.profiles["smoke"]
    prof = dataclasses.replace(prof, pretrain=dataclasses.replace(prof.pretrain, **pretrain))
    return dataclasses.replace(plan, profiles={**plan.profiles, "smoke": prof})


def table(lengths_by_lang, bins_check=1):
    """A PairTable by hand: language l has pairs of the given lengths (ids 5.., no specials but [CLS]=2/[SEP]=3)."""
    from types import SimpleNamespace

    from xlrepro.papers.k2020.stacks import PairTable
    pairs = {}
    for lang, lengths in lengths_by_lang.items():
        w = max(lengths)
        ids = np.zeros((len(lengths), w), np.int64)
        for i, n in enumerate(lengths):
            ids[i, :n] = [2, *range(5, 5 + n - 2), 3]
        pairs[lang] = (ids, np.zeros_like(ids), np.tile(np.arange(w), (len(lengths), 1)), np.array(lengths),
                       np.ones(len(lengths), bool))
    return PairTable.build(pairs, {0, 1, 2, 3, 4}, SimpleNamespace(length_bins=bins_check, alpha=1.0))


def test_shared_bin_visits_every_quantile_once_per_cycle():
    from xlrepro.papers.k2020.stacks import shared_bin
    assert [shared_bin(s, 1) for s in range(5)] == [0] * 5
    for cycle in range(3):
        assert sorted(shared_bin(cycle * 4 + i, 4) for i in range(4)) == [0, 1, 2, 3]
    assert [shared_bin(s, 4) for s in range(4)] != [shared_bin(s, 4) for s in range(4, 8)] or \
        [shared_bin(s, 4) for s in range(8, 12)] != [shared_bin(s, 4) for s in range(4)]  # orders vary by cycle
    with pytest.raises(ValueError, match="bins must be >= 1"):
        shared_bin(0, 0)


def test_pair_table_maskable_and_length_quantiles_by_hand():
    t = table({"a": [4, 10, 6, 8], "b": [5, 3]}, bins_check=2)
    # pair 0 of a: [CLS] 5 6 [SEP]: only the two content pieces are maskable
    assert t.maskable[0].tolist()[:5] == [False, True, True, False, False]
    assert t.offsets.tolist() == [0, 4] and t.sizes.tolist() == [4, 2]
    assert t.by_length.tolist() == [0, 2, 3, 1, 5, 4]  # a sorted by length 4, 6, 8, 10; then b: 3, 5
    assert t.probs == pytest.approx([4 / 6, 2 / 6])  # alpha = 1: proportional
    from xlrepro.papers.k2020.stacks import shared_bin
    for step in range(6):
        rows = t.draw(seed=7, step=step, batch_size=64, bins=2)
        short = shared_bin(step, 2) == 0  # the lower half of each language: a rows {0, 2}, b row {5}
        assert set(rows.tolist()) <= ({0, 2, 5} if short else {3, 1, 4})
    everything = np.concatenate([t.draw(7, s, 64, 1) for s in range(4)])
    assert set(everything.tolist()) == set(range(6))  # no grouping: every pair can be drawn
    assert np.array_equal(t.draw(7, 3, 64, 2), t.draw(7, 3, 64, 2))  # (seed, step) fix the draw
    assert not np.array_equal(t.draw(7, 3, 64, 1), t.draw(8, 3, 64, 1))


def test_more_bins_than_pairs_is_an_error():
    with pytest.raises(ConfigError, match="length_bins 3 exceeds the smallest language's 2 pairs"):
        table({"a": [4, 5, 6], "b": [4, 5]}, bins_check=3)


def test_vocabularies_are_padded_to_the_profile_rows(multilingual_cache, tmp_path):
    from xlrepro.papers.k2020.bbert import Cell
    plan = smoke_plan()
    cells = [Cell(plan, "smoke", n, [0], root=tmp_path) for n in ("en-es", "enfake-es/id", "enfake-es/char")]
    sizes = [c.vocab_size for c in cells]
    assert sizes[1] == 2 * cells[1]._tok.get_vocab_size()  # the id way doubles the vocabulary
    assert len(set(sizes)) == 3 and all(c.vocab_rows == 640 for c in cells)
    small = Cell(smoke_plan(embedding_rows=100), "smoke", "en-es", [0], root=tmp_path / "small")
    with pytest.raises(ConfigError, match="raise embedding_rows to at least"):
        small.vocab_rows


def test_plan_groups_by_shape_and_spreads_over_slots(multilingual_cache, tmp_path):
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import plan_stacks, stack_shape
    plan = smoke_plan()
    names = ["en-es", "enfake-es", "enfake-ru/L12H1", "enfake-es/nsp", "enfake-es/single"]
    cells = {n: Cell(plan, "smoke", n, [0, 1, 2], root=tmp_path) for n in names}
    members = [(c, s) for c in cells.values() for s in c.seeds]
    assert stack_shape(cells["enfake-es/nsp"]) is None and stack_shape(cells["enfake-es/single"]) is None
    stacks = plan_stacks(members, slots=1)
    got = sorted(sorted(f"{c.name}/{s}" for c, s in st) for st in stacks)
    assert got == [["en-es/0", "en-es/1", "en-es/2", "enfake-es/0", "enfake-es/1", "enfake-es/2"],
                   ["enfake-ru/L12H1/0", "enfake-ru/L12H1/1", "enfake-ru/L12H1/2"]]
    # the 9 models end to end, 4 slots of 2.25 models each: the 6 fall into slots 0, 0, 1, 1, 2, 2, the 3 into 2, 3, 3
    # (a piece of one joins the rest of its group)
    assert [len(s) for s in plan_stacks(members, slots=4)] == [2, 2, 2, 3]
    # 2 slots of 4.5: the 6 into 0, 0, 0, 0, 1, 1 and the 3 into slot 1 (loads 4 and 5; the groups whole: 6 and 3)
    assert [len(s) for s in plan_stacks(members, slots=2)] == [4, 2, 3]
    # 12 slots: a slot a model would make stacks of one; pieces of one join their neighbours
    assert [len(s) for s in plan_stacks(members, slots=12)] == [2, 2, 2, 3]
    assert [len(s) for s in plan_stacks(members, slots=1, max_stack=4)] == [3, 3, 3]  # 6 cut evenly under 4
    # a group whose models take twice as long gets twice the share of the slots
    slow = plan_stacks(members, slots=3, seconds=lambda c: 2.0 if c.name == "enfake-ru/L12H1" else 1.0)
    assert [len(s) for s in slow] == [4, 2, 3]  # total 12: slots of 4; the 6 fill 4 + 2, the 3 (6 s) slots 1, 2
    with pytest.raises(ConfigError, match="slots and max_stack"):
        plan_stacks(members, slots=0)


def test_jobs_train_only_members_without_a_model_or_results(tmp_path):
    """A cell evaluated elsewhere (results, no weights) is not trained again; one with a model is only evaluated; the
    stack keeps the others, so its subset stays the same until it is done."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import jobs_of
    plan = smoke_plan()
    cell = Cell(plan, "smoke", "enfake-ru/L12H1", [0, 1, 2, 3], root=tmp_path)  # section task only
    cell.dir.mkdir(parents=True)
    (cell.dir / "results_1.csv").write_text("evaluated on another machine")
    (cell.dir / "model_2.safetensors").write_text("trained, not evaluated")
    jobs = jobs_of([cell], slots=1)
    assert jobs == [{"kind": "stack", "members": [["enfake-ru/L12H1", 0], ["enfake-ru/L12H1", 3]]},
                    {"kind": "eval", "members": [["enfake-ru/L12H1", 0]]},
                    {"kind": "eval", "members": [["enfake-ru/L12H1", 2]]},
                    {"kind": "eval", "members": [["enfake-ru/L12H1", 3]]}]
    for seed in (0, 3):
        (cell.dir / f"model_{seed}.safetensors").write_text("the stack is done")
    assert [j["kind"] for j in jobs_of([cell], slots=1)] == ["eval"] * 3


def test_trained_models_leave_no_gap_in_the_plan_and_a_paused_stack_is_resumed_as_it_is(tmp_path):
    """Seeds 0 and 1 are trained: the other four fill two stacks of 2 (planned over all six, the stacks of 3 would
    keep 1 and 3 members). A stack paused with a checkpoint keeps its members, whatever a fresh plan would make; its
    progress.json without the checkpoint binds nothing."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import jobs_of, stack_folder
    cell = Cell(smoke_plan(), "smoke", "enfake-ru/L12H1", [0, 1, 2, 3, 4, 5], root=tmp_path)
    cell.dir.mkdir(parents=True)
    for seed in (0, 1):
        (cell.dir / f"model_{seed}.safetensors").write_text("trained")
    stacks = lambda: [[s for _, s in j["members"]] for j in jobs_of([cell], slots=2) if j["kind"] == "stack"]  # noqa
    assert stacks() == [[2, 3], [4, 5]]
    folder = stack_folder([(cell, 3), (cell, 4), (cell, 5)])
    folder.mkdir(parents=True)
    (folder / "progress.json").write_text(json.dumps({"step": 5, "steps": 9, "members": [
        "enfake-ru/L12H1/3", "enfake-ru/L12H1/4", "enfake-ru/L12H1/5"]}))
    assert stacks() == [[2, 3], [4, 5]]  # no checkpoint: nothing to resume
    (folder / "checkpoint.pt").write_text("weights and optimiser at step 5")
    assert sorted(stacks()) == [[2], [3, 4, 5]]


def test_a_cell_alone_and_in_a_stack_of_three_sees_the_same_masks_and_results(multilingual_cache, tmp_path,
                                                                              monkeypatch):
    from safetensors.torch import load_file

    from xlrepro.papers.k2020 import stacks, trainer
    from xlrepro.papers.k2020.bbert import Cell
    plan = smoke_plan(steps=6)
    seen: dict[int, list] = {}
    original = trainer.whole_word_mask

    def recording(ids, *args, **kwargs):
        inputs, labels = original(ids, *args, **kwargs)
        m = ids.shape[0]
        i = {1: 0, 3: 1}[m]  # where enfake-es seed 0 sits
        seen.setdefault(m, []).append(sorted(map(tuple, (labels[i] != -100).nonzero().tolist())))
        return inputs, labels

    monkeypatch.setattr(trainer, "whole_word_mask", recording)
    monkeypatch.setattr(trainer, "LOSS_EVERY", 4)  # 6 steps: the loss means of steps 1-4 and 5-6
    alone = Cell(plan, "smoke", "enfake-es", [0], root=tmp_path / "alone")
    assert stacks.StackTrainer([(alone, 0)]).run(progress=False)
    cell = Cell(plan, "smoke", "enfake-es", [0], root=tmp_path / "stacked")
    # HF's WordPiece trainer breaks ties in an order that varies between runs: a cell's vocabulary is trained once
    # and kept in its folder (tokenizer.json); here the stacked copy of the cell gets the same one
    cell.dir.mkdir(parents=True)
    shutil.copy(alone.dir / "tokenizer.json", cell.dir / "tokenizer.json")
    other = Cell(plan, "smoke", "enfake-hi/perm0.5", [1], root=tmp_path / "stacked")  # hi, permuted, another seed
    idway = Cell(plan, "smoke", "enfake-es/id", [2], root=tmp_path / "stacked")  # the id way: twice the ids
    assert idway.vocab_size == 2 * alone.vocab_size and other.tokenizer().get_vocab() != alone.tokenizer().get_vocab()
    assert stacks.StackTrainer([(other, 1), (cell, 0), (idway, 2)]).run(progress=False)
    assert len(seen[1]) == len(seen[3]) == 6 and all(seen[1])
    assert seen[1] == seen[3]  # the same masked (row, position) at every step
    curves = [json.loads(next((c.dir.parent / "stacks").glob("*/timing.json")).read_text())["mlm_loss_curve"]
              for c in (alone, cell)]
    assert list(curves[0]) == list(curves[1]) == ["4", "6"] and len(curves[1]["6"]) == 3
    for step in ("4", "6"):  # the same model, masks and batches: the same losses alone and stacked (its index 1)
        assert curves[1][step][1] == pytest.approx(curves[0][step][0], rel=1e-3)
        assert all(0 < v < 10 for v in curves[1][step])
    a, b = (load_file(str(c.dir / "model_0.safetensors")) for c in (alone, cell))
    assert a.keys() == b.keys() and a["embeddings.word_embeddings.weight"].shape[0] == 640
    for k in a:
        torch.testing.assert_close(a[k].float(), b[k].float(), rtol=2e-2, atol=2e-3)
    res = [c.evaluate_seed(0) for c in (alone, cell)]
    pd.testing.assert_frame_equal(res[0].drop(columns="value"), res[1].drop(columns="value"))
    keep = res[0]["metric"] != "finetune_seconds"
    assert res[1]["value"][keep].to_numpy() == pytest.approx(res[0]["value"][keep].to_numpy(), abs=1e-6)


def test_a_stack_cut_short_resumes_and_its_timing_keeps_a_compile_fallback_of_the_first_call(multilingual_cache,
                                                                                               tmp_path, monkeypatch):
    """Call 1 fails its first compiled step (run again eagerly), stops at the time limit and checkpoints; call 2
    resumes to the end. timing.json names the failure, and the models equal those of a run never interrupted."""
    from safetensors.torch import load_file

    from xlrepro.papers.k2020 import stacks
    from xlrepro.papers.k2020.bbert import Cell
    plan = smoke_plan(steps=4)
    whole = Cell(plan, "smoke", "enfake-es", [0], root=tmp_path / "whole")
    assert stacks.StackTrainer([(whole, 0)]).run(progress=False)
    cut = Cell(plan, "smoke", "enfake-es", [0], root=tmp_path / "cut")
    cut.dir.mkdir(parents=True)
    shutil.copy(whole.dir / "tokenizer.json", cut.dir / "tokenizer.json")  # the same vocabulary (see above)
    new_stack = stacks.StackTrainer._new_stack

    def failing(self):
        stack = new_stack(self)

        def broken(*inputs):
            raise AssertionError("expected size 3==3, stride 1==2 at dim=0")

        stack.compiled, stack._losses = "regional", broken
        return stack

    monkeypatch.setattr(stacks.StackTrainer, "_new_stack", failing)
    with pytest.warns(UserWarning, match="compiled step failed at step 0"):
        assert not stacks.StackTrainer([(cut, 0)]).run(time_limit=0, progress=False)  # one step, then a checkpoint
    monkeypatch.setattr(stacks.StackTrainer, "_new_stack", new_stack)
    assert not (cut.dir / "model_0.safetensors").exists()
    progress = json.loads(next((cut.dir.parent / "stacks").glob("*/progress.json")).read_text())
    assert progress["step"] == 1 and progress["compile_fallbacks"][0]["step"] == 0  # a check can read it mid-run
    assert progress["members"] == ["enfake-es/0"]  # the next call's plan resumes the stack as it is (paused_stacks)
    assert [[c.name, s] for c, s in stacks.paused_stacks([(cut, 0)])[0]] == [["enfake-es", 0]]
    assert stacks.StackTrainer([(cut, 0)]).run(progress=False)
    timing = json.loads(next((cut.dir.parent / "stacks").glob("*/timing.json")).read_text())
    assert timing["compile_fallbacks"] == [{"step": 0, "error": "AssertionError: expected size 3==3, stride 1==2 "
                                                                "at dim=0"}]
    whole_timing = json.loads(next((whole.dir.parent / "stacks").glob("*/timing.json")).read_text())
    assert whole_timing["compile_fallbacks"] == []
    a, b = (load_file(str(c.dir / "model_0.safetensors")) for c in (whole, cut))
    for k in a:
        torch.testing.assert_close(a[k].float(), b[k].float(), rtol=2e-2, atol=2e-3)


def test_the_nsp_control_trains_one_model_at_a_time_on_mlm_alone(multilingual_cache, tmp_path):
    """enfake-es/single and enfake-es/nsp train on the same trainer from the same initial weights (seed 0): the
    control's pooler (the NSP head's input) gets no gradient and keeps them, the NSP cell's moves; both encoders
    learn. Both are single-model jobs, never stacked."""
    from safetensors.torch import load_file
    from transformers import BertForPreTraining

    from xlrepro.engine.models import bert_config
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import jobs_of
    plan = smoke_plan(steps=3)
    cells = [Cell(plan, "smoke", n, [0], root=tmp_path) for n in ("enfake-es/single", "enfake-es/nsp")]
    assert [j["kind"] for j in jobs_of(cells, slots=2)][:2] == ["nsp", "nsp"]
    torch.manual_seed(0)
    init = BertForPreTraining(bert_config(cells[0].size, cells[0].vocab_rows,
                                          positions=cells[0].profile.pretrain.max_length)).bert.state_dict()
    for cell, pooler_moves in zip(cells, (False, True)):
        assert cell.pretrain(progress=False)
        got = load_file(str(cell.dir / "model_0.safetensors"))
        moved = lambda k: not torch.equal(got[k], init[k].to(got[k].dtype))  # noqa: E731 (saved in bf16)
        assert moved("pooler.dense.weight") == pooler_moves, cell.name
        assert moved("encoder.layer.0.attention.self.query.weight"), cell.name


def test_at_a_profile_with_nsp_stack_nsp_cells_train_in_their_own_stack_with_the_nsp_head(multilingual_cache,
                                                                                           tmp_path):
    """nsp_stack: the NSP cell's seeds make one stack job (none trained alone), apart from the base cell's (one loss a
    stack); the NSP models' poolers learn (the NSP head's input: it moves from the seed's initial weights), the
    stack records that its losses are MLM + NSP, and only the NSP cell's run key changes."""
    from safetensors.torch import load_file
    from transformers import BertForPreTraining

    from xlrepro.engine.models import bert_config
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import jobs_of
    from xlrepro.papers.k2020.trainer import plan_stacks, stack_folder
    plan = smoke_plan(steps=3, nsp_stack=True)
    nsp, base = Cell(plan, "smoke", "enfake-es/nsp", [0, 1], root=tmp_path), Cell(plan, "smoke", "enfake-es", [0],
                                                                                    root=tmp_path)
    assert nsp.alone is False and Cell(smoke_plan(steps=3), "smoke", "enfake-es/nsp").alone is True
    assert nsp.key != Cell(smoke_plan(steps=3), "smoke", "enfake-es/nsp").key
    assert base.key == Cell(smoke_plan(steps=3), "smoke", "enfake-es").key
    kinds = [j["kind"] for j in jobs_of([nsp, base], slots=1)]
    assert "nsp" not in kinds and kinds.count("stack") == 2
    stacks = plan_stacks([(nsp, 0), (nsp, 1), (base, 0)], slots=1)
    assert sorted(len(st) for st in stacks) == [1, 2] and all(len({c.name for c, _ in st}) == 1 for st in stacks)
    assert nsp.pretrain(progress=False)
    torch.manual_seed(0)
    init = BertForPreTraining(bert_config(nsp.size, nsp.vocab_rows, positions=nsp.profile.pretrain.max_length))
    got = load_file(str(nsp.dir / "model_0.safetensors"))
    assert not torch.equal(got["pooler.dense.weight"], init.bert.pooler.dense.weight.to(got["pooler.dense.weight"].dtype))
    timing = json.loads((stack_folder([(nsp, 0), (nsp, 1)]) / "timing.json").read_text())
    assert timing["loss"] == "mlm+nsp" and len(timing["members"]) == 2


@pytest.mark.slow  # ~60 s on 2 cores: two ranks import torch and prepare three cells
def test_two_cpu_ranks_under_torchrun_train_and_evaluate_every_cell(multilingual_cache, tmp_path, monkeypatch, capfd):
    """`xlrepro train k2020 --workers-per-gpu 2` on a CPU: torchrun starts two ranks, which share out the stacks and
    the evaluations through the engine's queue; a second call (one process) finds everything done."""
    from xlrepro.cli import main
    from xlrepro.papers.k2020.stacks import part_cells, run_part
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path))
    argv = ["train", "k2020", "--part", "t11", "--profile", "smoke", "--seeds", "0"]
    assert main(argv + ["--workers-per-gpu", "2", "--max-stack", "2"]) == 0
    out = capfd.readouterr().out  # the ranks' lines and this process's
    assert out.count("] done: stack") == 2 and out.count("] done: eval") == 3, out
    assert "[rank 0/2]" in out and "[rank 1/2]" in out
    cells = part_cells("t11", "smoke", [0])
    root = cells[0].dir.parent
    # 3 members over 2 slots make one stack of 3 (no stack of one, wrap_stacks' min_piece); --max-stack 2 cuts it
    # into stacks of 2 and 1, one for each rank
    assert len(list((root / "stacks").glob("*/timing.json"))) == 2
    written = {f: f.stat().st_mtime_ns for f in root.glob("*/*") if f.suffix in (".csv", ".safetensors")}
    assert len([f for f in written if f.name.startswith("model_")]) == 3
    again = run_part("t11", "smoke", [0], progress=False)
    assert {f: f.stat().st_mtime_ns for f in written} == written  # nothing trained or evaluated again
    assert set(again["experiment"]) == {"enfake-es", "enfake-hi", "enfake-ru", "majority/enfake-es",
                                        "majority/enfake-hi", "majority/enfake-ru"}


def test_step_flops_by_hand_and_the_speed_model_meets_its_measured_points():
    from xlrepro.papers.k2020.config import gpu_plan, load_plan, step_flops, step_ms
    # h=2, 1 layer, width 1, 10 rows, 1 pair, half masked: 24*4 + 4*1*2 = 104 per layer; head 0.5*(8 + 40) = 24
    assert step_flops(2, 1, 1, 10, batch=1, mlm=0.5) == 3 * 128
    assert step_ms(256, 4, 40, 4096) == pytest.approx(3.0)  # BERT-small in a stack of 16 (H200)
    assert step_ms(768, 12, 40, 4096) == pytest.approx(24.0)  # BERT-base
    assert step_ms(192, 12, 76, 20480, gpu="H100") == pytest.approx(1.3 * step_ms(192, 12, 76, 20480))
    table = gpu_plan(load_plan(), ["pilot", "t1"])
    assert table["new experiments"].tolist() == [4, 6]  # t1's pilot cells are counted once, in the pilot
    assert table["cumulative GPU-min"].iloc[-1] == pytest.approx(table["GPU-min"].sum(), abs=0.15)  # rounded to 0.1


def test_the_part_s_jobs_go_into_lanes_and_an_evaluation_after_the_job_that_trains_its_model():
    from xlrepro.papers.k2020.stacks import queue_jobs
    jobs = [{"kind": "stack", "members": [["a", 0], ["b", 0]]}, {"kind": "nsp", "members": [["c", 0]]},
            {"kind": "eval", "members": [["b", 0]]}, {"kind": "eval", "members": [["c", 0]]},
            {"kind": "eval", "members": [["d", 0]]}]  # d's model was trained by an earlier call
    q = queue_jobs(jobs)
    assert [(j.lane, j.after) for j in q] == [("train", ()), ("train", ()), ("eval", (0,)), ("eval", (1,)),
                                              ("eval", ())]
    assert [j.spec for j in q] == jobs


def test_the_slowest_stack_by_measured_speed_is_handed_out_first(tmp_path):
    """Two one-cell stacks: by FLOPs the 12-layer base comes first; once a finished stack has timed the 1-layer
    shape at 10 s a step, it does."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import jobs_of, measured_step_ms
    plan = smoke_plan()
    deep, shallow = (Cell(plan, "smoke", name, [0], root=tmp_path) for name in ("enfake-ru/L12H1", "enfake-ru/L1H12"))
    first = lambda: jobs_of([shallow, deep], slots=2)[0]["members"][0][0]  # noqa: E731
    assert deep.size.layers > shallow.size.layers and first() == "enfake-ru/L12H1"
    folder = tmp_path / "stacks"
    for key, ms in (("a", 9000.0), ("b", 11000.0), ("c", 10000.0)):
        (folder / key).mkdir(parents=True)
        (folder / key / "timing.json").write_text(json.dumps({"shape": shallow.size.name, "ms_per_model_step": ms}))
    assert deep.dir.parent / "stacks" == folder
    assert measured_step_ms(folder) == {shallow.size.name: 10000.0}  # the median of the three
    assert first() == "enfake-ru/L1H12"


def test_a_dry_run_lists_the_stacks_with_their_estimates_and_the_busiest_slot(tmp_path):
    """Two one-shape cells of two seeds, 100 steps, one slot: the measured shape (2 x 100 x 1 s + 45 s start-up =
    245 s) comes first, the other by the FLOP model; a cell with results has no stack left, only nothing to do."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.config import STACK_OVERHEAD_SECONDS
    from xlrepro.papers.k2020.stacks import dry_run
    plan = smoke_plan(steps=100)
    deep, shallow = (Cell(plan, "smoke", n, [0, 1], root=tmp_path) for n in ("enfake-ru/L12H1", "enfake-ru/L1H12"))
    (tmp_path / "stacks" / "x").mkdir(parents=True)
    (tmp_path / "stacks" / "x" / "timing.json").write_text(
        json.dumps({"shape": shallow.size.name, "ms_per_model_step": 1000.0}))
    text = dry_run([deep, shallow], slots=1).splitlines()
    assert STACK_OVERHEAD_SECONDS == 45.0
    assert text[0] == "2 stacks (4 models), 0 models one at a time (NSP, control) and 4 evaluations left over 1 slots"
    first, second = text[2].split(), text[3].split()
    assert first[1:5] == [shallow.size.name, "2", "245", "measured"] and first[-1] == "enfake-ru/L1H12"
    assert second[1] == deep.size.name and "FLOP" in text[3] and float(second[3]) < 245
    assert text[-1].startswith("busiest slot: about ")
    minutes = float(text[-1].split("about ")[1].split()[0])
    assert minutes == pytest.approx((245 + float(second[3])) / 60, abs=0.06)  # one slot trains both
    for cell in (deep, shallow):
        cell.dir.mkdir(parents=True, exist_ok=True)
        for seed in (0, 1):
            (cell.dir / f"results_{seed}.csv").write_text("evaluated elsewhere")
    assert dry_run([deep, shallow], slots=1) == ("0 stacks (0 models), 0 models one at a time (NSP, control) and 0 "
                                                 "evaluations left over 1 slots")


def test_measured_speeds_can_be_those_of_one_card(tmp_path):
    from xlrepro.config import ConfigError
    from xlrepro.papers.k2020.stacks import measured_step_ms
    for key, ms, device in (("a", 20.0, "NVIDIA H200"), ("b", 30.0, "NVIDIA H100 80GB HBM3"),
                            ("c", 40.0, "NVIDIA H100 80GB HBM3"), ("d", 10.0, "NVIDIA H200")):
        (tmp_path / key).mkdir()
        (tmp_path / key / "timing.json").write_text(json.dumps({"shape": "s", "ms_per_model_step": ms,
                                                                "device": device}))
    assert measured_step_ms(tmp_path) == {"s": 25.0}  # the median of all four
    assert measured_step_ms(tmp_path, "H100") == {"s": 35.0}
    assert measured_step_ms(tmp_path, "H200") == {"s": 15.0}
    with pytest.raises(ConfigError, match="valid choices: H100, H200"):
        measured_step_ms(tmp_path, "A100")


def test_a_compiled_call_plans_with_compiled_speeds_where_a_shape_has_them(tmp_path):
    from xlrepro.papers.k2020.stacks import measured_step_ms, planning_step_ms
    for key, shape, ms, device, mode in (("a", "s", 24.0, "NVIDIA H200", "none"), ("b", "s", 28.0, "NVIDIA H200", "none"),
                                         ("c", "s", 8.0, "NVIDIA H200", "regional"),
                                         ("d", "s", 12.0, "NVIDIA H100 80GB HBM3", "regional"),
                                         ("e", "t", 50.0, "NVIDIA H100 80GB HBM3", "none")):
        (tmp_path / key).mkdir()
        (tmp_path / key / "timing.json").write_text(json.dumps({"shape": shape, "ms_per_model_step": ms,
                                                                "device": device, "compile": mode}))
    assert measured_step_ms(tmp_path, compiled=True) == {"s": 10.0}
    assert measured_step_ms(tmp_path, compiled=False) == {"s": 26.0, "t": 50.0}
    assert measured_step_ms(tmp_path) == {"s": 18.0, "t": 50.0}  # the median of 8, 12, 24 and 28 pooled
    # the card's compiled speed; t was timed eager on an H100 only, the one measurement there is
    assert planning_step_ms(tmp_path, "H200", compiled=True) == {"s": 8.0, "t": 50.0}
    assert planning_step_ms(tmp_path, "H200", compiled=False) == {"s": 26.0, "t": 50.0}
    assert planning_step_ms(tmp_path, "H100", compiled=False) == {"s": 26.0, "t": 50.0}  # the mode before the card
    assert planning_step_ms(tmp_path) == {"s": 18.0, "t": 50.0}


def test_a_dry_run_for_one_card_reads_that_card_s_speeds_alone(tmp_path):
    """A shape timed on an H100 only: a dry run for H200s estimates it by the FLOP model, one for H100s reads the
    measurement (100 steps x 2 models x 1 s + 45 s); a compiled H100 timing wins over an eager one for --compile."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import dry_run
    cell = Cell(smoke_plan(steps=100), "smoke", "enfake-ru/L1H12", [0, 1], root=tmp_path)
    for key, ms, mode in (("eager", 1000.0, "none"), ("compiled", 500.0, "regional")):
        (tmp_path / "stacks" / key).mkdir(parents=True)
        (tmp_path / "stacks" / key / "timing.json").write_text(json.dumps(
            {"shape": cell.size.name, "ms_per_model_step": ms, "device": "NVIDIA H100 80GB HBM3", "compile": mode}))
    row = lambda text: text.splitlines()[2].split()  # noqa: E731 - slot, shape, models, estimated s, speed, ...
    assert row(dry_run([cell], slots=1, gpu="H200"))[4] == "FLOP"
    assert row(dry_run([cell], slots=1, gpu="H100", compiled=False))[3:5] == ["245", "measured"]
    assert row(dry_run([cell], slots=1, gpu="H100", compiled=True))[3:5] == ["145", "measured"]


def test_what_is_left_of_a_checkpointed_stack_is_estimated_from_its_progress(tmp_path):
    """100 steps at a measured 1000 ms a model-step, 2 models: 200 s + 45 s start-up; at step 75, a quarter of the
    steps is left: 50 s + 45 s."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.config import STACK_OVERHEAD_SECONDS
    from xlrepro.papers.k2020.stacks import stack_folder, stack_seconds_left
    cell = Cell(smoke_plan(steps=100), "smoke", "enfake-ru/L1H12", [0, 1], root=tmp_path)
    stack = [(cell, 0), (cell, 1)]
    measured = {cell.size.name: 1000.0}
    assert STACK_OVERHEAD_SECONDS == 45.0
    assert stack_seconds_left(stack, measured) == 245.0
    stack_folder(stack).mkdir(parents=True)
    (stack_folder(stack) / "progress.json").write_text(json.dumps({"step": 75, "steps": 100}))
    assert stack_seconds_left(stack, measured) == 95.0


def test_on_the_last_call_a_stack_that_cannot_be_evaluated_in_time_is_not_started(tmp_path, capsys):
    """A 245 s stack needs 245 + EVAL_MARGIN (240) = 485 s: with 484 s left it is too long, with 486 s not. With 400 s
    left a last call leaves it for a later call and says so; the evaluation of its model is given up at once (it
    reads a model nobody trains in this call), so the call does not idle until the deadline. An evaluation is never
    too long by this test (EVAL_MARGIN itself guards it)."""
    import time

    from xlrepro.engine.queue import LEFT, run_queue
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.config import EVAL_MARGIN
    from xlrepro.papers.k2020.stacks import job_runner, queue_jobs, too_long
    cell = Cell(smoke_plan(steps=100), "smoke", "enfake-ru/L1H12", [0, 1], root=tmp_path)
    cells, measured = {cell.name: cell}, {cell.size.name: 1000.0}
    spec = {"kind": "stack", "members": [[cell.name, 0], [cell.name, 1]]}
    assert EVAL_MARGIN == 240
    assert too_long(spec, cells, 484.0, measured, "H200") and not too_long(spec, cells, 486.0, measured, "H200")
    assert not too_long({"kind": "eval", "members": [[cell.name, 0]]}, cells, 1.0, measured, "H200")
    (tmp_path / "stacks" / "x").mkdir(parents=True)
    (tmp_path / "stacks" / "x" / "timing.json").write_text(json.dumps({"shape": cell.size.name,
                                                                        "ms_per_model_step": 1000.0}))
    start = time.time()
    jobs = queue_jobs([spec, {"kind": "eval", "members": [[cell.name, 0]]}])
    states = run_queue(jobs, job_runner(cells, "cpu", last_call=True), time_limit=400, poll=0.01)
    assert time.time() - start < 30  # it did not wait for the deadline
    assert states == {0: LEFT, 1: LEFT} and not cell.pretrained()
    assert "not started: stack" in capsys.readouterr().out


def test_a_dry_run_adds_the_evaluations_at_the_measured_fine_tuning_time(tmp_path):
    """One evaluated seed measured 60 s (section task) and the NER stand-in 200 s elsewhere: the three evaluations
    left (section task only) need 3 x 60 s = 3 worker-minutes."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import dry_run, measured_finetune_seconds
    plan = smoke_plan(steps=100)
    deep, shallow = (Cell(plan, "smoke", n, [0, 1], root=tmp_path) for n in ("enfake-ru/L12H1", "enfake-ru/L1H12"))
    assert deep.exp.tasks == ("sections",) and shallow.exp.tasks == ("sections",)
    deep.dir.mkdir(parents=True)
    row = "experiment,seed,language,task,metric,value\n"
    (deep.dir / "results_0.csv").write_text(row + "enfake-ru/L12H1,0,enfake,sections,finetune_seconds,60.0\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "results_ner-x_0.csv").write_text(row + "other,0,enfake,ner,finetune_seconds,200.0\n")
    assert measured_finetune_seconds(tmp_path) == {"sections": 60.0, "ner": 200.0}
    last = dry_run([deep, shallow], slots=1).splitlines()[-1]
    assert last.startswith("evaluations: about 3 worker-minutes of fine-tuning for the 3 left")
    assert "ner 200 s, sections 60 s" in last


def _results(folder, name, task, values, seed=0):
    folder.mkdir(parents=True, exist_ok=True)
    rows = "".join(f"x,{seed},enfake,{task},finetune_seconds,{v}\n" for v in values)
    (folder / name).write_text("experiment,seed,language,task,metric,value\n" + rows)


def test_an_evaluation_is_estimated_from_its_own_cell_else_from_all_scaled_to_its_depth(tmp_path):
    """Smoke sizes: enfake-ru/L12H1 has 2 layers, enfake-ru/L1H12 1, enfake-ru 2 (section task and NER stand-in).
    Own fine-tuning 1000 s: 1000 x 1.25 + 20 = 1270 s. Elsewhere the section task took 40 s three times (median of
    40, 40, 40 and 1000 is 40) and NER 200 s: the 1-layer cell 40 x (0.1 + 0.9 / 12) = 7 s, x 1.25 + 20 = 28.75 s;
    the 2-layer base (40 + 200) x (0.1 + 0.9 x 2 / 12) = 60 s, x 1.25 + 20 = 95 s. Nothing measured: EVAL_MARGIN."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import eval_seconds
    plan = smoke_plan(steps=100)
    deep, shallow, base = (Cell(plan, "smoke", n, [0, 1], root=tmp_path)
                           for n in ("enfake-ru/L12H1", "enfake-ru/L1H12", "enfake-ru"))
    assert (deep.size.layers, shallow.size.layers, base.size.layers) == (2, 1, 2)
    assert eval_seconds(deep) == 240.0 and eval_seconds(base) == 240.0
    _results(deep.dir, "results_0.csv", "sections", [1000.0])
    _results(deep.dir.parent / "other", "results_0.csv", "sections", [40.0, 40.0, 40.0])
    assert eval_seconds(deep) == 1270.0
    assert eval_seconds(shallow) == pytest.approx(28.75)
    assert eval_seconds(base) == 240.0  # the NER stand-in was never measured
    _results(deep.dir.parent / "other", "results_ner-x_0.csv", "ner", [200.0])
    assert eval_seconds(base) == pytest.approx(95.0)


def test_an_evaluation_that_cannot_finish_is_left_and_a_shorter_one_taken(tmp_path, monkeypatch, capsys):
    """400 s left: the 2-layer cell's evaluation (1270 s by its own 1000 s) is left for a later call, and the rank
    goes on to the 1-layer cell's (28.75 s) instead of stopping."""
    import time

    from xlrepro.engine.queue import DONE, LEFT, run_queue
    from xlrepro.papers.k2020 import stacks
    from xlrepro.papers.k2020.bbert import Cell
    plan = smoke_plan(steps=100)
    deep, shallow = (Cell(plan, "smoke", n, [0, 1], root=tmp_path) for n in ("enfake-ru/L12H1", "enfake-ru/L1H12"))
    _results(deep.dir, "results_0.csv", "sections", [1000.0])
    _results(deep.dir.parent / "other", "results_0.csv", "sections", [40.0, 40.0, 40.0])
    for c in (deep, shallow):
        (c.dir / "model_1.safetensors").parent.mkdir(parents=True, exist_ok=True)
        (c.dir / "model_1.safetensors").write_bytes(b"")
    ran = []
    monkeypatch.setattr(stacks, "do_job", lambda spec, *a, **k: ran.append(spec["members"]) or True)
    start = time.time()
    jobs = stacks.queue_jobs([{"kind": "eval", "members": [[deep.name, 1]]},
                              {"kind": "eval", "members": [[shallow.name, 1]]}])
    states = run_queue(jobs, stacks.job_runner({deep.name: deep, shallow.name: shallow}, "cpu"), time_limit=400,
                       poll=0.01)
    assert time.time() - start < 30
    assert ran == [[[shallow.name, 1]]]
    assert states == {0: LEFT, 1: DONE}
    assert "not started: eval" in capsys.readouterr().out


def test_measured_speeds_pool_every_profiles_stacks(tmp_path):
    import json

    from xlrepro.papers.k2020.stacks import measured_step_ms, speed_folders

    for profile, ms in (("lab", 10.0), ("alltext", 30.0), ("alltext2x", 20.0)):
        folder = tmp_path / profile / "stacks" / "k1"
        folder.mkdir(parents=True)
        (folder / "timing.json").write_text(json.dumps({"shape": "s", "ms_per_model_step": ms, "device": "NVIDIA H200"}))

    class Cell:  # a cell of the alltext4x profile, which has trained nothing yet
        dir = tmp_path / "alltext4x" / "en-es-0123"
    assert [f.parent.name for f in speed_folders(Cell, tmp_path)] == ["alltext", "alltext2x", "lab"]
    assert measured_step_ms(speed_folders(Cell, tmp_path)) == {"s": 20.0}  # the median over the three profiles
    assert measured_step_ms(tmp_path / "lab" / "stacks") == {"s": 10.0}  # one folder, as before

    class Elsewhere:  # a cell kept outside the paper's run folders plans with its own folder's speeds only
        dir = tmp_path / "elsewhere" / "cells" / "en-es-0123"
    assert speed_folders(Elsewhere, tmp_path) == [tmp_path / "elsewhere" / "cells" / "stacks"]


def test_snapshot_shares_are_checked_and_turned_into_steps_by_hand():
    from xlrepro.papers.k2020.config import Pretrain
    assert Pretrain(steps=16000, batch_size=8, snapshots=(0.25, 0.5, 0.75)).snapshot_steps == (4000, 8000, 12000)
    # round(0.1 x 3) = 0 and round(0.9 x 3) = 3 are no steps between the first and the last; round(0.5 x 3) = 2
    assert Pretrain(steps=3, batch_size=8, snapshots=(0.1, 0.5, 0.9)).snapshot_steps == (2,)
    assert Pretrain(steps=3, batch_size=8).snapshot_steps == ()
    for bad in ((0.5, 0.25), (0.0,), (1.0,), (0.5, 0.5)):
        with pytest.raises(ConfigError, match="snapshots must be increasing shares"):
            Pretrain(steps=10, batch_size=8, snapshots=bad)


def test_snapshots_change_neither_the_cell_s_key_nor_its_final_model_and_get_their_own_evaluations(
        multilingual_cache, tmp_path):
    """A profile with snapshots keeps the cell's folder and trains the same final model; the weights after step 2 of
    4 are saved beside it, a snapshot job evaluates them like the final model (a `step` column added), and the queue
    takes it after the stack and before the final evaluation. A member trained without snapshots gets no job."""
    from safetensors.torch import load_file

    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import StackTrainer, do_job, job_done, jobs_of, queue_jobs
    plain = Cell(smoke_plan(steps=4), "smoke", "enfake-es", [0], root=tmp_path / "plain")
    cell = Cell(smoke_plan(steps=4, snapshots=(0.5,)), "smoke", "enfake-es", [0], root=tmp_path / "snap")
    assert cell.key == plain.key
    jobs = jobs_of([cell], slots=1)
    assert jobs == [{"kind": "stack", "members": [["enfake-es", 0]]},
                    {"kind": "snapshot", "members": [["enfake-es", 0]], "step": 2},
                    {"kind": "eval", "members": [["enfake-es", 0]]}]
    assert [(j.lane, j.after) for j in queue_jobs(jobs)] == [("train", ()), ("eval", ()), ("eval", (0,))]
    assert [j["kind"] for j in jobs_of([cell], slots=1, snapshots=False)] == ["stack", "eval"]  # --no-snapshots
    by_name = {"enfake-es": cell}
    assert do_job(jobs[1], by_name, "cpu", None) is None  # nothing trains beside it in one process: left for later
    assert StackTrainer([(plain, 0)]).run(progress=False)
    cell.dir.mkdir(parents=True)
    shutil.copy(plain.dir / "tokenizer.json", cell.dir / "tokenizer.json")  # the same vocabulary (see above)
    assert StackTrainer([(cell, 0)]).run(progress=False)
    assert [p.name for p in (cell.dir / "snapshots").iterdir()] == ["model_0_step2.safetensors"]
    a, b, half = (load_file(str(p)) for p in (plain.dir / "model_0.safetensors", cell.dir / "model_0.safetensors",
                                              cell.snapshot_path(0, 2)))
    for k in a:
        torch.testing.assert_close(a[k].float(), b[k].float(), rtol=2e-2, atol=2e-3)
    assert not torch.equal(half["encoder.layer.0.attention.self.query.weight"],
                           b["encoder.layer.0.attention.self.query.weight"])  # two more steps moved it
    assert not job_done(jobs[1], by_name) and do_job(jobs[1], by_name, "cpu", None) is True
    curve = pd.read_csv(cell.curve_path(0, 2))
    assert set(curve["step"]) == {2} and {"dev_accuracy", "accuracy"} <= set(curve["metric"])
    assert job_done(jobs[1], by_name) and not cell.evaluated(0)  # the final model's results are apart
    plain_later = Cell(smoke_plan(steps=4, snapshots=(0.5,)), "smoke", "enfake-es", [0], root=tmp_path / "plain")
    assert [j["kind"] for j in jobs_of([plain_later], slots=1)] == ["eval"]  # its final model has no snapshot
    nsp = Cell(smoke_plan(steps=4, snapshots=(0.5,)), "smoke", "enfake-es/nsp", [0], root=tmp_path / "nsp")
    assert [j["kind"] for j in jobs_of([nsp], slots=1)] == ["nsp", "eval"]  # trained alone, without snapshots


def test_an_evaluation_rank_waits_for_a_snapshot_while_there_is_time_and_not_once_the_model_is_final(tmp_path,
                                                                                                     monkeypatch):
    import threading

    from xlrepro.papers.k2020 import stacks
    from xlrepro.papers.k2020.bbert import Cell
    monkeypatch.setattr(stacks, "eval_seconds", lambda cell: 100.0)
    cell = Cell(smoke_plan(steps=4, snapshots=(0.5,)), "smoke", "enfake-es", [0], root=tmp_path)
    path = cell.snapshot_path(0, 2)
    path.parent.mkdir(parents=True)
    threading.Timer(0.3, path.write_text, ["saved by a stack on another rank"]).start()
    assert stacks.wait_for_snapshot(cell, 0, 2, left=1000, waiting=True, poll=0.05)
    path.unlink()
    assert not stacks.wait_for_snapshot(cell, 0, 2, left=50, waiting=True, poll=0.05)  # no time to evaluate it
    assert not stacks.wait_for_snapshot(cell, 0, 2, left=None, waiting=False)  # one process: nothing trains beside
    path.write_text("saved")
    assert stacks.wait_for_snapshot(cell, 0, 2, left=None, waiting=False)
    assert not stacks.wait_for_snapshot(cell, 0, 2, left=50, waiting=False)  # there, but no time to evaluate it
    path.unlink()
    (cell.dir / "model_0.safetensors").write_text("trained without the snapshot")
    assert not stacks.wait_for_snapshot(cell, 0, 2, left=None, waiting=True, poll=0.05)


def test_a_stack_told_to_skip_snapshots_saves_none(multilingual_cache, tmp_path):
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import StackTrainer
    cell = Cell(smoke_plan(steps=4, snapshots=(0.5,)), "smoke", "enfake-es", [0], root=tmp_path)
    assert StackTrainer([(cell, 0)], snapshots=False).run(progress=False)
    assert (cell.dir / "model_0.safetensors").exists() and not (cell.dir / "snapshots").exists()


def _timed(root, *cells, ms=1000.0):
    """A finished stack's timing.json per cell shape: `ms` per model-step (100 steps: 100 s a model)."""
    for c in cells:
        (root / "stacks" / c.size.name).mkdir(parents=True, exist_ok=True)
        (root / "stacks" / c.size.name / "timing.json").write_text(json.dumps({"shape": c.size.name,
                                                                               "ms_per_model_step": ms}))


def test_time_total_plans_only_the_cells_that_fit_in_the_part_s_order(tmp_path):
    """Models of 100 s (100 steps at 1000 ms), a stack's start-up 45 s, an evaluation 240 s (EVAL_MARGIN: nothing
    measured). One slot, 600 s: cell A (2 seeds: 245 s, + 240) fits, B would bring it to 730 s and waits, with its
    evaluations; 800 s holds both. Two slots share the work: both fit in 500 s."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.config import EVAL_MARGIN, STACK_OVERHEAD_SECONDS
    from xlrepro.papers.k2020.stacks import jobs_of
    assert (EVAL_MARGIN, STACK_OVERHEAD_SECONDS) == (240, 45.0)
    plan = smoke_plan(steps=100)
    a, b = (Cell(plan, "smoke", n, [0, 1], root=tmp_path) for n in ("enfake-ru/L1H12", "enfake-ru/L12H1"))
    _timed(tmp_path, a, b)
    names = lambda jobs, kind: sorted({n for j in jobs if j["kind"] == kind for n, _ in j["members"]})  # noqa: E731
    jobs = jobs_of([a, b], slots=1, time_total=600)
    assert names(jobs, "stack") == names(jobs, "eval") == ["enfake-ru/L1H12"]
    assert names(jobs_of([a, b], slots=1, time_total=800), "stack") == ["enfake-ru/L12H1", "enfake-ru/L1H12"]
    assert names(jobs_of([a, b], slots=2, time_total=500), "stack") == ["enfake-ru/L12H1", "enfake-ru/L1H12"]
    assert names(jobs_of([a, b], slots=1, time_total=400), "stack") == []  # A alone needs 485 s
    assert names(jobs_of([b, a], slots=1, time_total=600), "stack") == ["enfake-ru/L12H1"]  # the part's order


def test_a_cell_passed_over_for_its_long_evaluation_does_not_hold_back_the_next(tmp_path, monkeypatch):
    """Models of 100 s, a stack's start-up 45 s. B's evaluation takes 1000 s, A's 240 s; one slot, 600 s: B (245 s +
    1000) waits, A (245 + 240 = 485 s) fits though B comes first in the part; at 1300 s B fits and A no longer
    (490 + 1000); 1500 s holds both."""
    from xlrepro.papers.k2020 import stacks
    from xlrepro.papers.k2020.bbert import Cell
    plan = smoke_plan(steps=100)
    a, b = (Cell(plan, "smoke", n, [0, 1], root=tmp_path) for n in ("enfake-ru/L1H12", "enfake-ru/L12H1"))
    _timed(tmp_path, a, b)
    monkeypatch.setattr(stacks, "eval_seconds", lambda c: {"enfake-ru/L1H12": 240.0, "enfake-ru/L12H1": 1000.0}[c.name])
    names = lambda jobs: sorted({n for j in jobs if j["kind"] == "stack" for n, _ in j["members"]})  # noqa: E731
    assert names(stacks.jobs_of([b, a], slots=1, time_total=600)) == ["enfake-ru/L1H12"]
    assert names(stacks.jobs_of([b, a], slots=1, time_total=1200)) == ["enfake-ru/L1H12"]
    assert names(stacks.jobs_of([b, a], slots=1, time_total=1300)) == ["enfake-ru/L12H1"]
    assert names(stacks.jobs_of([b, a], slots=1, time_total=1500)) == ["enfake-ru/L12H1", "enfake-ru/L1H12"]


def test_a_later_cell_s_longer_evaluation_must_leave_the_earlier_cells_room(tmp_path, monkeypatch):
    """Two slots, 600 s. A: 4 models of 100 s as one stack (445 s with its start-up), evaluation 100 s; B: 1 model
    (145 s), evaluation 300 s. A fits (445 + 100); with B the tail becomes 300 s and A's stack alone needs 745 s: B
    waits. 800 s holds both."""
    from xlrepro.papers.k2020 import stacks
    from xlrepro.papers.k2020.bbert import Cell
    plan = smoke_plan(steps=100)
    a = Cell(plan, "smoke", "enfake-ru/L1H12", [0, 1, 2, 3], root=tmp_path)
    b = Cell(plan, "smoke", "enfake-ru/L12H1", [0], root=tmp_path)
    _timed(tmp_path, a, b)
    monkeypatch.setattr(stacks, "eval_seconds", lambda c: {"enfake-ru/L1H12": 100.0, "enfake-ru/L12H1": 300.0}[c.name])
    fresh = [(a, s) for s in a.seeds] + [(b, 0)]
    seconds = lambda c: 100.0  # noqa: E731
    assert stacks.cells_that_fit([], fresh, 2, 600, seconds, {}) == ["enfake-ru/L1H12"]
    assert stacks.cells_that_fit([], fresh, 2, 800, seconds, {}) == ["enfake-ru/L1H12", "enfake-ru/L12H1"]


def test_a_call_s_time_limit_cuts_the_stacks_and_the_dealt_plan_must_fit_the_total(tmp_path):
    """--time-limit 200: a stack may train 155 s, one 100 s model (145 s with its start-up). A and B, 3 seeds each,
    on 2 slots: six stacks of one, dealt 3 to a slot: 435 s + 240 > 600, though the work shared evenly would fit
    (2 x 345 / 2 + 240 = 585); B's three stacks are dropped, A's three fit (290 + 240 = 530)."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import jobs_of
    plan = smoke_plan(steps=100)
    a, b = (Cell(plan, "smoke", n, [0, 1, 2], root=tmp_path) for n in ("enfake-ru/L1H12", "enfake-ru/L12H1"))
    _timed(tmp_path, a, b)
    stacks = lambda **kw: sorted([f"{n}/{s}" for n, s in j["members"]] for j in jobs_of([a, b], slots=2, **kw)  # noqa
                                 if j["kind"] == "stack")
    assert len(stacks(time_limit=200)) == 6 and all(len(s) == 1 for s in stacks(time_limit=200))
    assert stacks() == [[f"enfake-ru/L12H1/{s}" for s in range(3)], [f"enfake-ru/L1H12/{s}" for s in range(3)]]
    assert stacks(time_limit=200, time_total=600) == [["enfake-ru/L1H12/0"], ["enfake-ru/L1H12/1"],
                                                      ["enfake-ru/L1H12/2"]]


def test_time_total_is_checked_and_a_last_call_is_its_own_time_limit():
    from xlrepro.papers.k2020.stacks import check_time_total
    assert check_time_total(540, None) == (540, None)
    assert check_time_total(None, 600) == (600, 600)  # no limit: this call may use all of it
    assert check_time_total(540, 1500) == (540, 1500)
    assert check_time_total(540, None, last_call=True) == (540, 540)
    with pytest.raises(ConfigError, match="cannot be below the time_limit"):
        check_time_total(540, 500)
    with pytest.raises(ConfigError, match="positive"):
        check_time_total(540, 0)
    with pytest.raises(ConfigError, match="a last call's time_total is its time_limit"):
        check_time_total(540, 600, last_call=True)


def test_the_plan_fills_the_seconds_left_after_start_up_and_data_preparation(tmp_path, monkeypatch):
    """A call of 1080 s whose preparation took 120 s plans for 960 s: a plan made with the whole call held two
    stacks of 888 s that the runner then refused (they could not finish and be evaluated in the 959 s left), and their
    GPUs stayed idle."""
    from xlrepro.papers.k2020 import stacks
    assert stacks.seconds_after(1080, 1080, 120) == (960, 960)
    assert stacks.seconds_after(540, 1500, 40.5) == (499.5, 1459.5)
    assert stacks.seconds_after(None, None, 120) == (None, None)
    assert stacks.seconds_after(100, 300, 250) == (0, 50)  # nothing is planned past the end
    clock = iter([1000.0, 1120.0])  # the call's start, then the end of the preparation
    monkeypatch.setattr(stacks, "launched_at", lambda: next(clock))
    monkeypatch.setattr(stacks.time, "time", lambda: next(clock))
    monkeypatch.setattr(stacks, "prepare", lambda *a, **k: None)
    planned = []
    monkeypatch.setattr(stacks, "jobs_of", lambda *a: planned.append(a[-2:]) or [])
    monkeypatch.setattr(stacks, "run_queue", lambda *a, **k: None)
    monkeypatch.setattr(stacks, "collect", lambda cells: None)
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path))
    stacks.run_part("t11", "smoke", [0], time_limit=1080, time_total=1080, progress=False)
    assert planned == [(960.0, 960.0)]


def test_only_cells_with_work_left_get_their_pair_tables_built(tmp_path, monkeypatch):
    """Of three cells: one evaluated for every seed (as `pilots --restore` leaves it) and one whose table exists are
    left alone; the third is built."""
    from xlrepro.papers.k2020 import stacks
    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path))
    cells = stacks.part_cells("t11", "smoke", [0, 1])
    done, built, left = cells
    for seed in (0, 1):
        done.dir.mkdir(parents=True, exist_ok=True)
        (done.dir / f"results_{seed}.csv").write_text("experiment\n")
        for path in (done.ner_results_path(seed), done.adjacency_results_path(seed)):
            path.write_text("experiment\n")
    built.dir.mkdir(parents=True, exist_ok=True)
    (built.dir / "pairs.npz").write_bytes(b"")
    assert [c.name for c in stacks.tables_to_build(cells)] == [left.name]
    (done.dir / "results_1.csv").unlink()  # a seed to evaluate again: its table is needed
    assert [c.name for c in stacks.tables_to_build(cells)] == [done.name, left.name]


def test_a_stack_that_cannot_finish_within_the_calls_that_follow_is_not_started(tmp_path, capsys):
    """The 485 s stack (2 models of 100 s, start-up 45 s, an evaluation 240 s) with 400 s left in this call: 50 s in
    the calls that follow leave 450 s, too few; the runner leaves it and says so."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import job_runner
    cell = Cell(smoke_plan(steps=100), "smoke", "enfake-ru/L1H12", [0, 1], root=tmp_path)
    _timed(tmp_path, cell)
    spec = {"kind": "stack", "members": [[cell.name, 0], [cell.name, 1]]}
    assert job_runner({cell.name: cell}, "cpu", later=50.0)(spec, 400.0) is None
    assert "cannot finish and be evaluated in the 450 s left" in capsys.readouterr().out
    assert job_runner({cell.name: cell}, "cpu", last_call=True)(spec, 484.0) is None


def test_a_char_cell_plans_at_its_own_padded_width_and_stacks_apart_from_word_pieces(tmp_path):
    """A word-piece stack timed at 10 ms per model-step: the char cell of the same size is not read as measured (its
    128-wide rows cost more than word pieces' 76) but calibrated on it, above 10 ms; once a char stack is timed, its
    own 17 ms is read. The two never share a stack."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import measured_step_ms, shape_step_ms
    from xlrepro.papers.k2020.trainer import stack_shape
    plan = smoke_plan()
    pieces, chars = (Cell(plan, "smoke", n, [0], root=tmp_path) for n in ("enfake-ru", "enfake-ru/char"))
    assert pieces.size.name == chars.size.name and chars.exp.tokenization == "char"
    assert stack_shape(pieces) != stack_shape(chars)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "timing.json").write_text(json.dumps({"shape": pieces.size.name, "ms_per_model_step": 10.0}))
    measured = measured_step_ms(tmp_path)
    assert measured == {pieces.size.name: 10.0}  # a record without a tokenization was timed on word pieces
    assert shape_step_ms(pieces, measured) == (10.0, "measured")
    ms, where = shape_step_ms(chars, measured)
    assert where == "similar shape" and ms > 12.0
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "timing.json").write_text(json.dumps({"shape": chars.size.name, "tokenization": "char",
                                                            "ms_per_model_step": 17.0}))
    measured = measured_step_ms(tmp_path)
    assert measured == {pieces.size.name: 10.0, f"{chars.size.name}/char": 17.0}
    assert shape_step_ms(chars, measured) == (17.0, "measured")
    assert shape_step_ms(pieces, measured) == (10.0, "measured")


def test_a_cell_with_its_own_linear_layers_trains_alone_with_that_lever(tmp_path, monkeypatch):
    """The FP8 switch's check cells: en-es/mm and en-es/fp8 have keys of their own (en-es keeps its key), train one
    model per stack (the base cell's seeds share one), and hand their linear layers to the engine as a lever."""
    import xlrepro.engine.pretrain as engine_pretrain
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.trainer import StackTrainer, plan_stacks
    plan = smoke_plan()
    base, mm, fp8 = (Cell(plan, "smoke", n, [0, 1, 2], root=tmp_path) for n in ("en-es", "en-es/mm", "en-es/fp8"))
    assert len({base.key, mm.key, fp8.key}) == 3
    assert Cell(plan, "lab", "en-es").key == "a39b5dedf1760303"  # the published lab cell's key, unchanged
    stacks = plan_stacks([(c, s) for c in (base, mm) for s in c.seeds], slots=1)
    assert sorted(len(st) for st in stacks if st[0][0] is mm) == [1, 1, 1]
    assert [len(st) for st in stacks if st[0][0] is base] == [3]
    given = []
    monkeypatch.setattr(engine_pretrain, "new_stack", lambda *a, **k: given.append(k.get("levers")))
    StackTrainer([(mm, 0)])._new_stack()
    StackTrainer([(base, 0)])._new_stack()
    assert given[0].linear == "mm" and given[1] is None


def test_a_stack_is_timed_by_the_speed_of_stacks_of_its_size(tmp_path):
    """One shape timed in two stacks of 2 models (1.5 s a model-step) and one of 3 (1.0 s): pooled, 1.5 s (the
    median of the three); by size, a stack of 2 or fewer at 1.5 s (no smaller stack was timed), of 3 or more at 1.0 s
    (a larger stack's model-steps cost no more). Four seeds of 100 steps in a call of 500 s (455 s of training after a
    stack's 45 s start-up): by the pooled speed a stack holds 3 models at most (450 s), so the plan cuts the four into
    two stacks of 2; by the stacked one it holds 4 (400 s), so the plan makes one stack of 4, timed at 4 x 100 x 1.0 s
    + 45 s."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import jobs_of, measured_step_ms, stack_seconds, stacked_step_ms
    plan = smoke_plan(steps=100)
    cell = Cell(plan, "smoke", "enfake-ru/L1H12", [0, 1, 2, 3], root=tmp_path)
    shape = cell.size.name
    for key, ms, n in (("a", 1500.0, 2), ("b", 1500.0, 2), ("c", 1000.0, 3)):
        (tmp_path / "stacks" / key).mkdir(parents=True)
        (tmp_path / "stacks" / key / "timing.json").write_text(json.dumps(
            {"shape": shape, "ms_per_model_step": ms, "members": [f"x/{i}" for i in range(n)]}))
    measured = measured_step_ms(tmp_path / "stacks")
    assert measured == {shape: 1500.0, f"{shape}@2": 1500.0, f"{shape}@3": 1000.0}
    assert [stacked_step_ms(measured, shape, n) for n in (1, 2, 3, 4, 16)] == [1500.0, 1500.0, 1000.0, 1000.0, 1000.0]
    assert stacked_step_ms(measured, "other", 3) is None
    members = [(cell, s) for s in cell.seeds]
    assert stack_seconds(members, measured) == 4 * 100 * 1.0 + 45
    assert stack_seconds(members[:1], measured) == 100 * 1.5 + 45
    stacks = [j["members"] for j in jobs_of([cell], slots=1, time_limit=500) if j["kind"] == "stack"]
    assert stacks == [[[cell.name, s] for s in (0, 1, 2, 3)]]
    pooled = {shape: 1500.0}  # the same records without their members
    for key in "abc":
        record = json.loads((tmp_path / "stacks" / key / "timing.json").read_text())
        del record["members"]
        (tmp_path / "stacks" / key / "timing.json").write_text(json.dumps(record))
    assert measured_step_ms(tmp_path / "stacks") == pooled
    stacks = [j["members"] for j in jobs_of([cell], slots=1, time_limit=500) if j["kind"] == "stack"]
    assert sorted(map(len, stacks)) == [2, 2]


def test_a_cell_passed_over_fills_a_slot_that_a_dropped_cell_left_idle(tmp_path):
    """As above (--time-limit 200: stacks of one 100 s model, 145 s each; 2 slots, 600 s, evaluations 240 s), with a
    third cell C of one seed after B in the part. Evenly shared, A and B fit (2 x 345 / 2 + 240 = 585) and C does not
    (835 / 2 + 240 = 657), but dealt, A and B do not, so B is dropped. C is tried again then: A's three stacks and
    C's one, dealt two to a slot, take 290 s + 240 = 530, so C is planned; B is tried again too and still waits."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import jobs_of
    plan = smoke_plan(steps=100)
    a, b = (Cell(plan, "smoke", n, [0, 1, 2], root=tmp_path) for n in ("enfake-ru/L1H12", "enfake-ru/L12H1"))
    c = Cell(plan, "smoke", "enfake-ru/L2H12", [0], root=tmp_path)
    assert len({a.size.name, b.size.name, c.size.name}) == 3
    _timed(tmp_path, a, b, c)
    jobs = jobs_of([a, b, c], slots=2, time_limit=200, time_total=600)
    stacks = sorted([f"{n}/{s}" for n, s in j["members"]] for j in jobs if j["kind"] == "stack")
    assert stacks == [["enfake-ru/L1H12/0"], ["enfake-ru/L1H12/1"], ["enfake-ru/L1H12/2"], ["enfake-ru/L2H12/0"]]
    evals = sorted(f"{n}/{s}" for j in jobs if j["kind"] == "eval" for n, s in j["members"])
    assert evals == ["enfake-ru/L1H12/0", "enfake-ru/L1H12/1", "enfake-ru/L1H12/2", "enfake-ru/L2H12/0"]


def test_a_stack_is_bounded_by_the_speed_of_its_own_size(tmp_path):
    """Stacks timed at 2 models (1.5 s a model-step) and at 5 (1.0 s); four seeds of 100 steps; a call of 500 s
    (455 s of training). At the cheapest speed a stack would hold 4 models (400 s), but a stack of 4 is timed at its
    nearest measured size not above it, 2: 600 s, too long; 3 at that speed take 450 s: the plan cuts the four into
    stacks of at most 3, none of one where more are left."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.stacks import jobs_of
    plan = smoke_plan(steps=100)
    cell = Cell(plan, "smoke", "enfake-ru/L1H12", [0, 1, 2, 3], root=tmp_path)
    for key, ms, n in (("a", 1500.0, 2), ("b", 1000.0, 5)):
        (tmp_path / "stacks" / key).mkdir(parents=True)
        (tmp_path / "stacks" / key / "timing.json").write_text(json.dumps(
            {"shape": cell.size.name, "ms_per_model_step": ms, "members": [f"x/{i}" for i in range(n)]}))
    stacks = [j["members"] for j in jobs_of([cell], slots=1, time_limit=500) if j["kind"] == "stack"]
    assert sorted(map(len, stacks)) == [2, 2]


def test_an_nsp_model_keeps_its_time_when_a_passed_over_cell_is_tried_again(tmp_path):
    """One slot, 10,000 steps: stacked models of 100 s (10 ms a step), a stack's start-up 45 s, an NSP model 520 s
    (NSP_STEP_MS), evaluations 240 s. A (145 s) and then the NSP cell N (565 s with its start-up) fit 951 s (950 with
    the evaluation); B (145 s) after them does not. Tried again, B does not fit either: with N's 520 s the slot would
    take 810 s + 240; only the stacks (290 s + 240) would have let it in."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.config import NSP_STEP_MS
    from xlrepro.papers.k2020.stacks import jobs_of
    assert NSP_STEP_MS == 52.0
    plan = smoke_plan(steps=10_000)
    a, n, b = (Cell(plan, "smoke", x, [0], root=tmp_path) for x in ("enfake-ru/L1H12", "enfake-ru/nsp",
                                                                   "enfake-ru/L12H1"))
    assert n.alone and not a.alone and not b.alone
    _timed(tmp_path, a, b, ms=10.0)
    jobs = jobs_of([a, n, b], slots=1, time_total=951)
    trained = sorted((j["kind"], m) for j in jobs if j["kind"] in ("stack", "nsp") for m, _ in j["members"])
    assert trained == [("nsp", "enfake-ru/nsp"), ("stack", "enfake-ru/L1H12")]


def test_speeds_by_stack_size_come_from_the_closest_source_that_timed_the_shape():
    """Pooled (eager and compiled): s at 25 ms in stacks of 2; compiled alone: s at 8 ms in stacks of 3. A compiled
    plan reads s from the compiled source, with its sizes only, so a compiled stack of 2 is not timed at the eager
    25 ms; t, timed in the pooled source alone, keeps its sizes from there."""
    from xlrepro.papers.k2020.stacks import closest_first, stacked_step_ms
    pooled = {"s": 20.0, "s@2": 25.0, "s@3": 8.0, "t": 50.0, "t@1": 50.0}
    compiled = {"s": 8.0, "s@3": 8.0}
    merged = closest_first([pooled, compiled])
    assert merged == {"s": 8.0, "s@3": 8.0, "t": 50.0, "t@1": 50.0}
    assert stacked_step_ms(merged, "s", 2) == 8.0  # the smallest size timed there, not the pooled 25 ms
