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

from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Final, Literal, Self, TypeAlias

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
        ``Usage`` after every call (24,000 instructions a turn, measured with cachegrind). The
        sums of valid counts are valid counts, so the sum is ``built`` rather than validated
        again (11,000 instructions a run, cachegrind), all its fields given as ``+`` gives them.
        """
        items = tuple(usages)
        context = None
        for usage in reversed(items):
            if usage.context_tokens is not None:
                context = usage.context_tokens
                break
        values = {
            "input_tokens": sum(u.input_tokens for u in items),
            "output_tokens": sum(u.output_tokens for u in items),
            "cache_read_tokens": sum(u.cache_read_tokens for u in items),
            "cache_write_tokens": sum(u.cache_write_tokens for u in items),
            "context_tokens": context,
            "reasoning_tokens": sum(u.reasoning_tokens for u in items),
        }
        if cls is Usage:
            return built(Usage, values, _ALL_GIVEN)
        return cls(**values)

    @classmethod
    def context(cls, tokens: int) -> Usage:
        """``Usage(context_tokens=tokens)``, built without a second validation for an ``int``
        (a simulated provider reports one with every reply; validated it cost 8,000
        instructions, cachegrind). Anything else is validated, with its errors."""
        if cls is Usage and type(tokens) is int:
            return built(Usage, {**_ZERO, "context_tokens": tokens}, _CONTEXT_GIVEN)
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


_ZERO: Final[dict[str, Any]] = dict(Usage().__dict__)
_CONTEXT_GIVEN: Final = {"context_tokens"}
_ALL_GIVEN: Final = set(_ZERO)


# --- the events -----------------------------------------------------------------------------

_new: Final = object.__new__


class _Event:
    """A frozen record of ``__slots__``: compared, hashed, printed and pickled by its fields.
    ``kind`` (a class attribute) tells the events apart, as the fold does.

    The class refuses ``setattr``, so an event is filled through its slots' own setters
    (``_setters``, found once per class): 1,600 instructions an event cheaper than
    ``object.__setattr__`` (cachegrind). ``_of`` builds one from valid values, unchecked (for
    unpickling; ``Events`` is the fast way)."""

    __slots__: ClassVar[tuple[str, ...]] = ()
    kind: ClassVar[str]
    _setters: ClassVar[tuple[Callable[[Any, Any], None], ...]]

    def __init_subclass__(cls) -> None:
        cls._setters = tuple(cls.__dict__[name].__set__ for name in cls.__slots__)

    @classmethod
    def _of(cls, *values: Any) -> Self:
        event = _new(cls)
        for setter, value in zip(cls._setters, values, strict=True):
            setter(event, value)
        return event

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
        return (type(self)._of, self._values())


def _wrong(event: str, field: str, expected: str, value: object) -> TypeError:
    return TypeError(f"{event}.{field} must be {expected}, not {value!r}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class TextDelta(_Event):
    __slots__ = ("text",)
    kind: ClassVar[Literal["text_delta"]] = "text_delta"
    text: str

    def __init__(self, *, text: str) -> None:
        if not isinstance(text, str):
            raise _wrong("TextDelta", "text", "a str", text)
        self._setters[0](self, text)


class ToolCallStart(_Event):
    """A tool call begins; ``index`` identifies it among the reply's calls."""

    __slots__ = ("index", "id", "name")  # noqa: RUF023 (field order: repr, setters)
    kind: ClassVar[Literal["tool_call_start"]] = "tool_call_start"
    index: int
    id: str
    name: str

    def __init__(self, *, index: int, id: str, name: str) -> None:
        if not _is_int(index):
            raise _wrong("ToolCallStart", "index", "an int", index)
        if not isinstance(id, str):
            raise _wrong("ToolCallStart", "id", "a str", id)
        if not isinstance(name, str):
            raise _wrong("ToolCallStart", "name", "a str", name)
        set_index, set_id, set_name = self._setters
        set_index(self, index)
        set_id(self, id)
        set_name(self, name)


class ToolCallDelta(_Event):
    """A fragment of the call's arguments as JSON text; fragments are joined in order."""

    __slots__ = ("index", "arguments")  # noqa: RUF023 (field order: repr, setters)
    kind: ClassVar[Literal["tool_call_delta"]] = "tool_call_delta"
    index: int
    arguments: str

    def __init__(self, *, index: int, arguments: str) -> None:
        if not _is_int(index):
            raise _wrong("ToolCallDelta", "index", "an int", index)
        if not isinstance(arguments, str):
            raise _wrong("ToolCallDelta", "arguments", "a str", arguments)
        set_index, set_arguments = self._setters
        set_index(self, index)
        set_arguments(self, arguments)


class ToolCallEnd(_Event):
    __slots__ = ("index",)
    kind: ClassVar[Literal["tool_call_end"]] = "tool_call_end"
    index: int

    def __init__(self, *, index: int) -> None:
        if not _is_int(index):
            raise _wrong("ToolCallEnd", "index", "an int", index)
        self._setters[0](self, index)


class UsageEvent(_Event):
    """Usage so far; the last one wins (providers report cumulative figures)."""

    __slots__ = ("usage",)
    kind: ClassVar[Literal["usage"]] = "usage"
    usage: Usage

    def __init__(self, *, usage: Usage) -> None:
        if not isinstance(usage, Usage):
            raise _wrong("UsageEvent", "usage", "a Usage", usage)
        self._setters[0](self, usage)


class StopEvent(_Event):
    """The provider's stop reason, normalized: ``end_turn``, ``tool_use``, ``max_tokens``, ..."""

    __slots__ = ("reason",)
    kind: ClassVar[Literal["stop"]] = "stop"
    reason: str

    def __init__(self, *, reason: str) -> None:
        if not isinstance(reason, str):
            raise _wrong("StopEvent", "reason", "a str", reason)
        self._setters[0](self, reason)


class ThinkingDelta(_Event):
    """A piece of reasoning text as it streams, for watchers (``on_stream``); the fold ignores
    it: the whole ``ThinkingPart`` follows in a ``PartEvent``."""

    __slots__ = ("text",)
    kind: ClassVar[Literal["thinking_delta"]] = "thinking_delta"
    text: str

    def __init__(self, *, text: str) -> None:
        if not isinstance(text, str):
            raise _wrong("ThinkingDelta", "text", "a str", text)
        self._setters[0](self, text)


class PartEvent(_Event):
    """A finished reasoning or provider part, in its place among the reply's parts."""

    __slots__ = ("part",)
    kind: ClassVar[Literal["part"]] = "part"
    part: ThinkingPart | ProviderPart

    def __init__(self, *, part: ThinkingPart | ProviderPart) -> None:
        if not isinstance(part, ThinkingPart | ProviderPart):
            raise _wrong("PartEvent", "part", "a ThinkingPart or ProviderPart", part)
        self._setters[0](self, part)


class AttemptAbandoned(_Event):
    """The model attempt whose events were streamed since the last ``AttemptAbandoned`` (or the
    start of the call) failed: nothing it streamed is part of the reply. Sent by the driver to
    ``on_stream`` watchers only (a client never yields it; the fold ignores it), so a UI can
    take the attempt's text back instead of running it into the next attempt's.

    It comes right after the attempt's last event and before anything of the next attempt,
    also when the stream had ended (``StopEvent``) and the reply was refused after it (its
    arguments were not JSON, its call ids repeated): a watcher cannot tell an attempt's end by
    a ``StopEvent``. So the event says what it takes back: ``text``, every ``TextDelta`` the
    attempt streamed, joined (the last ``len(text)`` characters a watcher that shows all text
    has shown), and ``events``, how many events the attempt streamed in all.

    ``attempt`` counts from 1; ``error`` is the failure's ``LoopError`` kind and ``message``
    its text; ``retry_in`` the seconds until the next attempt, or None when there is none
    (the call fails with this error)."""

    __slots__ = ("attempt", "error", "message", "retry_in", "text", "events")  # noqa: RUF023
    kind: ClassVar[Literal["attempt_abandoned"]] = "attempt_abandoned"
    attempt: int
    error: str
    message: str
    retry_in: float | None
    text: str
    events: int

    def __init__(
        self,
        *,
        attempt: int,
        error: str,
        message: str = "",
        retry_in: float | None = None,
        text: str = "",
        events: int = 0,
    ) -> None:
        name = "AttemptAbandoned"
        if not _is_int(attempt):
            raise _wrong(name, "attempt", "an int", attempt)
        if not isinstance(error, str):
            raise _wrong(name, "error", "a str", error)
        if not isinstance(message, str):
            raise _wrong(name, "message", "a str", message)
        if retry_in is not None and not (_is_int(retry_in) or isinstance(retry_in, float)):
            raise _wrong(name, "retry_in", "a number or None", retry_in)
        if not isinstance(text, str):
            raise _wrong(name, "text", "a str", text)
        if not _is_int(events) or events < 0:
            raise _wrong(name, "events", "a count", events)
        retry = None if retry_in is None else float(retry_in)
        values = (attempt, error, message, retry, text, events)
        for setter, value in zip(self._setters, values, strict=True):
            setter(self, value)


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
    worlds, ``reply_events``) make their events. Unrolled, not ``_Event._of``: the generic
    fill cost 10,600 instructions an event, this 4,000 (cachegrind). Tests pin each to its
    constructor's event."""

    @staticmethod
    def text(text: str) -> TextDelta:
        event = _new(TextDelta)
        TextDelta._setters[0](event, text)
        return event

    @staticmethod
    def start(index: int, id: str, name: str) -> ToolCallStart:
        event = _new(ToolCallStart)
        set_index, set_id, set_name = ToolCallStart._setters
        set_index(event, index)
        set_id(event, id)
        set_name(event, name)
        return event

    @staticmethod
    def delta(index: int, arguments: str) -> ToolCallDelta:
        event = _new(ToolCallDelta)
        set_index, set_arguments = ToolCallDelta._setters
        set_index(event, index)
        set_arguments(event, arguments)
        return event

    @staticmethod
    def end(index: int) -> ToolCallEnd:
        event = _new(ToolCallEnd)
        ToolCallEnd._setters[0](event, index)
        return event

    @staticmethod
    def part(part: ThinkingPart | ProviderPart) -> PartEvent:
        event = _new(PartEvent)
        PartEvent._setters[0](event, part)
        return event

    @staticmethod
    def usage(usage: Usage) -> UsageEvent:
        event = _new(UsageEvent)
        UsageEvent._setters[0](event, usage)
        return event

    @staticmethod
    def stop(reason: str) -> StopEvent:
        event = _new(StopEvent)
        StopEvent._setters[0](event, reason)
        return event
