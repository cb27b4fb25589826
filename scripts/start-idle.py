#!/usr/bin/env python3
"""Start and idle cost of `toolhost serve` on stdio, measured from outside.

    python3 scripts/start-idle.py target/release/toolhost [OTHER_BINARY ...]

For each binary, interleaved, RUNS times (env START_RUNS, default 11):
- cold start: a fresh empty directory (built-in configuration, bundled
  plugins) with an empty compiled-code cache; the time from spawning
  `toolhost serve` to the `initialize` answer, then to the first
  `tools/list` answer (all bundled tools), and the resident memory then;
- idle: after that listing, the server is left alone for 2 s, then for
  IDLE_SECONDS (default 10) its threads' context switches (wake-ups) and CPU
  time are counted from /proc.

Prints the median of each figure per binary.
"""

import os
import statistics
import sys
import time

from stdio_server import cold, memory_mib

RUNS = int(os.environ.get("START_RUNS", "11"))
IDLE_SECONDS = float(os.environ.get("IDLE_SECONDS", "10"))
TICKS = os.sysconf("SC_CLK_TCK")


def wakeups(pid):
    """Context switches so far of each thread of `pid`, by thread id."""
    counts = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as status:
                counts[task] = sum(
                    int(line.split(":")[1]) for line in status if "ctxt_switches:" in line
                )
        except FileNotFoundError:
            pass
    return counts


def woken(before, after):
    """Wake-ups between two samples (threads that ended in between count
    for nothing; threads that started count from zero)."""
    return sum(n - before.get(tid, 0) for tid, n in after.items())


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def run_once(binary, measure_idle):
    with cold(binary, "start-idle") as (proc, _, initialized, listed, tools):
        rss = memory_mib(proc.pid)
        idle = None
        if measure_idle:
            time.sleep(2)
            w0, c0 = wakeups(proc.pid), cpu_seconds(proc.pid)
            time.sleep(IDLE_SECONDS)
            w1, c1 = wakeups(proc.pid), cpu_seconds(proc.pid)
            idle = (woken(w0, w1) / IDLE_SECONDS, (c1 - c0) / IDLE_SECONDS * 100)
        return initialized, listed, tools, rss, idle


def main():
    binaries = sys.argv[1:] or ["target/release/toolhost"]
    results = {b: [] for b in binaries}
    for run in range(RUNS):
        for binary in binaries:
            results[binary].append(run_once(binary, measure_idle=run < 3))
    for binary, runs in results.items():
        med = lambda i: statistics.median(r[i] for r in runs)
        idles = [r[4] for r in runs if r[4] is not None]
        print(f"{binary}: {RUNS} runs, {runs[0][2]} tools")
        print(f"  initialize answered   {med(0) * 1000:8.1f} ms (median)")
        print(f"  tools/list answered   {med(1) * 1000:8.1f} ms (median)")
        print(f"  RSS after the listing {med(3):8.1f} MiB (median)")
        print(f"  idle wake-ups         {statistics.median(i[0] for i in idles):8.1f} /s "
              f"(median of {len(idles)} runs of {IDLE_SECONDS:.0f} s)")
        print(f"  idle CPU              {statistics.median(i[1] for i in idles):8.2f} % of a core")


if __name__ == "__main__":
    main()
