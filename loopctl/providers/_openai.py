"""OpenAI Chat Completions (``POST {base_url}/chat/completions``), and every server that speaks it.

The same client serves OpenAI, DeepSeek, OpenRouter, Groq, Gemini's OpenAI endpoint, vLLM,
llama.cpp, LM Studio and Ollama's ``/v1``. Their deviations are tolerated here:

- tool-call fragments are assembled by ``index``; a fragment carrying a new id at an index in
  use starts a new call (servers that reuse index 0 across a parallel batch), and so does one
  carrying a name but no id once the call at that index has arguments;
- a missing (or repeated) id becomes ``call_{turn}_{n}``, deterministic;
- the usage chunk may be missing, null, or ride the finish chunk; a ``data:`` line holding
  ``{"error": ...}`` is an error; a stream that ends without ``[DONE]`` is accepted once a
  ``finish_reason`` arrived (a ``network`` error otherwise);
- reasoning (a string, or a host's own object or list) and Gemini's ``extra_content`` are kept
  and echoed back to the same host (``_openai_wire``); Mistral's ``thinking`` chunks are kept,
  not sent back; a chunk carrying ``message`` instead of ``delta`` is read the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

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
    UsageEvent,
)
from loopctl.core import ProviderPart
from loopctl.providers._common import OpenAIKeyed
from loopctl.providers._errors import (
    ProviderInfo,
    classify,
    loads_object,
    malformed,
    stream_ended_early,
)
from loopctl.providers._framing import CallIds, Cursor, sse_events
from loopctl.providers._openai_wire import (
    CALL_EXTRA,
    MESSAGE_EXTRA,
    merge_fields,
    messages_to_wire,
    reasoning_part,
    reasoning_text,
    tools_to_wire,
    usage_from_wire,
)

_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


class _Calls:
    """Assembles streamed tool-call fragments into calls with unique, non-empty ids."""

    def __init__(self, turn: int) -> None:
        self.ids = CallIds(turn)
        # wire index -> (our index, the id the wire gave it, whether arguments arrived)
        self.by_wire_index: dict[int, tuple[int, str | None, bool]] = {}
        self.open: list[int] = []
        self.call_ids: dict[int, str] = {}  # our index -> the id given
        self.extras: dict[str, dict[str, Any]] = {}  # call id -> its extra_content (Gemini)

    def fragment(
        self, info: ProviderInfo, frag: Mapping[str, Any], where: str
    ) -> Iterator[StreamEvent]:
        wire_index = frag.get("index", 0)
        if not isinstance(wire_index, int):
            raise malformed(info, f"tool call index {wire_index!r} is not an integer", where)
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
                raise malformed(
                    info, f"tool call at index {wire_index} has no function name", where
                )
            if current is not None:
                yield ToolCallEnd(index=current[0])
                self.open.remove(current[0])
            ours, call_id = self.ids.next(wire_id)
            self.call_ids[ours] = call_id
            self.by_wire_index[wire_index] = (ours, wire_id, bool(args))
            self.open.append(ours)
            yield ToolCallStart(index=ours, id=call_id, name=name)
        else:
            assert current is not None
            ours = current[0]
            self.by_wire_index[wire_index] = (ours, current[1], current[2] or bool(args))
        extra = frag.get("extra_content")
        if isinstance(extra, Mapping) and extra:
            merge_fields(self.extras.setdefault(self.call_ids[ours], {}), extra)
        if args:
            yield ToolCallDelta(index=ours, arguments=args)

    def close(self) -> Iterator[StreamEvent]:
        for ours in self.open:
            yield ToolCallEnd(index=ours)
        self.open.clear()


class _Reply:
    """One reply's chunks (or its whole message) as events. Reasoning streams as
    ``ThinkingDelta`` and becomes one ``ThinkingPart`` when the answer begins, or at the end."""

    def __init__(self, info: ProviderInfo, turn: int, provider: str) -> None:
        self.info = info
        self.provider = provider
        self.calls = _Calls(turn)
        self.reasoning: dict[str, Any] = {}
        self.details: dict[int, dict[str, Any]] = {}
        self.extra: dict[str, Any] = {}

    def delta(self, delta: Mapping[str, Any], where: str) -> Iterator[StreamEvent]:
        shown = False
        for key in ("reasoning_content", "reasoning"):
            piece = delta.get(key)
            if not piece or not isinstance(piece, str | Mapping | list):
                continue
            # a string joins the text so far; an object or a list (a host's own shape) is kept
            # as it came, streamed pieces merged (strings joined, lists extended)
            merge_fields(self.reasoning, {key: piece})
            text = piece if isinstance(piece, str) else reasoning_text(piece)
            if not shown and text:
                shown = True
                yield ThinkingDelta(text=text)
        details = delta.get("reasoning_details")
        if isinstance(details, list):
            for piece in self._detail(details):
                if not shown and piece:
                    yield ThinkingDelta(text=piece)
        extra = delta.get("extra_content")
        if isinstance(extra, Mapping) and extra:
            merge_fields(self.extra, extra)
        for key in ("content", "refusal"):  # a refusal is what the model said
            said = delta.get(key)
            if isinstance(said, list):
                yield from self._chunks(said, shown)
            elif isinstance(said, str) and said:
                yield from self.close_reasoning()
                yield TextDelta(text=said)
        fragments = delta.get("tool_calls") or []
        if fragments:
            yield from self.close_reasoning()
        for frag in fragments:
            yield from self.calls.fragment(self.info, frag, where)

    def _chunks(self, chunks: list[Any], shown: bool) -> Iterator[StreamEvent]:
        """Content as a list of typed chunks (Mistral's reasoning models): ``text`` chunks are
        text, ``thinking`` chunks reasoning, kept under ``thinking`` (not sent back)."""
        for chunk in chunks:
            if isinstance(chunk, str):
                chunk = {"type": "text", "text": chunk}
            if not isinstance(chunk, Mapping):
                continue
            if chunk.get("type") == "thinking":
                text = reasoning_text(chunk.get("thinking"))
                if text:
                    merge_fields(self.reasoning, {"thinking": text})
                    if not shown:
                        shown = True
                        yield ThinkingDelta(text=text)
            elif isinstance(chunk.get("text"), str) and chunk["text"]:
                yield from self.close_reasoning()
                yield TextDelta(text=chunk["text"])

    def _detail(self, fragments: list[Any]) -> Iterator[str]:
        """Fold OpenRouter ``reasoning_details`` fragments by ``index`` (text pieces join)."""
        for frag in fragments:
            if not isinstance(frag, Mapping):
                continue
            index = frag.get("index")
            if not isinstance(index, int):
                index = max(self.details, default=-1) + 1
            current = self.details.get(index)
            if current is None:
                self.details[index] = dict(frag)
            else:
                for key, value in frag.items():
                    old = current.get(key)
                    if key in ("text", "summary", "data") and isinstance(old, str):
                        current[key] = old + (value if isinstance(value, str) else "")
                    elif value is not None and value != "":
                        current[key] = value
            piece = frag.get("text") or frag.get("summary")
            yield piece if isinstance(piece, str) else ""

    def close_reasoning(self) -> Iterator[StreamEvent]:
        fields: dict[str, Any] = dict(self.reasoning)
        if self.details:
            fields["reasoning_details"] = [self.details[k] for k in sorted(self.details)]
        self.reasoning, self.details = {}, {}
        part = reasoning_part(fields, self.provider)
        if part is not None:
            yield PartEvent(part=part)

    def finish(self) -> Iterator[StreamEvent]:
        """Close what is open: reasoning, calls, then the extras (once each)."""
        yield from self.close_reasoning()
        yield from self.calls.close()
        for call_id, extra in self.calls.extras.items():
            data = {"type": CALL_EXTRA, "call_id": call_id, "fields": {"extra_content": extra}}
            yield PartEvent(part=ProviderPart(provider=self.provider, data=data))
        self.calls.extras = {}
        if self.extra:
            data = {"type": MESSAGE_EXTRA, "fields": {"extra_content": self.extra}}
            yield PartEvent(part=ProviderPart(provider=self.provider, data=data))
            self.extra = {}


class OpenAIClient(OpenAIKeyed):
    """A Chat Completions client (streaming SSE by default; ``stream=False`` for one JSON body).
    The arguments of ``OpenAIKeyed``; ``options`` are extra body fields (``reasoning_effort``,
    ...), a request's own win; ``server_tools`` are sent after the function tools as given.
    """

    family = "chat"
    path = "chat/completions"

    def body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages_to_wire(request.messages, request.system, self.provider),
        }
        if tools := self.tools(request, tools_to_wire):
            body["tools"] = tools
        body.update(self.options)
        body.update(request.options)
        body["stream"] = self.streaming
        if self.streaming:
            body["stream_options"] = {"include_usage": True}
        return body

    async def parse_stream(
        self, response: httpx.Response, request: ModelRequest, cursor: Cursor
    ) -> AsyncIterator[StreamEvent]:
        reply = _Reply(self.info, request.turn, self.provider)
        finished = False
        async for sse in sse_events(response.aiter_lines(), cursor):
            if sse.data.strip() == "[DONE]":
                break
            where = cursor.where()
            chunk = loads_object(self.info, sse.data, where, "a chunk")
            if "error" in chunk:
                raise classify(self.info, None, chunk)
            for choice in chunk.get("choices") or []:
                # a few servers stream ``message`` where the others stream ``delta``
                delta = choice.get("delta") or choice.get("message") or {}
                for event in reply.delta(delta, where):
                    yield event
                reason = choice.get("finish_reason")
                if reason:
                    finished = True
                    for event in reply.finish():
                        yield event
                    yield StopEvent(reason=_STOP.get(reason, reason))
            usage = chunk.get("usage")
            if isinstance(usage, Mapping):
                yield UsageEvent(usage=usage_from_wire(usage))
        else:
            if not finished:
                raise stream_ended_early(self.info, "its finish_reason")
        for event in reply.finish():
            yield event

    def parse_body(self, data: Any, request: ModelRequest) -> Iterator[StreamEvent]:
        choices = data.get("choices") if isinstance(data, Mapping) else None
        if not choices:
            raise malformed(self.info, "a completion without choices", "the JSON body")
        choice = choices[0]
        message = dict(choice.get("message") or {})
        message["tool_calls"] = [
            {**tc, "index": i} for i, tc in enumerate(message.get("tool_calls") or [])
        ]
        reply = _Reply(self.info, request.turn, self.provider)
        yield from reply.delta(message, "the JSON body")
        yield from reply.finish()
        reason = choice.get("finish_reason")
        if reason:
            yield StopEvent(reason=_STOP.get(reason, reason))
        usage = data.get("usage")
        if isinstance(usage, Mapping):
            yield UsageEvent(usage=usage_from_wire(usage))
