"""The seam between the driver and model providers: ``ApiClient`` and its stream events.

A client turns one ``ModelRequest`` into a stream of small events; ``fold_events`` (pure) turns
them into one assistant ``Message`` plus ``Usage``, so every provider's reply is assembled by the
same code. ``reply_events`` goes the other way (replays and simulated worlds use it). A client
that holds its replies whole (``WholeReplyClient``) also answers ``whole_reply``, which the
driver asks for when nobody watches the stream.

Reasoning and provider blocks arrive whole, as ``PartEvent`` where the provider put them (some
providers require their order back); ``ThinkingDelta`` streams reasoning text for watchers only.

Errors: a client raises ``ApiError`` carrying a ``LoopError`` (its ``kind`` classifies the
failure) and the provider's retry hints; the driver decides what to do with it.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Final, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from loopctl.core import (
    Conversation,
    LoopctlError,
    LoopError,
    Message,
    Part,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolCall,
)
from loopctl.core.values import MAX_NESTING, value_problem
from loopctl.events import (
    AttemptAbandoned,
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

__all__ = [
    "ApiClient",
    "ApiError",
    "AttemptAbandoned",
    "ModelReply",
    "ModelRequest",
    "PartEvent",
    "StopEvent",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolSpec",
    "Usage",
    "UsageEvent",
    "WholeReply",
    "WholeReplyClient",
    "fold_events",
    "folded",
    "folded_reply",
    "reply_events",
    "whole_reply_of",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ToolSpec(BaseModel):
    """What the model is told about one tool."""

    model_config = _FROZEN
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ModelRequest(BaseModel):
    """One model call: the conversation (history plus pending), tools, system prompt, options.

    ``messages`` reads as a tuple; built by the driver it is a view of the brain's conversation
    (``Conversation``), not a copy, so a request costs the same at 10 or 10,000 messages.

    ``server_tools`` are tools the provider runs itself, in its own wire form (OpenAI Responses
    ``{"type": "web_search"}``): advertised after ``tools`` (and after a client's own), their
    calls and results come back as ``ProviderPart`` and never reach the registry.
    """

    model_config = _FROZEN
    messages: Conversation
    tools: tuple[ToolSpec, ...] = ()
    system: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    turn: int = 0
    server_tools: tuple[dict[str, Any], ...] = ()


class ModelReply(BaseModel):
    """The folded reply."""

    model_config = _FROZEN
    message: Message
    usage: Usage = Usage()
    stop_reason: str | None = None


class ApiError(LoopctlError):
    """A provider call failed; ``error`` classifies it, the server's hints steer the driver's
    retry (``retry_after`` in seconds; ``should_retry`` overrides the kind's default)."""

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


class WholeReplyClient(ApiClient, Protocol):
    """A client that holds each reply whole (a scripted model, a replay, a simulated world) may
    also answer ``whole_reply(request)``: the fold of what ``stream(request)`` would yield, or
    the same ``ApiError`` (one call stands for the other: each uses a reply up). The driver
    calls it when nobody watches the stream: events built only to be folded back are waste.
    """

    async def whole_reply(self, request: ModelRequest) -> ModelReply: ...


WholeReply = Callable[[ModelRequest], Awaitable[ModelReply]]


def whole_reply_of(client: object) -> WholeReply | None:
    """``client.whole_reply`` when it stands for ``client.stream``, else None (stream it).

    It does when the class that gives the client its ``stream`` (or a subclass of it) gives it
    its ``whole_reply`` too: a subclass that overrides only ``stream`` (to add a delay, a log)
    keeps its override, and a proxy forwarding names through ``__getattr__`` is streamed."""
    for klass in type(client).__mro__:
        namespace = klass.__dict__
        if "whole_reply" in namespace:
            return client.whole_reply  # type: ignore[attr-defined,no-any-return]
        if "stream" in namespace:
            return None
    return None


_NO_USAGE: Final = Usage()


class _CallBuffer:
    __slots__ = ("args", "id", "name")

    def __init__(self, id: str, name: str) -> None:
        self.id = id
        self.name = name
        self.args: list[str] = []


def _close_segment(
    out: list[Part | _CallBuffer], text: list[str], segment: list[_CallBuffer]
) -> None:
    """The text since the last ``PartEvent`` (one part, if any) then its calls, onto ``out``."""
    if text:
        joined = "".join(text)
        if joined:
            out.append(TextPart(text=joined))
        text.clear()
    out.extend(segment)
    segment.clear()


def fold_events(events: Iterable[StreamEvent]) -> ModelReply:
    """Fold a reply's events into one assistant message with usage.

    Parts keep the provider's order: a ``PartEvent`` closes the text and calls before it, which
    form one text part (every ``TextDelta`` joined) followed by the calls in the order they
    started. Invalid argument JSON raises ``ApiError`` (kind ``provider``) naming the tool. This
    is the door where a reply enters: arguments (and a part's data) nested deeper than
    ``MAX_NESTING`` or holding NaN or infinity are refused here, not retried, so everything the
    brain accepts can be saved and read back.
    """
    out: list[Part | _CallBuffer] = []
    text: list[str] = []
    segment: list[_CallBuffer] = []  # the calls since the last PartEvent
    calls: dict[int, _CallBuffer] = {}
    usage = _NO_USAGE
    stop: str | None = None
    for event in events:  # told apart by ``kind``, the union's discriminator
        if event.kind == "tool_call_delta":
            buf_or_none = calls.get(event.index)
            if buf_or_none is None:
                message = f"arguments for tool call index {event.index} before its start"
                raise _refused(message, {})
            buf_or_none.args.append(event.arguments)
        elif event.kind == "text_delta":
            text.append(event.text)
        elif event.kind == "tool_call_start":
            if event.index in calls:
                raise _refused(f"tool call index {event.index} started twice in one reply", {})
            calls[event.index] = buf = _CallBuffer(event.id, event.name)
            segment.append(buf)
        elif event.kind == "stop":
            stop = event.reason
        elif event.kind == "usage":
            usage = event.usage
        elif event.kind == "part":
            _close_segment(out, text, segment)
            part = event.part  # its data must be holdable, as tool arguments must
            if part.data and (problem := value_problem(part.data)) is not None:
                raise _unholdable(f"a {part.kind} part's data", problem, {"part": part.kind})
            out.append(part)
    _close_segment(out, text, segment)
    parts = tuple(_finish_call(p) if isinstance(p, _CallBuffer) else p for p in out)
    return ModelReply(message=Message(role="assistant", parts=parts), usage=usage, stop_reason=stop)


def reply_events(
    message: Message,
    usage: Usage | None = None,
    stop_reason: str | None = None,
    chunk: int | None = None,
) -> list[StreamEvent]:
    """The events a provider would stream for ``message``: ``fold_events`` of them gives it back.
    Text and arguments stream in pieces of ``chunk`` characters (None: two pieces each), so a
    replay exercises the fold as a real stream does. The stop reason defaults to ``tool_use``
    or ``end_turn``."""
    events: list[StreamEvent] = []
    index = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            events += [TextDelta(text=t) for t in _pieces(part.text, chunk)]
        elif isinstance(part, ToolCall):
            try:
                args = json.dumps(part.arguments)  # in the message's order, which its JSON keeps
            except RecursionError:  # far past MAX_NESTING: refused as the fold refuses it
                raise _unholdable(
                    f"the arguments for tool '{part.name}'",
                    f"it is nested more than {MAX_NESTING} levels deep",
                    {"tool": part.name},
                ) from None
            events.append(ToolCallStart(index=index, id=part.id, name=part.name))
            events += [ToolCallDelta(index=index, arguments=a) for a in _pieces(args, chunk)]
            events.append(ToolCallEnd(index=index))
            index += 1
        elif isinstance(part, ThinkingPart | ProviderPart):
            events.append(PartEvent(part=part))
    if usage is not None:
        events.append(UsageEvent(usage=usage))
    reason = stop_reason or ("tool_use" if message.tool_calls else "end_turn")
    events.append(StopEvent(reason=reason))
    return events


def _pieces(text: str, chunk: int | None) -> list[str]:
    """``text`` in pieces of ``chunk`` characters, or in two halves; no empty piece."""
    if chunk is None:
        half = len(text) // 2
        return [t for t in (text[:half], text[half:]) if t]
    return [text[i : i + chunk] for i in range(0, len(text), chunk)]


_SCALARS: Final = (str, int, bool, type(None))


def plain_json(value: Any, sort_keys: bool = False) -> bool:
    """Whether writing ``value`` as JSON and reading it back gives an equal value, in the same
    order (sorted, given ``sort_keys``), that the door would let in: dicts with ``str`` keys,
    lists, strings, ints, booleans, None and finite floats, of exactly these types (a tuple
    reads back as a list), nested within ``MAX_NESTING``. False says only "not surely": the
    caller goes the long way (write, read, check).
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if type(item) is dict:
            for key in item:
                if type(key) is not str:
                    return False
            if sort_keys and list(item) != sorted(item):
                return False
            children: Any = item.values()
        elif type(item) is list:
            children = item
        elif type(item) in _SCALARS or (type(item) is float and math.isfinite(item)):
            continue  # the whole value is a scalar
        else:
            return False
        if depth >= MAX_NESTING:
            return False
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind not in _SCALARS and not (kind is float and math.isfinite(child)):
                return False
    return True


def folded(
    message: Message,
    usage: Usage | None = None,
    stop_reason: str | None = None,
    *,
    sort_keys: bool = False,
) -> ModelReply | None:
    """``fold_events(reply_events(message, usage, stop_reason))`` without the events, when
    ``message`` is already in the form the fold makes; None when it is not (the caller folds).

    The fold's form: an assistant message whose parts are segments (a reasoning or provider
    part ends one), each at most one non-empty text part and then its calls, whose arguments
    survive the fold's write-and-read (``plain_json``; ``sort_keys`` for a stream that writes
    them sorted); a part's data within the door's limits. Tests pin this to the fold; a
    simulated turn spent a fifth of its time building and folding such events.
    """
    if message.role != "assistant":
        return None
    text = calls = called = False  # the segment holds a text, calls; the message a call
    for part in message.parts:
        if type(part) is ToolCall:
            if not plain_json(part.arguments, sort_keys):
                return None
            calls = called = True
        elif type(part) is TextPart:
            if text or calls or not part.text or type(part.text) is not str:
                return None
            text = True
        elif type(part) is ThinkingPart or type(part) is ProviderPart:
            if part.data and value_problem(part.data) is not None:
                return None
            text = calls = False
        else:
            return None
    stop_reason = stop_reason or ("tool_use" if called else "end_turn")
    fields = {"message": message, "stop_reason": stop_reason}
    if usage is not None:
        fields["usage"] = usage
    # the model's validator without its ``__init__`` wrapper: 12,400 -> 9,000 instructions
    reply: ModelReply = ModelReply.__pydantic_validator__.validate_python(fields)
    return reply


def folded_reply(
    message: Message, usage: Usage | None = None, stop_reason: str | None = None
) -> ModelReply:
    """``fold_events(reply_events(message, usage, stop_reason))``: ``folded`` where it answers,
    else the fold of the events (with its checks and errors)."""
    whole = folded(message, usage, stop_reason)
    return whole if whole is not None else fold_events(reply_events(message, usage, stop_reason))


def _finish_call(buf: _CallBuffer) -> ToolCall:
    raw = "".join(buf.args).strip()
    arguments: Any = {}
    problem: str | None = None
    details = {"tool": buf.name, "arguments": raw[:500]}
    if raw:
        try:
            arguments = json.loads(raw)
        except json.JSONDecodeError as exc:
            message = f"the model sent invalid JSON arguments for tool '{buf.name}': {exc.msg}"
            raise _refused(message, details, retryable=True) from None
        except RecursionError:  # nested far past MAX_NESTING: too deep for the parser itself
            problem = f"it is nested more than {MAX_NESTING} levels deep"
        else:
            problem = value_problem(arguments)
    if problem is not None:
        raise _unholdable(f"the arguments for tool '{buf.name}'", problem, details)
    if not isinstance(arguments, dict):
        message = f"the model sent arguments for tool '{buf.name}' that are not an object"
        raise _refused(message, details, retryable=True)
    return ToolCall(id=buf.id, name=buf.name, arguments=arguments)


def _unholdable(what: str, problem: str, details: dict[str, Any]) -> ApiError:
    """The door's refusal of a value the engine could not save and read back: not retried
    (the model chose to send it)."""
    return _refused(
        f"the model sent {what} that the engine cannot hold: {problem} "
        f"(the limit is {MAX_NESTING} levels; numbers must be finite)",
        details,
    )


def _refused(message: str, details: dict[str, Any], *, retryable: bool = False) -> ApiError:
    error = LoopError(kind="provider", message=message, retryable=retryable, details=details)
    return ApiError(error)
