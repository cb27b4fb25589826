"""A `toolhost serve` on stdio started cold, for the start-up scripts
(cold-start.py, start-idle.py): a fresh empty directory (the built-in
configuration, the bundled plugins), an empty compiled-code cache, and the
JSON-RPC messages of its first minutes."""

import json
import os
import subprocess
import tempfile
import time
from contextlib import contextmanager


def memory_mib(pid, field="VmRSS"):
    """`field` of /proc/PID/status (VmRSS, VmHWM) in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def send(proc, message):
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def answer(proc, id):
    """The answer to request `id` (notifications before it skipped)."""
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the server closed its output before answering {id}")
        message = json.loads(line)
        if message.get("id") == id:
            return message


def spawn(binary, work):
    """`binary serve` on stdio in directory `work`, its cache under it."""
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(work, "cache"), HOME=work)
    env.pop("TOOLHOST_CACHE_DIR", None)
    return subprocess.Popen(
        [os.path.abspath(binary), "serve"],
        cwd=work,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def initialize(proc, client):
    """`initialize` answered and the session initialized."""
    send(proc, {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": client, "version": "0"}},
    })
    answer(proc, 0)
    send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})


@contextmanager
def cold(binary, client):
    """A cold `binary serve`, initialized and listed: yields `(proc,
    started, initialized, listed, tools)`, times in seconds from the spawn
    (`started` is its monotonic time), `tools` the number listed. The
    server is killed on the way out."""
    with tempfile.TemporaryDirectory() as work:
        started = time.monotonic()
        proc = spawn(binary, work)
        try:
            initialize(proc, client)
            initialized = time.monotonic() - started
            send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            tools = len(answer(proc, 1)["result"]["tools"])
            listed = time.monotonic() - started
            yield proc, started, initialized, listed, tools
        finally:
            proc.kill()
            proc.wait()
