#!/usr/bin/env python3
"""Resident memory of `toolhost serve` on stdio after 100 `echo` calls from
a warm cache, and what holds it.

    python3 scripts/warm-memory.py target/release/toolhost [OTHER_BINARY ...]

For each binary, interleaved, RUNS times (env MEMORY_RUNS, default 5): a
fresh empty directory (the built-in configuration, the bundled plugins) whose
compiled-code cache is warmed first by one server that calls `echo` and
waits for its optimised code to be cached; then a second server started
there: `initialize`, `tools/list`, 100 `tools/call` of `echo`, a pause of
one second, and its memory read from /proc: VmRSS, and from smaps the
resident bytes by kind (the binary's own pages, other files, the heap and
anonymous maps, thread stacks).

Prints the median of each figure per binary, and with VERBOSE=1 the largest
resident mappings of the last run.
"""

import os
import statistics
import sys
import tempfile
import time

from stdio_server import answer, initialize, memory_mib, send, spawn

RUNS = int(os.environ.get("MEMORY_RUNS", "5"))
CALLS = 100


def start(binary, work):
    """A server in `work`, initialized and listed. Without
    `RUST_BACKTRACE`: every error a guest sees would capture a backtrace."""
    os.environ.pop("RUST_BACKTRACE", None)
    proc = spawn(binary, work)
    initialize(proc, "warm-memory")
    send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    answer(proc, 1)
    return proc


def calls(proc, count, first_id=2):
    for i in range(count):
        send(proc, {"jsonrpc": "2.0", "id": first_id + i, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "hi"}}})
        reply = answer(proc, first_id + i)
        assert "result" in reply and not reply["result"].get("isError"), reply


def cached_bytes(work):
    total = 0
    for root, _, files in os.walk(os.path.join(work, "cache")):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def smaps(pid, binary):
    """Resident KiB by kind, and the largest resident mappings."""
    kinds = {"binary": 0, "files": 0, "heap+anon": 0, "stacks": 0}
    mappings = []
    name, rss = None, 0
    real = os.path.realpath(binary)

    def close():
        if name is None:
            return
        if name == real:
            kind = "binary"
        elif name.startswith("/"):
            kind = "files"
        elif name.startswith("[stack"):
            kind = "stacks"
        else:
            kind = "heap+anon"
        kinds[kind] += rss
        mappings.append((rss, name or "[anon]"))

    with open(f"/proc/{pid}/smaps") as lines:
        for line in lines:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and ":" in head[3]:
                close()
                name = head[5] if len(head) > 5 else ""
                rss = 0
            elif head[0] == "Rss:":
                rss = int(head[1])
        close()
    mappings.sort(reverse=True)
    return kinds, mappings[:12]


def measure(binary):
    with tempfile.TemporaryDirectory() as work:
        warm = start(binary, work)
        try:
            calls(warm, 1)
            # The optimised code is compiled in the background and cached:
            # wait until the cache has not grown for 3 s.
            before, steady, deadline = -1, 0, time.monotonic() + 120
            while time.monotonic() < deadline and steady < 6:
                time.sleep(0.5)
                now = cached_bytes(work)
                steady = steady + 1 if now == before and now > 0 else 0
                before = now
        finally:
            warm.kill()
            warm.wait()
        proc = start(binary, work)
        try:
            calls(proc, CALLS)
            time.sleep(1)
            kinds, top = smaps(proc.pid, binary)
            return memory_mib(proc.pid), memory_mib(proc.pid, "VmHWM"), kinds, top
        finally:
            proc.kill()
            proc.wait()


def main():
    binaries = sys.argv[1:]
    if not binaries:
        sys.exit(__doc__)
    results = {b: [] for b in binaries}
    top = {}
    for _ in range(RUNS):
        for binary in binaries:
            rss, hwm, kinds, top[binary] = measure(binary)
            results[binary].append((rss, hwm, kinds))
    for binary, runs in results.items():
        med = lambda f: statistics.median(f(r) for r in runs)
        print(f"{binary}: RSS {med(lambda r: r[0]):.1f} MiB (peak {med(lambda r: r[1]):.1f}) "
              f"after {CALLS} echo calls, median of {len(runs)}; by kind (MiB): "
              + ", ".join(f"{k} {med(lambda r: r[2][k] / 1024):.1f}" for k in runs[0][2]))
        if os.environ.get("VERBOSE"):
            for kib, name in top[binary]:
                print(f"    {kib / 1024:7.1f} MiB  {name}")


if __name__ == "__main__":
    main()
