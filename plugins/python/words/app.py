"""A toolhost plugin in Python: word frequencies of a text."""

import heapq  # noqa: F401 (most_common needs it; componentize-py bundles what is imported)
import json
import re
from collections import Counter

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

PARAMETERS = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The text to analyse."},
        "top": {"type": "integer", "minimum": 1, "maximum": 1000,
                "description": "How many of the most frequent words to return (default 10)."},
    },
    "required": ["text"],
}

RESULT = {
    "type": "object",
    "properties": {
        "total": {"type": "integer", "description": "How many words the text has."},
        "distinct": {"type": "integer", "description": "How many different words."},
        "top": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"word": {"type": "string"}, "count": {"type": "integer"}},
                "required": ["word", "count"],
            },
        },
    },
    "required": ["total", "distinct", "top"],
}


class Tool(exports.Tool):
    def describe(self) -> types.Manifest:
        return types.Manifest(
            tools=[types.ToolSpec(
                name="word_frequencies",
                description="Count how often each word occurs in a text and return the most frequent ones.",
                parameters=json.dumps(PARAMETERS),
                toolset="text",
                permissions=[],
                requires_env=[],
                emoji="📊",
                read_only=True,
                destructive=False,
                title="Word frequencies",
                output_schema=json.dumps(RESULT),
            )],
            stateful=False,
        )

    def call(self, name: str, arguments: str) -> str:
        if name != "word_frequencies":
            raise Err(types.ToolError_InvalidArguments(f"no tool named {name!r}"))
        args = json.loads(arguments)
        words = re.findall(r"[\w']+", args["text"].lower())
        top = Counter(words).most_common(args.get("top", 10))
        return json.dumps({"total": len(words), "distinct": len(set(words)),
                           "top": [{"word": w, "count": c} for w, c in top]})
