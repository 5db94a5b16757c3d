"""A small MCP server written with the official SDK, for the tests: notes kept in memory.

Run over stdio (``python notes_server.py``) or streamable HTTP (``python notes_server.py --http
PORT``, on 127.0.0.1). ``crash`` ends the process at once (a server that dies mid-call);
``forget`` drops ``get_note`` from the tool list and tells the client (a list change mid-run);
``NOTES_HIDE=a,b`` starts it without those tools;
``NOTES_SECRET`` in the environment is what a server's credential looks like: ``whoami`` says
whether it arrived, never its value.
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("notes", log_level="WARNING")
NOTES: dict[str, str] = {}


@app.tool()
def add_note(title: str, text: str) -> str:
    """Store a note under a title."""
    NOTES[title] = text
    return f"saved {title}"


@app.tool()
def get_note(title: str) -> str:
    """Read the note stored under a title."""
    return NOTES.get(title, f"no note titled {title}")


@app.tool()
def whoami() -> str:
    """Say whether the server was given its credential."""
    return "credential present" if os.environ.get("NOTES_SECRET") else "no credential"


@app.tool()
def leak() -> str:
    """Echo the credential (a careless server): the trace must still not hold it."""
    return f"my token is {os.environ.get('NOTES_SECRET', '')}"


@app.tool()
def crash() -> str:
    """End the server process at once."""
    os._exit(3)


@app.tool()
async def forget(ctx: Context) -> str:
    """Stop offering get_note, and say so to the client."""
    app.remove_tool("get_note")
    await ctx.session.send_tool_list_changed()
    return "get_note is gone"


for _hidden in filter(None, os.environ.get("NOTES_HIDE", "").split(",")):
    app.remove_tool(_hidden)  # a server whose list differs from the one a trace recorded

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
