#!/usr/bin/env bash
# Builds the Python plugins in this directory with componentize-py.
#
#   plugins/python/build.sh [OUT_DIR]
#
# Each subdirectory with an app.py becomes OUT_DIR/<name>.wasm (default OUT_DIR:
# target/python-plugins). componentize-py is installed from PyPI into
# target/python-venv on first use.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/python-plugins}"
venv="${TOOLHOST_PYTHON_VENV:-$root/target/python-venv}"
version="0.25.1"

if [ ! -x "$venv/bin/componentize-py" ] || ! "$venv/bin/componentize-py" --version | grep -q "$version"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "componentize-py==$version"
fi

mkdir -p "$out"
# Each plugin is built from a copy: importing app.py writes __pycache__ next
# to it, and nothing is written into the source tree (the Rust build scripts
# watch plugins/, so a new file there rebuilds the host).
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for app in "$here"/*/app.py; do
    dir="$(dirname "$app")"
    name="$(basename "$dir")"
    cp -R "$dir" "$work/$name"
    (cd "$work/$name" && "$venv/bin/componentize-py" -d "$root/wit" -w plugin componentize app -o "$out/$name.wasm")
    echo "built $out/$name.wasm"
done
