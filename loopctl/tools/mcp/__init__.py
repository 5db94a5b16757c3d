"""MCP servers as a source of tools (the ``loopctl[mcp]`` extra, on the official ``mcp`` SDK).

    from loopctl.tools.mcp import McpServer

    notes = McpServer.stdio("notes", "python", ["-m", "my_notes_server"])
    loop = BareLoop(client, tools=[*notes.tools(), my_tool])

A server over stdio or streamable HTTP gives ``McpTool``s, which run like ``@tool`` functions
and report the MCP session to the run's trace. Opening a session without the ``mcp`` package
raises an ``ImportError`` saying how to install it. See docs/mcp.md.
"""

from loopctl.tools.mcp._connection import McpError, TransportWrapper
from loopctl.tools.mcp._server import (
    McpBackend,
    McpServer,
    McpTool,
    result_text,
    schema_problems,
    standing_in,
)

__all__ = [
    "McpBackend",
    "McpError",
    "McpServer",
    "McpTool",
    "TransportWrapper",
    "result_text",
    "schema_problems",
    "standing_in",
]
