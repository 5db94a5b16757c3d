"""What a model stream says: ``Usage`` and the small events a client yields.

An event lives for one fold (``loopctl.api.fold_events``): it is never saved or read back, so
the events are frozen dataclasses, not pydantic models; ``Usage`` is saved in traces, a model.
The driver adds ``AttemptAbandoned`` for watchers.

Constructing an event checks its fields (a ``TypeError`` naming the field and the value): a
provider's parser builds events from wire data, and the providers turn that ``TypeError`` into a
malformed reply, with where it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar, Final, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

from loopctl.core import ProviderPart, ThinkingPart

__all__ = [
    "AttemptAbandoned",
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
    """Token usage of one model call (or, summed, of a run). ``context_tokens`` is the size of
    the context after the call as the provider reports it, or None when it did not say;
    ``reasoning_tokens`` is the part of ``output_tokens`` spent on reasoning."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    context_tokens: int | None = None
    reasoning_tokens: int = 0

    @classmethod
    def total(cls, usages: Iterable[Usage]) -> Usage:
        """The sum of ``usages`` (``Usage()`` for none): the counts added, the last known
        context size kept."""
        # One pass over the usages (a run adds up one a model call), not a generator a field:
        # a sum of 1 went 49,500 -> 21,000 instructions, of 100 424,800 -> 242,000 (cachegrind).
        input_tokens = output_tokens = cache_read = cache_write = reasoning = 0
        context = None
        for u in usages:
            input_tokens += u.input_tokens
            output_tokens += u.output_tokens
            cache_read += u.cache_read_tokens
            cache_write += u.cache_write_tokens
            reasoning += u.reasoning_tokens
            if u.context_tokens is not None:
                context = u.context_tokens
        return cls(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            context_tokens=context,
            reasoning_tokens=reasoning,
        )

    @classmethod
    def context(cls, tokens: int) -> Usage:
        """``Usage(context_tokens=tokens)``: what a simulated provider reports with a reply."""
        return cls(context_tokens=tokens)

    def __add__(self, other: Usage) -> Usage:
        return Usage.total((self, other))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_INT: Final = (_is_int, "an int")
_STR: Final = (lambda v: isinstance(v, str), "a str")


@dataclass(frozen=True, kw_only=True)
class _Event:
    """``kind`` tells the events apart; ``_checks`` maps a field to its test and its type."""

    kind: ClassVar[str]
    _checks: ClassVar[dict[str, tuple[Callable[[object], bool], str]]] = {}

    def __post_init__(self) -> None:
        for field, (ok, expected) in self._checks.items():
            value = getattr(self, field)
            if not ok(value):
                name = type(self).__name__
                raise TypeError(f"{name}.{field} must be {expected}, not {value!r}")


@dataclass(frozen=True, kw_only=True)
class TextDelta(_Event):
    kind: ClassVar[Literal["text_delta"]] = "text_delta"
    _checks = {"text": _STR}
    text: str


@dataclass(frozen=True, kw_only=True)
class ToolCallStart(_Event):
    """A tool call begins; ``index`` identifies it among the reply's calls."""

    kind: ClassVar[Literal["tool_call_start"]] = "tool_call_start"
    _checks = {"index": _INT, "id": _STR, "name": _STR}
    index: int
    id: str
    name: str


@dataclass(frozen=True, kw_only=True)
class ToolCallDelta(_Event):
    """A fragment of the call's arguments as JSON text; fragments are joined in order."""

    kind: ClassVar[Literal["tool_call_delta"]] = "tool_call_delta"
    _checks = {"index": _INT, "arguments": _STR}
    index: int
    arguments: str


@dataclass(frozen=True, kw_only=True)
class ToolCallEnd(_Event):
    kind: ClassVar[Literal["tool_call_end"]] = "tool_call_end"
    _checks = {"index": _INT}
    index: int


@dataclass(frozen=True, kw_only=True)
class UsageEvent(_Event):
    """Usage so far; the last one wins (providers report cumulative figures)."""

    kind: ClassVar[Literal["usage"]] = "usage"
    _checks = {"usage": (lambda v: isinstance(v, Usage), "a Usage")}
    usage: Usage


@dataclass(frozen=True, kw_only=True)
class StopEvent(_Event):
    """The provider's stop reason, normalized: ``end_turn``, ``tool_use``, ``max_tokens``, ..."""

    kind: ClassVar[Literal["stop"]] = "stop"
    _checks = {"reason": _STR}
    reason: str


@dataclass(frozen=True, kw_only=True)
class ThinkingDelta(_Event):
    """A piece of reasoning text as it streams, for watchers (``on_stream``); the fold ignores
    it: the whole ``ThinkingPart`` follows in a ``PartEvent``."""

    kind: ClassVar[Literal["thinking_delta"]] = "thinking_delta"
    _checks = {"text": _STR}
    text: str


@dataclass(frozen=True, kw_only=True)
class PartEvent(_Event):
    """A finished reasoning or provider part, in its place among the reply's parts."""

    kind: ClassVar[Literal["part"]] = "part"
    _checks = {
        "part": (
            lambda v: isinstance(v, ThinkingPart | ProviderPart),
            "a ThinkingPart or ProviderPart",
        )
    }
    part: ThinkingPart | ProviderPart


@dataclass(frozen=True, kw_only=True)
class AttemptAbandoned(_Event):
    """The model attempt whose events were streamed since the last ``AttemptAbandoned`` (or the
    start of the call) failed: nothing it streamed is part of the reply. Sent by the driver to
    ``on_stream`` watchers only, so a UI can take the attempt's text back.

    It comes right after the attempt's last event, also when the stream had ended
    (``StopEvent``) and the reply was refused after it (its arguments were not JSON), so it
    says what it takes back: ``text``, every ``TextDelta`` the attempt streamed, joined, and
    ``events``, how many events it streamed. ``attempt`` counts from 1; ``error`` is the
    failure's ``LoopError`` kind and ``message`` its text; ``retry_in`` the seconds until the
    next attempt, or None when the call fails with this error."""

    kind: ClassVar[Literal["attempt_abandoned"]] = "attempt_abandoned"
    _checks = {
        "attempt": _INT,
        "error": _STR,
        "message": _STR,
        "retry_in": (
            lambda v: v is None or _is_int(v) or isinstance(v, float),
            "a number or None",
        ),
        "text": _STR,
        "events": (lambda v: _is_int(v) and v >= 0, "a count"),  # type: ignore[operator]
    }
    attempt: int
    error: str
    message: str = ""
    retry_in: float | None = None
    text: str = ""
    events: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.retry_in is not None:
            object.__setattr__(self, "retry_in", float(self.retry_in))


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
