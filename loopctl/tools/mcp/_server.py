"""``McpServer`` and ``McpTool``: an MCP server's tools as loopctl tools.

An ``McpTool`` is a ``Tool`` whose arguments are checked against the JSON Schema the server
advertised and whose execution is a ``tools/call`` on the server's session. The session opens
when the tools are first asked for, so an agent module can describe its servers at import time.

Every run reports an ``mcp`` IO event with the tool list each server advertised (``op: tools``)
at its start and when the server changes it mid-run (what was added, removed or changed), one
with each call's result (``op: result``) and one for each failure (``op: error``). The command,
URL, environment and headers are not reported: they are where an API key lives.

A harness may stand in for the session (``standing_in``): replay answers from the trace.
"""

from __future__ import annotations

import atexit
import json
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from loopctl.api import ToolSpec
from loopctl.observe import IoEvent, io_event, report_io
from loopctl.tools.decorator import Tool, ToolArgumentsError, ToolError
from loopctl.tools.mcp._connection import McpError, ThreadConnection, TransportWrapper, sdk

__all__ = ["McpBackend", "McpServer", "McpTool", "standing_in"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_UNFIT = re.compile(r"[^A-Za-z0-9_-]")


class McpBackend(Protocol):
    """What an ``McpServer`` talks to: a live session, or a harness's stand-in for one."""

    def list_tools(self, timeout: float) -> list[dict[str, Any]]: ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]: ...

    def close(self) -> None: ...


StandIn = Callable[["McpServer"], McpBackend | None]
_STAND_IN: ContextVar[StandIn | None] = ContextVar("loopctl_mcp_stand_in", default=None)


@contextmanager
def standing_in(stand_in: StandIn) -> Iterator[None]:
    """While this holds, a server that opens its session asks ``stand_in`` first (a backend,
    or None for the real server): how ``loopctl_sim`` replays an agent without its servers."""
    token = _STAND_IN.set(stand_in)
    try:
        yield
    finally:
        _STAND_IN.reset(token)


class McpServer:
    """One MCP server, over stdio (``McpServer.stdio``) or streamable HTTP (``McpServer.http``).

    ``name`` names the server in traces (replay finds the recorded session by it). ``tools()``
    opens the session; ``prefix`` goes before each tool's name (two servers may offer the same
    name). ``timeout`` bounds each call (else the loop's ``tool_timeout``). ``close()`` (or a
    ``with`` block) ends the session; one left open is closed when the interpreter exits.
    """

    def __init__(
        self,
        name: str,
        target: Any,
        *,
        prefix: str = "",
        timeout: float | None = None,
        parallel_safe: bool = True,
        connect_timeout: float = 30.0,
        transport: TransportWrapper | None = None,
    ) -> None:
        if not name or not name.isprintable():
            raise ValueError(f"MCP server name {name!r}: give it a short printable name")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"MCP server '{name}': timeout must be positive, got {timeout}")
        self.name = name
        self.prefix = prefix
        self.timeout = timeout
        self.parallel_safe = parallel_safe
        self.connect_timeout = connect_timeout
        self._target = target
        self._wrapper = transport
        self._backend: McpBackend | None = None
        self._listed: list[dict[str, Any]] = []
        self._pending: list[IoEvent] = []
        self._lock = threading.Lock()
        _OPEN.add(self)

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        **options: Any,
    ) -> McpServer:
        """A server the SDK starts as a subprocess and talks to over its stdin and stdout.
        ``env`` is added to a minimal inherited environment (the SDK's rule: PATH, HOME...)."""
        params = _StdioTarget(command=command, args=list(args), env=dict(env or {}), cwd=cwd)
        return cls(name, params, **options)

    @classmethod
    def http(
        cls,
        name: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        **options: Any,
    ) -> McpServer:
        """A server at a streamable-HTTP endpoint (``http://127.0.0.1:8000/mcp``)."""
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"MCP server '{name}': {url!r} is not an http(s) URL")
        target: Any = {"url": url, "headers": dict(headers)} if headers else url
        return cls(name, target, **options)

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "stdio" if isinstance(self._target, _StdioTarget) else "http"

    def __repr__(self) -> str:  # never the env, the headers or the URL: secrets live there
        return f"<McpServer {self.name!r} over {self.transport}>"

    def __enter__(self) -> McpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> McpBackend:
        if self._backend is not None:
            return self._backend
        stand_in = _STAND_IN.get()
        backend = stand_in(self) if stand_in is not None else None
        self._backend = backend if backend is not None else self.open_live()
        return self._backend

    def open_live(self, transport: TransportWrapper | None = None) -> McpBackend:
        """A session with the real server, whoever stands in (a watching harness's way in);
        ``transport`` wraps the SDK's transport instead of the server's own wrapper."""
        target = self._target
        mcp = sdk()  # without the extra: an ImportError that says how to install it
        if isinstance(target, _StdioTarget):
            target = mcp.StdioServerParameters(
                command=target.command, args=target.args, env=target.env, cwd=target.cwd
            )
        return ThreadConnection(
            self.name,
            target,
            wrapper=transport if transport is not None else self._wrapper,
            on_list_changed=self._list_changed,
            connect_timeout=self.connect_timeout,
        )

    def tools(self) -> list[McpTool]:
        """The server's tools, as it advertises them now (opens the session the first time)."""
        backend = self._open()
        listed = backend.list_tools(self.connect_timeout)
        with self._lock:
            self._listed = listed
        built = [self._tool(entry) for entry in listed]
        names = [t.name for t in built]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(
                    f"MCP server '{self.name}': two tools are named {name!r} once made fit "
                    "for a provider; give the server a prefix= or rename them"
                )
        return built

    def _tool(self, entry: Mapping[str, Any]) -> McpTool:
        """A tool of the server, its name made fit for a provider."""
        remote = str(entry.get("name", ""))
        name = self.prefix + remote
        if not _NAME.match(name):
            name = _UNFIT.sub("_", name)[:64] or "_"
        schema = entry.get("inputSchema")
        return McpTool(
            self,
            remote,
            name=name,
            description=str(entry.get("description") or ""),
            schema=schema if isinstance(schema, dict) else {"type": "object"},
        )

    def advertised(self) -> list[dict[str, Any]]:
        """The tool list the server last advertised (as the MCP wire has it)."""
        with self._lock:
            return list(self._listed)

    def _list_changed(self, tools: list[dict[str, Any]]) -> None:
        """The server said its list changed (on the session's thread): kept and reported."""
        with self._lock:
            before = {str(t.get("name")): t for t in self._listed}
            after = {str(t.get("name")): t for t in tools}
            self._listed = tools
            changes = {
                "added": sorted(after.keys() - before.keys()),
                "removed": sorted(before.keys() - after.keys()),
                "changed": sorted(n for n in after.keys() & before if after[n] != before[n]),
            }
            data = {"op": "tools", "server": self.name, "tools": tools, **changes}
            self._pending.append(io_event("mcp", None, data))

    def _flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for event in pending:
            report_io(event)

    def announce(self) -> list[IoEvent]:
        """What a run's start reports: the tool list the server advertises (and any change
        not yet reported). Called by ``BareLoop`` through its registry."""
        with self._lock:
            pending, self._pending = self._pending, []
            listed = list(self._listed)
        data = {"op": "tools", "server": self.name, "transport": self.transport, "tools": listed}
        return [io_event("mcp", None, data), *pending]

    async def call(self, tool: McpTool, arguments: dict[str, Any]) -> str:
        """One ``tools/call``: the result's text, or ``ToolError`` with the server's message."""
        self._flush()
        with self._lock:
            offered = any(entry.get("name") == tool.remote_name for entry in self._listed)
        if not offered:
            raise self._failed(
                tool,
                arguments,
                f"MCP server '{self.name}' no longer offers tool '{tool.remote_name}' "
                "(its tool list changed during the run)",
            )
        try:
            backend = self._open()
            result = await backend.call_tool(tool.remote_name, arguments)
        except McpError as exc:
            self._flush()  # a list change the call ran into comes first
            raise self._failed(tool, arguments, str(exc)) from None
        self._flush()
        data = {"op": "result", "server": self.name, "tool": tool.remote_name}
        report_io(io_event("mcp", None, {**data, "arguments": arguments, "result": result}))
        try:
            text, is_error = result_text(result)
        except ValueError as exc:
            raise self._failed(
                tool, arguments, f"MCP server '{self.name}' sent a malformed result: {exc}"
            ) from None
        if is_error:
            raise ToolError(text or f"MCP tool '{tool.remote_name}' failed")
        return text

    def _failed(self, tool: McpTool, arguments: dict[str, Any], message: str) -> McpError:
        data = {"op": "error", "server": self.name, "tool": tool.remote_name}
        report_io(io_event("mcp", None, {**data, "arguments": arguments, "error": message}))
        return McpError(message)

    def close(self) -> None:
        """End the session (a stdio server's process stops). The tools then answer errors."""
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()
        _OPEN.discard(self)


class _StdioTarget(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str | Path | None = None


class _Arguments(BaseModel):
    """The model's arguments to an MCP tool, checked against the server's schema."""

    model_config = ConfigDict(frozen=True)
    values: dict[str, Any]


class McpTool(Tool[..., Any]):
    """One tool of an ``McpServer``; built by ``McpServer.tools()``."""

    def __init__(
        self,
        server: McpServer,
        remote_name: str,
        *,
        name: str,
        description: str,
        schema: dict[str, Any],
    ) -> None:
        # Not ``Tool.__init__``: there is no Python function whose signature to read; the
        # server's JSON Schema is the spec and the validation both.
        self.source = server
        self.remote_name = remote_name
        self.name = self.__name__ = name
        self.description = description
        self.timeout = server.timeout
        self.parallel_safe = server.parallel_safe
        self.inline = False
        self.is_async = True
        self.raises = (ToolError,)
        self.schema = schema
        self.fn = self._direct
        self.spec = ToolSpec(name=name, description=description, parameters=schema)

    def _direct(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"MCP tool '{self.name}' is called by a loop, or with 'await tool.run(arguments)'"
        )

    def __repr__(self) -> str:
        return f"<McpTool {self.name!r} of server {self.source.name!r}>"

    def parse_arguments(self, arguments: Mapping[str, Any]) -> BaseModel:
        values = dict(arguments)
        problems = schema_problems(self.schema, values)
        if problems:
            lines = "\n".join(f"- {p}" for p in problems)
            raise ToolArgumentsError(f"invalid arguments for tool '{self.name}':\n{lines}")
        return _Arguments(values=values)

    async def execute(self, validated: BaseModel) -> Any:
        assert isinstance(validated, _Arguments)
        return await self.source.call(self, dict(validated.values))


def schema_problems(schema: Mapping[str, Any], values: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``values`` for ``schema``, one line each (none: fine)."""
    try:
        import jsonschema  # type: ignore[import-untyped]
    except ImportError:  # the mcp extra brings it; without it, the required names are checked
        required = schema.get("required") or []
        return [f"{name}: missing (required)" for name in required if name not in values]
    try:
        validator = jsonschema.Draft202012Validator(dict(schema))
        errors = sorted(validator.iter_errors(dict(values)), key=lambda e: list(e.path))
    except Exception:  # a schema it cannot use (an unresolvable $ref): the server judges
        return []
    return [f"{'.'.join(str(p) for p in e.path) or '(arguments)'}: {e.message}" for e in errors]


def result_text(result: Mapping[str, Any]) -> tuple[str, bool]:
    """A ``CallToolResult`` (wire JSON) as the text the model receives, and whether it is an
    error: the text blocks joined, else every block as JSON; ``ValueError`` when it is no
    ``CallToolResult``."""
    content = result.get("content")
    is_error = result.get("isError", False)
    if not isinstance(content, list) or not isinstance(is_error, bool):
        raise ValueError(f"no content list in {json.dumps(result)[:200]}")
    texts = [b.get("text") for b in content if isinstance(b, dict)]
    if content and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "\n".join(str(t) for t in texts), is_error
    if not content and "structuredContent" in result:
        return json.dumps(result["structuredContent"], ensure_ascii=False), is_error
    return json.dumps(content, ensure_ascii=False), is_error


_OPEN: weakref.WeakSet[McpServer] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for server in list(_OPEN):
        server.close()
