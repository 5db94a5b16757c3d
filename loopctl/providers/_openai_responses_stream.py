"""OpenAI Responses replies as ``loopctl.api`` events: a whole ``Response``, or its event stream.

Both give the same events for the same response (tests check it on every cassette):

- a ``reasoning`` item: its summary (``response.reasoning_summary_text.delta``) as
  ``ThinkingDelta``, then a ``ThinkingPart`` holding the item as received (``data``, with its
  ``encrypted_content``, also the part's ``signature``), taken from ``output_item.done``: the
  docs warn that ``encrypted_content`` in ``output_item.added`` may be incomplete;
- a ``message`` item: its ``output_text`` (and ``refusal``) as ``TextDelta``; annotations (URL
  citations) as an ``annotations`` ``ProviderPart`` after the text;
- a ``function_call`` item: ``ToolCallStart`` (``call_id``; a missing or repeated one becomes
  ``call_{turn}_{n}``), the ``function_call_arguments.delta`` pieces, ``ToolCallEnd``, then a
  ``call_extra`` ``ProviderPart`` keeping the item's own ``id`` (``fc_...``) for the way back;
- any other item (``web_search_call``, ``file_search_call``, ``mcp_call``, built-in tools added
  later): a ``ProviderPart`` of the item as done. OpenAI runs those tools itself.

The stream ends with ``response.completed`` or ``response.incomplete`` (usage, stop reason);
``response.failed`` and ``error`` events are classified like HTTP errors; unknown events are
ignored; no ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, Final

from loopctl.api import (
    PartEvent,
    StopEvent,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UsageEvent,
)
from loopctl.core import ProviderPart, ThinkingPart
from loopctl.providers._errors import (
    ProviderInfo,
    classify,
    loads_object,
    malformed,
    stream_ended_early,
)
from loopctl.providers._framing import CallIds, Cursor, sse_events

ANNOTATIONS: Final = "annotations"
CALL_EXTRA: Final = "call_extra"
_INCOMPLETE: Final = {"max_output_tokens": "max_tokens"}


def usage_from_wire(usage: Mapping[str, Any]) -> Usage:
    """``input_tokens`` / ``output_tokens``; context = ``total_tokens``; the breakdowns."""
    fresh = int(usage.get("input_tokens") or 0)
    output = int(usage.get("output_tokens") or 0)
    total = usage.get("total_tokens")
    return Usage(
        input_tokens=fresh,
        output_tokens=output,
        cache_read_tokens=int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0),
        context_tokens=int(total) if total is not None else fresh + output,
        reasoning_tokens=int(
            (usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
        ),
    )


def _summary(item: Mapping[str, Any]) -> str:
    pieces = [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, Mapping)]
    if not any(pieces):
        pieces = [c.get("text", "") for c in item.get("content") or [] if isinstance(c, Mapping)]
    return "\n\n".join(p for p in pieces if p)


class _Reply:
    """The state of one response: our tool-call indexes, and what a stream already showed."""

    def __init__(self, info: ProviderInfo, turn: int, provider: str, where: str) -> None:
        self.info = info
        self.where = where  # updated by a stream as it reads
        self.provider = provider
        self.ids = CallIds(turn)
        self.calls: dict[int, int] = {}  # output_index -> our index
        self.call_ids: dict[int, str] = {}  # our index -> the call's id
        self.argued: set[int] = set()  # output indexes whose arguments streamed
        self.texted: set[int] = set()  # output indexes whose text streamed
        self.any_call = False

    def start_call(self, item: Mapping[str, Any], output_index: int) -> Iterator[StreamEvent]:
        if not item.get("name"):
            raise malformed(self.info, "a function_call item without a name", self.where)
        ours, call_id = self.ids.next(item.get("call_id"))
        self.calls[output_index] = ours
        self.call_ids[ours] = call_id
        self.any_call = True
        yield ToolCallStart(index=ours, id=call_id, name=item["name"])

    def item_done(self, item: Mapping[str, Any], output_index: int) -> Iterator[StreamEvent]:
        """Everything a finished item adds (a stream showed its text and arguments already)."""
        itype = item.get("type")
        if itype == "function_call":
            if output_index not in self.calls:
                yield from self.start_call(item, output_index)
            ours = self.calls[output_index]
            if output_index not in self.argued and item.get("arguments"):
                yield ToolCallDelta(index=ours, arguments=item["arguments"])
            yield ToolCallEnd(index=ours)
            if item.get("id"):
                call_id = self.call_ids[ours]
                data = {"type": CALL_EXTRA, "call_id": call_id, "fields": {"id": item["id"]}}
                yield PartEvent(part=ProviderPart(provider=self.provider, data=data))
        elif itype == "reasoning":
            text = _summary(item)
            if text and output_index not in self.texted:
                yield ThinkingDelta(text=text)
            part = ThinkingPart(
                provider=self.provider,
                text=text,
                signature=item.get("encrypted_content"),
                data=dict(item),
            )
            yield PartEvent(part=part)
        elif itype == "message":
            annotations: list[Any] = []
            for content in item.get("content") or []:
                kind = content.get("type")
                text = content.get("refusal" if kind == "refusal" else "text")
                if text and output_index not in self.texted:
                    yield TextDelta(text=text)
                annotations.extend(content.get("annotations") or [])
            if annotations:
                data = {"type": ANNOTATIONS, "annotations": annotations}
                yield PartEvent(part=ProviderPart(provider=self.provider, data=data))
        else:
            yield PartEvent(part=ProviderPart(provider=self.provider, data=dict(item)))

    def finish(self, response: Mapping[str, Any]) -> Iterator[StreamEvent]:
        status = response.get("status")
        if status == "failed" or response.get("error"):
            raise classify(self.info, None, {"error": response.get("error") or {}})
        if status == "incomplete":
            reason = (response.get("incomplete_details") or {}).get("reason") or "incomplete"
            yield StopEvent(reason=_INCOMPLETE.get(reason, reason))
        else:
            yield StopEvent(reason="tool_use" if self.any_call else "end_turn")
        usage = response.get("usage")
        if isinstance(usage, Mapping):
            yield UsageEvent(usage=usage_from_wire(usage))


def response_events(
    info: ProviderInfo, data: Any, turn: int, provider: str
) -> Iterator[StreamEvent]:
    """The events of a whole (non-streamed) ``Response``."""
    if not isinstance(data, Mapping) or not isinstance(data.get("output"), list):
        raise malformed(info, "a response without an output list", "the JSON body")
    reply = _Reply(info, turn, provider, "the JSON body")
    for i, item in enumerate(data["output"]):
        if item.get("type") == "function_call":
            yield from reply.start_call(item, i)
        yield from reply.item_done(item, i)
    yield from reply.finish(data)


async def stream_events(
    info: ProviderInfo,
    lines: AsyncIterator[str],
    cursor: Cursor,
    turn: int,
    provider: str,
) -> AsyncIterator[StreamEvent]:
    """The events of a streamed response (see the module docstring)."""
    reply = _Reply(info, turn, provider, cursor.where())
    async for sse in sse_events(lines, cursor):
        reply.where = where = cursor.where()
        data = loads_object(info, sse.data, where, "an event")
        etype = data.get("type", sse.event)
        index = data.get("output_index")
        if etype == "response.output_item.added":
            item = data.get("item") or {}
            if item.get("type") == "function_call" and isinstance(index, int):
                for event in reply.start_call(item, index):
                    yield event
        elif etype == "response.output_text.delta" or etype == "response.refusal.delta":
            if data.get("delta"):
                reply.texted.add(index)  # type: ignore[arg-type]
                yield TextDelta(text=data["delta"])
        elif etype in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if data.get("delta"):
                reply.texted.add(index)  # type: ignore[arg-type]
                yield ThinkingDelta(text=data["delta"])
        elif etype == "response.function_call_arguments.delta":
            ours = reply.calls.get(index)  # type: ignore[arg-type]
            if ours is None:
                what = f"arguments for output item {index}, which never started"
                raise malformed(info, what, where)
            if data.get("delta"):
                reply.argued.add(index)  # type: ignore[arg-type]
                yield ToolCallDelta(index=ours, arguments=data["delta"])
        elif etype == "response.output_item.done":
            for event in reply.item_done(data.get("item") or {}, index):  # type: ignore[arg-type]
                yield event
        elif etype in ("response.completed", "response.incomplete", "response.failed"):
            for event in reply.finish(data.get("response") or {}):
                yield event
            return
        elif etype == "error":
            error = {k: data.get(k) for k in ("message", "code", "param")}
            raise classify(info, None, {"error": {**error, "type": data.get("code")}})
        # response.created, in_progress, content_part.*, *.done, and events added later
    raise stream_ended_early(info, "response.completed")
