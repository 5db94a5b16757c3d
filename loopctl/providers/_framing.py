"""Framing of a response's bytes (server-sent events, NDJSON lines), where a parser is, and the
ids of the tool calls it reads.

Both framings count what they read on a ``Cursor``, so a body that cannot be parsed is reported
with the event and line it failed at. ``CallIds`` makes a reply's call ids unique, the same way
for every provider.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from loopctl.providers._errors import ProviderInfo, loads, stream_ended_early


class Cursor:
    """How far a parser has read a response: lines, events, and the last event's name and the
    line it began on (where a parser that fails on it would look)."""

    __slots__ = ("event", "event_line", "events", "lines")

    def __init__(self) -> None:
        self.events = 0
        self.lines = 0
        self.event: str | None = None
        self.event_line = 0

    def where(self) -> str:
        if not self.events and not self.lines:
            return "the start of the response"
        named = f" ({self.event})" if self.event else ""
        if self.events:
            return f"event {self.events}{named}, line {self.event_line}"
        return f"line {self.lines}"


class CallIds:
    """Our index and a unique, non-empty id for each tool call of one reply: a missing or
    repeated wire id becomes ``call_{turn}_{n}`` (deterministic, never random; the next free
    ``n`` from the call's own index, so it cannot collide with an id the wire gave)."""

    __slots__ = ("count", "seen", "turn")

    def __init__(self, turn: int) -> None:
        self.turn = turn
        self.count = 0
        self.seen: set[str] = set()

    def next(self, wire_id: Any) -> tuple[int, str]:
        """``(our index, the id)`` of the next call; ``wire_id`` as the reply gave it (a value
        that is not a string fails the ``ToolCallStart`` check: a malformed reply)."""
        ours = self.count
        self.count += 1
        call_id = wire_id or ""
        n = ours
        while not call_id or call_id in self.seen:
            call_id = f"call_{self.turn}_{n}"
            n += 1
        self.seen.add(call_id)
        return ours, call_id


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str | None
    data: str


async def sse_events(
    lines: AsyncIterator[str], cursor: Cursor | None = None
) -> AsyncIterator[SseEvent]:
    """Server-sent events from text lines: ``event:`` / ``data:`` fields up to a blank line.

    Comment lines (starting with ``:``) and unknown fields are skipped; several ``data:`` lines
    join with newlines. An event not closed by a blank line when the stream ends is dropped (the
    SSE rule), so a disconnect mid-event never yields half a JSON document.
    """
    at = cursor if cursor is not None else Cursor()
    event: str | None = None
    data: list[str] = []
    first = 0  # the line the event began on
    async for raw in lines:
        at.lines += 1
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                at.events += 1
                at.event = event
                at.event_line = first
                yield SseEvent(event, "\n".join(data))
            event, data, first = None, [], 0
            continue
        if line.startswith(":"):
            continue
        first = first or at.lines
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value


async def ndjson_objects(
    info: ProviderInfo, chunks: AsyncIterator[str], cursor: Cursor | None = None
) -> AsyncIterator[Any]:
    """JSON objects of an NDJSON stream, one a line, however the text was chunked.

    A complete line that is not JSON is a malformed stream; an unfinished last line that is not
    JSON means the connection dropped mid-line (``network``).
    """
    at = cursor if cursor is not None else Cursor()
    buffer = ""
    async for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split("\n")
        for line in lines:
            at.lines += 1
            if line.strip():
                yield loads(info, line, at.where())
    if buffer.strip():
        at.lines += 1
        try:
            last = json.loads(buffer)
        except json.JSONDecodeError:
            raise stream_ended_early(info, "its last line was complete") from None
        yield last
