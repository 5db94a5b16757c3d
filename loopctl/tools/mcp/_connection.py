"""A live MCP session held by a thread of its own.

The official SDK ties a session to the task that opened it, while an agent's tools are listed
when its factory builds the loop (often synchronous code) and called from whatever event loop
runs it. So the session lives on an event loop in a daemon thread; a call is awaited from the
run's loop through ``asyncio.wrap_future``, which carries a cancellation over to the session.

When the server dies, every call in flight and every later call fails with ``McpError`` naming
the server (the model sees an error result, the run goes on); the session is not reopened behind
the user's back.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import Future
from contextlib import asynccontextmanager
from typing import Any, TextIO

from loopctl.tools.decorator import ToolError

__all__ = ["McpError", "ThreadConnection", "TransportWrapper", "describe"]

#: Wraps the SDK's transport (an async context manager of a read and a write stream): how a
#: harness puts faults between the client and the server (``loopctl_sim.sim.mcp_faults``).
TransportWrapper = Callable[[Any], Any]

_INSTALL = "MCP servers as tools need the mcp extra: pip install 'loopctl[mcp]'"


class McpError(ToolError):
    """An MCP server could not answer: not started, gone, or it sent something malformed (a
    ``ToolError``: the model gets this message as the call's error result)."""


def describe(exc: BaseException) -> str:
    """One line for an exception out of the SDK (task groups wrap the real cause)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _errlog() -> TextIO:
    """Where a stdio server's stderr goes: ours, when it is a real file; else the process's
    own (under pytest's capture, click's CliRunner or a notebook, ``sys.stderr`` has no file
    descriptor for the subprocess to write to), else nowhere."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (OSError, ValueError, AttributeError):
            continue
    return open(os.devnull, "w")


@asynccontextmanager
async def _with_headers(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with headers on every request (an ``Authorization`` header), through an
    HTTP client of the SDK's timeouts that is closed with the session."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def sdk() -> Any:
    """The ``mcp`` package, or an ``ImportError`` saying how to install it."""
    try:
        import mcp
    except ImportError as exc:
        raise ImportError(f"{_INSTALL} ({exc})") from None
    return mcp


class ThreadConnection:
    """One open session with one server (see the module docstring)."""

    def __init__(
        self,
        label: str,
        target: Any,
        *,
        wrapper: TransportWrapper | None,
        on_list_changed: Callable[[list[dict[str, Any]]], None],
        connect_timeout: float,
    ) -> None:
        self.label = label
        self._target = target
        self._wrapper = wrapper
        self._on_list_changed = on_list_changed
        self._client: Any = None
        self._dead: str | None = None
        self._inflight: set[asyncio.Task[Any]] = set()
        self._relisting: asyncio.Task[None] | None = None
        self._names: set[str] | None = None  # after a list change: what the server offers now
        self._stop: asyncio.Event | None = None
        self._ended = threading.Event()  # the session is over, its process and streams closed
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"loopctl-mcp-{label}", daemon=True
        )
        self._thread.start()
        started: Future[None] = Future()
        self._held = asyncio.run_coroutine_threadsafe(self._hold(started), self._loop)
        try:
            started.result(connect_timeout)
        except TimeoutError:
            self.close()
            raise self._error(f"did not answer within {connect_timeout:g}s of starting") from None
        except McpError:
            self.close()
            raise

    async def _hold(self, started: Future[None]) -> None:
        """Open the session, keep it open until ``close``, and mark it dead when it ends."""
        mcp = sdk()
        self._stop = asyncio.Event()
        try:
            transport = self._transport(mcp)
            # The handshake-era protocol: its servers push ``tools/list_changed`` to the
            # session's message handler, where the 2026 one delivers it only to a subscription.
            client_of = mcp.Client(transport, message_handler=self._message, mode="legacy")
            async with client_of as client:
                self._client = client
                started.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            reason = describe(exc)
            if self._dead is None:
                self._dead = f"it stopped ({reason})"
            if not started.done():
                started.set_exception(self._error(f"could not be started: {reason}"))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._ended.set()
            if self._dead is None:
                self._dead = "it was closed"
            for task in list(self._inflight):
                task.cancel()

    def _transport(self, mcp: Any) -> Any:
        target = self._target
        if isinstance(target, str) and self._wrapper is None:
            return target
        if isinstance(target, mcp.StdioServerParameters):
            from mcp.client.stdio import stdio_client

            transport = stdio_client(target, errlog=_errlog())
        elif isinstance(target, str):
            from mcp.client.streamable_http import streamable_http_client

            transport = streamable_http_client(target)
        elif isinstance(target, Mapping):  # an HTTP URL with headers
            transport = _with_headers(target["url"], dict(target["headers"]))
        else:
            raise TypeError(f"MCP server '{self.label}': no transport for {type(target).__name__}")
        return transport if self._wrapper is None else self._wrapper(transport)

    async def _message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if method == "notifications/tools/list_changed" and self._dead is None:
            self._relisting = asyncio.get_running_loop().create_task(self._relist())
        await asyncio.sleep(0)

    async def _relist(self) -> None:
        try:
            tools = await self._list()
        except Exception:
            return
        self._names = {str(t.get("name")) for t in tools}
        self._on_list_changed(tools)

    async def _list(self) -> list[dict[str, Any]]:
        if self._client is None or self._dead is not None:
            raise self._error(f"is not running: {self._dead}")
        listed = await self._client.list_tools()
        return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]

    def list_tools(self, timeout: float) -> list[dict[str, Any]]:
        """The tools the server advertises now (from any thread but the session's)."""
        future = asyncio.run_coroutine_threadsafe(self._list(), self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise self._error(f"did not list its tools in {timeout:g}s") from None
        except McpError:
            raise
        except Exception as exc:
            raise self._error(f"failed to list its tools: {describe(exc)}") from None

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The server's ``CallToolResult`` as JSON (its wire field names)."""
        if self._loop.is_closed():
            raise self._error(f"is not running: {self._dead}")
        future = asyncio.run_coroutine_threadsafe(self._call(name, arguments), self._loop)
        return await asyncio.wrap_future(future)

    async def _call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if self._relisting is not None:  # a list change announced before this call: seen first
            await asyncio.shield(self._relisting)
        if self._names is not None and name not in self._names:
            raise self._error(
                f"no longer offers tool '{name}' (its tool list changed during the run)"
            )
        if self._client is None or self._dead is not None:
            raise self._error(f"is not running: {self._dead}")
        task = asyncio.current_task()
        assert task is not None
        self._inflight.add(task)
        try:
            result = await self._client.call_tool(name, arguments)
        except asyncio.CancelledError:
            if self._dead is not None:
                raise self._error(f"stopped during the call to '{name}': {self._dead}") from None
            raise
        except McpError:
            raise
        except Exception as exc:
            if "connection closed" in str(exc).lower():  # the SDK's word for a server gone
                self._dead = self._dead or "its connection closed"
            if self._dead is not None:
                raise self._error(f"stopped during the call to '{name}': {self._dead}") from None
            if type(exc).__name__ == "ValidationError":  # the SDK read the answer: not a result
                detail = " ".join(str(exc).split())[:300]
                raise self._error(
                    f"sent a malformed result to the call to '{name}': {detail}"
                ) from None
            raise self._error(f"failed the call to '{name}': {describe(exc)}") from None
        finally:
            self._inflight.discard(task)
        dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped

    def _error(self, what: str) -> McpError:
        return McpError(f"MCP server '{self.label}' {what}")

    def close(self) -> None:
        """End the session (the SDK stops a stdio server's process) and the thread."""
        if self._loop.is_closed():
            return
        stop = self._stop
        if self._client is None:  # never opened (a server that does not answer): cut it off
            self._held.cancel()
        elif stop is not None:
            self._loop.call_soon_threadsafe(stop.set)
        if not self._ended.wait(10):
            self._held.cancel()
            self._ended.wait(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()
