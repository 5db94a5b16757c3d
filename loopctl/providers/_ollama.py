"""Ollama's native chat API (``POST {host}/api/chat``): NDJSON streaming or one JSON body.

A tool call arrives whole (``arguments`` a JSON object): one start, one fragment, one end.
``done_reason`` stays ``stop`` even after tool calls, so the stop reason is ``tool_use`` whenever
a call arrived. A ``{"error": ...}`` line (HTTP status still 200) is classified like an HTTP
error; a stream that ends before ``done: true`` is a ``network`` error.

Context tokens: ``prompt_eval_count + eval_count``; when ``prompt_eval_count`` is missing (a
cached prompt) the context size is unknown and left as None (the driver keeps its estimate).

History: tool results go back as ``{"role": "tool", "content", "tool_name", "tool_call_id"}``;
assistant calls carry their ids (older servers ignore the extra fields).

Thinking (``think: true``) streams as ``ThinkingDelta``, becomes one ``ThinkingPart`` when the
answer begins, and goes back as the assistant message's ``thinking`` field. (Ollama's
OpenAI-compatible ``/v1`` is served by ``OpenAIClient``.)
"""

from __future__ import annotations

import json
import os
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
    Usage,
    UsageEvent,
)
from loopctl.core import Message, ThinkingPart
from loopctl.providers._common import HttpProvider, OllamaArgs
from loopctl.providers._errors import ProviderInfo, classify, malformed, stream_ended_early
from loopctl.providers._framing import CallIds, Cursor, ndjson_objects
from loopctl.providers._openai_wire import tools_to_wire

DEFAULT_HOST = "http://127.0.0.1:11434"
DEFAULT_PROVIDER = "ollama"
_TOP_LEVEL = {"think", "format", "keep_alive"}


def host_from_env(value: str | None) -> str:
    """``OLLAMA_HOST`` as a base URL: a scheme and the default port added, 0.0.0.0 -> 127.0.0.1;
    ``user:password@`` and a query are kept (the client sends them as it does a ``base_url``'s)."""
    if not value:
        return DEFAULT_HOST
    value = value.strip().rstrip("/")
    if "://" not in value:
        value = f"http://{value}"
    url = httpx.URL(value)
    host = "127.0.0.1" if url.host in ("0.0.0.0", "") else url.host
    port = url.port or (443 if url.scheme == "https" else 11434)
    if ":" in host:
        host = f"[{host}]"
    userinfo = url.userinfo.decode("ascii")
    query = url.query.decode("ascii")
    return (
        f"{url.scheme}://{userinfo + '@' if userinfo else ''}{host}:{port}"
        f"{url.path.rstrip('/')}{'?' + query if query else ''}"
    )


def messages_to_wire(
    messages: Sequence[Message], system: str | None = None, provider: str = DEFAULT_PROVIDER
) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    if system:
        wire.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.text}
            thinking = "".join(t.text for t in message.thinking if t.provider == provider)
            if thinking:
                entry["thinking"] = thinking
            if message.tool_calls:
                entry["tool_calls"] = [
                    {"id": c.id, "function": {"name": c.name, "arguments": c.arguments}}
                    for c in message.tool_calls
                ]
            wire.append(entry)
        elif message.role == "system":
            wire.append({"role": "system", "content": message.text})
        else:
            for r in message.tool_results:
                wire.append(
                    {
                        "role": "tool",
                        "content": r.content,
                        "tool_name": r.name,
                        "tool_call_id": r.call_id,
                    }
                )
            if message.text or not message.tool_results:
                wire.append({"role": "user", "content": message.text})
    return wire


def usage_from_wire(data: Mapping[str, Any]) -> Usage:
    prompt = data.get("prompt_eval_count")
    output = int(data.get("eval_count") or 0)
    return Usage(
        input_tokens=int(prompt or 0),
        output_tokens=output,
        context_tokens=int(prompt) + output if prompt is not None else None,
    )


class _Reply:
    """Turns the objects of one reply (stream lines or the whole body) into events."""

    def __init__(self, info: ProviderInfo, turn: int, provider: str) -> None:
        self.info = info
        self.provider = provider
        self.ids = CallIds(turn)
        self.done = False
        self.thinking: list[str] = []

    def close_thinking(self) -> Iterator[StreamEvent]:
        if self.thinking:
            text = "".join(self.thinking)
            self.thinking = []
            yield PartEvent(part=ThinkingPart(provider=self.provider, text=text))

    def feed(self, obj: Any, where: str) -> Iterator[StreamEvent]:
        if not isinstance(obj, Mapping):
            raise malformed(self.info, f"a line that is not an object: {str(obj)[:200]!r}", where)
        if "error" in obj:
            raise classify(self.info, None, obj)
        message = obj.get("message") or {}
        thinking = message.get("thinking")
        if isinstance(thinking, str) and thinking:
            self.thinking.append(thinking)
            yield ThinkingDelta(text=thinking)
        content = message.get("content")
        calls = message.get("tool_calls") or []
        if (isinstance(content, str) and content) or calls or obj.get("done"):
            yield from self.close_thinking()
        if isinstance(content, str) and content:
            yield TextDelta(text=content)
        for tc in calls:
            fn = tc.get("function") or {}
            if not fn.get("name"):
                raise malformed(self.info, "a tool call without a function name", where)
            ours, call_id = self.ids.next(tc.get("id"))
            args = fn.get("arguments")
            text = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
            yield ToolCallStart(index=ours, id=call_id, name=fn["name"])
            yield ToolCallDelta(index=ours, arguments=text)
            yield ToolCallEnd(index=ours)
        if obj.get("done"):
            self.done = True
            reason = obj.get("done_reason") or "stop"
            if self.ids.count:
                normalized = "tool_use"
            else:
                normalized = {"stop": "end_turn", "length": "max_tokens"}.get(reason, reason)
            yield StopEvent(reason=normalized)
            yield UsageEvent(usage=usage_from_wire(obj))


class OllamaClient(HttpProvider):
    """An Ollama native-API client: the host from ``base_url``, else ``OLLAMA_HOST``, else
    ``http://127.0.0.1:11434``; no key needed (an ``api_key`` is sent as a bearer token, for a
    proxy). ``num_ctx`` sets the context size; ``options`` are model options, and so are a
    request's, except ``think``, ``format`` and ``keep_alive`` (top-level fields).
    """

    family = "ollama"
    path = "api/chat"

    def __init__(
        self, model: str, *, num_ctx: int | None = None, **kwargs: Unpack[OllamaArgs]
    ) -> None:
        if "server_tools" in kwargs:  # Ollama runs no tools of its own
            raise TypeError("OllamaClient() got an unexpected keyword argument 'server_tools'")
        super().__init__(model, **kwargs)
        if num_ctx is not None:
            self.options["num_ctx"] = num_ctx

    def default_base_url(self) -> str:
        return host_from_env(os.environ.get("OLLAMA_HOST"))

    def body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages_to_wire(request.messages, request.system, self.provider),
            "stream": self.streaming,
        }
        if tools := self.tools(request, tools_to_wire):
            body["tools"] = tools
        options = dict(self.options)
        for key, value in request.options.items():
            if key in _TOP_LEVEL:
                body[key] = value
            else:
                options[key] = value
        if options:
            body["options"] = options
        return body

    stream_types = ("application/x-ndjson", "application/ndjson")

    async def parse_stream(
        self, response: httpx.Response, request: ModelRequest, cursor: Cursor
    ) -> AsyncIterator[StreamEvent]:
        reply = _Reply(self.info, request.turn, self.provider)
        async for obj in ndjson_objects(self.info, response.aiter_text(), cursor):
            for event in reply.feed(obj, cursor.where()):
                yield event
            if reply.done:
                return
        raise stream_ended_early(self.info, '"done": true')

    def parse_body(self, data: Any, request: ModelRequest) -> Iterator[StreamEvent]:
        reply = _Reply(self.info, request.turn, self.provider)
        yield from reply.feed(data, "the JSON body")
        if not reply.done:
            raise malformed(
                self.info, 'a non-streaming reply without "done": true', "the JSON body"
            )
