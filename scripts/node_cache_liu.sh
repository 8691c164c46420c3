#!/usr/bin/env bash
# The part of the prepared data cache that Liu et al.'s BERT pretraining and word retrieval read, for a GPU node
# (`python -m xlrepro.papers.liu2020.pilot`): the Bibles of the 11 languages with the manifest (the big and small
# corpora are cut from them), mBERT's vocabulary (mbert/vocab.txt) and the parsed dictionaries of the 9 target
# languages that have one (dictionaries/<lang>.pack.*, read where the FreeDict / CC-CEDICT files are not installed).
# Whatever is missing from the source cache (the packs, the vocabulary) is made there first (`xlrepro prepare
# --multilingual` makes both; this needs the dictionary packages and blingfire). Writes .cache/node-liu; on the node:
#   export XLREPRO_CACHE=$PWD/.cache/node-liu
# Usage (repository root): bash scripts/node_cache_liu.sh
set -euo pipefail
src=${XLREPRO_CACHE:-.cache/xlrepro}
dst=.cache/node-liu
py=${PYTHON:-python3}
[ -f "$src/multilingual/manifest.json" ] || { echo "no prepared cache at $src (run: xlrepro prepare --multilingual)" >&2; exit 2; }
langs=$(XLREPRO_CACHE=$src $py -c 'from xlrepro.papers.liu2020.corpora import LANGUAGES; print(*LANGUAGES)')
targets=$(XLREPRO_CACHE=$src $py -c '
from xlrepro.data.dictionaries import NO_DICTIONARY
from xlrepro.papers.liu2020.corpora import LANGUAGES
print(*[l for l in LANGUAGES if l != "en" and l not in NO_DICTIONARY])')
for l in $langs; do
    [ -f "$src/multilingual/bible.$l.tsv.gz" ] || { echo "no Bible for '$l' in $src/multilingual (run: xlrepro prepare --multilingual)" >&2; exit 2; }
done
XLREPRO_CACHE=$src $py - $targets <<'PY'
import sys
from xlrepro.data.dictionaries import prepare_dictionary_packs, read_pack
from xlrepro.data.mbert_vocab import mbert_vocab_path
missing = [l for l in sys.argv[1:] if read_pack(l) is None]
if missing:
    made = prepare_dictionary_packs(missing)
    if set(made) != set(missing):
        sys.exit(f"no installed dictionary for {sorted(set(missing) - set(made))} to pack")
print("vocabulary:", mbert_vocab_path())
PY
rm -rf "$dst.tmp" && mkdir -p "$dst.tmp/multilingual" "$dst.tmp/dictionaries"
cp "$src/multilingual/manifest.json" "$dst.tmp/multilingual/"
for l in $langs; do cp "$src/multilingual/bible.$l.tsv.gz" "$dst.tmp/multilingual/"; done
cp -r "$src/mbert" "$dst.tmp/"
for l in $targets; do cp "$src/dictionaries/$l.pack.tsv.gz" "$src/dictionaries/$l.pack.json" "$dst.tmp/dictionaries/"; done
rm -rf "$dst" && mv "$dst.tmp" "$dst"
echo "$dst: $(du -sh "$dst" | cut -f1) ($(echo $langs | wc -w) Bibles, mBERT vocabulary, packs: $targets)"
echo "on the node: export XLREPRO_CACHE=\$PWD/$dst"
