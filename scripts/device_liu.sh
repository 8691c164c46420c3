#!/usr/bin/env bash
# Liu et al. 2020 on a GPU node of any size: train the four BERTs (spread over the GPUs, one process per GPU that
# trains its share one after the other) and GloVe, then evaluate them there (weights never leave the node). Results
# are small CSV/JSON files in $XLREPRO_RUNS/liu2020/lab/gpu-results, packed into $OUT/liu.tgz every 30 s and at the
# end, so a call cut short still returns what finished.
# Usage (repository root, on the node; calls that follow each other on the same machine):
#   bash scripts/device_liu.sh train 540      # the BERTs + GloVe (+ Word2Vec where gensim is installed); resumable
#   bash scripts/device_liu.sh evaluate 540   # finishes any BERT left over (in parallel), then the evaluations,
#                                             # one shard per GPU; repeat until every task is done
#   bash scripts/device_liu.sh train 60 --smoke ; bash scripts/device_liu.sh evaluate 120 --smoke   # CPU smoke
# Word2Vec's zero-shot runs need gensim, which the node image lacks: where it is missing they are skipped here and
# run on a CPU machine (`python -m xlrepro.papers.liu2020.evaluate --kinds static`, the vectors already there).
# Back home: mkdir -p runs/liu2020/lab/gpu-results && tar -xzf liu.tgz -C runs/liu2020/lab/gpu-results
set -uo pipefail
phase=${1:?usage: device_liu.sh train|evaluate SECONDS [--smoke]}
limit=${2:?usage: device_liu.sh train|evaluate SECONDS [--smoke]}
smoke=${3:-}
case "$phase" in train|evaluate) ;; *) echo "unknown phase $phase; valid: train evaluate" >&2; exit 2;; esac
case "$smoke" in ""|--smoke) ;; *) echo "unknown option $smoke; valid: --smoke" >&2; exit 2;; esac
py=${PYTHON:-python3}
runs=${XLREPRO_RUNS:-runs}
out=${OUT:-/tmp/out}
# big-w512 first: L §4 and Table 4 read it, so it is the one to have if a call is cut short
models=(big-w512 small-w20 small-w512 big-w20)
if [ -n "$smoke" ]; then
    res="$runs/liu2020/smoke/gpu-results"; bert="$runs/liu2020/smoke/bert"; devices=(cpu cpu); shards=2
else
    res="$runs/liu2020/lab/gpu-results"; bert="$runs/liu2020/lab/bert"
    n=$($py -c 'import torch; print(torch.cuda.device_count())')
    [ "$n" -ge 1 ] 2>/dev/null || { echo "no CUDA device found (torch.cuda.device_count() = $n)" >&2; exit 2; }
    devices=(); for i in $(seq 0 $(( n - 1 ))); do devices+=("cuda:$i"); done; shards=$n
fi
ndev=${#devices[@]}
share() {  # the models of device $1 (round robin) that have not finished
    local g=$1 i
    for i in "${!models[@]}"; do
        [ $(( i % ndev )) -eq "$g" ] && [ ! -f "$bert/${models[$i]}/training.json" ] && echo -n "${models[$i]} "
    done
}
mkdir -p "$out" "$res"
pack() {  # the training records (no weights) travel with the results
    for m in "${models[@]}"; do
        for f in config.json training.json; do
            [ -f "$bert/$m/$f" ] && mkdir -p "$res/training/$m" && cp "$bert/$m/$f" "$res/training/$m/$f"
        done
    done
    for f in "$runs"/liu2020/lab/static/*/training.json; do
        [ -f "$f" ] && grep -q '"device": "cuda' "$f" && d="$res/training/static/$(basename "$(dirname "$f")")" \
            && mkdir -p "$d" && cp "$f" "$(dirname "$f")/config.json" "$d/"
    done
    tar czf "$out/liu.tgz.tmp" -C "$res" . && mv "$out/liu.tgz.tmp" "$out/liu.tgz"
}
( while sleep 30; do pack; done ) &
packer=$!
start=$(date +%s)
pids=()
train_shares() {  # $1: seconds; one process per device, its models one after the other
    local g m
    for g in $(seq 0 $(( ndev - 1 ))); do
        m=$(share "$g"); [ -z "$m" ] && continue
        # shellcheck disable=SC2086  # $m: the model names, one word each
        $py -m xlrepro.cli train liu2020 --part bert --models $m --device "${devices[$g]}" \
            --time-limit "$1" $smoke >> "$res/train-gpu$g.log" 2>&1 &
        pids+=($!)
    done
}
if [ "$phase" = train ]; then
    train_shares "$limit"
    if [ -z "$smoke" ]; then  # GloVe beside the BERTs (small tensors; its co-occurrence counts run on the CPU)
        $py -m xlrepro.cli train liu2020 --part glove --device "${devices[$(( ndev - 1 ))]}" --time-limit "$limit" \
            > "$res/train-glove.log" 2>&1 &
        pids+=($!)
        # Word2Vec (gensim, CPU cores) for the static zero-shot runs: its vectors are too large to carry here
        if $py -c 'import gensim' 2>/dev/null; then
            timeout $(( limit + 30 )) $py -m xlrepro.cli train liu2020 --part word2vec --device cpu \
                --time-limit "$limit" > "$res/train-word2vec.log" 2>&1 &
            pids+=($!)
        else
            echo "gensim missing: Word2Vec's zero-shot runs are left to a CPU machine" > "$res/train-word2vec.log"
        fi
    fi
else
    # BERTs the first call left unfinished get at most a third of this call, in parallel
    train_shares $(( limit / 3 ))
    for p in "${pids[@]}"; do wait "$p"; done
    pids=()
    left=$(( limit - ($(date +%s) - start) - 90 ))  # no task starts in the last 90 s
    [ "$left" -lt 10 ] && left=10
    for i in $(seq 0 $(( shards - 1 ))); do
        $py -m xlrepro.papers.liu2020.evaluate --out "$res" --shard "$i/$shards" --device "${devices[$i]}" \
            --time-limit "$left" $smoke >> "$res/evaluate-$i.log" 2>&1 &
        pids+=($!)
    done
fi
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
wall=$(( $(date +%s) - start ))
echo "liu2020 $phase: exit $rc after $wall s"
WALL=$wall RC=$rc PHASE=$phase $py -c '
import json, os, torch
gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
print(json.dumps({"phase": os.environ["PHASE"], "wall_seconds": int(os.environ["WALL"]),
                  "exit_code": int(os.environ["RC"]), "gpus": gpus}))' > "$res/wall-$phase-$start.json"  # one record per call
kill "$packer" 2>/dev/null
pack
tail -n 3 "$res"/*.log
exit $rc
