"""Drives toolhost's /mcp with the official Python SDK's default `Client` and
a small Tasks extension (`io.modelcontextprotocol/tasks`; the SDK 2.3 has no
Tasks client of its own): a `tools/call` answered with a task is polled with
`tasks/get` until it ends. Usage: `mcp_sdk_tasks.py URL TOKEN TOOL ARGUMENTS`;
prints one JSON line: {"tasks": [the CreateTaskResults seen], "polls": N,
"result": the final CallToolResult}.
"""

import asyncio
import json
import sys
from typing import Any, Literal

import httpx2
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import ConfigDict

seen: list = []
polls = 0


class CreateTaskResult(Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class GetTaskParams(RequestParams):
    task_id: str


class GetTaskRequest(Request[GetTaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: GetTaskParams
    name_param = "taskId"


class GetTaskResult(Result):
    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


async def resolve(created: CreateTaskResult, context: ClaimContext) -> CallToolResult:
    global polls
    seen.append(created.model_dump(by_alias=True, mode="json", exclude_none=True))
    interval = (created.poll_interval_ms or 1000) / 1000
    while True:
        polls += 1
        task = await context.session.send_request(
            GetTaskRequest(params=GetTaskParams(task_id=created.task_id)), GetTaskResult
        )
        if task.status == "completed":
            return CallToolResult.model_validate(task.result)
        if task.status in ("failed", "cancelled"):
            raise RuntimeError(f"task {task.task_id} ended {task.status}: {task.error}")
        await asyncio.sleep(interval)


class Tasks(ClientExtension):
    identifier = "io.modelcontextprotocol/tasks"

    def claims(self):
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=resolve)]


async def main(url: str, token: str, tool: str, arguments: str) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with Client(streamable_http_client(url, http_client=http), extensions=[Tasks()]) as client:
        result = await client.call_tool(tool, json.loads(arguments))
        answer = {
            "version": client.protocol_version,
            "tasks": seen,
            "polls": polls,
            "result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
        }
    print(json.dumps(answer), flush=True)


asyncio.run(main(*sys.argv[1:]))
