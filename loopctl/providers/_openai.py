"""OpenAI Chat Completions (``POST {base_url}/chat/completions``), and every server that speaks it.

The same client serves OpenAI, vLLM, llama.cpp's ``llama-server``, LM Studio, OpenRouter and
Ollama's ``/v1``: point ``base_url`` at the server. Their deviations are tolerated here:

- tool-call fragments are assembled by ``index``; a fragment carrying a NEW id at an index
  already in use starts a new call (servers that reuse index 0 across a parallel batch), and so
  does a fragment carrying a name but no id once the call at that index has arguments;
- whole arguments in one delta, missing ids, ids without the ``call_`` prefix: a missing (or
  repeated) id becomes ``call_{turn}_{n}``, deterministic, never random;
- the usage chunk of ``stream_options.include_usage`` may be missing, null, or ride the finish
  chunk; SSE comment lines are skipped; a ``data:`` line holding ``{"error": ...}`` is an error;
- a stream that ends without ``[DONE]`` is accepted once a ``finish_reason`` arrived, and is a
  ``network`` error otherwise.

History: the system prompt is the first message; an assistant message echoes its
``tool_calls`` (arguments as a JSON string); each ``ToolResult`` becomes one ``role: tool``
message, and text riding with results becomes a user message after them. The wire has no
``is_error`` flag: an error result travels as its content alone.
"""

from __future__ import annotations

import json
import os
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
from loopctl.core import Message, TextPart, ToolCall, ToolResult
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

__all__ = ["OpenAIClient", "messages_from_wire", "messages_to_wire", "usage_from_wire"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


def _args_json(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)


def messages_to_wire(
    messages: Sequence[Message], system: str | None = None
) -> list[dict[str, Any]]:
    """Messages in Chat Completions form; ``system`` (if any) becomes the first message."""
    wire: list[dict[str, Any]] = []
    if system:
        wire.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "system":
            wire.append({"role": "system", "content": message.text})
        elif message.role == "assistant":
            # content may be null only beside tool_calls
            content = message.text or (None if message.tool_calls else "")
            entry: dict[str, Any] = {"role": "assistant", "content": content}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": _args_json(call.arguments)},
                    }
                    for call in message.tool_calls
                ]
            wire.append(entry)
        else:
            for result in message.tool_results:
                wire.append(
                    {"role": "tool", "tool_call_id": result.call_id, "content": result.content}
                )
            texts = [p for p in message.parts if isinstance(p, TextPart)]
            if texts or not message.tool_results:
                wire.append({"role": "user", "content": message.text})
    return wire


def messages_from_wire(wire: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[Message]]:
    """The inverse of ``messages_to_wire``: a leading system message becomes ``system``.

    Consecutive ``role: tool`` messages become one user message of results; the result's
    tool name is looked up from the assistant call it answers.
    """
    system: str | None = None
    messages: list[Message] = []
    names: dict[str, str] = {}
    results: list[ToolResult] = []

    def flush() -> None:
        if results:
            messages.append(Message.from_results(list(results)))
            results.clear()

    for i, entry in enumerate(wire):
        role = entry.get("role")
        if role != "tool":
            flush()
        content = entry.get("content")
        if role == "system":
            if i == 0:
                system = content
            else:
                messages.append(Message.system(content or ""))
        elif role == "assistant":
            calls = []
            for tc in entry.get("tool_calls") or []:
                fn = tc["function"]
                raw = fn.get("arguments") or ""
                calls.append(
                    ToolCall(id=tc["id"], name=fn["name"], arguments=json.loads(raw) if raw else {})
                )
                names[tc["id"]] = fn["name"]
            messages.append(Message.assistant(content or "", calls))
        elif role == "tool":
            call_id = entry["tool_call_id"]
            results.append(
                ToolResult(call_id=call_id, name=names.get(call_id, ""), content=content or "")
            )
        else:
            messages.append(Message.user(content or ""))
    flush()
    return system, messages


def tools_to_wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def usage_from_wire(usage: Mapping[str, Any]) -> Usage:
    """Usage from ``prompt_tokens``/``completion_tokens``; context = ``total_tokens``."""
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    total = usage.get("total_tokens")
    details = usage.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=prompt,
        output_tokens=completion,
        cache_read_tokens=int(details.get("cached_tokens") or 0),
        context_tokens=int(total) if total is not None else prompt + completion,
    )


class _Calls:
    """Assembles streamed tool-call fragments into calls with unique, non-empty ids."""

    def __init__(self, turn: int) -> None:
        self.turn = turn
        self.count = 0
        # wire index -> (our index, the id the wire gave it, whether arguments arrived)
        self.by_wire_index: dict[int, tuple[int, str | None, bool]] = {}
        self.ids: set[str] = set()
        self.open: list[int] = []

    def _new_id(self, wire_id: str | None, n: int) -> str:
        if wire_id and wire_id not in self.ids:
            return wire_id
        candidate = f"call_{self.turn}_{n}"
        while candidate in self.ids:
            n += 1
            candidate = f"call_{self.turn}_{n}"
        return candidate

    def fragment(self, info: ProviderInfo, frag: Mapping[str, Any]) -> Iterator[StreamEvent]:
        wire_index = frag.get("index", 0)
        if not isinstance(wire_index, int):
            raise malformed(info, f"tool call index {wire_index!r} is not an integer")
        fn = frag.get("function") or {}
        wire_id = frag.get("id") or None
        name = fn.get("name") or None
        args = fn.get("arguments") or ""
        current = self.by_wire_index.get(wire_index)
        starts = (
            current is None
            or (wire_id is not None and current[1] is not None and wire_id != current[1])
            or (name is not None and current[2] and (wire_id is None or current[1] is None))
        )
        if starts:
            if name is None:
                raise malformed(info, f"tool call at index {wire_index} has no function name")
            if current is not None:
                yield ToolCallEnd(index=current[0])
                self.open.remove(current[0])
            ours = self.count
            self.count += 1
            call_id = self._new_id(wire_id, ours)
            self.ids.add(call_id)
            self.by_wire_index[wire_index] = (ours, wire_id, bool(args))
            self.open.append(ours)
            yield ToolCallStart(index=ours, id=call_id, name=name)
        else:
            assert current is not None
            ours = current[0]
            self.by_wire_index[wire_index] = (ours, current[1], current[2] or bool(args))
        if args:
            yield ToolCallDelta(index=ours, arguments=args)

    def close(self) -> Iterator[StreamEvent]:
        for ours in self.open:
            yield ToolCallEnd(index=ours)
        self.open.clear()


class OpenAIClient(HttpProvider):
    """A Chat Completions client (streaming SSE by default; ``stream=False`` for one JSON body).

    ``api_key`` defaults to ``OPENAI_API_KEY``; ``base_url`` to ``OPENAI_BASE_URL`` or the
    OpenAI API. A key is required only for the OpenAI API itself: local servers (vLLM,
    llama.cpp, LM Studio, Ollama) run without one. ``options`` are extra body fields
    (``temperature``, ``max_tokens``, ...); a request's own ``options`` win over them.
    """

    info = ProviderInfo("OpenAI", "OPENAI_API_KEY")

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        options: Mapping[str, Any] | None = None,
        timeout: httpx.Timeout | float | None = None,
    ) -> None:
        url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        super().__init__(base_url=url, http_client=http_client, stream=stream, timeout=timeout)
        self.model = model
        self.options = dict(options or {})
        official = httpx.URL(self.base_url).host == "api.openai.com"
        self.api_key = resolve_key(api_key, "OPENAI_API_KEY", "OpenAI", required=official)

    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages_to_wire(request.messages, request.system),
        }
        if request.tools:
            body["tools"] = tools_to_wire(request.tools)
        body.update(self.options)
        body.update(request.options)
        body["stream"] = self.streaming
        if self.streaming:
            body["stream_options"] = {"include_usage": True}
        return body

    async def parse_stream(
        self, response: httpx.Response, request: ModelRequest
    ) -> AsyncIterator[StreamEvent]:
        calls = _Calls(request.turn)
        finished = False
        async for sse in sse_events(response.aiter_lines()):
            if sse.data.strip() == "[DONE]":
                break
            chunk = loads(self.info, sse.data)
            if not isinstance(chunk, Mapping):
                raise malformed(self.info, f"a chunk that is not an object: {sse.data[:200]!r}")
            if "error" in chunk:
                raise classify(self.info, None, chunk)
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                for key in ("content", "refusal"):  # a refusal is what the model said
                    text = delta.get(key)
                    if isinstance(text, str) and text:
                        yield TextDelta(text=text)
                for frag in delta.get("tool_calls") or []:
                    for event in calls.fragment(self.info, frag):
                        yield event
                reason = choice.get("finish_reason")
                if reason:
                    finished = True
                    for event in calls.close():
                        yield event
                    yield StopEvent(reason=_STOP.get(reason, reason))
            usage = chunk.get("usage")
            if isinstance(usage, Mapping):
                yield UsageEvent(usage=usage_from_wire(usage))
        else:
            if not finished:
                raise stream_ended_early(self.info, "its finish_reason")
        for event in calls.close():
            yield event

    def parse_body(self, data: Any, request: ModelRequest) -> Iterator[StreamEvent]:
        choices = data.get("choices") if isinstance(data, Mapping) else None
        if not choices:
            raise malformed(self.info, "a completion without choices")
        choice = choices[0]
        message = choice.get("message") or {}
        for key in ("content", "refusal"):
            text = message.get(key)
            if isinstance(text, str) and text:
                yield TextDelta(text=text)
        calls = _Calls(request.turn)
        for i, tc in enumerate(message.get("tool_calls") or []):
            yield from calls.fragment(self.info, {**tc, "index": i})
        yield from calls.close()
        reason = choice.get("finish_reason")
        if reason:
            yield StopEvent(reason=_STOP.get(reason, reason))
        usage = data.get("usage")
        if isinstance(usage, Mapping):
            yield UsageEvent(usage=usage_from_wire(usage))
