#!/usr/bin/env bash
# Earlier machines' results of a paper, for the next GPU node: copies runs/PAPER's small record files (results_*.csv,
# config.json, timing*.json; no weights, checkpoints, tokenizers or queue) into .carry/PAPER. Carry `.carry` on every
# call; the device script merges it into runs/PAPER without overwriting anything there (`cp -rn`). Never carry
# runs/PAPER itself: a carried folder replaces the node's copy on every call, checkpoints and fresh results with it.
# Usage (repository root): bash scripts/carry_results.sh k2020
set -euo pipefail
paper=${1:?usage: carry_results.sh PAPER   (a folder of runs/, e.g. k2020)}
[ -d "runs/$paper" ] || { echo "no runs/$paper; papers with runs: $(ls runs | grep -v '^_' | tr '\n' ' ')" >&2; exit 2; }
dst=.carry/$paper
rm -rf "$dst.tmp" && mkdir -p "$dst.tmp"
(cd "runs/$paper" && find . \( -name "results_*.csv" -o -name "config.json" -o -name "timing*.json" \) \
    -not -path "*/queue/*" -print0 | tar cf - --null -T -) | tar xf - -C "$dst.tmp"
rm -rf "$dst" && mv "$dst.tmp" "$dst"
echo "$dst: $(du -sh "$dst" | cut -f1), $(find "$dst" -name 'results_*.csv' | wc -l) results files; carry .carry"
