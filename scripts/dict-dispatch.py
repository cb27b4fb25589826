#!/usr/bin/env python3
"""The peer of toolhost's batch figures (BENCHMARKS.md, "Batches"): the
bundled `echo` tool as a plain Python function, dispatched from a dict, in
the shapes toolhost reads and answers.

  python3 scripts/dict-dispatch.py batch FILE
      like `toolhost call --batch FILE`: reads `{"tool_calls": [...]}`,
      prints `{"tool_results": [...]}` on one line (toolhost indents it;
      Python's `json` indents with its slower pure-Python encoder, so the
      peer is not made to)
  python3 scripts/dict-dispatch.py serve
      like `toolhost serve --http`: a Starlette app answering
      `POST /v1/tool_calls` (uvicorn, one process, no access log); prints
      `serving on http://ADDR` on stderr once it listens, which is what
      the serve bench waits for (`SERVE_BENCH_PEER`)

JSON is read and written with the standard library's `json`. Needs
`starlette` and `uvicorn` for `serve` (`pip install starlette
'uvicorn[standard]'`).
"""

import json
import sys


def echo(arguments):
    return arguments


TOOLS = {"echo": echo}


def run(calls):
    results = []
    for call in calls:
        function = call["function"]
        name = function["name"]
        tool = TOOLS.get(name)
        if tool is None:
            content = json.dumps({"error": f"unknown tool {name}"})
        else:
            answer = tool(json.loads(function["arguments"]))
            content = json.dumps(answer, separators=(",", ":"))
        results.append(
            {"content": content, "name": name, "role": "tool", "tool_call_id": call["id"]}
        )
    return {"tool_results": results}


def batch(path):
    with open(path) as f:
        calls = json.load(f)["tool_calls"]
    json.dump(run(calls), sys.stdout)
    sys.stdout.write("\n")


def serve():
    import socket

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    async def tool_calls(request):
        calls = json.loads(await request.body())["tool_calls"]
        body = json.dumps(run(calls), separators=(",", ":"))
        return Response(body, media_type="application/json")

    app = Starlette(routes=[Route("/v1/tool_calls", tool_calls, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    host, port = sock.getsockname()
    print(f"serving on http://{host}:{port}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:2] == ["batch"] and len(sys.argv) == 3:
        batch(sys.argv[2])
    elif sys.argv[1:] == ["serve"]:
        serve()
    else:
        sys.exit(__doc__)
