#!/usr/bin/env bash
# The Dufter & Schütze grid spread over GPUs, timed: Table 1's BERT-small models (IDs 0-9, five seeds) at a shortened
# number of epochs, trained and evaluated by `xlrepro train dufter2020` on the GPUs named, from an empty runs folder
# and an empty compile cache. Run it once on one GPU and once on two (side by side on one machine is fine: they share
# nothing but the host) and compare the wall times. Writes $OUT/spread-<N>gpu.json (wall time, exit code, GPUs, the
# stacks' own timings), $OUT/spread-<N>gpu.log and $OUT/spread-<N>gpu-metrics.tgz (every model's metrics.json and
# config, to compare two runs' numbers, e.g. `--evaluation per-model` against the default stacked evaluation).
# SPREAD_TAG=name puts the name in the files' names instead of <N>gpu (two runs of one GPU count side by side).
# Usage (repository root, on the node): bash scripts/device_grid_spread.sh GPUS EPOCHS [train options...]
#   e.g. bash scripts/device_grid_spread.sh 2,3 20 --compile     and     bash scripts/device_grid_spread.sh 1 20 --compile
set -uo pipefail
gpus=$1 epochs=$2; shift 2
n=$(awk -F, '{print NF}' <<< "$gpus")
tag=${SPREAD_TAG:-${n}gpu}
out=${OUT:-/tmp/out}
work=$(mktemp -d)
mkdir -p "$out"
start=$(date +%s.%N)
CUDA_VISIBLE_DEVICES=$gpus XLREPRO_RUNS=$work/runs TORCHINDUCTOR_CACHE_DIR=$work/inductor \
    python3 -m xlrepro.cli train dufter2020 --ids 0 1 2 4 5 6 7 8 3 9 --epochs "$epochs" "$@" \
    > "$out/spread-${tag}.log" 2>&1
rc=$?
end=$(date +%s.%N)
START=$start END=$end RC=$rc GPUS=$gpus EPOCHS=$epochs WORK=$work ARGS="$*" python3 -c '
import glob, json, os, torch
e = os.environ
stacks = [json.load(open(p)) for p in sorted(glob.glob(e["WORK"] + "/runs/dufter2020/**/timing.json", recursive=True))]
names = [torch.cuda.get_device_name(int(i)) for i in e["GPUS"].split(",")]
print(json.dumps({"gpus": len(names), "gpu_names": names, "epochs": int(e["EPOCHS"]), "arguments": e["ARGS"],
                  "wall_seconds": float(e["END"]) - float(e["START"]), "exit_code": int(e["RC"]),
                  "started": float(e["START"]), "stacks": stacks},
                 indent=1))' > "$out/spread-${tag}.json"
(cd "$work/runs" && find dufter2020 -name "metrics.json" -o -name "config.json" | tar czf "$out/spread-${tag}-metrics.tgz" -T -)
tail -3 "$out/spread-${tag}.log"
cat "$out/spread-${tag}.json" | head -12
rm -rf "$work"
