#!/usr/bin/env bash
# Liu et al. 2020 on a 4-GPU node: train the four BERTs (one per GPU) and GloVe, then evaluate them there (weights
# never leave the node). Results are small CSV/JSON files in $XLREPRO_RUNS/liu2020/lab/gpu-results, packed into
# $OUT/liu.tgz every 30 s and at the end, so a call cut short still returns what finished.
# Usage (repository root, on the node; two calls that follow each other on the same machine):
#   bash scripts/device_liu.sh train 540      # 4 BERTs in parallel + GloVe + Word2Vec (CPU); resumable, stops at 540 s
#   bash scripts/device_liu.sh evaluate 540   # finishes any BERT left over, then all evaluations on 4 GPUs
#   bash scripts/device_liu.sh train 60 --smoke ; bash scripts/device_liu.sh evaluate 120 --smoke   # CPU smoke
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
models=(small-w512 small-w20 big-w512 big-w20)
if [ -n "$smoke" ]; then
    res="$runs/liu2020/smoke/gpu-results"; bert="$runs/liu2020/smoke/bert"; devices=(cpu cpu cpu cpu); shards=2
else
    res="$runs/liu2020/lab/gpu-results"; bert="$runs/liu2020/lab/bert"; devices=(cuda:0 cuda:1 cuda:2 cuda:3); shards=4
fi
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
if [ "$phase" = train ]; then
    for i in 0 1 2 3; do
        $py -m xlrepro.cli train liu2020 --part bert --models "${models[$i]}" --device "${devices[$i]}" \
            --time-limit "$limit" $smoke > "$res/train-${models[$i]}.log" 2>&1 &
        pids+=($!)
    done
    if [ -z "$smoke" ]; then  # GloVe beside the BERTs (small tensors; its co-occurrence counts run on the CPU)
        $py -m xlrepro.cli train liu2020 --part glove --device cuda:3 --time-limit "$limit" > "$res/train-glove.log" 2>&1 &
        pids+=($!)
        # Word2Vec (gensim, CPU cores) for the static zero-shot runs: its vectors are too large to carry here
        timeout $(( limit + 30 )) $py -m xlrepro.cli train liu2020 --part word2vec --device cpu --time-limit "$limit" \
            > "$res/train-word2vec.log" 2>&1 &
        pids+=($!)
    fi
else
    # a BERT the first call left unfinished gets at most a quarter of this call
    for i in 0 1 2 3; do
        [ -f "$bert/${models[$i]}/training.json" ] && continue
        $py -m xlrepro.cli train liu2020 --part bert --models "${models[$i]}" --device "${devices[$i]}" \
            --time-limit $(( limit / 4 )) $smoke >> "$res/train-${models[$i]}.log" 2>&1
    done
    left=$(( limit - ($(date +%s) - start) - 90 ))  # no task starts in the last 90 s
    [ "$left" -lt 10 ] && left=10
    for i in $(seq 0 $(( shards - 1 ))); do
        $py -m xlrepro.papers.liu2020.evaluate --out "$res" --shard "$i/$shards" --device "${devices[$i]}" \
            --time-limit "$left" $smoke > "$res/evaluate-$i.log" 2>&1 &
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
                  "exit_code": int(os.environ["RC"]), "gpus": gpus}))' > "$res/wall-$phase.json"
kill "$packer" 2>/dev/null
pack
tail -n 3 "$res"/*.log
exit $rc
