#!/usr/bin/env bash
# The README's quick start as a newcomer meets it: a fresh clone of the
# committed HEAD in a temporary directory, a fresh target directory, and the
# two commands of the quick start.
#
#   scripts/fresh-clone.sh            # both commands
#   scripts/fresh-clone.sh --serve    # only the first (the release build and `serve`)
#
# With FRESH_REMOVE_WASM_TARGET=1 it first removes the wasm32-wasip2 target
# from the toolchain, so the run starts from a machine with only the host
# target (the build must add it back by itself).
set -euo pipefail
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone --quiet "$repo" "$work/toolhost"
cd "$work/toolhost"
export CARGO_TARGET_DIR="$work/target"

if [ "${FRESH_REMOVE_WASM_TARGET:-0}" = 1 ]; then
  rustup target remove wasm32-wasip2 || true
fi
echo "installed targets: $(rustup target list --installed | tr '\n' ' ')"

# 1. `cargo run --release -- serve`: answer an MCP initialize and a tools/list on stdio.
start=$(date +%s)
requests='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fresh-clone","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
answers=$( (printf '%s\n' "$requests"; sleep 5) | cargo run --release -- serve)
echo "cargo run --release -- serve: built and answered in $(( $(date +%s) - start )) s"
grep -q '"id":1' <<<"$answers" || { echo "no answer to initialize:"; echo "$answers"; exit 1; }
grep -q '"name":"read_file"' <<<"$answers" || { echo "tools/list lacks the bundled tools:"; echo "$answers"; exit 1; }
echo "serve answered initialize and listed the bundled tools"

[ "${1:-}" = --serve ] && exit 0

# 2. `cargo test`.
start=$(date +%s)
cargo test
echo "cargo test: passed in $(( $(date +%s) - start )) s"
