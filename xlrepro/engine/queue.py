"""A work queue over `torch.distributed`'s store: one rank per GPU (or per worker slot), on one machine or several.

A recipe cuts its training into jobs (a stack of models, a fine-tuning cell, an evaluation): each an opaque,
JSON-serialisable description that the queue hands to the recipe's own function. Every rank runs the same call:

    states = run_queue(jobs, run_job, done=lambda spec: results_exist(spec), name="grid", time_limit=3600)

where `run_job(spec, seconds_left)` returns True (done), False (stopped by the time limit: a checkpoint is written,
this rank takes no more jobs) or None (not run in this call: left for a later one; the rank goes on).

How the jobs are shared out. Rank 0's list is the plan: it goes into the store once (`jobs`), and every rank reads
it there, so all ranks hand out the same jobs even where their file systems differ. The jobs come in the order the
recipe gives them (the planner's: the longest first, so the last to finish is a short one). A rank takes the next
job with the store's atomic counter (`store.add("next/<lane>", 1)`): no two ranks ever take the same job, and no
file is renamed or polled. A job whose results exist already (`done(spec)`) is skipped, so a second launch of the
same command resumes where the first stopped. A job may read another's results (`Job.after`: an evaluation after
the stack that trains its model): the rank holds it, goes on with other jobs, and runs it once those are done (or
gives it up when one of them stopped unfinished). Jobs come in lanes (`Job.lane`); a rank takes from the lanes it
is given (`lanes=`, default all, in the order they first appear), e.g. extra ranks that only evaluate.

Launching. `torchrun` starts the ranks and gives them the store (`torch.distributed.rendezvous("env://")`):

    torchrun --nproc-per-node 4 -m xlrepro.cli train <paper> ...               one machine, four GPUs
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
             --rdzv-endpoint HOST:29500 -m xlrepro.cli train <paper> ...         two machines (the same on each)

No process group is joined: each rank trains alone on its own GPU (`rank_device`), so a stack trains exactly as in a
single process. Without torchrun the queue runs every job in this process (rank 0 of 1, an in-memory store), so
nothing requires torchrun on one GPU; `launch` starts torchrun from a command that was given more than one slot.
Data parallelism (every rank on a share of each batch of one stack, `distributed.py`) goes through the same
launcher; a recipe chooses it instead of the queue.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable, Sequence

import torch.distributed as dist

# The states of a job at the end of a call
DONE = "done"            # run to its end in this call
SKIPPED = "skipped"      # its results were there already
PAUSED = "paused"        # stopped by the time limit (resumes from its checkpoint)
LEFT = "left"            # not run in this call: the recipe's function said so, or a job it reads did not finish
NOT_STARTED = "not started"  # no rank took it before the time limit (or its rank stopped first)
FINISHED = (DONE, SKIPPED)

WAIT = timedelta(days=7)  # how long a rank waits for rank 0's plan (rank 0 may prepare data first)
LAUNCHED_AT = "XLREPRO_LAUNCHED_AT"  # set by `launch`: when the command that started torchrun began (time.time())


@dataclass(frozen=True)
class Job:
    """One job of the queue. spec: the recipe's description (JSON-serialisable), handed to its function.
    lane: ranks take jobs only from their lanes. after: indices of jobs before this one in the list whose results
    it reads; it runs once they are done or skipped."""
    spec: dict
    lane: str = "work"
    after: tuple[int, ...] = ()

    def to_json(self) -> dict:
        return {"spec": self.spec, "lane": self.lane, "after": list(self.after)}

    @staticmethod
    def from_json(d: dict) -> "Job":
        return Job(d["spec"], d["lane"], tuple(d["after"]))


def queue_world() -> tuple[int, int]:
    """(rank, world size) that torchrun describes in the environment; (0, 1) without it."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def under_torchrun() -> bool:
    return queue_world()[1] > 1


def local_slot() -> tuple[int, int]:
    """(this rank's index on its machine, ranks on its machine): torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE."""
    return int(os.environ.get("LOCAL_RANK", "0")), int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def rank_device() -> str:
    """This rank's device: GPU (local rank modulo the machine's GPUs, so several ranks may share one), else "cpu"."""
    import torch
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return f"cuda:{local_slot()[0] % n}" if n else "cpu"


def launched_at() -> float:
    """When this call's time limit starts: the launching command's start where `launch` started torchrun (so the
    ranks' start-up counts against it, as the command's caller expects), else now."""
    return min(time.time(), float(os.environ.get(LAUNCHED_AT, "inf")))


def default_store() -> dist.Store:
    """The store that torchrun's rendezvous opened for this job (the launcher's, or rank 0's); an in-memory one for
    a single process."""
    if not under_torchrun():
        return dist.HashStore()
    store, _, _ = next(dist.rendezvous("env://"))
    return store


def run_queue(jobs: Sequence[Job] | None, run: Callable[[dict, float | None], bool | None], *,
              done: Callable[[dict], bool] = lambda spec: False, name: str = "jobs", time_limit: float | None = None,
              lanes: Sequence[str] | None = None, store: dist.Store | None = None, rank: int | None = None,
              world: int | None = None, poll: float = 1.0, describe: Callable[[dict], str] | None = None,
              local: bool = False, started: float | None = None) -> dict[int, str]:
    """Run the queue's jobs on this rank until none is left, or the time limit; returns every job's state (DONE,
    SKIPPED, PAUSED, LEFT, NOT_STARTED) by index, the same on every rank: the call returns once every rank is done.

    jobs: the plan (read on rank 0 only; the other ranks may pass None). run(spec, seconds_left): the recipe's
    function (see the module's docstring). done(spec): whether a job's results exist (it is then skipped).
    name: the queue's name in the store (one call per name and launch). time_limit: seconds from `started` (a
    time.time() value; default `launched_at()`); no job starts after it, and the running one gets what is left.
    lanes: the lanes this rank takes from.
    store, rank, world: torchrun's by default (`default_store`, `queue_world`); a test may pass its own.
    local: run every job in this process, whatever torchrun says (under data parallelism every rank runs the whole
    list in step, each on its share of every batch).
    """
    if time_limit is not None and time_limit <= 0:
        raise ValueError(f"time_limit must be a positive number of seconds or None; got {time_limit}")
    t0 = launched_at() if started is None else started
    env_rank, env_world = (0, 1) if local else queue_world()
    if local:
        store = dist.HashStore()
    rank, world = env_rank if rank is None else rank, env_world if world is None else world
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} outside a world of {world}")
    store = dist.PrefixStore(f"xlrepro-queue/{name}/", store if store is not None else default_store())
    if rank == 0:
        if jobs is None:
            raise ValueError("rank 0 needs the job list (the plan)")
        for i, job in enumerate(jobs):
            bad = [a for a in job.after if not 0 <= a < i]
            if bad:
                raise ValueError(f"job {i} reads job(s) {bad}: a job reads only jobs before it in the list "
                                 f"(0..{i - 1}; so no two wait for each other)")
        store.set("jobs", json.dumps([j.to_json() for j in jobs]))
    else:
        store.wait(["jobs"], WAIT)
    plan = [Job.from_json(d) for d in json.loads(store.get("jobs"))]
    order = list(dict.fromkeys(j.lane for j in plan))
    lanes = order if lanes is None else list(lanes)
    unknown = [lane for lane in lanes if lane not in order]
    if unknown and plan:
        raise ValueError(f"unknown lane(s) {unknown}; this queue's lanes: {', '.join(order)}")
    # a lane this rank takes that the plan does not have (an empty plan: every job of a part done) hands out nothing
    by_lane = {lane: [i for i, j in enumerate(plan) if j.lane == lane] for lane in [*order, *lanes]}
    describe = describe or (lambda spec: json.dumps(spec)[:100])
    say = (lambda text: print(f"[rank {rank}/{world}] {text}", flush=True)) if world > 1 else (lambda text: None)

    def state(i: int) -> str | None:
        return store.get(f"state/{i}").decode() if store.check([f"state/{i}"]) else None

    def settle(i: int, s: str) -> None:
        store.set(f"state/{i}", s)

    def left() -> float | None:
        return None if time_limit is None else time_limit - (time.time() - t0)

    def execute(i: int) -> bool:
        """Run job i (its inputs done); False when the rank must stop (paused by the time limit)."""
        spec = plan[i].spec
        if done(spec):
            settle(i, SKIPPED)
            return True
        started = time.time()
        ok = run(spec, left())
        s = DONE if ok else (LEFT if ok is None else PAUSED)
        settle(i, s)
        say(f"{s}: {describe(spec)} in {time.time() - started:.0f} s")
        return ok is not False

    held: list[int] = []  # jobs this rank took whose inputs are not done yet
    lanes_left = list(lanes)
    going = True
    while going and (lanes_left or held):
        if left() is not None and left() <= 0:
            break
        progressed = False
        for i in list(held):  # a held job whose inputs are settled: run it, or give it up
            inputs = [state(a) for a in plan[i].after]
            if all(s in FINISHED for s in inputs):
                held.remove(i)
                progressed = True
                if not execute(i):
                    going = False
                    break
            elif any(s is not None and s not in FINISHED for s in inputs):
                held.remove(i)
                settle(i, LEFT)
                say(f"{LEFT}: {describe(plan[i].spec)} (a job it reads did not finish)")
        if not going:
            break
        if lanes_left:
            lane = lanes_left[0]
            k = store.add(f"next/{lane}", 1) - 1
            if k >= len(by_lane[lane]):
                lanes_left.pop(0)
                continue
            i = by_lane[lane][k]
            progressed = True
            if plan[i].after and done(plan[i].spec):
                settle(i, SKIPPED)
            elif plan[i].after:
                held.append(i)
            elif not execute(i):
                break
        elif not progressed:
            time.sleep(poll)
    for i in held:
        settle(i, NOT_STARTED)
    store.add("finished", 1)
    while store.add("finished", 0) < world:  # every rank settles its jobs before anyone reports
        time.sleep(poll)
    return {i: state(i) or NOT_STARTED for i in range(len(plan))}


def all_finished(states: dict[int, str]) -> bool:
    """Whether every job of a call is done or was done already."""
    return all(s in FINISHED for s in states.values())


def launch(argv: Sequence[str], nproc: int, module: str = "xlrepro.cli", threads: int | None = None,
           started: float | None = None) -> int:
    """Run `python -m <module> <argv>` under torchrun on this machine, `nproc` ranks (`--standalone`: a free port),
    and wait for it; returns its exit status. Each rank gets `threads` CPU threads (default: the cores shared out);
    a time limit of the ranks' queues counts from `started` (default: now; `launched_at`)."""
    if nproc < 1:
        raise ValueError(f"nproc must be >= 1; got {nproc}")
    threads = threads or max(1, (os.cpu_count() or 1) // nproc)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           "-m", module, *argv]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), LAUNCHED_AT: repr(started or launched_at())}
    proc = subprocess.Popen(cmd, env=env)
    try:
        return proc.wait()
    except BaseException:  # Ctrl-C, SIGTERM (a deadline): torchrun passes SIGTERM on to its ranks, which clean up
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
