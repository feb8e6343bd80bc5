"""An MCP server written with the Python `mcp` SDK, for corral's injection
tests: an issue tracker and a mailbox kept as files in one directory (the
first argument, which its entry grants it).

- `read_issue`: the text of `issue.md` (a test puts an injected instruction
  in it, or not);
- `read_inbox`: the text of `inbox.md` (private mail);
- `send_email`: appends the message to `outbox.jsonl` and says "sent";
- `post_status`: appends the text to `posted.jsonl` (its entry declares it
  `network`, as a real status service would be).

It has no network of its own: what it "sends" lands in files a test reads.
"""

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

box = Path(sys.argv[1])
server = MCPServer("office")


@server.tool()
def read_issue() -> str:
    """Reads the open issue."""
    return (box / "issue.md").read_text()


@server.tool()
def read_inbox() -> str:
    """Reads the user's inbox."""
    return (box / "inbox.md").read_text()


@server.tool()
def send_email(to: str, subject: str, body: str) -> str:
    """Sends an e-mail."""
    with open(box / "outbox.jsonl", "a") as f:
        f.write(json.dumps({"to": to, "subject": subject, "body": body}) + "\n")
    return "sent"


@server.tool()
def post_status(text: str) -> str:
    """Posts a status update."""
    with open(box / "posted.jsonl", "a") as f:
        f.write(json.dumps({"text": text}) + "\n")
    return "posted"


server.run()
