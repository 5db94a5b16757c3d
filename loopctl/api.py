"""The seam between the driver and model providers: ``ApiClient`` and its stream events.

A client turns one ``ModelRequest`` into a stream of small events; ``fold_events`` (pure) turns the
events into one assistant ``Message`` plus ``Usage``. Providers never build ``Message`` objects
themselves, so every provider's reply is assembled by the same code.

Errors: a client raises ``ApiError`` carrying a ``LoopError`` record (its ``kind`` classifies the
failure: ``rate_limited``, ``context_overflow``, ``auth``, ...) and the provider's retry hints.
The driver decides what to do with it (retry, emergency compaction, fail the run).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from loopctl.core import LoopError, Message, TextPart, ToolCall

__all__ = [
    "ApiClient",
    "ApiError",
    "ModelReply",
    "ModelRequest",
    "StopEvent",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolSpec",
    "Usage",
    "UsageEvent",
    "fold_events",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Usage(BaseModel):
    """Token usage of one model call (or, summed, of a run).

    ``context_tokens`` is the size of the context after the call as the provider reports it
    (OpenAI ``total_tokens``; Anthropic all input figures plus output; Ollama prompt plus eval),
    or None when the provider did not say.
    """

    model_config = _FROZEN
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    context_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            context_tokens=other.context_tokens
            if other.context_tokens is not None
            else self.context_tokens,
        )


# --- stream events --------------------------------------------------------------------------


class TextDelta(BaseModel):
    model_config = _FROZEN
    kind: Literal["text_delta"] = "text_delta"
    text: str


class ToolCallStart(BaseModel):
    """A tool call begins; ``index`` identifies it among the reply's calls."""

    model_config = _FROZEN
    kind: Literal["tool_call_start"] = "tool_call_start"
    index: int
    id: str
    name: str


class ToolCallDelta(BaseModel):
    """A fragment of the call's arguments as JSON text; fragments are joined in order."""

    model_config = _FROZEN
    kind: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    arguments: str


class ToolCallEnd(BaseModel):
    model_config = _FROZEN
    kind: Literal["tool_call_end"] = "tool_call_end"
    index: int


class UsageEvent(BaseModel):
    """Usage so far; the last one wins (providers report cumulative figures)."""

    model_config = _FROZEN
    kind: Literal["usage"] = "usage"
    usage: Usage


class StopEvent(BaseModel):
    """The provider's stop reason, normalized: ``end_turn``, ``tool_use``, ``max_tokens``, ..."""

    model_config = _FROZEN
    kind: Literal["stop"] = "stop"
    reason: str


StreamEvent = Annotated[
    TextDelta | ToolCallStart | ToolCallDelta | ToolCallEnd | UsageEvent | StopEvent,
    Field(discriminator="kind"),
]


# --- requests and replies -------------------------------------------------------------------


class ToolSpec(BaseModel):
    """What the model is told about one tool."""

    model_config = _FROZEN
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ModelRequest(BaseModel):
    """One model call: the conversation (history plus pending), tools, system prompt, options."""

    model_config = _FROZEN
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    system: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    turn: int = 0


class ModelReply(BaseModel):
    """The folded reply."""

    model_config = _FROZEN
    message: Message
    usage: Usage = Usage()
    stop_reason: str | None = None


class ApiError(Exception):
    """A provider call failed; ``error`` classifies it, the hints steer the driver's retry.

    ``retry_after`` is in seconds (from ``retry-after-ms`` or ``retry-after``); ``should_retry``
    carries ``x-should-retry`` when the server sent it (it overrides the kind's default).
    """

    def __init__(
        self,
        error: LoopError,
        *,
        retry_after: float | None = None,
        should_retry: bool | None = None,
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after
        self.should_retry = should_retry


@runtime_checkable
class ApiClient(Protocol):
    """A model provider. ``stream`` yields events for one request; raise ``ApiError`` on failure."""

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]: ...


# --- the fold (pure) -------------------------------------------------------------------------


class _CallBuffer:
    __slots__ = ("args", "id", "name")

    def __init__(self, id: str, name: str) -> None:
        self.id = id
        self.name = name
        self.args: list[str] = []


def fold_events(events: Iterable[StreamEvent]) -> ModelReply:
    """Fold a reply's events into one assistant message with usage.

    Tool calls keep the order in which they started. Invalid argument JSON raises ``ApiError``
    (kind ``provider``) naming the tool, never a bare ``JSONDecodeError``.
    """
    text: list[str] = []
    calls: dict[int, _CallBuffer] = {}
    usage = Usage()
    stop: str | None = None
    for event in events:
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, ToolCallStart):
            if event.index in calls:
                raise ApiError(
                    LoopError(
                        kind="provider",
                        message=f"tool call index {event.index} started twice in one reply",
                    )
                )
            calls[event.index] = _CallBuffer(event.id, event.name)
        elif isinstance(event, ToolCallDelta):
            buf = calls.get(event.index)
            if buf is None:
                raise ApiError(
                    LoopError(
                        kind="provider",
                        message=f"arguments for tool call index {event.index} before its start",
                    )
                )
            buf.args.append(event.arguments)
        elif isinstance(event, UsageEvent):
            usage = event.usage
        elif isinstance(event, StopEvent):
            stop = event.reason
    tool_calls = [_finish_call(buf) for buf in calls.values()]
    parts: list[TextPart | ToolCall] = []
    joined = "".join(text)
    if joined:
        parts.append(TextPart(text=joined))
    parts.extend(tool_calls)
    return ModelReply(
        message=Message(role="assistant", parts=tuple(parts)), usage=usage, stop_reason=stop
    )


def _finish_call(buf: _CallBuffer) -> ToolCall:
    raw = "".join(buf.args).strip()
    if not raw:
        return ToolCall(id=buf.id, name=buf.name, arguments={})
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ApiError(
            LoopError(
                kind="provider",
                message=f"the model sent invalid JSON arguments for tool '{buf.name}': {exc.msg}",
                retryable=True,
                details={"tool": buf.name, "arguments": raw[:500]},
            )
        ) from None
    if not isinstance(arguments, dict):
        raise ApiError(
            LoopError(
                kind="provider",
                message=f"the model sent arguments for tool '{buf.name}' that are not an object",
                retryable=True,
                details={"tool": buf.name, "arguments": raw[:500]},
            )
        )
    return ToolCall(id=buf.id, name=buf.name, arguments=arguments)
