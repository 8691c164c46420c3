#!/usr/bin/env bash
# The training check of `--linear mm` (the engineering appendix): Table 1's models 0 1 2 4 5 (25 BERT-small models,
# five seeds, the full 100 epochs, one compiled stack) trained from an empty runs folder and compile cache, with the
# train options given. Run it twice, side by side on two GPUs: once without options (the grid's baddbmm), once with
# --linear mm. Writes $W/metrics.tgz (every model's metrics.json, curve.json and the stack's timing.json).
# Usage (repository root, on the node): W=folder bash scripts/device_mm_check.sh [--linear mm]
#   (scripts/device_lanes.sh sets W for each lane)
set -uo pipefail
W=${W:-$PWD/runs/linear-check}
mkdir -p "$W"
XLREPRO_RUNS=$W/runs TORCHINDUCTOR_CACHE_DIR=$W/ind python3 -m xlrepro.cli train dufter2020 --ids 0 1 2 4 5 --compile \
    --time-limit 540 "$@"
echo "exit $?"
(cd "$W/runs" && find . -name metrics.json -o -name timing.json -o -name curve.json | tar czf "$W/metrics.tgz" -T -)
rm -rf "$W/runs" "$W/ind"
