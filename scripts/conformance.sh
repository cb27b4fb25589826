#!/usr/bin/env bash
# Runs the official MCP conformance suite (npm @modelcontextprotocol/conformance)
# against `toolhost serve --http`, with the suite's fixture tools that the
# contract can express (tests/plugins/conformance) in the plugin directory.
#
#   scripts/conformance.sh            # prints the suite's summary
#
# Needs Node.js and npm. CONFORMANCE_VERSION picks the suite (0.1.12 is the
# newest that runs on Node 20; later ones need Node 22's fs.globSync).
set -euo pipefail
cd "$(dirname "$0")/.."
version="${CONFORMANCE_VERSION:-0.1.12}"
port="${CONFORMANCE_PORT:-18765}"
work="$(mktemp -d)"
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

if curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null 2>&1; then
  echo "port $port is taken by another server; set CONFORMANCE_PORT" >&2
  exit 1
fi
cargo build --release -p toolhost --quiet
rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
cargo build --release --target wasm32-wasip2 -p plugin-conformance --quiet
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$work/plugins"
cp "$target/wasm32-wasip2/release/plugin_conformance.wasm" "$work/plugins/conformance.wasm"

(cd "$work" && npm install --silent --no-audit --no-fund "@modelcontextprotocol/conformance@$version" >/dev/null)

(cd "$work" && exec "$OLDPWD/$target/release/toolhost" serve --plugins plugins --http "127.0.0.1:$port") \
  >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null && break
  sleep 0.2
done
(cd "$work" && npx --no-install conformance server --url "http://127.0.0.1:$port/mcp" -o "$work/out" 2>&1) \
  | sed -n '/=== SUMMARY ===/,$p'
