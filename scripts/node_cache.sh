#!/usr/bin/env bash
# A subset of the prepared data cache small enough to carry to a GPU node with the tree and the wheelhouse (the whole
# .cache/xlrepro with the NER labels passes the 64 MiB a call may carry). Copies the Bibles of the given languages with
# the manifest, and the entities (K et al.'s NER stand-in), dufter2020 (the lab's Fake-English corpus, tokenizer and
# neighbour table) and mbert (the tokenizer's vocabulary) folders into .cache/node. On the node:
#   export XLREPRO_CACHE=$PWD/.cache/node
# Usage (repository root): bash scripts/node_cache.sh [LANGUAGE ...]    (default: en es hi ru de)
set -euo pipefail
src=${XLREPRO_CACHE:-.cache/xlrepro}
dst=.cache/node
langs=("$@")
[ ${#langs[@]} -eq 0 ] && langs=(en es hi ru de)
[ -f "$src/multilingual/manifest.json" ] || { echo "no prepared cache at $src (run: xlrepro prepare)" >&2; exit 2; }
for l in "${langs[@]}"; do
    [ -f "$src/multilingual/bible.$l.tsv.gz" ] || {
        echo "no Bible for '$l' in $src/multilingual; prepared: $(cd "$src/multilingual" && ls bible.*.tsv.gz \
            | sed 's/bible\.\(.*\)\.tsv\.gz/\1/' | tr '\n' ' ')" >&2; exit 2; }
done
rm -rf "$dst.tmp" && mkdir -p "$dst.tmp/multilingual"
for d in entities dufter2020 mbert; do
    [ -d "$src/$d" ] && cp -r "$src/$d" "$dst.tmp/" || echo "note: no $src/$d (not carried)" >&2
done
cp "$src/multilingual/manifest.json" "$dst.tmp/multilingual/"
for l in "${langs[@]}"; do cp "$src/multilingual/bible.$l.tsv.gz" "$dst.tmp/multilingual/"; done
rm -rf "$dst" && mv "$dst.tmp" "$dst"
echo "$dst: $(du -sh "$dst" | cut -f1) (${langs[*]}); carry it with .whl and set XLREPRO_CACHE=\$PWD/$dst on the node"
