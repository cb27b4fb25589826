"""Drives toolhost's /mcp with the official Python SDK's default `Client`
(which negotiates 2026-07-28 over HTTP: no session). Reads one JSON command
a line on stdin and writes one JSON answer a line on stdout:

  {"token": T, "list": true}                  -> {"version": V, "tools": [...]}
  {"token": T, "tool": N, "arguments": {...}}  -> the CallToolResult, as JSON

with `"legacy": true` the client is one with a session (`mode="legacy"`);
with `"answer": "once"` (or another decision) it declares elicitation and
answers every question with that decision, printing the question to stderr.
  {"token": T, "listen": true}                -> {"listening": true} once acknowledged
  {"token": T, "next_event": true}            -> the next event of that listen, as text

Over stdio instead of HTTP: `mcp_sdk_handles.py --stdio COMMAND ARGS...`.
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client


async def main(argv: list) -> None:
    url = argv[0]
    clients = {}

    async def client_of(token, legacy, answer):
        if (token, legacy, answer) not in clients:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            http = httpx2.AsyncClient(headers=headers, timeout=60)
            if url == "--stdio":
                transport = StdioServerParameters(command=argv[1], args=argv[2:])
            else:
                transport = streamable_http_client(url, http_client=http)
            options = {"mode": "legacy"} if legacy else {}
            if answer:

                async def answering(context, params):
                    print("asked:", params.message, file=sys.stderr)
                    return types.ElicitResult(action="accept", content={"decision": answer})

                options["elicitation_callback"] = answering
            client = Client(transport, **options)
            await client.__aenter__()
            clients[(token, legacy, answer)] = client
        return clients[(token, legacy, answer)]

    subscriptions = {}
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        command = json.loads(line)
        client = await client_of(command.get("token"), bool(command.get("legacy")), command.get("answer"))
        if command.get("listen"):
            subscription = client.listen(tools_list_changed=True)
            sub = await subscription.__aenter__()
            subscriptions[command.get("token")] = (subscription, sub)
            answer = {"listening": True}
        elif command.get("next_event"):
            _, sub = subscriptions[command.get("token")]
            event = await asyncio.wait_for(sub.__anext__(), 30)
            answer = {"event": str(event)}
        elif command.get("list"):
            tools = await client.list_tools()
            answer = {
                "version": client.protocol_version,
                "tools": [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools.tools],
            }
        else:
            result = await client.call_tool(command["tool"], command.get("arguments") or {})
            answer = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        print(json.dumps(answer), flush=True)
    for subscription, _ in subscriptions.values():
        await subscription.__aexit__(None, None, None)
    for client in clients.values():
        await client.__aexit__(None, None, None)


asyncio.run(main(sys.argv[1:]))
