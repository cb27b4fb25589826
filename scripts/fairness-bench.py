#!/usr/bin/env python3
"""One tenant's CPU-bound guests beside another tenant's short calls.

Serves TOOLHOST (`serve --http`) with two tenants. Tenant a keeps
CONNECTIONS batches of BATCH calls of the `misbehave` test guest's `spin`
(a loop that never ends; each call runs until `limits.timeout`, 4 s) in
flight, back to back; tenant b calls `echo` every 0.25 s and records how
long each took. Prints b's p50, p90 and max with a idle and with a busy.

    python3 scripts/fairness-bench.py TOOLHOST MISBEHAVE_WASM [BEFORE]

BUSY_TOOL and BUSY_ARGS (JSON) name another of the guest's tools for
tenant a: `BUSY_TOOL=chatter BUSY_ARGS='{"lines": 100000000, "bytes":
65536}'` is a guest that spends nearly all its time in short host calls.

MISBEHAVE_WASM is the test guest cargo builds (target/guests/wasm32-wasip2/
guest/plugin_misbehave.wasm). BEFORE, another toolhost binary, is measured
the same way in the same run.
"""
import hashlib, json, os, shutil, socket, subprocess, sys, tempfile, threading, time
import urllib.request

SECONDS = float(os.environ.get("SECONDS_BUSY", "20"))
CONNECTIONS = int(os.environ.get("CONNECTIONS", "1"))
BATCH = int(os.environ.get("BATCH", "16"))
BUSY_TOOL = os.environ.get("BUSY_TOOL", "spin")
BUSY_ARGS = json.loads(os.environ.get("BUSY_ARGS", "{}"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(toolhost, wasm, root):
    os.makedirs(f"{root}/ws/a"); os.makedirs(f"{root}/ws/b"); os.makedirs(f"{root}/plugins")
    shutil.copy(wasm, f"{root}/plugins/misbehave.wasm")
    ta, tb = "tok-a-" + os.urandom(8).hex(), "tok-b-" + os.urandom(8).hex()
    sha = lambda t: hashlib.sha256(t.encode()).hexdigest()
    with open(f"{root}/toolhost.toml", "w") as f:
        f.write(f"""default_profile = "dev"
plugins = "plugins"
cache_dir = "cache"
audit = "off"
[profiles.dev]
allow = ["file:read"]
file.read = ["."]
limits.timeout = "4s"
limits.concurrency = 16
[tenants.a]
token_sha256 = "{sha(ta)}"
profile = "dev"
workspace = "ws/a"
[tenants.b]
token_sha256 = "{sha(tb)}"
profile = "dev"
workspace = "ws/b"
""")
    port = free_port()
    server = subprocess.Popen([toolhost, "--config", f"{root}/toolhost.toml", "serve", "--http",
                               f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1/tool_calls"
    for _ in range(200):
        try:
            post(url, tb, "echo", {"text": "up"})
            return server, url, ta, tb
        except Exception:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("the server did not answer")


def post(url, token, tool, arguments, count=1, timeout=60):
    body = json.dumps({"tool_calls": [{"id": str(i), "type": "function", "function": {
        "name": tool, "arguments": json.dumps(arguments)}} for i in range(count)]}).encode()
    request = urllib.request.Request(url, body, {"content-type": "application/json",
                                                 "authorization": "Bearer " + token})
    return urllib.request.urlopen(request, timeout=timeout).read()


def echo_latencies(url, tb, seconds):
    latencies, stop = [], time.time() + seconds
    while time.time() < stop:
        start = time.time()
        try:
            post(url, tb, "echo", {"text": "b"}, timeout=30)
            latencies.append(time.time() - start)
        except Exception:
            latencies.append(99.0)
        time.sleep(0.25)
    latencies.sort()
    return latencies


def figures(latencies):
    ms = lambda q: latencies[min(len(latencies) - 1, int(len(latencies) * q))] * 1000
    return f"p50 {ms(0.5):7.1f} ms  p90 {ms(0.9):7.1f} ms  max {latencies[-1] * 1000:7.1f} ms  ({len(latencies)} calls)"


def measure(label, toolhost, wasm):
    root = tempfile.mkdtemp(prefix="fairness-")
    server, url, ta, tb = serve(toolhost, wasm, root)
    try:
        idle = echo_latencies(url, tb, 5)
        stop = time.time() + SECONDS + 3
        def busy():
            while time.time() < stop:
                try:
                    post(url, ta, BUSY_TOOL, BUSY_ARGS, count=BATCH, timeout=120)
                except Exception:
                    time.sleep(0.2)
        threads = [threading.Thread(target=busy, daemon=True) for _ in range(CONNECTIONS)]
        for t in threads:
            t.start()
        time.sleep(2)
        loaded = echo_latencies(url, tb, SECONDS)
        print(f"{label}: b's echo, a idle: {figures(idle)}")
        print(f"{label}: b's echo, a busy: {figures(loaded)}")
        return loaded
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(root, ignore_errors=True)


def main():
    toolhost, wasm = sys.argv[1], sys.argv[2]
    print(f"a: {CONNECTIONS} x batches of {BATCH} {BUSY_TOOL} calls (4 s each) for {SECONDS:.0f} s; "
          f"b: echo every 0.25 s; {os.cpu_count()} cores")
    after = measure("toolhost", toolhost, wasm)
    if len(sys.argv) > 3:
        before = measure("before", sys.argv[3], wasm)
        ratio = before[len(before) // 2] / after[len(after) // 2]
        print(f"b's p50 with a busy, before / toolhost: {ratio:.1f}x")


if __name__ == "__main__":
    main()
