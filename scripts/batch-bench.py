#!/usr/bin/env python3
"""`toolhost call --batch` beside plain Python dict dispatch
(`scripts/dict-dispatch.py batch`), in one run (BENCHMARKS.md, "Batches").

  python3 scripts/batch-bench.py TOOLHOST [TOOLHOST...]

Each command runs a batch of SMALL and of LARGE `echo` calls (environment
`BATCH_SMALL`, default 1,000, and `BATCH_LARGE`, default 20,000), in a fresh
directory with the built-in configuration and a compile cache warmed first,
`BATCH_RUNS` times (default 7), the commands interleaved. What is printed is
each command's median wall time for both batches and its marginal rate:
(LARGE - SMALL) calls / (time of LARGE - time of SMALL), which leaves out
the process's start, the configuration and the plugin's load, and the
ratio of each toolhost to the Python script. Every output is checked: as
many results as calls, each `{"text":"hi"}`.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def write_batch(path, calls):
    tool_calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "echo", "arguments": '{"text":"hi"}'},
        }
        for i in range(calls)
    ]
    with open(path, "w") as f:
        json.dump({"tool_calls": tool_calls}, f)


def timed(command, cwd, calls):
    started = time.perf_counter()
    out = subprocess.run(command, cwd=cwd, capture_output=True, check=True).stdout
    took = time.perf_counter() - started
    results = json.loads(out)["tool_results"]
    assert len(results) == calls, f"{command}: {len(results)} results for {calls} calls"
    assert all(r["content"] == '{"text":"hi"}' for r in results), f"{command}: {results[:2]}"
    return took


def main():
    toolhosts = sys.argv[1:]
    if not toolhosts:
        sys.exit(__doc__)
    small = int(os.environ.get("BATCH_SMALL", "1000"))
    large = int(os.environ.get("BATCH_LARGE", "20000"))
    runs = int(os.environ.get("BATCH_RUNS", "7"))
    work = tempfile.mkdtemp(prefix="batch-bench-")
    files = {}
    for calls in (small, large):
        files[calls] = os.path.join(work, f"batch-{calls}.json")
        write_batch(files[calls], calls)
    commands = {
        f"toolhost {path}": [path, "call", "--batch", "{file}"] for path in toolhosts
    }
    commands["python dict dispatch"] = [
        sys.executable,
        os.path.join(HERE, "dict-dispatch.py"),
        "batch",
        "{file}",
    ]
    # Warm the compile cache (each toolhost compiles echo on its first call).
    for name, command in commands.items():
        timed([a.replace("{file}", files[small]) for a in command], work, small)
    times = {(name, calls): [] for name in commands for calls in (small, large)}
    for _ in range(runs):
        for name, command in commands.items():
            for calls in (small, large):
                argv = [a.replace("{file}", files[calls]) for a in command]
                times[(name, calls)].append(timed(argv, work, calls))
    print(
        f"batches of {small} and {large} echo calls, median of {runs} runs, "
        f"load average {os.getloadavg()[0]:.2f}:"
    )
    rates = {}
    for name in commands:
        t_small = statistics.median(times[(name, small)])
        t_large = statistics.median(times[(name, large)])
        rates[name] = (large - small) / (t_large - t_small)
        print(
            f"  {name}: {small} calls {t_small * 1000:.1f} ms, {large} calls "
            f"{t_large * 1000:.1f} ms; marginal {rates[name]:,.0f} calls/s"
        )
    python = rates["python dict dispatch"]
    for name, rate in rates.items():
        if name != "python dict dispatch":
            print(f"  {name} / python: {rate / python:.2f}x")


if __name__ == "__main__":
    main()
