"""A grid worker: bound to one device, it takes stack jobs from the queue folder until none is left.

Started by `grid.run_grid` once per GPU. A job is claimed by renaming its file (atomic), so two workers never
train the same stack; a job stopped by the time limit goes back to the queue and resumes from its checkpoint.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from xlrepro.config import plural
from xlrepro.engine.fused_bert import LINEARS

from .config import load_chapter
from .grid import StackRun, grid_members
from .lab import load_lab


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chapter", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--profile", default="lab")
    ap.add_argument("--device", required=True)
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--max-sentences", type=int)
    ap.add_argument("--time-limit", type=float)
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--compile", choices=["regional", "full"])
    ap.add_argument("--no-graphs", action="store_true")
    ap.add_argument("--evaluation", default="stacked", choices=["stacked", "per-model"])
    ap.add_argument("--linear", default="baddbmm", choices=list(LINEARS))
    a = ap.parse_args(argv)
    t0 = time.time()
    chapter, lab, root = load_chapter(a.chapter), load_lab(a.profile), Path(a.root)
    queue = root / "queue"
    tag = a.device.replace(":", "")
    while True:
        jobs = sorted(queue.glob("[0-9]*.json"))
        job = None
        for candidate in jobs:
            claimed = candidate.with_name(f"claimed-{tag}-{candidate.name}")
            try:
                os.rename(candidate, claimed)
                job = claimed
                break
            except FileNotFoundError:
                continue  # another worker took it
        if job is None:
            return
        members = [grid_members(chapter, [e], [s], [s], a.profile, a.epochs, a.max_sentences, a.batch_size)[0]
                   for e, s in json.loads(job.read_text())["members"]]
        left = None if a.time_limit is None else a.time_limit - (time.time() - t0)
        t_stack = time.time()
        done = StackRun(chapter, members, lab, root, a.device, a.epochs, a.max_sentences, batch_size=a.batch_size,
                        compile=a.compile, graphs=not a.no_graphs, evaluation=a.evaluation,
                        linear=a.linear).run(left, progress=False)
        print(f"[{a.device}] {'done' if done else 'paused'}: {plural(len(members), 'model')} "
              f"({','.join(sorted({m.exp.id for m in members}))}) in {time.time() - t_stack:.0f} s", flush=True)
        if done:
            job.unlink()
        else:
            os.rename(job, job.with_name(job.name.split("-", 2)[2]))
            return


if __name__ == "__main__":
    main()
