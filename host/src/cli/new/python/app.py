"""The component's entry point: connects the tools in tools.py to corral.
You should not need to change it; componentize-py generates `wit_world`
from the WIT files in wit/ when it builds."""

import json

import corral_tool
from componentize_py_types import Err
from tools import TOOLS
from wit_world import exports
from wit_world.imports import host, types

_LEVELS = {
    "trace": host.LogLevel.TRACE,
    "debug": host.LogLevel.DEBUG,
    "info": host.LogLevel.INFO,
    "warn": host.LogLevel.WARN,
    "error": host.LogLevel.ERROR,
}
_EFFECTS = {
    "read": types.Effect.READ,
    "write": types.Effect.WRITE,
    "execute": types.Effect.EXECUTE,
    "network": types.Effect.NETWORK,
}
_ERRORS = {
    "invalid-arguments": types.ToolError_InvalidArguments,
    "unknown-tool": types.ToolError_UnknownTool,
    "failed": types.ToolError_Failed,
    "fatal": types.ToolError_Fatal,
}


class _Host:
    def log(self, level, message):
        host.log(_LEVELS[level], message)

    def config(self, key):
        return host.config(key)


corral_tool.bind(_Host())


def _guard(f):
    """Runs `f`, turning a tool error into the WIT error the host reads."""
    try:
        return f()
    except corral_tool.ToolError as e:
        raise Err(_ERRORS[e.kind](e.message)) from None


class Tool(exports.Tool):
    def describe(self):
        return [
            types.ToolSpec(
                name=s["name"],
                description=s["description"],
                input_schema=s["input_schema"],
                effects=[_EFFECTS[e] for e in s["effects"]],
            )
            for s in (t.spec() for t in TOOLS)
        ]

    def invoke(self, call):
        out = _guard(lambda: corral_tool.find(TOOLS, call.name).call(call.arguments))
        data = None if out.data is None else json.dumps(out.data)
        return types.ToolOutput(content=out.content, is_error=out.is_error, data=data)

    def preview(self, call):
        return _guard(lambda: corral_tool.find(TOOLS, call.name).preview_call(call.arguments))
