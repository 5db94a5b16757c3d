"""OpenAI Responses (``POST {base_url}/responses``): the API OpenAI recommends for new work.

Requests are stateless: the whole conversation goes in ``input`` every time, with
``store: false`` and ``include: ["reasoning.encrypted_content"]``, so reasoning items come back
encrypted and can be sent back, which reasoning models need across tool calls.

Input items: the system prompt is ``instructions``; each ``ToolResult`` a
``function_call_output`` (no error flag: an error result is its text); an assistant message
keeps its order: its reasoning items as received, its text as an ``assistant`` message (with its
annotations), each call a ``function_call`` (the item id kept from the reply), and any other
item this client kept (a ``web_search_call``) as received. Another provider's parts are left
out.

Replies: a whole ``Response`` and its event stream give the same events (tests check it on every
cassette):

- a ``reasoning`` item: its summary as ``ThinkingDelta``, then a ``ThinkingPart`` holding the
  item as received (its ``encrypted_content`` also the ``signature``), taken from
  ``output_item.done``: the docs warn that ``output_item.added`` may hold it incomplete;
- a ``message`` item: its ``output_text`` (and ``refusal``) as ``TextDelta``; annotations as an
  ``annotations`` ``ProviderPart`` after the text;
- a ``function_call`` item: ``ToolCallStart``, the argument pieces, ``ToolCallEnd``, then a
  ``call_extra`` ``ProviderPart`` keeping the item's own ``id`` (``fc_...``) for the way back;
- any other item (``web_search_call``, ``mcp_call``, ...): a ``ProviderPart`` of the item as
  done. OpenAI runs those tools itself.

The stream ends with ``response.completed`` or ``response.incomplete``; ``response.failed`` and
``error`` events are classified like HTTP errors; unknown events are ignored.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Final, Unpack

import httpx

from loopctl.api import (
    ModelRequest,
    PartEvent,
    StopEvent,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    UsageEvent,
)
from loopctl.core import Message, ProviderPart, TextPart, ThinkingPart, ToolCall, ToolResult
from loopctl.providers._common import ClientArgs, OpenAIKeyed
from loopctl.providers._errors import (
    ProviderInfo,
    classify,
    loads_object,
    malformed,
    stream_ended_early,
)
from loopctl.providers._framing import CallIds, Cursor, sse_events
from loopctl.providers._openai_wire import args_json, usage_from_wire

ANNOTATIONS: Final = "annotations"
CALL_EXTRA: Final = "call_extra"
_INCOMPLETE: Final = {"max_output_tokens": "max_tokens"}


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
            yield UsageEvent(usage=usage_from_wire(usage, "input_tokens", "output_tokens"))


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


DEFAULT_PROVIDER = "openai-responses"


def _assistant_items(message: Message, provider: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                items.append({"role": "assistant", "content": part.text})
        elif isinstance(part, ToolCall):
            item = {
                "type": "function_call",
                "call_id": part.id,
                "name": part.name,
                "arguments": args_json(part.arguments),
            }
            calls[part.id] = item
            items.append(item)
        elif isinstance(part, ToolResult) or part.provider != provider:
            continue
        elif isinstance(part, ThinkingPart):
            if part.data:
                items.append(dict(part.data))
        elif part.data.get("type") == CALL_EXTRA:
            target = calls.get(part.data.get("call_id", ""))
            if target is not None:
                target.update(part.data.get("fields") or {})
        elif part.data.get("type") == ANNOTATIONS:
            if items and items[-1].get("role") == "assistant":
                text = items[-1]["content"]
                items[-1] = {
                    "type": "message",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "output_text",
                            "text": text,
                            "annotations": part.data.get("annotations", []),
                        }
                    ],
                }
        else:
            items.append(dict(part.data))
    return items


def input_items(messages: Sequence[Message], provider: str = DEFAULT_PROVIDER) -> list[Any]:
    """The conversation as Responses input items (see the module docstring)."""
    items: list[Any] = []
    for message in messages:
        if message.role == "system":
            items.append({"role": "system", "content": message.text})
        elif message.role == "assistant":
            items.extend(_assistant_items(message, provider))
        else:
            for result in message.tool_results:
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": result.call_id,
                        "output": result.content,
                    }
                )
            texts = [p for p in message.parts if isinstance(p, TextPart)]
            if texts or not message.tool_results:
                items.append({"role": "user", "content": message.text})
    return items


def tools_to_wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Function tools as ``{"type": "function", "name", "description", "parameters"}``."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
        for tool in tools
    ]


class OpenAIResponsesClient(OpenAIKeyed):
    """A Responses API client (streaming SSE by default; ``stream=False`` for one JSON body).

    The arguments of ``OpenAIClient``, and ``store`` (default False), sent as is; while it is
    False the request asks for ``reasoning.encrypted_content``. ``server_tools`` are OpenAI's
    built-in tools in its form (``{"type": "web_search"}``).
    """

    family = "responses"
    path = "responses"

    def __init__(self, model: str, *, store: bool = False, **kwargs: Unpack[ClientArgs]) -> None:
        super().__init__(model, **kwargs)
        self.store = store

    def body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "input": input_items(request.messages, self.provider),
        }
        if request.system:
            body["instructions"] = request.system
        if tools := self.tools(request, tools_to_wire):
            body["tools"] = tools
        body["store"] = self.store
        if not self.store:
            body["include"] = ["reasoning.encrypted_content"]
        body.update(self.options)
        body.update(request.options)
        body["stream"] = self.streaming
        return body

    def parse_stream(
        self, response: httpx.Response, request: ModelRequest, cursor: Cursor
    ) -> AsyncIterator[StreamEvent]:
        lines = response.aiter_lines()
        return stream_events(self.info, lines, cursor, request.turn, self.provider)

    def parse_body(self, data: Any, request: ModelRequest) -> Iterator[StreamEvent]:
        return response_events(self.info, data, request.turn, self.provider)
