#!/usr/bin/env bash
# Builds NAME.wasm from app.py with componentize-py (installed into .venv).
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/componentize-py ]; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet componentize-py==0.25.1
fi
.venv/bin/componentize-py -d wit -w plugin componentize app -o NAME.wasm
echo "built NAME.wasm"
