"""An agent whose one tool source is an MCP server: the published reference server
``mcp-server-time`` (``pip install mcp-server-time``), started over stdio.

``build`` lists the server's tools when it builds the loop; every call goes to the server as
``tools/call`` through loopctl's dispatch (hooks, middleware, timeouts and error results as for
any tool), and the session (the tool list, each result) is in the run's trace. The shipped trace
``traces/clock.jsonl`` was recorded by ``record.py`` against the local model server over HTTP;

    loopctl-sim replay examples/mcp_agent/traces/clock.jsonl \\
        --agent examples.mcp_agent.agent:build --tools recorded

replays it with the server absent (its tool list and results come from the trace). With
``--tools live`` the server runs again and the replay names the tool whose list or result
changed (``convert_time`` answers with today's date).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from loopctl import BareLoop
from loopctl.api import ApiClient
from loopctl.driver import RunConfig, SessionConfig
from loopctl.observe import LoopObserver
from loopctl.tools.mcp import McpServer

MODEL = "skyway-clock-1"
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
SYSTEM = "You answer questions about time zones with the time server's tools."

#: Described at import, started when ``build`` first asks for its tools (UTC as local zone, so
#: the machine's own zone changes nothing).
TIME = McpServer.stdio(
    "time", sys.executable, ["-m", "mcp_server_time", "--local-timezone", "UTC"], timeout=20.0
)


def own_client(model: str = MODEL) -> ApiClient:
    """The client the agent uses when the harness brings none (``SKYWAY_BASE_URL``,
    ``SKYWAY_API_KEY``): Chat Completions over HTTP."""
    from loopctl.providers import OpenAIClient

    base_url = os.environ.get("SKYWAY_BASE_URL", DEFAULT_BASE_URL)
    return OpenAIClient(model, base_url=base_url, api_key=os.environ.get("SKYWAY_API_KEY"))


def build(client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()) -> BareLoop:
    """The clock agent: the time server's tools, a short system prompt."""
    return BareLoop(
        client if client is not None else own_client(),
        tools=TIME.tools(),
        config=RunConfig(max_turns=4),
        session=SessionConfig(system_prompt=SYSTEM),
        observers=observers,
    )
