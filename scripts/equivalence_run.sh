#!/usr/bin/env bash
# Two Dufter & Schütze configurations (IDs 0 and 5) trained one by one (a stack of one model each, HF's own forward)
# and as one stack with the fused, compiled loss; the published run has the same models stacked with vmap.
# Same seeds -> the final perplexities should agree within the spread over seeds. Usage: bash scripts/equivalence_run.sh ROOT
set -euo pipefail
root=${1:-runs/dufter2020/equivalence}
python3 -c "from xlrepro.papers.dufter2020.grid import run_grid; run_grid('dufter2020', ['0', '5'], [0, 42], root='$root/alone', max_stack={'small': 1}, devices=['cuda:0'] * 4, progress=False)" &
XLREPRO_COMPILE=1 python3 -c "from xlrepro.papers.dufter2020.grid import run_grid; run_grid('dufter2020', ['0', '5'], [0, 42, 43, 100, 101], root='$root/fused', devices=['cuda:0'], progress=False)" &
wait
