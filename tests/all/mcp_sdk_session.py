"""Opens an MCP session over HTTP with the official Python SDK, lists the
tools, calls `read` on local.txt and closes the session (a DELETE); the SDK's warnings go
to stderr, where the test looks for them."""

import asyncio
import logging
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main(url: str) -> None:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            print("tools", " ".join(sorted(t.name for t in tools.tools)))
            result = await session.call_tool("read", {"path": "local.txt"})
            print("read", result.content[0].text)
    print("closed")


logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
asyncio.run(main(sys.argv[1]))
