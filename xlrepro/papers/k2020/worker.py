"""A K et al. (2020) worker: bound to one device, it takes jobs (stacks, NSP models, evaluations) from the queue
folder that `stacks.run_part` wrote, until none is left or its time is up. Started once per slot (device x worker)."""
from __future__ import annotations

import argparse
from pathlib import Path

from .stacks import part_cells, work


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", required=True)
    ap.add_argument("--profile", default="lab")
    ap.add_argument("--queue", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--tag", required=True, help="this worker's name in claimed job files")
    ap.add_argument("--seeds", nargs="*", type=int)
    ap.add_argument("--root")
    ap.add_argument("--cache-dir")
    ap.add_argument("--deadline", type=float, help="a time.time() value: no job starts after it, and a running stack pauses there")
    ap.add_argument("--compile", choices=["none", "regional", "full"], default="none")
    ap.add_argument("--no-graphs", action="store_true")
    ap.add_argument("--kinds", nargs="*", choices=["stack", "nsp", "eval"], help="take only these jobs (default: all)")
    ap.add_argument("--last-call", action="store_true",
                    help="start no stack or NSP model that cannot finish and be evaluated before the deadline")
    a = ap.parse_args(argv)
    cells = part_cells(a.part, a.profile, a.seeds, a.cache_dir, a.root)
    work(Path(a.queue), {c.name: c for c in cells}, a.device, a.tag, a.deadline,
         compile=None if a.compile == "none" else a.compile, graphs=not a.no_graphs,
         kinds=set(a.kinds) if a.kinds else None, last_call=a.last_call)


if __name__ == "__main__":
    main()
