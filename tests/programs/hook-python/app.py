"""A corral hook in Python: before a tool call, blocks it when its arguments
mention one of the words in `config.words` (a JSON list; default `[".env"]`),
with a reason the model reads.

Build it against the WIT the corral binary serves:

    corral plugin wit --out wit
    componentize-py -d wit -w hook-plugin componentize app -o no-secrets.wasm

and bind it in the manifest:

    [plugins.no-secrets]
    source = "no-secrets.wasm"
    config = { words = [".env", "id_rsa"] }

    [hooks]
    before_tool = [{ plugin = "no-secrets" }]
"""

import json

from wit_world import exports
from wit_world.exports import hook
from wit_world.imports import host


def _words():
    text = host.config("words")
    return json.loads(text) if text else [".env"]


class Hook(exports.Hook):
    def handle(self, event):
        if not isinstance(event, hook.Event_BeforeTool):
            return hook.Decision_Continue()
        arguments = event.value.call.arguments
        for word in _words():
            if word in arguments:
                return hook.Decision_Block(
                    f"the arguments mention `{word}`, which this project keeps away from tools"
                )
        return hook.Decision_Continue()
