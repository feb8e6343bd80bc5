"""A small corral tool plugin in Python, for the `plugins` benchmark.

`py_word_count` counts the words of its `text` argument and, when given a
`path`, of that file too (inside the plugin's granted directories).
Built with componentize-py against the repository's `wit/` directory, world
`tool-plugin`.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The text whose words to count."},
        "path": {"type": "string", "description": "A file whose words to count."},
    },
    "additionalProperties": False,
}


class Tool(exports.Tool):
    def describe(self):
        return [
            types.ToolSpec(
                name="py_word_count",
                description="Counts the words of a text or a file.",
                input_schema=json.dumps(SCHEMA),
                effects=[types.Effect.READ],
            )
        ]

    def invoke(self, call):
        if call.name != "py_word_count":
            raise Err(types.ToolError_UnknownTool(call.name))
        try:
            args = json.loads(call.arguments)
        except ValueError as e:
            raise Err(types.ToolError_InvalidArguments(str(e)))
        text = args.get("text", "")
        if "path" in args:
            with open(args["path"], encoding="utf-8") as f:
                text += " " + f.read()
        return types.ToolOutput(content=str(len(text.split())), is_error=False, data=None)

    def preview(self, call):
        return None
