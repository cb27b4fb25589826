"""A toolhost plugin in Python."""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

PARAMETERS = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "Who to greet."}},
    "required": ["name"],
}


class Tool(exports.Tool):
    def describe(self) -> types.Manifest:
        return types.Manifest(
            tools=[types.ToolSpec(
                name="TOOL",
                description="Greet someone by name.",
                parameters=json.dumps(PARAMETERS),
                toolset="TOOL",
                permissions=[],
                requires_env=[],
                emoji=None,
                read_only=True,
                destructive=False,
                title=None,
                output_schema=None,
            )],
            stateful=False,
        )

    def call(self, name: str, arguments: str) -> str:
        args = json.loads(arguments)
        if not args["name"].strip():
            raise Err(types.ToolError_InvalidArguments("name must not be empty"))
        return json.dumps({"greeting": f"Hello, {args['name']}!"})
