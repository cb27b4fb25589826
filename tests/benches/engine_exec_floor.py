"""The container engine's own cost of one command, for comparison with the
container backend's warm session in BENCHMARKS.md: create an exec of `true`
in a running container, start it attached, read its stream to the end, 21
times 50 ms apart, through Podman's Docker-compatible API.

Run (after `cargo test container::`, which imports the image):
  podman run --runtime runc -d --name toolhost-floor --network none \
    -v /usr:/usr:ro --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 --init \
    localhost/toolhost-test-root:latest bash -c 'while :; do sleep 86400 & wait $!; done'
  python3 tests/benches/engine_exec_floor.py
  podman rm -f -t 0 toolhost-floor
"""
import socket, json, time, statistics
def req(method, path, body=None, upgrade=False):
    s = socket.socket(socket.AF_UNIX); s.connect("/run/podman/podman.sock")
    data = json.dumps(body).encode() if body is not None else b""
    hdr = f"{method} {path} HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    if upgrade: hdr += "Connection: Upgrade\r\nUpgrade: tcp\r\n"
    else: hdr += "Connection: close\r\n"
    s.sendall(hdr.encode() + b"\r\n" + data)
    return s
def readall(s):
    out = b""
    while True:
        b = s.recv(65536)
        if not b: return out
        out += b
times = []
for i in range(21):
    t = time.perf_counter()
    s = req("POST", "/v1.41/containers/toolhost-floor/exec", {"AttachStdout": True, "AttachStderr": True, "Cmd": ["true"]})
    eid = json.loads(readall(s).split(b"\r\n\r\n",1)[1])["Id"]
    s = req("POST", f"/v1.41/exec/{eid}/start", {"Detach": False, "Tty": False}, upgrade=True)
    readall(s)
    times.append(time.perf_counter() - t)
    time.sleep(0.05)
print(f"engine exec of true: median {statistics.median(times)*1000:.2f} ms")
