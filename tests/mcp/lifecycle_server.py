"""An MCP server written with the Python `mcp` SDK, for corral's lifecycle tests.

Run by corral over stdio (`lifecycle_server.py`) or by a test over streamable
HTTP (`lifecycle_server.py http PORT HEADERS_FILE`). Its tools:

- `greet`: its description is read from `desc.txt` in the working directory
  when the server starts, so a test can change it between two sessions;
- `pid`: the server's process id;
- `crash`: the server exits at once, mid-call;
- `grow`: adds the tool `extra` and sends `notifications/tools/list_changed`;
- `seen` (HTTP only): writes the request headers it received to HEADERS_FILE
  (outside what corral logs) and answers only "recorded".
"""

import json
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("lifecycle")

try:
    description = Path("desc.txt").read_text().strip()
except OSError:
    description = "Greets someone."


def greet(name: str) -> str:
    return f"hello, {name}"


server.add_tool(greet, name="greet", description=description)


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
def crash() -> str:
    """Exits the server mid-call."""
    sys.stdout.flush()
    os._exit(3)


def extra() -> str:
    return "extra ran"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `extra` and says the list changed."""
    server.add_tool(extra, name="extra", description="Added during the session.")
    await ctx.session.send_tool_list_changed()
    return "grown"


if len(sys.argv) > 1 and sys.argv[1] == "http":
    headers_file = sys.argv[3]

    @server.tool()
    def seen(ctx: Context) -> str:
        """Records the request headers it received."""
        with open(headers_file, "a") as f:
            f.write(json.dumps(dict(ctx.headers or {})) + "\n")
        return "recorded"

    server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
else:
    server.run()
