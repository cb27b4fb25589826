#!/usr/bin/env bash
# search_files through `toolhost call` side by side with ripgrep (with the
# flags that give search_files' rules, scripts/search-tree.py's rg-flags)
# and grep -rn, on the tree scripts/search-tree.py writes: hyperfine, one
# run, medians and ratios printed. `toolhost call echo` is the floor: a
# process that loads the config and runs one call that touches no file.
#
#   bash scripts/search-bench.sh [TOOLHOST] [ROOT]
#
# TOOLHOST defaults to target/release/toolhost; ROOT (the tree's directory,
# written when missing) to a new temporary directory. RUNS (default 10) sets
# hyperfine's runs per command; BEFORE, another toolhost binary (an older
# build), adds its search_files to the same run. Needs hyperfine, ripgrep
# and python3.
set -euo pipefail
# Backtraces captured for every error a guest sees (a missing ignore file)
# are not what a user's run pays for.
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
here="$(cd "$(dirname "$0")/.." && pwd)"
toolhost="$(realpath "${1:-$here/target/release/toolhost}")"
root="${2:-$(mktemp -d)/search}"
runs="${RUNS:-10}"

[ -f "$root/toolhost.toml" ] || python3 "$here/scripts/search-tree.py" "$root"
cd "$root"
# The rg flags, each quoted for the shell hyperfine runs commands in.
flags=""
while IFS= read -r flag; do
  flags+=" $(printf '%q' "$flag")"
done <rg-flags

# Compile the bundled plugins into the cache before timing anything.
"$toolhost" --config toolhost.toml call search_files '{"pattern":"zebrafish","path":"tree"}' >/dev/null
before=()
if [ -n "${BEFORE:-}" ]; then
  "$BEFORE" --config toolhost.toml call search_files '{"pattern":"zebrafish","path":"tree"}' >/dev/null
fi

for word in zebrafish needle; do
  echo "== $word"
  call="call search_files '{\"pattern\":\"$word\",\"path\":\"tree\",\"max_results\":1000}'"
  if [ -n "${BEFORE:-}" ]; then
    before=(-n "search_files (before)" "$(realpath "$BEFORE") --config toolhost.toml $call")
  fi
  hyperfine --style basic --warmup 2 --runs "$runs" -i --export-json "bench-$word.json" \
    "${before[@]}" \
    -n "search_files" "$toolhost --config toolhost.toml $call" \
    -n "rg" "rg -n$flags $word tree" \
    -n "grep -rn" "grep -rn $word tree" \
    -n "toolhost call echo" "$toolhost --config toolhost.toml call echo '{\"text\":\"hi\"}'" \
    >/dev/null
  python3 - "bench-$word.json" <<'EOF'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
medians = {r["command"]: r["median"] for r in results}
for name, median in medians.items():
    print(f"{name:20} median {median * 1000:8.1f} ms")
for name in [n for n in medians if n.startswith("search_files")]:
    print(f"{name} / rg:       {medians[name] / medians['rg']:.2f}x")
    print(f"{name} / grep -rn: {medians[name] / medians['grep -rn']:.2f}x")
EOF
done
