#!/usr/bin/env bash
# Train the Dufter & Schütze grid on a GPU node and pack results as they finish, so that a run cut short by its
# time limit still returns every model finished so far (metrics, curves, timings; no weights) in $OUT/grid.tgz.
# Usage (repository root, on the node): bash scripts/device_grid.sh SECONDS [xlrepro train options...]
#   e.g. bash scripts/device_grid.sh 540 --compile        (runs go to $XLREPRO_RUNS, default ./runs)
# PACK_WEIGHTS="0/0 1/0 9/0" also packs those members' weights (the figures' models) into $OUT/weights.tgz at the end.
set -uo pipefail
limit=$1; shift
runs=${XLREPRO_RUNS:-runs}
out=${OUT:-/tmp/out}
mkdir -p "$out"
pack() {
    find "$runs/dufter2020" -name "*.json" -not -path "*/queue/*" 2>/dev/null | tar czf "$out/grid.tgz.tmp" -T - \
        && mv "$out/grid.tgz.tmp" "$out/grid.tgz"
}
( while sleep 30; do pack; done ) &
packer=$!
start=$(date +%s)
python3 -m xlrepro.cli train dufter2020 --time-limit "$limit" "$@"
rc=$?
wall=$(( $(date +%s) - start ))
echo "grid: exit $rc after $wall s of wall time"
WALL=$wall RC=$rc ARGS="$*" python3 -c '
import json, os, torch
gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
print(json.dumps({"wall_seconds": int(os.environ["WALL"]), "exit_code": int(os.environ["RC"]),
                  "arguments": os.environ["ARGS"], "gpus": gpus}))' > "$runs/dufter2020/grid_wall.json"
kill "$packer" 2>/dev/null
pack
if [ -n "${PACK_WEIGHTS:-}" ]; then
    (cd "$runs" && for m in $PACK_WEIGHTS; do ls dufter2020/*/"$m"/*/model.safetensors; done | tar czf "$out/weights.tgz" -T -)
fi
exit $rc
