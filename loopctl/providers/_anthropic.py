"""Anthropic Messages (``POST {base_url}/v1/messages``): the client, streaming SSE or one JSON
body, and its replies as ``loopctl.api`` events.

A whole message body and its event stream give the same events for the same message (tests
compare with the official SDK's accumulator):

- ``text``: ``TextDelta``; its ``citations`` (``citations_delta`` in a stream) become a
  citations ``ProviderPart`` right after the text, when the block ends;
- ``thinking``: ``ThinkingDelta`` as it streams, then the ``ThinkingPart`` with its
  ``signature`` (``signature_delta``, just before the block's end); ``redacted_thinking``: a
  ``ThinkingPart`` with the encrypted data;
- ``tool_use``: ``ToolCallStart`` / ``ToolCallDelta`` (the ``input_json_delta`` fragments) /
  ``ToolCallEnd``; a missing or repeated id becomes ``call_{turn}_{n}``;
- every other block (``server_tool_use``, ``mcp_tool_use``, ``web_search_tool_result``, blocks
  added later): a ``ProviderPart`` of the block as it ends (their ``input_json_delta`` fragments
  joined and parsed at ``content_block_stop``, as the SDK does). The provider runs those tools:
  never a ``ToolCall`` for the registry.

``ping`` and unknown events or deltas are ignored; an ``error`` event is classified like an
HTTP error; a delta for a block that never started is a malformed stream.

History: the system prompt (and the history's system messages, joined by blank lines) goes
top-level; results become ``tool_result`` blocks (``is_error`` only when true). Anthropic wants
roles to alternate and every ``tool_result`` at the start of the next user message, so
consecutive messages of one role are merged, ``tool_result`` blocks first. A single text stays a
plain string; a message with nothing to send is left out (the API rejects empty content).

Parts this client keeps go back as Anthropic requires: a ``ThinkingPart`` as the ``thinking``
block with its ``signature`` (or ``redacted_thinking``), unchanged (required with extended
thinking in a tool-use turn); a ``ProviderPart`` as the block it was; a citations part as the
``citations`` of the text block before it. Another provider's parts are left out: Anthropic
cannot check another provider's reasoning.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Unpack

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
    Usage,
    UsageEvent,
)
from loopctl.core import Message, Part, ProviderPart, TextPart, ThinkingPart, ToolCall, ToolResult
from loopctl.providers._common import ClientArgs, HttpProvider
from loopctl.providers._errors import (
    ProviderInfo,
    classify,
    loads,
    loads_object,
    malformed,
    stream_ended_early,
)
from loopctl.providers._framing import CallIds, Cursor, sse_events

DEFAULT_PROVIDER = "anthropic"
#: The ``data["type"]`` of a ProviderPart holding the citations of the text part before it.
CITATIONS = "citations"


def _thinking_block(part: ThinkingPart) -> dict[str, Any] | None:
    if part.redacted is not None:
        return {"type": "redacted_thinking", "data": part.redacted}
    if part.signature is None:
        return None  # unsigned thinking is refused: it cannot go back
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def _blocks(message: Message, provider: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCall):
            blocks.append(
                {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments}
            )
        elif isinstance(part, ToolResult):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": part.call_id,
                "content": part.content,
            }
            if part.is_error:
                block["is_error"] = True
            blocks.append(block)
        elif part.provider != provider:
            continue  # another provider's reasoning or block: Anthropic cannot use it
        elif isinstance(part, ThinkingPart):
            thinking = _thinking_block(part)
            if thinking is not None:
                blocks.append(thinking)
        elif part.data.get("type") == CITATIONS:
            if blocks and blocks[-1]["type"] == "text":
                blocks[-1]["citations"] = part.data.get("citations", [])
        else:
            blocks.append(dict(part.data))
    return blocks


def messages_to_wire(
    messages: Sequence[Message], system: str | None = None, provider: str = DEFAULT_PROVIDER
) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system, messages)`` in Messages form, with same-role neighbours merged."""
    systems = [system] if system else []
    merged: list[tuple[str, list[dict[str, Any]]]] = []
    for message in messages:
        if message.role == "system":
            if message.text:
                systems.append(message.text)
            continue
        blocks = _blocks(message, provider)
        if not blocks:
            continue  # the API rejects empty content; the neighbours merge instead
        if merged and merged[-1][0] == message.role:
            merged[-1][1].extend(blocks)
        else:
            merged.append((message.role, blocks))
    wire: list[dict[str, Any]] = []
    for role, blocks in merged:
        if role == "user":
            blocks.sort(key=lambda b: b["type"] != "tool_result")  # stable: results first
        if len(blocks) == 1 and blocks[0]["type"] == "text" and "citations" not in blocks[0]:
            wire.append({"role": role, "content": blocks[0]["text"]})
        else:
            wire.append({"role": role, "content": blocks})
    return ("\n\n".join(systems) or None), wire


def block_parts(block: Mapping[str, Any], provider: str) -> list[Part]:
    """The parts of one content block that is not a tool call or result (those the callers
    handle, since they need ids and names): text, reasoning, or the block kept whole."""
    btype = block.get("type")
    if btype == "text":
        parts: list[Part] = [TextPart(text=block["text"])] if block.get("text") else []
        if block.get("citations"):
            parts.append(
                ProviderPart(
                    provider=provider, data={"type": CITATIONS, "citations": block["citations"]}
                )
            )
        return parts
    if btype == "thinking":
        return [
            ThinkingPart(
                provider=provider, text=block.get("thinking", ""), signature=block.get("signature")
            )
        ]
    if btype == "redacted_thinking":
        return [ThinkingPart(provider=provider, redacted=block.get("data", ""))]
    return [ProviderPart(provider=provider, data=dict(block))]


def tools_to_wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Function tools as ``{"name", "description", "input_schema"}``."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def usage_from_wire(usage: Mapping[str, Any]) -> Usage:
    """Input = uncached + cache writes + cache reads; context = input + output."""
    fresh = int(usage.get("input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    read = int(usage.get("cache_read_input_tokens") or 0)
    output = int(usage.get("output_tokens") or 0)
    details = usage.get("output_tokens_details") or {}
    return Usage(
        input_tokens=fresh + write + read,
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_tokens=write,
        context_tokens=fresh + write + read + output,
        reasoning_tokens=int(details.get("thinking_tokens") or 0),
    )


def _part_events(block: Mapping[str, Any], provider: str) -> Iterator[StreamEvent]:
    for part in block_parts(block, provider):
        if isinstance(part, TextPart):
            yield TextDelta(text=part.text)
        elif isinstance(part, ThinkingPart | ProviderPart):
            if isinstance(part, ThinkingPart) and part.text:
                yield ThinkingDelta(text=part.text)
            yield PartEvent(part=part)


def body_events(info: ProviderInfo, data: Any, turn: int, provider: str) -> Iterator[StreamEvent]:
    """The events of a whole (non-streamed) Messages body."""
    if not isinstance(data, Mapping) or not isinstance(data.get("content"), list):
        raise malformed(info, "a message without a content list", "the JSON body")
    ids = CallIds(turn)
    for block in data["content"]:
        if block.get("type") == "tool_use":
            ours, call_id = ids.next(block.get("id"))
            yield ToolCallStart(index=ours, id=call_id, name=block["name"])
            yield ToolCallDelta(index=ours, arguments=json.dumps(block.get("input") or {}))
            yield ToolCallEnd(index=ours)
        else:
            yield from _part_events(block, provider)
    if data.get("stop_reason"):
        yield StopEvent(reason=data["stop_reason"])
    yield UsageEvent(usage=usage_from_wire(data.get("usage") or {}))


class _Block:
    """One content block while it streams."""

    __slots__ = ("block", "call", "fragments", "initial")

    def __init__(self, block: dict[str, Any], call: int | None = None) -> None:
        self.block = block  # as started, updated by the deltas
        self.call = call  # our tool-call index, for tool_use
        self.fragments: list[str] = []  # input_json_delta pieces
        self.initial = block.get("input")  # a tool block's input as started


class _Stream:
    """The state of one streamed reply: open blocks by wire index, usage so far."""

    def __init__(self, info: ProviderInfo, cursor: Cursor, turn: int, provider: str) -> None:
        self.info = info
        self.cursor = cursor
        self.provider = provider
        self.ids = CallIds(turn)
        self.blocks: dict[int, _Block] = {}
        self.usage: dict[str, Any] = {}

    def bad(self, what: str) -> Exception:
        return malformed(self.info, what, self.cursor.where())

    def start(self, data: Mapping[str, Any]) -> Iterator[StreamEvent]:
        block = dict(data.get("content_block") or {})
        index = data.get("index")
        if not isinstance(index, int):
            raise self.bad(f"a content block without an index: {block.get('type')!r}")
        btype = block.get("type")
        if btype == "tool_use":
            if not block.get("name"):
                raise self.bad("a tool_use block without a name")
            ours, call_id = self.ids.next(block.get("id"))
            self.blocks[index] = _Block(block, ours)
            yield ToolCallStart(index=ours, id=call_id, name=block["name"])
            return
        self.blocks[index] = _Block(block)
        if btype == "text" and block.get("text"):
            yield TextDelta(text=block["text"])
        elif btype == "thinking" and block.get("thinking"):
            yield ThinkingDelta(text=block["thinking"])

    def delta(self, data: Mapping[str, Any]) -> Iterator[StreamEvent]:
        index = data.get("index")
        open_block = self.blocks.get(index)  # type: ignore[arg-type]
        delta = data.get("delta") or {}
        dtype = delta.get("type")
        if open_block is None:
            raise self.bad(f"a {dtype} for block {index}, which never started")
        block = open_block.block
        btype = block.get("type")
        if dtype == "text_delta" and btype == "text":
            if delta.get("text"):
                block["text"] = block.get("text", "") + delta["text"]
                yield TextDelta(text=delta["text"])
        elif dtype == "input_json_delta" and "input" in block:
            piece = delta.get("partial_json") or ""
            if piece:
                open_block.fragments.append(piece)
                if open_block.call is not None:
                    yield ToolCallDelta(index=open_block.call, arguments=piece)
        elif dtype == "citations_delta" and btype == "text":
            block["citations"] = [*(block.get("citations") or []), delta.get("citation")]
        elif dtype == "thinking_delta" and btype == "thinking":
            if delta.get("thinking"):
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
                yield ThinkingDelta(text=delta["thinking"])
        elif dtype == "signature_delta" and btype == "thinking":
            block["signature"] = delta.get("signature")
        # deltas of other types (added later), or for blocks they do not apply to: ignored

    def stop(self, data: Mapping[str, Any]) -> Iterator[StreamEvent]:
        open_block = self.blocks.get(data.get("index"))  # type: ignore[arg-type]
        if open_block is None:
            return
        block = open_block.block
        if open_block.call is not None:
            if not open_block.fragments and open_block.initial:
                # the input came whole in content_block_start
                yield ToolCallDelta(index=open_block.call, arguments=json.dumps(open_block.initial))
            yield ToolCallEnd(index=open_block.call)
            return
        if open_block.fragments:
            joined = "".join(open_block.fragments)
            block["input"] = loads(self.info, joined, self.cursor.where())
            if not isinstance(block["input"], dict):
                raise self.bad(f"the input of a {block.get('type')} block is not an object")
        btype = block.get("type")
        if btype == "text":
            if block.get("citations"):  # the text itself already streamed
                yield PartEvent(
                    part=ProviderPart(
                        provider=self.provider,
                        data={"type": CITATIONS, "citations": block["citations"]},
                    )
                )
            return
        for part in block_parts(block, self.provider):  # never text here: PartEvent checks it
            yield PartEvent(part=part)  # type: ignore[arg-type]

    def message_delta(self, data: Mapping[str, Any]) -> Iterator[StreamEvent]:
        reason = (data.get("delta") or {}).get("stop_reason")
        if reason:
            yield StopEvent(reason=reason)
        delta_usage = data.get("usage") or {}
        self.usage.update({k: v for k, v in delta_usage.items() if v is not None})
        yield UsageEvent(usage=usage_from_wire(self.usage))


async def stream_events(
    info: ProviderInfo,
    lines: AsyncIterator[str],
    cursor: Cursor,
    turn: int,
    provider: str,
) -> AsyncIterator[StreamEvent]:
    """The events of a streamed Messages reply (see the module docstring)."""
    state = _Stream(info, cursor, turn, provider)
    async for sse in sse_events(lines, cursor):
        data = loads_object(info, sse.data, cursor.where(), "an event")
        etype = data.get("type", sse.event)
        if etype == "message_start":
            state.usage.update((data.get("message") or {}).get("usage") or {})
            yield UsageEvent(usage=usage_from_wire(state.usage))
            continue
        if etype == "content_block_start":
            produced = state.start(data)
        elif etype == "content_block_delta":
            produced = state.delta(data)
        elif etype == "content_block_stop":
            produced = state.stop(data)
        elif etype == "message_delta":
            produced = state.message_delta(data)
        elif etype == "message_stop":
            return
        elif etype == "error":
            raise classify(info, None, data)
        else:
            continue  # ping, and event types added later
        for event in produced:
            yield event
    raise stream_ended_early(info, "message_stop")


DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


class AnthropicClient(HttpProvider):
    """A Messages API client. ``api_key`` defaults to ``ANTHROPIC_API_KEY`` (required).

    ``max_tokens`` (required by the API) defaults to 4096; ``options`` are extra body fields
    (``thinking``, ``mcp_servers``, ...), a request's own win; ``server_tools`` are in
    Anthropic's form (``{"type": "web_search_20250305", "name": "web_search"}``); ``betas`` go in
    the ``anthropic-beta`` header (the MCP connector needs one).
    """

    family = "anthropic"
    path = "v1/messages"
    key_env = "ANTHROPIC_API_KEY"

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        betas: Sequence[str] = (),
        **kwargs: Unpack[ClientArgs],
    ) -> None:
        super().__init__(model, **kwargs)
        self.max_tokens = max_tokens
        self.betas = tuple(betas)

    def default_base_url(self) -> str:
        return DEFAULT_BASE_URL

    def requires_key(self, host: str | None) -> bool:
        return True

    def headers(self) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
            "x-api-key": self.api_key or "",
        }
        if self.betas:
            headers["anthropic-beta"] = ",".join(self.betas)
        return headers

    def body(self, request: ModelRequest) -> dict[str, Any]:
        system, messages = messages_to_wire(request.messages, request.system, self.provider)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": messages,
        }
        if system:
            body["system"] = system
        if tools := self.tools(request, tools_to_wire):
            body["tools"] = tools
        body.update(self.options)
        body.update(request.options)
        if self.streaming:
            body["stream"] = True
        else:
            body.pop("stream", None)
        return body

    def parse_stream(
        self, response: httpx.Response, request: ModelRequest, cursor: Cursor
    ) -> AsyncIterator[StreamEvent]:
        lines = response.aiter_lines()
        return stream_events(self.info, lines, cursor, request.turn, self.provider)

    def parse_body(self, data: Any, request: ModelRequest) -> Iterator[StreamEvent]:
        return body_events(self.info, data, request.turn, self.provider)
