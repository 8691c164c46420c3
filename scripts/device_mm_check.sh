#!/usr/bin/env bash
# one lane of the linear="mm" training check: Table 1 IDs 0 1 2 4 5 (25 BERT-small models, full length, compiled)
XLREPRO_RUNS=$W/runs TORCHINDUCTOR_CACHE_DIR=$W/ind python3 -m xlrepro.cli train dufter2020 --ids 0 1 2 4 5 --compile --time-limit 540 "$@"
echo "exit $?"
(cd $W/runs && find . -name metrics.json -o -name timing.json -o -name curve.json | tar czf $W/metrics.tgz -T -)
rm -rf $W/runs $W/ind
