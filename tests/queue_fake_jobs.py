"""Tiny fake jobs for tests/test_queue.py, run by every rank under torchrun: job k sleeps k hundredths of a second,
writes results/<name>.json (its result file) and appends a line to runs.log; a job whose result file exists is
skipped. Usage: python -m tests.queue_fake_jobs FOLDER JOBS."""
import json

import sys
import time
from pathlib import Path

from xlrepro.engine.queue import Job, all_finished, queue_world, run_queue


def main(folder: str, n: int) -> None:
    folder = Path(folder)
    (folder / "results").mkdir(parents=True, exist_ok=True)
    rank, _ = queue_world()

    def run(spec, left):
        time.sleep(spec["seconds"])
        with open(folder / "runs.log", "a") as log:
            log.write(f"{spec['name']} {rank}\n")
        (folder / "results" / f"{spec['name']}.json").write_text(json.dumps({"rank": rank}))
        return True

    jobs = [Job({"name": f"j{k}", "seconds": k / 100}) for k in reversed(range(n))]  # the longest first
    states = run_queue(jobs if rank == 0 else None, run, name="fake",
                       done=lambda spec: (folder / "results" / f"{spec['name']}.json").exists(), poll=0.05)
    (folder / f"states_{rank}.json").write_text(json.dumps(states))
    assert all_finished(states)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))

