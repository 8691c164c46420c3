#!/usr/bin/env bash
# What Dufter & Schütze still needs from a GPU, on a node of one to three GPUs, in one resumable command:
# Table 3 (real languages: one stack of 6 models per GPU, then their fine-tuning) and Table 10 (model 17 trained for
# 250 epochs, seeds 0, 42 and 43, one BERT-base per seed; with --compile a stack of one BERT-base is compiled too).
# Each GPU is a lane that works through its list and stops, resumably, at the call's deadline (Table 3: the shard's
# stack is pretrained, then its models are fine-tuned by N processes side by side):
#   lane 0: Table 3 shard 0/2, Table 10 seed 0,  then seed 43 unless lane 1 took it
#   lane 1: Table 3 shard 1/2, Table 10 seed 42, then seed 43 unless lane 0 took it
# (with one GPU, lane 0 does all of it; with `table10` and three or more GPUs, lanes 0-2 take seeds 0, 42 and 43 and
# the other GPUs stay free for other work). Each Table 10 seed trains under its own runs folder (runs/t10-<seed>), so
# that two grid commands never share a job queue; their results unpack into the same runs/dufter2020 at home.
# Small results come back in $OUT/table3.tgz and $OUT/grid.tgz (every 30 s and at the end); weights never leave.
# Usage (repository root, on the node): bash scripts/device_dufter_rest.sh LIMIT_SECONDS [all|table3|table10] [N]
#   table10: the Table 10 seeds only (Table 3 done elsewhere: a fresh node has none of its runs)
#   N: Table 3 fine-tuning processes per GPU (default 6, one per model of a shard: one fine-tuning keeps an H200
#      about a fifth busy with 3 GB)
# Back home: tar -xzf table3.tgz -C runs && tar -xzf grid.tgz -C runs
set -uo pipefail
limit=${1:?usage: device_dufter_rest.sh LIMIT_SECONDS [all|table3|table10] [N]}
only=${2:-all}
finetunes=${3:-6}
case "$only" in all|table3|table10) ;; *) echo "unknown part '$only'; valid: all, table3, table10" >&2; exit 2;; esac
py=${PYTHON:-python3}
runs=${XLREPRO_RUNS:-runs}
out=${OUT:-/tmp/out}
t3="$runs/dufter2020-table3/lab"
mkdir -p "$out" "$t3" "$runs/claims"
start=$(date +%s)
deadline=$(( start + limit ))
log="$out/lanes.log"
say() { echo "[$(( $(date +%s) - start )) s] $*" | tee -a "$log"; }

pack() {
    XLREPRO_RUNS="$runs" $py -m xlrepro.papers.dufter2020.real_languages --collect "$t3/table3.csv" 2>/dev/null
    (cd "$runs" && find dufter2020-table3 \( -name "*.json" -o -name "table3.csv" -o -name "*.log" \) \
        -not -name "tokenizer-*" | tar czf "$out/table3.tgz.tmp" -T -) && mv "$out/table3.tgz.tmp" "$out/table3.tgz"
    local args=() d
    for d in "$runs"/t10-*; do  # absolute folders: each -C is relative to the one before
        [ -d "$d/dufter2020" ] && args+=(-C "$(cd "$d" && pwd)" dufter2020)
    done
    [ ${#args[@]} -gt 0 ] && tar czf "$out/grid.tgz.tmp" --exclude="*/queue/*" --exclude="*.safetensors" \
        --exclude="*.pt" --exclude="*.bin" "${args[@]}" \
        && mv "$out/grid.tgz.tmp" "$out/grid.tgz"
}

left() { echo $(( deadline - $(date +%s) )); }

table3() {  # lane gpus: pretrain the shard's stack, then its fine-tunings side by side on the lane's GPU
    local lane=$1 gpus=$2 l k rc
    [ "$only" = table10 ] && return 0
    [ -e "$runs/claims/t3-$lane.done" ] && return 0
    l=$(( $(left) - 30 ))
    [ "$l" -lt 60 ] && return 1
    say "lane $lane: Table 3 shard $lane/$gpus pretraining, $l s"
    XLREPRO_RUNS="$runs" $py -m xlrepro.papers.dufter2020.real_languages --root "$t3" --shard "$lane/$gpus" \
        --device "cuda:$lane" --time-limit "$l" --pretrain-only >> "$t3/shard$lane.log" 2>&1
    rc=$?
    [ "$rc" -ne 0 ] && { say "lane $lane: Table 3 pretraining exit $rc"; return "$rc"; }
    # a fine-tuning (about 95 s alone on an H200, slower side by side) checks the deadline between rates only
    l=$(( $(left) - 240 ))
    [ "$l" -lt 60 ] && return 1
    say "lane $lane: Table 3 shard $lane/$gpus fine-tuning, $finetunes processes, $l s"
    local pids=()
    for ((k = 0; k < finetunes; k++)); do
        XLREPRO_RUNS="$runs" $py -m xlrepro.papers.dufter2020.real_languages --root "$t3" --shard "$lane/$gpus" \
            --device "cuda:$lane" --time-limit "$l" --finetune-part "$k/$finetunes" >> "$t3/shard$lane-ft$k.log" 2>&1 &
        pids+=($!)
    done
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    say "lane $lane: Table 3 shard $lane/$gpus exit $rc"
    [ "$rc" -eq 0 ] && touch "$runs/claims/t3-$lane.done"
    return "$rc"
}

table10() {  # lane seed
    local lane=$1 seed=$2 l
    [ "$only" = table3 ] && return 0
    [ -e "$runs/claims/t10-$seed.done" ] && return 0
    local claim="$runs/claims/t10-$seed"   # the first lane to get here trains this seed
    mkdir "$claim" 2>/dev/null && echo "$lane" > "$claim/lane"
    [ "$(cat "$claim/lane" 2>/dev/null)" = "$lane" ] || return 0
    l=$(( $(left) - 20 ))
    [ "$l" -lt 90 ] && return 1
    say "lane $lane: Table 10 seed $seed, $l s"
    mkdir -p "$runs/t10-$seed"
    CUDA_VISIBLE_DEVICES=$lane XLREPRO_RUNS="$runs/t10-$seed" $py -m xlrepro.cli train dufter2020 --ids 17-250 \
        --large-seeds "$seed" --compile --time-limit "$l" >> "$runs/t10-$seed/train.log" 2>&1
    local rc=$?
    tail -n 2 "$runs/t10-$seed/train.log" | tee -a "$log"
    grep -q "grid complete" "$runs/t10-$seed/train.log" && touch "$runs/claims/t10-$seed.done"
    say "lane $lane: Table 10 seed $seed exit $rc"
}

lane() {  # lane gpus
    local lane=$1 gpus=$2 own=$(( $1 == 0 ? 0 : 42 ))
    if [ "$only" = table10 ] && [ "$gpus" -ge 3 ]; then
        table10 "$lane" "$(( lane == 0 ? 0 : lane == 1 ? 42 : 43 ))"
        return
    fi
    if [ "$gpus" -eq 1 ]; then
        table3 0 1 && table10 0 0 && table10 0 42 && table10 0 43
        return
    fi
    table3 "$lane" "$gpus" || return
    [ "$only" = table3 ] && return
    table10 "$lane" "$own"
    [ -e "$runs/claims/t10-$own.done" ] && table10 "$lane" 43
}

( while sleep 30; do pack; done ) &
packer=$!
lanes=2; [ "$only" = table10 ] && lanes=3
gpus=$($py -c "import torch; print(min($lanes, torch.cuda.device_count()))")
say "$gpus GPU(s): $($py -c 'import torch; print(", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())))')"
[ "$only" = table10 ] || XLREPRO_RUNS="$runs" $py -m xlrepro.papers.dufter2020.real_languages --prepare --root "$t3" >> "$log" 2>&1
pids=()
for ((i = 0; i < gpus; i++)); do lane "$i" "$gpus" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done
kill "$packer" 2>/dev/null
pack
ls "$runs/claims" | tee -a "$log"
cat "$t3"/stacks/*/timing.json 2>/dev/null | tee -a "$log"
say "done"
