"""Anthropic Messages (``POST {base_url}/v1/messages``), streaming SSE or one JSON body.

History: the system prompt (and any system messages of the history, joined by blank lines) goes
top-level; assistant messages become text and ``tool_use`` blocks; results become
``tool_result`` blocks (``is_error`` sent only when true). Anthropic wants roles to alternate and
every ``tool_result`` at the start of the next user message, so consecutive messages of one role
are merged into one, ``tool_result`` blocks first (results then a steering note become one user
message). A user message that is a single text stays a plain string. A message with nothing to
send (an empty assistant reply) is left out, as the API rejects empty content.

Stream: ``message_start`` carries the input figures, ``content_block_*`` the text and tool input
(``input_json_delta`` fragments, joined and parsed by the fold), ``message_delta`` the stop reason
and cumulative usage, ``message_stop`` the end; ``ping`` and unknown events are ignored; an
``error`` event is classified like an HTTP error (``overloaded_error`` -> ``overloaded``).
Context tokens: all three input figures plus the output tokens.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import httpx

from loopctl.api import (
    ModelRequest,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    Usage,
    UsageEvent,
)
from loopctl.core import Message, Part, TextPart, ToolCall, ToolResult
from loopctl.providers._common import (
    HttpProvider,
    ProviderInfo,
    classify,
    loads,
    malformed,
    resolve_key,
    sse_events,
    stream_ended_early,
)

__all__ = ["AnthropicClient", "messages_from_wire", "messages_to_wire", "usage_from_wire"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


def _blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCall):
            blocks.append(
                {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments}
            )
        else:
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": part.call_id,
                "content": part.content,
            }
            if part.is_error:
                block["is_error"] = True
            blocks.append(block)
    return blocks


def messages_to_wire(
    messages: Sequence[Message], system: str | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system, messages)`` in Messages form, with same-role neighbours merged."""
    systems = [system] if system else []
    merged: list[tuple[str, list[dict[str, Any]]]] = []
    for message in messages:
        if message.role == "system":
            if message.text:
                systems.append(message.text)
            continue
        blocks = _blocks(message)
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
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            wire.append({"role": role, "content": blocks[0]["text"]})
        else:
            wire.append({"role": role, "content": blocks})
    return ("\n\n".join(systems) or None), wire


def messages_from_wire(
    system: str | None, wire: Sequence[Mapping[str, Any]]
) -> tuple[str | None, list[Message]]:
    """The inverse of ``messages_to_wire`` (a merged message stays merged)."""
    names: dict[str, str] = {}
    messages: list[Message] = []
    for entry in wire:
        role = entry["role"]
        content = entry["content"]
        if isinstance(content, str):
            messages.append(Message(role=role, parts=(TextPart(text=content),)))
            continue
        parts: list[Part] = []
        for block in content:
            btype = block["type"]
            if btype == "text":
                parts.append(TextPart(text=block["text"]))
            elif btype == "tool_use":
                names[block["id"]] = block["name"]
                parts.append(ToolCall(id=block["id"], name=block["name"], arguments=block["input"]))
            elif btype == "tool_result":
                raw = block.get("content", "")
                text = (
                    raw
                    if isinstance(raw, str)
                    else "".join(b.get("text", "") for b in raw if b.get("type") == "text")
                )
                parts.append(
                    ToolResult(
                        call_id=block["tool_use_id"],
                        name=names.get(block["tool_use_id"], ""),
                        content=text,
                        is_error=bool(block.get("is_error", False)),
                    )
                )
        messages.append(Message(role=role, parts=tuple(parts)))
    return system, messages


def tools_to_wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def usage_from_wire(usage: Mapping[str, Any]) -> Usage:
    """Input = uncached + cache writes + cache reads; context = input + output."""
    fresh = int(usage.get("input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    read = int(usage.get("cache_read_input_tokens") or 0)
    output = int(usage.get("output_tokens") or 0)
    return Usage(
        input_tokens=fresh + write + read,
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_tokens=write,
        context_tokens=fresh + write + read + output,
    )


class AnthropicClient(HttpProvider):
    """A Messages API client. ``api_key`` defaults to ``ANTHROPIC_API_KEY`` (required).

    ``max_tokens`` (required by the API) defaults to 4096; ``options`` are extra body fields
    (``temperature``, ``tool_choice``, ...), a request's own ``options`` win over them.
    """

    info = ProviderInfo("Anthropic", "ANTHROPIC_API_KEY")

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        options: Mapping[str, Any] | None = None,
        timeout: httpx.Timeout | float | None = None,
    ) -> None:
        super().__init__(
            base_url=base_url or DEFAULT_BASE_URL,
            http_client=http_client,
            stream=stream,
            timeout=timeout,
        )
        self.model = model
        self.max_tokens = max_tokens
        self.options = dict(options or {})
        self.api_key = resolve_key(api_key, "ANTHROPIC_API_KEY", "Anthropic", required=True)

    def url(self) -> str:
        return f"{self.base_url}/v1/messages"

    def headers(self) -> dict[str, str]:
        return {
            "content-type": "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
            "x-api-key": self.api_key or "",
        }

    def body(self, request: ModelRequest) -> dict[str, Any]:
        system, messages = messages_to_wire(request.messages, request.system)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": messages,
        }
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = tools_to_wire(request.tools)
        body.update(self.options)
        body.update(request.options)
        if self.streaming:
            body["stream"] = True
        else:
            body.pop("stream", None)
        return body

    async def parse_stream(
        self, response: httpx.Response, request: ModelRequest
    ) -> AsyncIterator[StreamEvent]:
        blocks: dict[int, int] = {}  # wire block index -> our tool-call index
        pending_input: dict[int, Any] = {}  # tool blocks that started with a non-empty input
        usage: dict[str, Any] = {}
        ids: set[str] = set()
        async for sse in sse_events(response.aiter_lines()):
            data = loads(self.info, sse.data)
            if not isinstance(data, Mapping):
                raise malformed(self.info, f"an event that is not an object: {sse.data[:200]!r}")
            etype = data.get("type", sse.event)
            if etype == "message_start":
                usage.update((data.get("message") or {}).get("usage") or {})
                yield UsageEvent(usage=usage_from_wire(usage))
            elif etype == "content_block_start":
                block = data.get("content_block") or {}
                index = data.get("index")
                if block.get("type") == "text" and block.get("text"):
                    yield TextDelta(text=block["text"])
                elif block.get("type") == "tool_use":
                    if not isinstance(index, int) or not block.get("name"):
                        raise malformed(self.info, "a tool_use block without index or name")
                    ours = len(blocks)
                    blocks[index] = ours
                    call_id = block.get("id") or ""
                    if not call_id or call_id in ids:
                        call_id = f"call_{request.turn}_{ours}"
                    ids.add(call_id)
                    if block.get("input"):
                        pending_input[index] = block["input"]
                    yield ToolCallStart(index=ours, id=call_id, name=block["name"])
            elif etype == "content_block_delta":
                delta = data.get("delta") or {}
                dtype = delta.get("type")
                if dtype == "text_delta" and delta.get("text"):
                    yield TextDelta(text=delta["text"])
                elif dtype == "input_json_delta":
                    index = data.get("index")
                    if index not in blocks:
                        raise malformed(self.info, f"input_json_delta for unknown block {index}")
                    pending_input.pop(index, None)
                    if delta.get("partial_json"):
                        yield ToolCallDelta(index=blocks[index], arguments=delta["partial_json"])
            elif etype == "content_block_stop":
                index = data.get("index")
                if isinstance(index, int) and index in blocks:
                    if index in pending_input:
                        yield ToolCallDelta(
                            index=blocks[index], arguments=json.dumps(pending_input.pop(index))
                        )
                    yield ToolCallEnd(index=blocks[index])
            elif etype == "message_delta":
                reason = (data.get("delta") or {}).get("stop_reason")
                if reason:
                    yield StopEvent(reason=reason)
                delta_usage = data.get("usage") or {}
                usage.update({k: v for k, v in delta_usage.items() if v is not None})
                yield UsageEvent(usage=usage_from_wire(usage))
            elif etype == "message_stop":
                return
            elif etype == "error":
                raise classify(self.info, None, data)
            # ping and event types added later: ignored
        raise stream_ended_early(self.info, "message_stop")

    def parse_body(self, data: Any, request: ModelRequest) -> Iterator[StreamEvent]:
        if not isinstance(data, Mapping) or not isinstance(data.get("content"), list):
            raise malformed(self.info, "a message without a content list")
        ours = 0
        ids: set[str] = set()
        for block in data["content"]:
            if block.get("type") == "text" and block.get("text"):
                yield TextDelta(text=block["text"])
            elif block.get("type") == "tool_use":
                call_id = block.get("id") or ""
                if not call_id or call_id in ids:
                    call_id = f"call_{request.turn}_{ours}"
                ids.add(call_id)
                yield ToolCallStart(index=ours, id=call_id, name=block["name"])
                yield ToolCallDelta(index=ours, arguments=json.dumps(block.get("input") or {}))
                yield ToolCallEnd(index=ours)
                ours += 1
        if data.get("stop_reason"):
            yield StopEvent(reason=data["stop_reason"])
        yield UsageEvent(usage=usage_from_wire(data.get("usage") or {}))
