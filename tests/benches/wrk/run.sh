#!/usr/bin/env bash
# HTTP API throughput with wrk: POST /v1/tool_calls calling the bundled echo
# tool, at 1, 16 and 64 concurrent connections, with 1 and 100 calls per
# request. Usage: bash tests/benches/wrk/run.sh [seconds per run, default 10]
set -euo pipefail
cd "$(dirname "$0")/../../.."
seconds="${1:-10}"
cargo build --release --bin toolhost
target="${CARGO_TARGET_DIR:-target}"
port=8787
config=$(mktemp --suffix=.toml)
# The built-in configuration, without the per-call audit line on stderr.
{ echo 'audit = "off"'; "$target/release/toolhost" config show; } > "$config"
"$target/release/toolhost" --config "$config" serve --http "127.0.0.1:$port" 2>/tmp/toolhost-wrk.log &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$config"' EXIT
until curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null; do sleep 0.1; done
script="$(pwd)/tests/benches/wrk/tool_calls.lua"
for calls in 1 100; do
  for connections in 1 16 64; do
    printf 'calls/request %-3s connections %-2s  ' "$calls" "$connections"
    threads=$(( connections < 2 ? 1 : 2 ))
    CALLS=$calls wrk -t"$threads" -c"$connections" -d"${seconds}s" -s "$script" \
      "http://127.0.0.1:$port" | tail -1
  done
done
