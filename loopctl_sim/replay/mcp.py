"""Agent replay of MCP servers: from the trace with the server absent, or live and compared.

A trace recorded through ``loopctl.tools.mcp`` holds each server's session as ``mcp`` io records
(its tool lists, each call's result or failure). While ``mcp_replay`` holds, a server none of
whose tools runs live is a stand-in answering its recorded tool list (no process, no connection;
its calls are answered by the replay's ``RecordedTools`` like any tool's). A server with a live
tool is the real one, watched: a changed tool list or result is a note naming the server and
the tool, so the divergence it causes says where it came from. A server the trace never
recorded is a note too, and stays live.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from loopctl.tools.mcp import McpBackend, McpError, McpServer, standing_in
from loopctl_sim.trace import IoRecord, TraceReader


class RecordedSessions:
    """What a trace recorded of each MCP server's session, by server name."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.lists: dict[str, list[list[dict[str, Any]]]] = {}
        self.results: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for record in TraceReader(path):
            if not isinstance(record, IoRecord) or record.kind != "mcp":
                continue
            data = record.data
            server, op = str(data.get("server")), data.get("op")
            if op == "tools" and isinstance(data.get("tools"), list):
                self.lists.setdefault(server, []).append(list(data["tools"]))
            elif op in ("result", "error"):
                answer = {"result": data.get("result")} if op == "result" else {"error": True}
                self.results.setdefault((server, str(data.get("tool"))), []).append(answer)

    def first_list(self, server: str) -> list[dict[str, Any]] | None:
        lists = self.lists.get(server)
        return lists[0] if lists else None


class _Recorded:
    """A server as the trace recorded it: its tool list; a call is never its to answer."""

    def __init__(self, name: str, tools: list[dict[str, Any]]) -> None:
        self.name = name
        self.tools = tools

    def list_tools(self, timeout: float) -> list[dict[str, Any]]:
        return list(self.tools)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        raise McpError(
            f"MCP server '{self.name}' is replayed from the trace, which holds no result for "
            f"this call to '{name}'"
        )

    def close(self) -> None:
        return None


class _Watched:
    """The live server, compared with the recording as it answers."""

    def __init__(
        self, server: McpServer, live: McpBackend, sessions: RecordedSessions, notes: list[str]
    ) -> None:
        self.server = server
        self.live = live
        self.sessions = sessions
        self.notes = notes
        self.calls: dict[str, int] = {}

    def list_tools(self, timeout: float) -> list[dict[str, Any]]:
        tools = self.live.list_tools(timeout)
        recorded = self.sessions.first_list(self.server.name)
        if recorded is not None:  # each change once, however often the agent lists
            changes = list_changes(self.server.name, recorded, tools)
            self.notes.extend(c for c in changes if c not in self.notes)
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        index = self.calls.get(name, 0)
        self.calls[name] = index + 1
        result = await self.live.call_tool(name, arguments)
        recorded = self.sessions.results.get((self.server.name, name), [])
        if index < len(recorded) and recorded[index] != {"result": result}:
            was = recorded[index].get("result")
            self.notes.append(
                f"MCP server '{self.server.name}', tool '{name}': call {index + 1} answered "
                f"{_short(result)} where the trace has {_short(was) if was else 'an error'}"
            )
        return result

    def close(self) -> None:
        self.live.close()


def list_changes(
    server: str, recorded: list[dict[str, Any]], now: list[dict[str, Any]]
) -> list[str]:
    """One line per tool added, removed or changed between two advertised lists."""
    before = {str(t.get("name")): t for t in recorded}
    after = {str(t.get("name")): t for t in now}
    lines = [f"MCP server '{server}': tool '{n}' is new" for n in after if n not in before]
    lines += [f"MCP server '{server}': tool '{n}' is gone" for n in before if n not in after]
    for name in (n for n in after if n in before and after[n] != before[n]):
        fields = sorted(
            k for k in {*after[name], *before[name]} if after[name].get(k) != before[name].get(k)
        )
        lines.append(f"MCP server '{server}': tool '{name}' changed its {', '.join(fields)}")
    return lines


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value.get("content") if isinstance(value, dict) else value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextmanager
def mcp_replay(path: str | os.PathLike[str], live: Callable[[str], bool]) -> Iterator[list[str]]:
    """Stand in for the agent's MCP servers while the trace at ``path`` replays (see the module
    docstring); ``live`` says which tools run live. Yields the notes, filled as it goes."""
    read: list[RecordedSessions] = []  # the trace is read when a server first opens
    notes: list[str] = []
    opened: list[McpBackend] = []

    def stand_in(server: McpServer) -> McpBackend | None:
        if not read:
            read.append(RecordedSessions(path))
        sessions = read[0]
        recorded = sessions.first_list(server.name)
        if recorded is None:
            notes.append(f"MCP server '{server.name}' is not in the trace")
            return None
        names = [server.prefix + str(t.get("name")) for t in recorded]
        if not any(live(n) for n in names):
            return _Recorded(server.name, recorded)
        backend = server.open_live()
        watched = _Watched(server, backend, sessions, notes)
        opened.append(watched)
        return watched

    with standing_in(stand_in):
        try:
            yield notes
        finally:
            for backend in opened:
                backend.close()
