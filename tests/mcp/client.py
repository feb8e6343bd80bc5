"""An MCP client for corral's tests, built on the official Python SDK (`mcp`).

Usage: client.py SCENARIO -- COMMAND [ARG...]

Starts COMMAND (the `corral mcp serve` under test) as a stdio MCP server,
runs the scenario against it and prints one JSON object on stdout with what
the server answered; the Rust test asserts on it. The scenario is JSON:

    {
      "list": true,                       # also list the tools
      "elicitation": "accept" | "accept_for_session" | "decline" | "cancel" | null,
                                          # null: the client does not declare elicitation
      "calls": [{"name": "read_file", "arguments": {...}}, ...],
      "concurrent": false                 # true: send every call at once; each elicitation
                                          # is answered only once every call that does not
                                          # ask has come back
    }

Output: {"tools": [...], "calls": [{"is_error", "text", "structured"}...],
"elicitations": [{"message", "schema"}...], "protocol_version"}.
The server's environment is this process's, so the test's XDG directories reach it.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client


async def main() -> None:
    scenario = json.loads(sys.argv[1])
    if sys.argv[2] != "--":
        raise SystemExit("usage: client.py SCENARIO -- COMMAND [ARG...]")
    command, args = sys.argv[3], sys.argv[4:]

    mode = scenario.get("elicitation")
    elicitations = []
    # Set once every call that needs no approval has its answer; an
    # elicitation waits for it in a concurrent scenario, so a server that
    # held every call behind a pending approval would never finish.
    others_done = asyncio.Event()

    async def on_elicit(context, params):
        elicitations.append({"message": params.message, "schema": params.requested_schema})
        if scenario.get("concurrent"):
            await others_done.wait()
        if mode == "accept":
            return types.ElicitResult(action="accept", content={})
        if mode == "accept_for_session":
            return types.ElicitResult(action="accept", content={"for_session": True})
        return types.ElicitResult(action=mode)

    server = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    out = {"calls": [], "elicitations": elicitations}
    async with stdio_client(server) as (read, write):
        async with ClientSession(
            read, write, elicitation_callback=on_elicit if mode else None
        ) as session:
            init = await session.initialize()
            out["protocol_version"] = init.protocol_version
            if scenario.get("list"):
                listed = await session.list_tools()
                out["tools"] = [
                    {
                        "name": t.name,
                        "description": t.description,
                        "input_schema": t.input_schema,
                        "annotations": t.annotations.model_dump(by_alias=True, exclude_none=True)
                        if t.annotations
                        else None,
                    }
                    for t in listed.tools
                ]

            async def call(c):
                r = await session.call_tool(c["name"], c.get("arguments", {}))
                return {
                    "is_error": r.is_error,
                    "text": "".join(b.text for b in r.content if b.type == "text"),
                    "structured": r.structured_content,
                }

            calls = scenario.get("calls", [])
            if scenario.get("concurrent"):
                tasks = [asyncio.create_task(call(c)) for c in calls]
                asking = [t for t, c in zip(tasks, calls) if c.get("asks")]
                for t, c in zip(tasks, calls):
                    if not c.get("asks"):
                        await t
                others_done.set()
                await asyncio.gather(*asking)
                out["calls"] = [t.result() for t in tasks]
            else:
                for c in calls:
                    out["calls"].append(await call(c))
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
