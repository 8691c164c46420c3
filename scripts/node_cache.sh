#!/usr/bin/env bash
# A subset of the prepared data cache (.cache/xlrepro, `xlrepro prepare --multilingual`), small enough to carry to an
# offline GPU machine with the tree and the wheelhouse (the whole cache with K et al.'s NER labels passes 64 MiB).
#
#   bash scripts/node_cache.sh [LANGUAGE ...]   the Bibles of these languages (default: en es hi ru de) with the
#                                               manifest and the other prepared editions, and the entities (K et al.'s
#                                               NER stand-in), dufter2020 (the lab's Fake-English corpus, tokenizer and
#                                               neighbour table), mbert (mBERT's vocabulary) and libreoffice (help
#                                               paragraphs, K et al.'s alltext profile) folders -> .cache/node
#   bash scripts/node_cache.sh --liu            what Liu et al.'s BERT pretraining and word retrieval read (`python -m
#                                               xlrepro.papers.liu2020.pilot`): the Bibles of its 11 languages, mBERT's
#                                               vocabulary and the parsed dictionaries of its target languages that
#                                               have one (made first where missing) -> .cache/node-liu
#
# On the GPU machine: export XLREPRO_CACHE=$PWD/.cache/node (or .cache/node-liu). Settings (environment):
# XLREPRO_CACHE (the source cache, default .cache/xlrepro), PYTHON (python3, for --liu).
set -euo pipefail
src=${XLREPRO_CACHE:-.cache/xlrepro}
py=${PYTHON:-python3}
usage="usage: node_cache.sh [LANGUAGE ...] | node_cache.sh --liu"
liu=0
if [ "${1:-}" = "--liu" ]; then
    liu=1; shift
    [ $# -eq 0 ] || { echo "--liu takes no languages (its 11 are fixed); $usage" >&2; exit 2; }
fi
for a in "$@"; do
    case "$a" in -*) echo "unknown option '$a'; valid: --liu. $usage" >&2; exit 2;; esac
done
[ -f "$src/multilingual/manifest.json" ] || {
    echo "no prepared cache at $src (run: xlrepro prepare --multilingual)" >&2; exit 2; }

if [ "$liu" = 1 ]; then
    dst=.cache/node-liu
    langs=$(XLREPRO_CACHE=$src $py -c 'from xlrepro.papers.liu2020.corpora import LANGUAGES; print(*LANGUAGES)')
    targets=$(XLREPRO_CACHE=$src $py -c '
from xlrepro.data.dictionaries import NO_DICTIONARY
from xlrepro.papers.liu2020.corpora import LANGUAGES
print(*[l for l in LANGUAGES if l != "en" and l not in NO_DICTIONARY])')
    read -r -a langs <<< "$langs"
else
    dst=.cache/node
    langs=("$@")
    [ ${#langs[@]} -eq 0 ] && langs=(en es hi ru de)
fi
for l in "${langs[@]}"; do
    [ -f "$src/multilingual/bible.$l.tsv.gz" ] || {
        echo "no Bible for '$l' in $src/multilingual; prepared: $(cd "$src/multilingual" && ls bible.*.tsv.gz \
            | sed 's/bible\.\(.*\)\.tsv\.gz/\1/' | tr '\n' ' ')" >&2; exit 2; }
done
if [ "$liu" = 1 ]; then  # the dictionary packs and mBERT's vocabulary, made in the source cache where missing
    # shellcheck disable=SC2086  # $targets: the language codes, one word each
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
fi
rm -rf "$dst.tmp" && mkdir -p "$dst.tmp/multilingual"
cp "$src/multilingual/manifest.json" "$dst.tmp/multilingual/"
for l in "${langs[@]}"; do cp "$src/multilingual/bible.$l.tsv.gz" "$dst.tmp/multilingual/"; done
if [ "$liu" = 1 ]; then
    cp -r "$src/mbert" "$dst.tmp/"
    mkdir -p "$dst.tmp/dictionaries"
    for l in $targets; do cp "$src/dictionaries/$l.pack.tsv.gz" "$src/dictionaries/$l.pack.json" "$dst.tmp/dictionaries/"; done
else
    [ -d "$src/multilingual/editions" ] && cp -r "$src/multilingual/editions" "$dst.tmp/multilingual/"
    for d in entities dufter2020 mbert libreoffice; do
        [ -d "$src/$d" ] && cp -r "$src/$d" "$dst.tmp/" || echo "note: no $src/$d (not copied)" >&2
    done
fi
rm -rf "$dst" && mv "$dst.tmp" "$dst"
echo "$dst: $(du -sh "$dst" | cut -f1) (${langs[*]}); carry it with .whl and set XLREPRO_CACHE=\$PWD/$dst on the GPU machine"
