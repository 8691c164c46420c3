#!/usr/bin/env bash
# K et al. 2020 on a GPU node: one part of experiments.yaml over all GPUs of the machine (stacks of same-shape
# B-BERTs, then fine-tuning and evaluation there: weights never leave the node). Small result files (results_*.csv,
# config.json, timing*.json; no weights, no checkpoints) are packed into $OUT/k2020.tgz every 30 s and at the end, so
# a call cut short still returns what finished. Checkpoints stay under $XLREPRO_RUNS (default ./runs), which persists
# between back-to-back calls on the same machine: repeat the same command to resume. Earlier machines' results come
# in .carry/k2020 (`bash scripts/carry_results.sh k2020` here, about 1 MB; carry `.carry` on every call): merged into
# $XLREPRO_RUNS/k2020 without overwriting, so cells with results are not trained again (`stacks.jobs_of`). Never carry
# runs/k2020 itself: a carried folder replaces the node's copy on every call, and with it the checkpoints and results
# of the runs before.
# Usage (repository root, on the node):  bash scripts/device_k2020.sh PART SECONDS [more xlrepro train options]
#   e.g. bash scripts/device_k2020.sh t1 480        # T1 (includes the pilot's cells), stops resumably after 480 s
#        bash scripts/device_k2020.sh t1 300 --last-call   # the machine's last call: start no stack whose models
#                                                         # could not be evaluated before the limit; evaluate instead
#        bash scripts/device_k2020.sh t3 60 --profile smoke     # CPU smoke
# Back home: mkdir -p runs && tar -xzf k2020.tgz -C runs   (the chapters then find the finished cells)
set -uo pipefail
part=${1:?usage: device_k2020.sh PART SECONDS [options]}
limit=${2:?usage: device_k2020.sh PART SECONDS [options]}
shift 2
py=${PYTHON:-python3}
runs=${XLREPRO_RUNS:-runs}
out=${OUT:-/tmp/out}
mkdir -p "$out" "$runs/k2020"
[ -d .carry/k2020 ] && cp -rn .carry/k2020/. "$runs/k2020/"   # -n: what this machine already has stays
pack() {
    (cd "$runs" && find k2020 \( -name "results_*.csv" -o -name "config.json" -o -name "timing*.json" \
        -o -name "wall-*.json" -o -name "*.log" \) -not -path "*/queue/*" 2>/dev/null | tar czf "$out/k2020.tgz.tmp" -T -) \
        && mv "$out/k2020.tgz.tmp" "$out/k2020.tgz"
}
( while sleep 30; do pack; done ) &
packer=$!
start=$(date +%s)
gpus=$($py -c 'import torch; print(torch.cuda.device_count())')
extra=()
# 2 workers per GPU make the stack plan; 4 more per GPU take evaluations only (one keeps a GPU about a tenth busy)
[ "$gpus" -gt 0 ] && extra=(--compile --workers-per-gpu 2 --eval-workers-per-gpu 4)
$py -m xlrepro.cli train k2020 --part "$part" --time-limit "$limit" "${extra[@]}" "$@" 2>&1 \
    | tee -a "$runs/k2020/train-$part.log" | grep -v "it/s\]$" | tail -n 40
rc=${PIPESTATUS[0]}
wall=$(( $(date +%s) - start ))
echo "k2020 $part: exit $rc after $wall s"
WALL=$wall RC=$rc PART=$part ARGS="$*" $py -c '
import json, os, torch
gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
print(json.dumps({"part": os.environ["PART"], "wall_seconds": int(os.environ["WALL"]), "exit_code": int(os.environ["RC"]),
                  "arguments": os.environ["ARGS"], "gpus": gpus}))' > "$runs/k2020/wall-$part-$(date +%s).json"
kill "$packer" 2>/dev/null
pack
exit $rc
