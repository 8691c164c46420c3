#!/usr/bin/env bash
# Do compiled stacks of every Table 7 shape stay compiled? (Inductor's stride checks failed on the single-head,
# unaligned shapes L16H1, L24H1, L36H1 in two GPU runs; the stack then went on eagerly, slower.) Trains K et al.'s
# t7 cells from scratch in a throw-away runs folder, compiled and with CUDA graphs as the real runs train, for SECONDS,
# then prints each stack's shape, steps and compile fallbacks from its progress.json and writes them to
# $OUT/compile_check.json. Nothing of the book's runs is read or written; the models are thrown away.
# Usage (repository root, on a GPU node set up by scripts/node_setup.sh):
#   [COMMIT=abc1234] bash scripts/device_compile_check.sh [SECONDS] [WORKERS_PER_GPU]   (default 300 s, 2 workers
#   per GPU; COMMIT is recorded in the JSON: the node's copy has no .git)
# SECONDS: at least 300 (`xlrepro train` refuses shorter limits); no t7 stack finishes in 300 s, so none is evaluated.
# A pass: every stack reports "fallbacks: none". All seven t7 stacks train at once with 8 slots (4 GPUs x 2 workers,
# or 2 GPUs x 4); exit 1 when no stack reported (the training's own last lines say why).
set -uo pipefail
limit=${1:-300}
workers=${2:-2}
py=${PYTHON:-python3}
out=${OUT:-/tmp/out}
check=$(mktemp -d)
mkdir -p "$out"
XLREPRO_RUNS=$check $py -m xlrepro.cli train k2020 --part t7 --time-limit "$limit" --compile --workers-per-gpu "$workers" \
    --eval-workers-per-gpu 0 --max-stack 3 2>&1 | grep -v "it/s\]$" | grep -v -i "warn\|^$" | tail -n 20
CHECK=$check LIMIT=$limit OUT_FILE=$out/compile_check.json $py - <<'PY'
import json, os
from pathlib import Path
rows = []
for f in sorted(Path(os.environ["CHECK"]).glob("k2020/lab/stacks/*/progress.json")):
    p = json.loads(f.read_text())
    rows.append({"shape": p.get("shape"), "step": p["step"], "fallbacks": p.get("compile_fallbacks", [])})
    print(f"{p.get('shape')}: {p['step']} steps, fallbacks: "
          f"{'; '.join(x['error'][:120] + ' at step ' + str(x['step']) for x in rows[-1]['fallbacks']) or 'none'}")
import datetime, torch
Path(os.environ["OUT_FILE"]).write_text(json.dumps({
    "device": f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}", "torch": torch.__version__,
    "commit": os.environ.get("COMMIT") or None, "seconds": int(os.environ["LIMIT"]),
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "stacks": rows}, indent=1))
print(f"{len(rows)} stacks checked")
raise SystemExit(0 if rows else 1)
PY
rc=$?
rm -rf "$check"
exit $rc
