#!/usr/bin/env bash
# Dufter & Schütze Table 3 (real languages) on a lent GPU node: prepare (tokenizers, knn table) once, then one shard
# of the 12 models per GPU (pretrain as one stack, fine-tune on English, zero-shot on German and Hindi). Resumable:
# a call cut by LIMIT checkpoints; the next call continues. Small results (metrics, configs, table3.csv) are packed
# into $OUT/table3.tgz every 30 s; weights never leave the node.
# Usage (repository root, on the node): bash scripts/device_dufter_table3.sh LIMIT_SECONDS
set -uo pipefail
limit=$1
runs=${XLREPRO_RUNS:-runs}
export XLREPRO_RUNS=$runs
root="$runs/dufter2020-table3/lab"
out=${OUT:-/tmp/out}
mkdir -p "$out" "$root"
pack() {
    python3 -m xlrepro.papers.dufter2020.real_languages --collect "$root/table3.csv" 2>/dev/null
    (cd "$runs" && find dufter2020-table3 \( -name "*.json" -o -name "table3.csv" \) -not -name "tokenizer-*" \
        | tar czf "$out/table3.tgz.tmp" -T -) && mv "$out/table3.tgz.tmp" "$out/table3.tgz"
}
( while sleep 30; do pack; done ) &
packer=$!
start=$(date +%s)
python3 -m xlrepro.papers.dufter2020.real_languages --prepare --root "$root"
gpus=$(python3 -c 'import torch; print(max(1, torch.cuda.device_count()))')
left=$(( limit - ($(date +%s) - start) - 30 ))
pids=()
for ((i = 0; i < gpus; i++)); do
    python3 -m xlrepro.papers.dufter2020.real_languages --root "$root" --shard "$i/$gpus" --device "cuda:$i" \
        --time-limit "$left" > "$root/shard$i.log" 2>&1 &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
tail -n 3 "$root"/shard*.log
echo "table3: exit $rc after $(( $(date +%s) - start )) s on $gpus GPU(s)"
kill "$packer" 2>/dev/null
pack
exit $rc
