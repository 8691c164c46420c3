#!/usr/bin/env bash
# Several jobs side by side on one machine, each in its own "lane" (a GPU or a set of GPUs), all stopped by one
# deadline, everything they write packed into ONE archive: a call returns at most 8 files, so $OUT gets only
# $OUT/lanes.tgz (the lanes' folders and logs) and $OUT/lanes.log (which lane ended how, and when).
# A lane is "NAME|GPUS|COMMAND": COMMAND runs under bash with CUDA_VISIBLE_DEVICES=GPUS (GPUS "-" leaves it unset,
# for commands that pick their GPUs themselves), W=$OUT/w/NAME (its folder: write results there) and OUT=$W, its
# output in $W/NAME.log. Chain steps of a lane with && or ;. The lanes wait on their own PIDs (never pgrep).
# Usage (repository root, on the node): bash scripts/device_lanes.sh SECONDS 'a|0|cmd ...' 'b|1,2|cmd ...' ...
#   e.g. bash scripts/device_lanes.sh 560 'bench|0|python3 -m xlrepro.cli bench --cases base --out $W' \
#            'spread|-|bash scripts/device_grid_spread.sh 2,3 20 --compile'
set -uo pipefail
limit=${1:?usage: device_lanes.sh SECONDS 'NAME|GPUS|COMMAND' ...}
shift
out=${OUT:-/tmp/out}
mkdir -p "$out/w"
start=$(date +%s)
log="$out/lanes.log"
pids=() names=()
for lane in "$@"; do
    IFS='|' read -r name gpus cmd <<< "$lane"
    [ -n "$name" ] && [ -n "$cmd" ] || { echo "bad lane '$lane': NAME|GPUS|COMMAND" >&2; exit 2; }
    w="$out/w/$name"
    mkdir -p "$w"
    (
        [ "$gpus" != "-" ] && export CUDA_VISIBLE_DEVICES=$gpus
        export W=$w OUT=$w
        timeout --signal=INT --kill-after=15 "$limit" bash -c "$cmd" > "$w/$name.log" 2>&1
    ) &
    pids+=($!) names+=("$name")
    echo "lane $name (GPUs $gpus) started: $cmd" | tee -a "$log"
done
pack() { (cd "$out" && tar czf lanes.tgz.tmp w lanes.log && mv lanes.tgz.tmp lanes.tgz); }
( while sleep 60; do pack; done ) &
packer=$!
for k in "${!pids[@]}"; do
    wait "${pids[$k]}"
    rc=$?
    echo "lane ${names[$k]}: exit $rc after $(( $(date +%s) - start )) s" | tee -a "$log"
    tail -n 3 "$out/w/${names[$k]}/${names[$k]}.log" | cut -c1-300
done
kill "$packer" 2>/dev/null
pack
echo "packed $(du -h "$out/lanes.tgz" | cut -f1) after $(( $(date +%s) - start )) s"
