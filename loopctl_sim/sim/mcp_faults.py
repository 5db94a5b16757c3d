"""Faults at an MCP server's transport: what a flaky server does to an agent, on demand
(docs/mcp.md lists them). They act on the real session's messages, not on a mock; everything
but the faulted call passes through.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from loopctl.tools.mcp import McpBackend, McpServer, standing_in

FaultKind = Literal["die", "slow", "malformed", "tools_change"]


@dataclass(frozen=True)
class McpFault:
    """One fault of one server's transport, at its ``at_call``-th ``tools/call``: ``die`` (the
    stream ends), ``slow`` (``delay`` seconds late), ``malformed`` (no ``CallToolResult``) or
    ``tools_change`` (the tool list changes, without ``drop``)."""

    kind: FaultKind
    at_call: int = 1
    delay: float = 5.0
    drop: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("die", "slow", "malformed", "tools_change"):
            raise ValueError(
                f"MCP fault {self.kind!r}: expected die, slow, malformed or tools_change"
            )
        if self.at_call < 1:
            raise ValueError(f"MCP fault at_call must be 1 or more, got {self.at_call}")
        if self.kind == "tools_change" and not self.drop:
            raise ValueError("MCP fault tools_change needs drop=TOOL (the tool the list loses)")

    def wrap(self, transport: Any) -> Any:
        """The transport with this fault in between (``McpServer(transport=...)``)."""
        return _faulty(transport, self)


def with_fault(server: McpServer, fault: McpFault) -> McpServer:
    """A copy of ``server`` (same name, target and options) whose transport has ``fault``."""
    return McpServer(
        server.name,
        server._target,  # the same server, described once by the agent
        prefix=server.prefix,
        timeout=server.timeout,
        parallel_safe=server.parallel_safe,
        connect_timeout=server.connect_timeout,
        transport=fault.wrap,
    )


@contextmanager
def faulting(faults: Mapping[str, McpFault]) -> Iterator[None]:
    """While this holds, every ``McpServer`` named in ``faults`` that opens its session opens it
    with that fault on its transport: how a harness faults an agent's own servers (built by the
    agent's factory, untouched) the way ``loopctl-sim fuzz`` faults its tools."""

    def stand_in(server: McpServer) -> McpBackend | None:
        fault = faults.get(server.name)
        return None if fault is None else server.open_live(transport=fault.wrap)

    with standing_in(stand_in):
        yield


class _State:
    def __init__(self) -> None:
        self.calls = 0
        self.target: Any = None  # the id of the faulted call's request
        self.lists: set[Any] = set()  # ids of tools/list requests, once the list changed
        self.changed = False


@asynccontextmanager
async def _faulty(inner: Any, fault: McpFault) -> AsyncIterator[tuple[Any, Any]]:
    import anyio
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

    state = _State()
    async with inner as (read, write):
        send_in, receive_in = anyio.create_memory_object_stream[Any](32)
        died = anyio.Event()

        class Writer:
            async def send(self, item: Any, /) -> None:
                message = getattr(item, "message", None)
                if isinstance(message, JSONRPCRequest) and message.method == "tools/call":
                    state.calls += 1
                    if state.calls == fault.at_call:
                        state.target = message.id
                        if fault.kind == "die":
                            died.set()
                            return
                listing = isinstance(message, JSONRPCRequest) and message.method == "tools/list"
                if listing and state.changed:
                    state.lists.add(getattr(message, "id", None))
                if died.is_set():
                    return
                await write.send(item)

            async def aclose(self) -> None:
                await write.aclose()

            async def __aenter__(self) -> Writer:
                return self

            async def __aexit__(self, *exc: object) -> None:
                await self.aclose()

        async def pump() -> None:
            try:
                await relay()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the server died (``die``): nothing more reaches the client

        async def relay() -> None:
            async with send_in:
                async for item in read:
                    message = getattr(item, "message", None)
                    if isinstance(message, JSONRPCResponse) and message.id == state.target:
                        if fault.kind == "slow":
                            await anyio.sleep(fault.delay)
                        elif fault.kind == "malformed":
                            item = SessionMessage(
                                JSONRPCResponse(
                                    jsonrpc="2.0", id=message.id, result={"content": "garbled"}
                                )
                            )
                        elif fault.kind == "tools_change":
                            state.changed = True
                            note = JSONRPCNotification(
                                jsonrpc="2.0", method="notifications/tools/list_changed"
                            )
                            await send_in.send(SessionMessage(note))
                    elif isinstance(message, JSONRPCResponse) and message.id in state.lists:
                        tools = [
                            t
                            for t in message.result.get("tools", [])
                            if t.get("name") != fault.drop
                        ]
                        result = {**message.result, "tools": tools}
                        item = SessionMessage(
                            JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)
                        )
                    await send_in.send(item)

        async def watch() -> None:
            await died.wait()
            await send_in.aclose()  # the stream ends: what the client sees of a dead server

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            tg.start_soon(watch)
            try:
                yield receive_in, Writer()
            finally:
                tg.cancel_scope.cancel()
