#!/usr/bin/env python3
"""Cold start of `toolhost serve` on stdio, measured from outside.

    python3 scripts/cold-start.py target/release/toolhost [OTHER_BINARY ...]

For each binary, interleaved, RUNS times (env COLD_RUNS, default 9): in a
fresh empty directory (the built-in configuration: the bundled plugins) with
an empty compiled-code cache, the time from spawning `toolhost serve` to the
`initialize` answer, to the first `tools/list` answer, and to the answer of
the first `tools/call` (COLD_TOOL, default `echo`, with COLD_ARGS, default
`{"text": "hi"}`); then the server's resident memory (VmRSS) and its peak
(VmHWM), and both again COLD_SETTLE seconds later (default 3: a bundled
plugin's first calls run code compiled fast while the optimised code is
compiled in the background). Prints the median of each figure per binary, and exits non-zero
when the call failed.
"""

import json
import os
import statistics
import sys
import time

from stdio_server import answer, cold, memory_mib, send

RUNS = int(os.environ.get("COLD_RUNS", "9"))
SETTLE = float(os.environ.get("COLD_SETTLE", "3"))
TOOL = os.environ.get("COLD_TOOL", "echo")
ARGS = json.loads(os.environ.get("COLD_ARGS", '{"text": "hi"}'))


def run_once(binary):
    with cold(binary, "cold-start") as (proc, started, initialized, listed, tools):
        send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": TOOL, "arguments": ARGS}})
        result = answer(proc, 2)
        called = time.monotonic() - started
        if "error" in result or result["result"].get("isError"):
            raise RuntimeError(f"{binary}: the call failed: {result}")
        rss = memory_mib(proc.pid, "VmRSS")
        peak = memory_mib(proc.pid, "VmHWM")
        time.sleep(SETTLE)
        settled = memory_mib(proc.pid, "VmRSS")
        settled_peak = memory_mib(proc.pid, "VmHWM")
        return initialized, listed, called, rss, peak, tools, settled, settled_peak


def main():
    binaries = sys.argv[1:] or ["target/release/toolhost"]
    results = {b: [] for b in binaries}
    for _ in range(RUNS):
        for binary in binaries:
            results[binary].append(run_once(binary))
    for binary, runs in results.items():
        med = lambda i: statistics.median(r[i] for r in runs)
        spread = lambda i: f"{min(r[i] for r in runs) * 1000:.0f}-{max(r[i] for r in runs) * 1000:.0f}"
        print(f"{binary}: {RUNS} runs, {runs[0][5]} tools, first call of {TOOL!r}")
        print(f"  initialize answered   {med(0) * 1000:8.1f} ms (median; {spread(0)})")
        print(f"  tools/list answered   {med(1) * 1000:8.1f} ms (median; {spread(1)})")
        print(f"  first call answered   {med(2) * 1000:8.1f} ms (median; {spread(2)})")
        print(f"  RSS after the call    {med(3):8.1f} MiB (median)")
        print(f"  peak RSS then         {med(4):8.1f} MiB (median)")
        print(f"  RSS {SETTLE:.0f} s later        {med(6):8.1f} MiB (median)")
        print(f"  peak RSS {SETTLE:.0f} s later   {med(7):8.1f} MiB (median)")


if __name__ == "__main__":
    main()
