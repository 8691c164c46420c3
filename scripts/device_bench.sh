#!/usr/bin/env bash
# The honest benchmark on ONE GPU in one call of at most 9 minutes: writes $OUT/bench.csv, $OUT/bench.png and
# $OUT/bench.log. Each case runs in its own process (the rows of a case share one process, hence one machine
# state), bounded twice: `xlrepro bench --budget-s` skips (and records as skipped) the engines that would start
# too late, and `timeout` kills a case that overruns (its finished rows are already in the CSV, written row by row).
# Usage (repository root, on the node): bash scripts/device_bench.sh [main|split|small|ragged|dp] [COMMIT]
#   main   (default) base, mBERT, small one after the other on one GPU: every HF row, ours, ours + no mask, ours with
#          the bias outside the batched product (with and without the mask), and 16 stacked small models; about 8
#          minutes on an H100 (estimate: compiles dominate), so the fp32 rows may be skipped by the case budgets.
#   split  the same three cases side by side on GPUs 0, 1 and 2 (each in its own process, with time for every row,
#          fp32 included): how the published rows were made, 7.5 minutes on 3 H200s. Writes $OUT/<case>/ and the
#          three merged into $OUT/bench.csv.
#   small  the small case alone (every HF row, ours, 16 stacked small models), 150 s on an H200 (2026-11-27): in main, the
#          stack's compile did not fit small's 130 s. Its CSV has the same columns: replace main's small rows.
#   ragged the packing levers on base-ragged (HF padded against ours packed with SDPA and FlexAttention, with and
#          without fused QKV); about 5 minutes. Its CSV has the same columns: append its rows to main's.
#   dp     data parallel on the first 2 visible GPUs (torchrun): base-dp, BERT-base 256 x 128 per GPU; rank 0 first
#          times HF compiled and ours alone, then HF compiled in DDP, ours with an eager all-reduce and ours with the
#          all-reduce in the CUDA graph on both GPUs. Its CSV has the same columns: append its rows to main's.
# COMMIT: recorded in every row (the node's copy has no .git); default: git rev-parse HEAD where it works.
set -uo pipefail
part=${1:-main}
commit=${2:-}
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/bench.log"
start=$(date +%s)
deadline=$(( start + 525 ))   # 15 s spare under the 9-minute call
py=${PYTHON:-python3}
commit_args=()
[ -n "$commit" ] && commit_args=(--commit "$commit")
$py -c 'import torch; print("torch", torch.__version__, "|", torch.cuda.get_device_name(0))' 2>&1 | tee -a "$log"

# case cap_seconds reserve_seconds engines...: the case gets min(cap, time left); engines that would start in its
# last `reserve` seconds are skipped and recorded as such (base and mBERT reserve 75 s: their fp32 row, last, takes
# about 65 s at 0.4 s a step; small's takes about 6 s).
run_case() {
    local case=$1 cap=$2 reserve=$3; shift 3
    local left=$(( deadline - $(date +%s) ))
    local limit=$(( cap < left ? cap : left ))
    if [ "$limit" -lt 40 ]; then
        echo "== $case: not run, $left s left of the call" | tee -a "$log"
        return
    fi
    echo "== $case: up to $limit s, engines $*" | tee -a "$log"
    timeout --signal=INT --kill-after=10 "$limit" $launch -m xlrepro.cli bench --cases "$case" --engines "$@" \
        --steps 50 --repeats 3 --warmup 10 --budget-s $(( limit - reserve )) --out "$out" "${commit_args[@]}" \
        2>&1 | grep -v "^W[0-9]" | tee -a "$log"
    echo "== $case: exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s of the call" | tee -a "$log"
}

launch=$py
case "$part" in
    dp)
        launch="$py -m torch.distributed.run --standalone --nproc_per_node 2"
        run_case base-dp 480 60 hf-compile ours hf-compile-ddp ours-ddp ours-ddp-graph
        ;;
    main)
        run_case base 200 75 hf-compile hf-bf16 ours ours-nomask ours-mm ours-nomask-mm hf-fp32
        run_case mbert 195 75 hf-compile hf-bf16 ours ours-nomask ours-mm ours-nomask-mm hf-fp32
        run_case small 130 15 hf-compile hf-bf16 ours ours-mm ours-stack hf-fp32
        ;;
    split)   # the published rows: base, mBERT and small side by side on GPUs 0, 1 and 2, each case in its own process
        for spec in "0 base 470 90" "1 mbert 470 90" "2 small 250 30"; do
            set -- $spec
            ( CUDA_VISIBLE_DEVICES=$1 timeout --signal=INT --kill-after=10 "$3" $py -m xlrepro.cli bench --cases "$2" \
                --engines hf-fp32 hf-bf16 hf-compile ours ours-nomask ours-mm ours-nomask-mm ours-stack \
                --steps 50 --repeats 3 --warmup 10 --budget-s $(( $3 - $4 )) --out "$out/$2" "${commit_args[@]}" \
                > "$out/$2.log" 2>&1 ) &
        done
        wait
        OUT_DIR=$out $py -c '
import os, pandas as pd
from pathlib import Path
from xlrepro.bench import COLUMNS
out = Path(os.environ["OUT_DIR"])
parts = [pd.read_csv(out / c / "bench.csv") for c in ("base", "mbert", "small") if (out / c / "bench.csv").exists()]
pd.concat(parts, ignore_index=True)[COLUMNS].to_csv(out / "bench.csv", index=False)
print(out / "bench.csv", sum(map(len, parts)), "rows")' 2>&1 | tee -a "$log"
        ;;
    small)   # the small case alone, with time for the 16-model stack's compile (130 s in main was too little)
        run_case small 500 30 hf-compile hf-bf16 ours ours-stack ours-nomask-qkv hf-fp32
        ;;
    ragged)
        run_case base-ragged 400 75 hf-compile hf-bf16 ours ours-packed ours-flex ours-packed-qkv ours-qkv hf-fp32
        ;;
    *)
        echo "usage: bash scripts/device_bench.sh [main|split|small|ragged|dp] [COMMIT]" >&2
        exit 2
        ;;
esac
echo "device_bench $part: $(( $(date +%s) - start )) s of wall time" | tee -a "$log"
