#!/usr/bin/env bash
# MCP `tools/call` of echo over stdio: toolhost builds and other servers,
# measured by the same client (the serve bench's), interleaved in one run.
#
#   ROUNDS=5 bash scripts/stdio-peers.sh NAME=toolhost:PATH... NAME=peer:COMMAND...
#
# `toolhost:PATH` is a toolhost binary (`toolhost serve`, the built-in
# configuration); `peer:COMMAND` is any MCP server on stdio serving a tool
# `echo` (`peer:floor` is the bench's own server, which answers each line at
# once: the floor). Each round runs every server once with a client that
# polls for the answer (`SERVE_BENCH_CLIENT_SPIN=1`: the server's part of a
# round trip) and once with one that sleeps in `read`, 20,000 calls each;
# what is printed is the median over the rounds of each run's p50 and of the
# server's CPU per call. BENCH names the bench binary (default: the newest
# target/release/deps/serve-*, from
# `cargo bench -p toolhost-tests --bench serve --no-run`).
set -euo pipefail
cd "$(dirname "$0")/.."
bench=${BENCH:-$(ls -t target/release/deps/serve-* 2>/dev/null | grep -v '\.d$' | head -1 || true)}
if [[ -z "$bench" ]]; then
    echo "error: no bench binary; run cargo bench -p toolhost-tests --bench serve --no-run" >&2
    exit 1
fi
rounds=${ROUNDS:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for round in $(seq 1 "$rounds"); do
    for spec in "$@"; do
        name=${spec%%=*} rest=${spec#*=}
        kind=${rest%%:*} what=${rest#*:}
        case $kind in
            toolhost) server=(SERVE_BENCH_TOOLHOST="$what") ;;
            peer) server=(SERVE_BENCH_PEER="$what") ;;
            *) echo "error: $spec: say toolhost:PATH or peer:COMMAND" >&2; exit 1 ;;
        esac
        for mode in polling sleeping; do
            client=()
            [[ $mode == polling ]] && client=(SERVE_BENCH_CLIENT_SPIN=1)
            line=$(env "${server[@]}" "${client[@]}" SERVE_BENCH_RUNS=1 "$bench" \
                --bench stdio/tools/call 2>&1 | grep -E 'stdio/tools/call:|panicked' || true)
            echo "$name $mode $line" >> "$out"
        done
    done
done
python3 - "$out" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, mode = line.split()[:2]
    m = re.search(r"p50 ([\d.]+) µs.*server CPU per request ([\d.]+) µs", line)
    if not m:
        sys.exit(f"a run failed: {line.strip()}")
    runs.setdefault((mode, name), []).append((float(m[1]), float(m[2])))
for (mode, name), values in runs.items():
    p50 = sorted(v[0] for v in values)
    cpu = sorted(v[1] for v in values)
    print(f"{mode:8} client  {name:12} p50 {statistics.median(p50):6.1f} µs "
          f"({p50[0]}-{p50[-1]}), server CPU {statistics.median(cpu):6.1f} µs per call")
PY
