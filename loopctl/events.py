"""What a model stream says: ``Usage`` and the small events a client yields.

A client turns one request into a stream of events (``TextDelta``, ``ToolCallStart`` /
``ToolCallDelta`` / ``ToolCallEnd``, ``UsageEvent``, ``StopEvent``, ``ThinkingDelta``,
``PartEvent``; the driver adds ``AttemptAbandoned`` for watchers), and ``loopctl.api.fold_events``
turns them into one message. An event lives for one fold: it is never saved, sent or read back.
So the events are small frozen records with slots, not pydantic models: a pydantic instance,
even built without validation, cost about 6,400 instructions more than one of these, and a
reply is a handful of events (a simulated 20-turn run with 8 events a reply: 10.7M -> 9.7M
instructions; cachegrind). ``Usage`` stays a pydantic model: it is saved in traces and summed.

Constructing an event checks its fields (a ``TypeError`` naming the field and the value): a
provider's parser builds events from wire data, and a field of the wrong type is a malformed
reply (the providers turn ``TypeError`` into one, with where it was). ``Events`` builds the
events of a reply the caller already holds as valid values (the test clients, the harness's
worlds, ``loopctl.api.reply_events``) without the checks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

from loopctl.core import ProviderPart, ThinkingPart
from loopctl.core.built import built

__all__ = [
    "AttemptAbandoned",
    "Events",
    "PartEvent",
    "StopEvent",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "Usage",
    "UsageEvent",
]


class Usage(BaseModel):
    """Token usage of one model call (or, summed, of a run).

    ``context_tokens`` is the size of the context after the call as the provider reports it
    (OpenAI ``total_tokens``; Anthropic all input figures plus output; Ollama prompt plus eval),
    or None when the provider did not say. ``reasoning_tokens`` is the part of ``output_tokens``
    spent on reasoning, where the provider says (OpenAI ``reasoning_tokens``, Anthropic
    ``thinking_tokens``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    context_tokens: int | None = None
    reasoning_tokens: int = 0

    @classmethod
    def total(cls, usages: Iterable[Usage]) -> Usage:
        """The sum of ``usages`` (``Usage()`` for none), as ``+`` one by one would give it, but
        built once: a run adds its calls' usage at the end instead of building a validated
        ``Usage`` after every call (24,000 instructions a turn, measured with cachegrind)."""
        items = tuple(usages)
        context = None
        for usage in reversed(items):
            if usage.context_tokens is not None:
                context = usage.context_tokens
                break
        return cls(
            input_tokens=sum(u.input_tokens for u in items),
            output_tokens=sum(u.output_tokens for u in items),
            cache_read_tokens=sum(u.cache_read_tokens for u in items),
            cache_write_tokens=sum(u.cache_write_tokens for u in items),
            context_tokens=context,
            reasoning_tokens=sum(u.reasoning_tokens for u in items),
        )

    @classmethod
    def context(cls, tokens: int) -> Usage:
        """``Usage(context_tokens=tokens)``, built without a second validation for an ``int``
        (a simulated provider reports one with every reply; validated it cost 8,000
        instructions, cachegrind). Anything else is validated, with its errors."""
        if cls is Usage and type(tokens) is int:
            values = {**_ZERO, "context_tokens": tokens}
            return _built_usage(values)
        return cls(context_tokens=tokens)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            context_tokens=other.context_tokens
            if other.context_tokens is not None
            else self.context_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


_ZERO: dict[str, Any] = dict(Usage().__dict__)


def _built_usage(values: dict[str, Any]) -> Usage:
    return built(Usage, values, {"context_tokens"})


# --- the events -----------------------------------------------------------------------------

_new = object.__new__
_set = object.__setattr__


def _restore(cls: type[_Event], values: tuple[Any, ...]) -> _Event:
    event = _new(cls)
    for name, value in zip(cls.__slots__, values, strict=True):
        _set(event, name, value)
    return event


class _Event:
    """A frozen record of ``__slots__``: compared, hashed, printed and pickled by its fields.
    ``kind`` (a class attribute) tells the events apart, as the fold does."""

    __slots__: ClassVar[tuple[str, ...]] = ()
    kind: ClassVar[str]

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Event)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), self._values()))


def _str(value: object, field: str, event: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{event}.{field} must be a str, not {value!r}")
    return value


def _int(value: object, field: str, event: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{event}.{field} must be an int, not {value!r}")
    return value


class TextDelta(_Event):
    __slots__ = ("text",)
    kind: ClassVar[Literal["text_delta"]] = "text_delta"
    text: str

    def __init__(self, *, text: str) -> None:
        _set(self, "text", _str(text, "text", "TextDelta"))


class ToolCallStart(_Event):
    """A tool call begins; ``index`` identifies it among the reply's calls."""

    __slots__ = ("id", "index", "name")
    kind: ClassVar[Literal["tool_call_start"]] = "tool_call_start"
    index: int
    id: str
    name: str

    def __init__(self, *, index: int, id: str, name: str) -> None:
        _set(self, "index", _int(index, "index", "ToolCallStart"))
        _set(self, "id", _str(id, "id", "ToolCallStart"))
        _set(self, "name", _str(name, "name", "ToolCallStart"))


class ToolCallDelta(_Event):
    """A fragment of the call's arguments as JSON text; fragments are joined in order."""

    __slots__ = ("arguments", "index")
    kind: ClassVar[Literal["tool_call_delta"]] = "tool_call_delta"
    index: int
    arguments: str

    def __init__(self, *, index: int, arguments: str) -> None:
        _set(self, "index", _int(index, "index", "ToolCallDelta"))
        _set(self, "arguments", _str(arguments, "arguments", "ToolCallDelta"))


class ToolCallEnd(_Event):
    __slots__ = ("index",)
    kind: ClassVar[Literal["tool_call_end"]] = "tool_call_end"
    index: int

    def __init__(self, *, index: int) -> None:
        _set(self, "index", _int(index, "index", "ToolCallEnd"))


class UsageEvent(_Event):
    """Usage so far; the last one wins (providers report cumulative figures)."""

    __slots__ = ("usage",)
    kind: ClassVar[Literal["usage"]] = "usage"
    usage: Usage

    def __init__(self, *, usage: Usage) -> None:
        if not isinstance(usage, Usage):
            raise TypeError(f"UsageEvent.usage must be a Usage, not {usage!r}")
        _set(self, "usage", usage)


class StopEvent(_Event):
    """The provider's stop reason, normalized: ``end_turn``, ``tool_use``, ``max_tokens``, ..."""

    __slots__ = ("reason",)
    kind: ClassVar[Literal["stop"]] = "stop"
    reason: str

    def __init__(self, *, reason: str) -> None:
        _set(self, "reason", _str(reason, "reason", "StopEvent"))


class ThinkingDelta(_Event):
    """A piece of reasoning text as it streams, for watchers (``on_stream``); the fold ignores
    it: the whole ``ThinkingPart`` follows in a ``PartEvent``."""

    __slots__ = ("text",)
    kind: ClassVar[Literal["thinking_delta"]] = "thinking_delta"
    text: str

    def __init__(self, *, text: str) -> None:
        _set(self, "text", _str(text, "text", "ThinkingDelta"))


class PartEvent(_Event):
    """A finished reasoning or provider part, in its place among the reply's parts."""

    __slots__ = ("part",)
    kind: ClassVar[Literal["part"]] = "part"
    part: ThinkingPart | ProviderPart

    def __init__(self, *, part: ThinkingPart | ProviderPart) -> None:
        if not isinstance(part, ThinkingPart | ProviderPart):
            raise TypeError(f"PartEvent.part must be a ThinkingPart or ProviderPart, not {part!r}")
        _set(self, "part", part)


class AttemptAbandoned(_Event):
    """The model attempt whose events were streamed since the last ``AttemptAbandoned`` (or the
    start of the call) failed: nothing it streamed is part of the reply. Sent by the driver to
    ``on_stream`` watchers only (a client never yields it; the fold ignores it), so a UI can
    clear the attempt's text instead of running it into the next attempt's.

    ``attempt`` counts from 1; ``error`` is the failure's ``LoopError`` kind and ``message``
    its text; ``retry_in`` the seconds until the next attempt, or None when there is none
    (the call fails with this error)."""

    __slots__ = ("attempt", "error", "message", "retry_in")
    kind: ClassVar[Literal["attempt_abandoned"]] = "attempt_abandoned"
    attempt: int
    error: str
    message: str
    retry_in: float | None

    def __init__(
        self, *, attempt: int, error: str, message: str = "", retry_in: float | None = None
    ) -> None:
        name = "AttemptAbandoned"
        _set(self, "attempt", _int(attempt, "attempt", name))
        _set(self, "error", _str(error, "error", name))
        _set(self, "message", _str(message, "message", name))
        if retry_in is not None and (
            not isinstance(retry_in, int | float) or isinstance(retry_in, bool)
        ):
            raise TypeError(f"{name}.retry_in must be a number or None, not {retry_in!r}")
        _set(self, "retry_in", None if retry_in is None else float(retry_in))


StreamEvent: TypeAlias = (
    TextDelta
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | UsageEvent
    | StopEvent
    | ThinkingDelta
    | PartEvent
    | AttemptAbandoned
)


class Events:
    """The stream events of values already valid, built without the constructors' checks: the
    one place the clients that stream a reply they hold (the test clients, the harness's
    worlds, ``reply_events``) make their events. Tests pin each to its constructor's event."""

    @staticmethod
    def text(text: str) -> TextDelta:
        event = _new(TextDelta)
        _set(event, "text", text)
        return event

    @staticmethod
    def start(index: int, id: str, name: str) -> ToolCallStart:
        event = _new(ToolCallStart)
        _set(event, "index", index)
        _set(event, "id", id)
        _set(event, "name", name)
        return event

    @staticmethod
    def delta(index: int, arguments: str) -> ToolCallDelta:
        event = _new(ToolCallDelta)
        _set(event, "index", index)
        _set(event, "arguments", arguments)
        return event

    @staticmethod
    def end(index: int) -> ToolCallEnd:
        event = _new(ToolCallEnd)
        _set(event, "index", index)
        return event

    @staticmethod
    def part(part: ThinkingPart | ProviderPart) -> PartEvent:
        event = _new(PartEvent)
        _set(event, "part", part)
        return event

    @staticmethod
    def usage(usage: Usage) -> UsageEvent:
        event = _new(UsageEvent)
        _set(event, "usage", usage)
        return event

    @staticmethod
    def stop(reason: str) -> StopEvent:
        event = _new(StopEvent)
        _set(event, "reason", reason)
        return event
