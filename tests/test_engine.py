"""The engine's planner, checkpoint format and pre-training loop (xlrepro/engine/) on hand-made cases."""
import numpy as np
import pytest
import torch

from xlrepro.config import ModelSize
from xlrepro.engine import checkpoint as ckpt
from xlrepro.engine import planner
from xlrepro.engine.fused_bert import Levers
from xlrepro.engine.models import init_model
from xlrepro.engine.pretrain import every_n, pretrain_loop
from xlrepro.engine.stacked import ModelStack, OptimConfig

TINY = ModelSize("tiny", 8, 1, 2, 16, 1e-2)
OPT = OptimConfig(lr=1e-2, weight_decay=0.01, eps=1e-6, warmup_steps=1, total_steps=4, max_grad_norm=1.0)


# --- planner ---------------------------------------------------------------------------------------------------
def test_deal_cuts_a_group_into_stacks_dealt_in_turn():
    assert planner.deal(list("abcde"), 2) == [["a", "d"], ["b", "e"], ["c"]]
    assert planner.deal(list("abc"), 5) == [["a", "b", "c"]]
    # 15 models at 5 a stack on two GPUs: 4 stacks (4 + 4 | 4 + 3), not 3 (5 + 5 | 5)
    assert [len(s) for s in planner.deal(list(range(15)), 5, gpus=2)] == [4, 4, 4, 3]
    assert planner.deal(list(range(3)), 5, gpus=8) == [[0], [1], [2]]  # never more stacks than models
    assert planner.deal([], 3) == []
    assert planner.deal(list("abc"), 2, gpus=0) == planner.deal(list("abc"), 2)  # no GPU: one device
    with pytest.raises(ValueError, match="per_stack must be >= 1"):
        planner.deal([1], 0)


def test_share_slots_keeps_small_groups_whole_and_cuts_a_big_one():
    # 8 slots over groups of 24, 2 and 2 models: 7 | 1 | 1 slots (rounded shares, at least one) -> 4, 2, 2 a stack
    assert planner.share_slots([24, 2, 2], 8, 16) == [4, 2, 2]
    assert planner.share_slots([40], 1, 16) == [16]  # one slot: stacks as large as allowed
    with pytest.raises(ValueError, match="slots and max_stack must be >= 1"):
        planner.share_slots([3], 0, 16)


def test_take_slots_gives_each_job_to_the_slot_with_the_least_work_so_far():
    # 5, 4, 3, 3 over 2 slots: 5 -> 0, 4 -> 1, 3 -> 1 (4 < 5), 3 -> 0 (5 < 7)
    assert planner.take_slots([5.0, 4.0, 3.0, 3.0], 2) == ([0, 1, 1, 0], [8.0, 7.0])
    assert planner.take_slots([], 3) == ([], [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="slots must be >= 1"):
        planner.take_slots([1.0], 0)


def test_wrap_stacks_cuts_the_groups_where_equal_shares_of_the_time_end():
    # 24 + 3 models of one time over 4 slots of 6.75: the 24 fall 7 | 6 | 7 | 4, the 3 into the last slot; taking the
    # longest first, the four workers end at 7, 6, 7 and 4 + 3 models (a share each of 6 | 6 | 6 | 6 + 3 ends at 9)
    assert planner.wrap_stacks([24, 3], [1.0, 1.0], 4, 16) == [[7, 6, 7, 4], [3]]
    # the times weigh: 3 models of 4 s and 6 of 1 s are 18 s, 3 slots of 6 s; the slow models' middles fall at 2, 6
    # and 10 s (slots 0, 1, 1), the fast ones' in slot 2; the slow piece of one joins its group unless allowed
    assert planner.wrap_stacks([3, 6], [4.0, 1.0], 3, 16, min_piece=1) == [[1, 2], [6]]
    assert planner.wrap_stacks([3, 6], [4.0, 1.0], 3, 16) == [[3], [6]]
    assert planner.wrap_stacks([40], [1.0], 1, 16) == [[14, 13, 13]]  # one slot: as few even stacks as fit under 16
    assert planner.wrap_stacks([3, 3], [1.0, 1.0], 6, 16) == [[3], [3]]  # no stack of one where the group has more
    assert planner.wrap_stacks([3, 3], [1.0, 1.0], 6, 16, min_piece=1) == [[1, 1, 1], [1, 1, 1]]
    # a cap per group: the first group's pieces 7, 6, 7, 4 each cut into as few even stacks of at most 3 as fit
    assert planner.wrap_stacks([24, 3], [1.0, 1.0], 4, [3, 16]) == [[3, 2, 2, 3, 3, 3, 2, 2, 2, 2], [3]]
    with pytest.raises(ValueError, match="one per group"):
        planner.wrap_stacks([24, 3], [1.0, 1.0], 4, [3])
    assert planner.wrap_stacks([1, 0], [0.0, 0.0], 2, 16) == [[1], []]  # no times known: equal weights
    with pytest.raises(ValueError, match="min_piece must be >= 1"):
        planner.wrap_stacks([3], [1.0], 0, 16)
    with pytest.raises(ValueError, match="one non-negative number each per group"):
        planner.wrap_stacks([3, 2], [1.0], 2, 16)


def test_max_stack_by_engine_and_gpu_memory(monkeypatch):
    assert planner.max_stack(None) == {"small": 20, "base": 1}
    assert planner.max_stack(None, {"base": 3}) == {"small": 20, "base": 3}
    with pytest.raises(ValueError, match="unknown model size.*'huge'.*valid: base, small"):
        planner.max_stack(None, {"huge": 2})
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 2)
    memory = {0: 139, 1: 79}  # GiB: an H200 beside an H100; the smaller one decides
    monkeypatch.setattr("torch.cuda.get_device_properties",
                        lambda i: type("Props", (), {"total_memory": memory[i] * 2**30}))
    assert planner.max_stack(True) == {"small": 25, "base": 5}
    memory[1] = 139
    assert planner.max_stack(True) == {"small": 50, "base": 5}


def test_model_step_ms_by_size_and_engine(monkeypatch):
    assert planner.model_step_ms("base") == 25.0
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert planner.model_step_ms("small", True) == 1.1  # compiled where a GPU compiles
    with pytest.raises(ValueError, match="valid: base, small"):
        planner.model_step_ms("large")


def test_stack_levers_only_where_a_default_changes():
    assert planner.stack_levers("baddbmm", 3, "small") is None
    assert planner.stack_levers("baddbmm", 1, "small") == Levers(persistent_reductions=False)
    assert planner.stack_levers("baddbmm", 1, "base") is None
    assert planner.stack_levers("mm", 2, "base") == Levers(linear="mm")
    with pytest.raises(ValueError, match="baddbmm, mm"):
        planner.stack_levers("bmm", 1, "base")


# --- checkpoint ------------------------------------------------------------------------------------------------
def stack_of(seed=0):
    return ModelStack([init_model(TINY, 20, seed, attn="eager", positions=8)], OPT, torch.device("cpu"))


def test_checkpoint_round_trip_restores_the_stack_and_the_progress(tmp_path):
    a = stack_of(0)
    a.step_count = 3
    path = tmp_path / "sub" / "checkpoint.pt"
    ckpt.save(path, a, elapsed=12.5, losses=[[0, 2.5]], extra={"curves": {"x": 1}})
    b = stack_of(1)
    got = ckpt.load(path, b)
    assert (got.step, got.elapsed, got.losses, got.extra) == (3, 12.5, [[0, 2.5]],
                                                              {"fallbacks": [], "curves": {"x": 1}})
    assert b.step_count == 3
    assert all(torch.equal(a.params[k], b.params[k]) for k in a.params)
    assert not list(path.parent.glob("*.tmp*"))  # written atomically: no temporary file left
    read = ckpt.progress(path)  # without a stack: how far the run stands
    assert (read.step, read.elapsed, read.losses) == (3, 12.5, [[0, 2.5]])


def test_checkpoint_restores_the_generator_only_when_asked(tmp_path):
    a, b, c = stack_of(), stack_of(), stack_of()  # init_model seeds the generator: built first
    torch.manual_seed(7)
    ckpt.save(tmp_path / "c.pt", a, elapsed=0, losses=[])
    expected = torch.rand(3)
    torch.manual_seed(8)
    ckpt.load(tmp_path / "c.pt", b)
    assert not torch.equal(torch.rand(3), expected)
    ckpt.load(tmp_path / "c.pt", c, restore_rng=True)
    assert torch.equal(torch.rand(3), expected)


def test_an_older_checkpoint_loads_and_other_files_are_refused(tmp_path):
    a = stack_of()
    torch.save({"stack": a.state_dict(), "curves": [1, 2]}, tmp_path / "old.pt")  # no format, no elapsed
    got = ckpt.load(tmp_path / "old.pt", stack_of(1))
    assert (got.elapsed, got.losses, got.extra) == (0.0, None, {"curves": [1, 2]})
    # a stacked trainer's older file: its loss curve under "loss_curve", the compile fallbacks at the top
    torch.save({"stack": a.state_dict(), "elapsed": 7.0, "loss_curve": {4: [6.5]},
                "fallbacks": [{"step": 0, "error": "AssertionError"}]}, tmp_path / "k.pt")
    b = stack_of(1)
    got = ckpt.load(tmp_path / "k.pt", b)
    assert (got.elapsed, got.losses) == (7.0, {4: [6.5]}) and b.fallbacks == [{"step": 0, "error": "AssertionError"}]
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a training checkpoint"):
        ckpt.load(tmp_path / "other.pt", stack_of())
    torch.save({"format": 99, "stack": a.state_dict()}, tmp_path / "new.pt")
    with pytest.raises(ValueError, match="format 99"):
        ckpt.load(tmp_path / "new.pt", stack_of())


# --- the loop --------------------------------------------------------------------------------------------------
def fixed_batch(step):
    """The same two rows every step: [CLS] 5 6 7 [SEP] with piece 6 masked (label 6)."""
    ids = torch.tensor([[[2, 5, 4, 7, 3], [2, 5, 4, 7, 3]]])  # [1, B=2, W=5]
    attention = torch.ones((1, 2, 1, 1, 5), dtype=torch.bool)
    pos = torch.arange(5).expand(1, 2, 5)
    sel_index, sel_labels = torch.tensor([[2, 7]]), torch.tensor([[6, 6]])  # flat positions in the [B * W] rows
    return (lambda: (ids, attention, pos, torch.zeros_like(ids), sel_index, sel_labels)), None


def test_every_n_keeps_every_nth_step_and_the_last():
    curve = []
    record = every_n(2, 5)
    shown = [record(curve, s, torch.tensor([float(s)])) for s in range(5)]
    assert curve == [[0, 0.0], [2, 2.0], [4, 4.0]] and shown == ["0.000", None, "2.000", None, "4.000"]
    record, curve = every_n(3, 4), []
    for s in range(4):
        record(curve, s, torch.tensor([s, 10.0 * s]))
    assert curve == [[0, [0.0, 0.0]], [3, [3.0, 30.0]]]  # a stack of two: both losses


def test_the_loop_stops_at_the_limit_resumes_and_ends_as_an_uninterrupted_run(tmp_path):
    evals = []
    whole = pretrain_loop(stack_of(), fixed_batch, steps=4, checkpoint=tmp_path / "w.pt", progress=False, loss_every=1,
                          seed=0, on_eval=lambda stack, curve, s: evals.append(stack.step_count), eval_every=2)
    stack, curve, seconds = whole
    assert [s for s, _ in curve] == [0, 1, 2, 3] and evals == [0, 2, 4] and seconds >= 0
    assert curve[-1][1] < curve[0][1]  # it learns the one masked piece
    assert pretrain_loop(stack_of(), fixed_batch, steps=4, checkpoint=tmp_path / "c.pt", progress=False,
                         loss_every=1, time_limit=0) is None  # one step, then the checkpoint
    assert ckpt.load(tmp_path / "c.pt", stack_of()).step == 1
    resumed = pretrain_loop(stack_of(), fixed_batch, steps=4, checkpoint=tmp_path / "c.pt", progress=False,
                            loss_every=1)
    assert [s for s, _ in resumed[1]] == [0, 1, 2, 3]
    stopped = pretrain_loop(stack_of(), fixed_batch, steps=4, checkpoint=tmp_path / "e.pt", progress=False,
                            on_eval=lambda stack, curve, s: stack.step_count == 2, eval_every=2)
    assert stopped is None and ckpt.load(tmp_path / "e.pt", stack_of()).step == 2  # on_eval asked to stop
    with pytest.raises(ValueError, match="steps must be >= 1"):
        pretrain_loop(stack_of(), fixed_batch, steps=0, checkpoint=tmp_path / "x.pt")


# --- one model alone -------------------------------------------------------------------------------------------
def line_fit(device="cpu"):
    """y = 2x by a 1x1 linear layer, mean squared error; the same four points every step."""
    from xlrepro.engine.single import SingleModel
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    loss = lambda m, x, y: torch.nn.functional.mse_loss(m(x), y)  # noqa: E731
    return SingleModel(model, loss, lr=0.1, weight_decay=0.0, eps=1e-8, warmup_steps=0, total_steps=50,
                       max_grad_norm=10.0, device=device)


def line_batch(step):
    x = torch.tensor([[1.0], [2.0], [-1.0], [0.5]])
    return (lambda: (x, 2 * x)), None


def test_a_model_alone_trains_on_the_loop_and_resumes_to_the_same_weights(tmp_path):
    whole = pretrain_loop(line_fit(), line_batch, steps=50, checkpoint=tmp_path / "w.pt", progress=False)
    assert 1.9 < whole[0].model.weight.item() < 2.1  # from 0, AdamW with a decaying rate comes near the slope 2
    assert pretrain_loop(line_fit(), line_batch, steps=50, checkpoint=tmp_path / "c.pt", progress=False,
                         time_limit=0) is None
    resumed = pretrain_loop(line_fit(), line_batch, steps=50, checkpoint=tmp_path / "c.pt", progress=False)
    assert resumed[0].step_count == 50
    assert torch.equal(resumed[0].model.weight, whole[0].model.weight)  # no random draws: the same weights
    # the layout of an older single-model checkpoint ("model", "opt", "sched", "step" at the top) loads too
    fit = line_fit()
    fit.step(*line_batch(0))
    torch.save({**fit.state_dict(), "elapsed": 3.0}, tmp_path / "old.pt")
    got = ckpt.load(tmp_path / "old.pt", line_fit())
    assert (got.step, got.elapsed) == (1, 3.0)


def test_new_stack_names_its_engine_and_keys_the_draws_by_the_rows_it_holds():
    from xlrepro.engine.pretrain import new_stack
    models = lambda: [init_model(TINY, 20, s, attn="eager", positions=8) for s in (0, 1)]  # noqa: E731
    stack = new_stack(models(), OPT, "cpu", engine="fused", seeds=[0, 1], rows=torch.tensor([1, 3]))
    assert stack.engine == "fused" and stack.noise.rows.tolist() == [1, 3]  # rank 1 of 2 holds rows 1 and 3 of 4
    assert new_stack(models(), OPT, "cpu", engine="hf").engine == "hf"
    with pytest.raises(ValueError, match="valid values are hf, fused"):
        new_stack(models(), OPT, "cpu", engine=None)
    with pytest.raises(ValueError, match="need seeds"):
        new_stack(models(), OPT, "cpu", engine="fused", rows=torch.arange(4))
