"""The engine's work queue (`xlrepro.engine.queue`): hand-made jobs, in one process, in threads sharing one store
(ranks without processes), and under torchrun with two CPU ranks."""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch.distributed as dist

from xlrepro.engine.queue import DONE, LEFT, NOT_STARTED, PAUSED, SKIPPED, Job, all_finished, run_queue

ROOT = Path(__file__).resolve().parents[1]


def test_one_process_runs_every_job_in_order_and_skips_the_done_ones():
    ran = []
    jobs = [Job({"n": n}) for n in (3, 2, 1)]
    states = run_queue(jobs, lambda spec, left: ran.append(spec["n"]) or True, done=lambda spec: spec["n"] == 2)
    assert ran == [3, 1]
    assert states == {0: DONE, 1: SKIPPED, 2: DONE} and all_finished(states)


def test_a_job_stopped_by_the_time_limit_stops_the_rank_and_the_rest_is_not_started():
    seen = []

    def run(spec, left):
        seen.append(left)
        return spec["n"] != 1  # the second job pauses (its checkpoint written)

    states = run_queue([Job({"n": n}) for n in range(3)], run, time_limit=100)
    assert states == {0: DONE, 1: PAUSED, 2: NOT_STARTED} and not all_finished(states)
    assert all(0 < s <= 100 for s in seen)  # each job is given what is left of the limit


def test_a_job_left_for_a_later_call_lets_the_rank_go_on():
    states = run_queue([Job({"n": n}) for n in range(3)], lambda spec, left: None if spec["n"] == 0 else True)
    assert states == {0: LEFT, 1: DONE, 2: DONE}


def test_a_job_that_reads_another_waits_for_it_and_is_given_up_when_it_did_not_finish():
    ran = []
    jobs = [Job({"n": "train a"}, "train"), Job({"n": "train b"}, "train"),
            Job({"n": "eval a"}, "eval", after=(0,)), Job({"n": "eval b"}, "eval", after=(1,))]

    def run(spec, left):
        ran.append(spec["n"])
        return None if spec["n"] == "train b" else True  # "train b" is left for a later call

    # lanes in the order given: the evaluations are taken first, held, and run once their training is done
    states = run_queue(jobs, run, lanes=["eval", "train"], poll=0.01)
    assert ran == ["train a", "eval a", "train b"]  # "eval b" is given up: the model it reads was not trained
    assert states == {0: DONE, 1: LEFT, 2: DONE, 3: LEFT}


def test_an_empty_plan_ends_at_once_on_a_rank_that_takes_one_lane():
    """Every job of a part done before the call: the plan is empty, and an evaluation-only rank has nothing to take
    (it raised KeyError: 'eval' before)."""
    assert run_queue([], lambda spec, left: True, lanes=["eval"]) == {}


def test_bad_plans_and_lanes_are_named():
    with pytest.raises(ValueError, match=r"job 0 reads job\(s\) \[5\]"):
        run_queue([Job({}, after=(5,))], lambda spec, left: True)
    with pytest.raises(ValueError, match=r"job 0 reads job\(s\) \[1\]: a job reads only jobs before it"):
        run_queue([Job({}, after=(1,)), Job({})], lambda spec, left: True)
    with pytest.raises(ValueError, match="unknown lane"):
        run_queue([Job({}, "train")], lambda spec, left: True, lanes=["eval"], name="other")
    with pytest.raises(ValueError, match="time_limit must be a positive number"):
        run_queue([Job({})], lambda spec, left: True, time_limit=0)


def test_ranks_sharing_a_store_run_every_job_exactly_once():
    """Three ranks as threads on one in-memory store; rank 2 takes evaluations only."""
    store, lock, ran, states = dist.HashStore(), threading.Lock(), [], {}
    jobs = [Job({"n": f"t{k}"}, "train") for k in range(6)] + [Job({"n": f"e{k}"}, "eval", after=(k,))
                                                               for k in range(6)]

    def run(spec, left):
        time.sleep(0.01)
        with lock:
            ran.append(spec["n"])
        return True

    def rank(r):
        states[r] = run_queue(jobs if r == 0 else None, run, store=store, rank=r, world=3, poll=0.01,
                              lanes=["eval"] if r == 2 else None)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(ran) == sorted(j.spec["n"] for j in jobs)  # each once
    assert all(ran.index(f"t{k}") < ran.index(f"e{k}") for k in range(6))  # an evaluation after its training
    assert states[0] == states[1] == states[2] == {i: DONE for i in range(12)}


def _torchrun(folder: Path, n: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "tests.queue_fake_jobs", str(folder), str(n)]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def test_two_cpu_ranks_under_torchrun_run_every_job_once_and_a_second_launch_skips_them(tmp_path):
    _torchrun(tmp_path, 8)
    lines = (tmp_path / "runs.log").read_text().split()
    names, ranks = lines[::2], lines[1::2]
    assert sorted(names) == sorted(f"j{k}" for k in range(8))  # every job, each exactly once
    assert set(ranks) == {"0", "1"}  # both ranks took jobs
    assert len(list((tmp_path / "results").glob("*.json"))) == 8
    first = json.loads((tmp_path / "states_0.json").read_text())
    assert first == json.loads((tmp_path / "states_1.json").read_text()) == {str(i): DONE for i in range(8)}
    _torchrun(tmp_path, 8)  # a second launch: all done already
    assert (tmp_path / "runs.log").read_text().split()[::2] == names
    assert json.loads((tmp_path / "states_1.json").read_text()) == {str(i): SKIPPED for i in range(8)}


@pytest.mark.slow  # ~27 s on 2 cores: `make test-all`; the two-rank queue itself is tested above with fake jobs
def test_a_tiny_grid_on_two_cpu_ranks_gives_the_numbers_of_one_process(tmp_path, lab):
    """Dufter & Schütze's models 0 and 3 dealt as for two GPUs (two stacks of one): each rank takes one stack from
    the queue; every model's metrics equal those of the same plan run in one process. About 27 s on 2 cores."""
    from tests.queue_grid_ranks import TINY
    from xlrepro.papers.dufter2020.config import load_chapter
    from xlrepro.papers.dufter2020.grid import grid_members, member_dir, run_grid

    out = _grid_ranks(tmp_path / "ranks")
    assert out.count("] done: 1 model (") == 2, out  # one stack a rank
    assert run_grid("dufter2020", ["0", "3"], [0], root=tmp_path / "one", device="cpu", gpus=2, progress=False,
                    **TINY)
    for m in grid_members(load_chapter("dufter2020"), ["0", "3"], [0], **TINY):
        ranks, one = (json.loads((member_dir(tmp_path / f, m) / "metrics.json").read_text()) for f in ("ranks", "one"))
        assert ranks["metrics"] == one["metrics"] and ranks["steps"] == one["steps"] == 12, m.key


def test_a_rank_past_its_time_limit_starts_nothing():
    ran = []
    states = run_queue([Job({"n": 0})], lambda spec, left: ran.append(spec) or True, time_limit=1e-9)
    assert ran == [] and states == {0: NOT_STARTED}


def test_the_time_limit_counts_from_the_launching_command(monkeypatch):
    """torchrun's ranks start seconds after the command that launched them: their time limit counts from its start."""
    seen = []
    monkeypatch.setenv("XLREPRO_LAUNCHED_AT", repr(time.time() - 50))
    run_queue([Job({})], lambda spec, left: seen.append(left) or True, time_limit=60)
    assert 9 < seen[0] <= 10
    monkeypatch.setenv("XLREPRO_LAUNCHED_AT", repr(time.time() - 70))  # past the limit already: nothing starts
    assert run_queue([Job({})], lambda spec, left: pytest.fail("it ran"), time_limit=60) == {0: NOT_STARTED}


def _grid_ranks(root: Path, *extra: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "tests.queue_grid_ranks", str(root), *extra]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


@pytest.mark.slow  # ~20 s on 2 cores
def test_data_parallel_goes_through_the_same_launcher(tmp_path, lab):
    """`data_parallel`: both CPU ranks (gloo) train every stack together, each on half of every batch; every model
    is done, and no rank took a stack of its own from the queue."""
    from tests.queue_grid_ranks import TINY
    from xlrepro.papers.dufter2020.config import load_chapter
    from xlrepro.papers.dufter2020.grid import grid_members, is_done
    out = _grid_ranks(tmp_path, "data-parallel")
    assert "] done:" not in out
    assert all(is_done(tmp_path, m) for m in grid_members(load_chapter("dufter2020"), ["0", "3"], [0], **TINY))
