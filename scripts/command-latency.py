#!/usr/bin/env python3
"""`run_command true` latency through `serve --http`, back to back and
paused, with toolhost's configuration inside the write grant (the layout
the README documents, where each sandbox keeps toolhost's own files).

    python3 scripts/command-latency.py TOOLHOST [BEFORE] [ROUNDS]

Serves each binary in turn (ROUNDS times, default 3), calls `run_command
true` 40 times back to back and 15 times with 150 ms pauses, and prints the
median of each round's medians, per binary and mode.
"""
import json, os, socket, statistics, subprocess, sys, tempfile, time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url, body):
    request = urllib.request.Request(url, data=body, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def round_of(toolhost):
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(f"{root}/plugins")
        with open(f"{root}/toolhost.toml", "w") as f:
            f.write('default_profile = "dev"\naudit = "off"\n[profiles.dev]\n'
                    'allow = ["file:*", "terminal:*"]\nfile.read = ["."]\nfile.write = ["."]\n')
        port = free_port()
        server = subprocess.Popen([toolhost, "--config", f"{root}/toolhost.toml", "serve",
                                   "--http", f"127.0.0.1:{port}"], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/v1/tool_calls"
        body = json.dumps({"tool_calls": [{"id": "c", "type": "function", "function": {
            "name": "run_command", "arguments": json.dumps({"command": "true"})}}]}).encode()
        try:
            for _ in range(600):
                try:
                    if "exit_code" in call(url, body)["tool_results"][0]["content"]:
                        break
                except Exception:
                    pass
                time.sleep(0.1)
            times = {"back to back": [], "paused": []}
            for mode, n, pause in [("back to back", 40, 0), ("paused", 15, 0.15)]:
                for _ in range(n):
                    start = time.perf_counter()
                    result = call(url, body)["tool_results"][0]["content"]
                    times[mode].append((time.perf_counter() - start) * 1000)
                    assert "\"exit_code\":0" in result, result
                    time.sleep(pause)
            return {mode: statistics.median(t) for mode, t in times.items()}
        finally:
            server.kill()
            server.wait()


def main():
    binaries = [b for b in sys.argv[1:3] if not b.isdigit()]
    rounds = int(sys.argv[-1]) if sys.argv[-1].isdigit() else 3
    results = {b: [] for b in binaries}
    for _ in range(rounds):
        for binary in binaries:
            results[binary].append(round_of(binary))
    for binary, runs in results.items():
        line = ", ".join(f"{mode} {statistics.median(r[mode] for r in runs):.2f} ms"
                         for mode in runs[0])
        print(f"{binary}: {line}")


if __name__ == "__main__":
    main()
