"""``loopctl.events``: the stream events are small frozen records whose constructors check each
field (a ``TypeError`` naming it)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from loopctl.api import (
    AttemptAbandoned,
    PartEvent,
    StopEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UsageEvent,
)
from loopctl.core import ProviderPart, TextPart, ThinkingPart

THINKING = ThinkingPart(provider="p", text="hmm", signature="s")

# (the event class, valid fields, its kind)
VALID: list[tuple[type[Any], dict[str, Any], str]] = [
    (TextDelta, {"text": "hi"}, "text_delta"),
    (ToolCallStart, {"index": 0, "id": "c1", "name": "add"}, "tool_call_start"),
    (ToolCallDelta, {"index": 2, "arguments": '{"a":'}, "tool_call_delta"),
    (ToolCallEnd, {"index": 1}, "tool_call_end"),
    (UsageEvent, {"usage": Usage(input_tokens=3)}, "usage"),
    (StopEvent, {"reason": "end_turn"}, "stop"),
    (ThinkingDelta, {"text": "so"}, "thinking_delta"),
    (PartEvent, {"part": THINKING}, "part"),
    (PartEvent, {"part": ProviderPart(provider="p", data={"k": 1})}, "part"),
    (
        AttemptAbandoned,
        {"attempt": 1, "error": "network", "message": "reset", "retry_in": 0.5},
        "attempt_abandoned",
    ),
    (
        AttemptAbandoned,
        {"attempt": 2, "error": "provider", "text": "Let me check", "events": 6},
        "attempt_abandoned",
    ),
]

# (the event class, fields with one of the wrong type, the field named in the error)
WRONG: list[tuple[type[Any], dict[str, Any], str]] = [
    (TextDelta, {"text": None}, "text"),
    (TextDelta, {"text": 3}, "text"),
    (ToolCallStart, {"index": "0", "id": "c1", "name": "add"}, "index"),
    (ToolCallStart, {"index": True, "id": "c1", "name": "add"}, "index"),
    (ToolCallStart, {"index": 0, "id": None, "name": "add"}, "id"),
    (ToolCallStart, {"index": 0, "id": "c1", "name": 5}, "name"),
    (ToolCallDelta, {"index": 0, "arguments": {"a": 1}}, "arguments"),
    (ToolCallEnd, {"index": 1.0}, "index"),
    (UsageEvent, {"usage": {"input_tokens": 3}}, "usage"),
    (StopEvent, {"reason": None}, "reason"),
    (ThinkingDelta, {"text": b"x"}, "text"),
    (PartEvent, {"part": TextPart(text="not a part event's")}, "part"),
    (AttemptAbandoned, {"attempt": "1", "error": "network"}, "attempt"),
    (AttemptAbandoned, {"attempt": 1, "error": "network", "retry_in": "soon"}, "retry_in"),
    (AttemptAbandoned, {"attempt": 1, "error": "network", "text": None}, "text"),
    (AttemptAbandoned, {"attempt": 1, "error": "network", "events": -1}, "events"),
    (AttemptAbandoned, {"attempt": 1, "error": "network", "events": True}, "events"),
]


@pytest.mark.parametrize(("cls", "fields", "kind"), VALID)
def test_an_event_holds_its_fields_and_kind(
    cls: type[Any], fields: dict[str, Any], kind: str
) -> None:
    event = cls(**fields)
    assert event.kind == kind == cls.kind
    for name, value in fields.items():
        assert getattr(event, name) == value
    assert event == cls(**fields)
    if not any(isinstance(v, ProviderPart) for v in fields.values()):  # a dict: unhashable
        assert hash(event) == hash(cls(**fields))
    assert repr(event).startswith(f"{cls.__name__}(")
    assert pickle.loads(pickle.dumps(event)) == event
    assert copy.copy(event) == event and copy.deepcopy(event) == event


@pytest.mark.parametrize(("cls", "fields", "field"), WRONG)
def test_a_field_of_the_wrong_type_is_a_type_error_naming_it(
    cls: type[Any], fields: dict[str, Any], field: str
) -> None:
    with pytest.raises(TypeError, match=rf"{cls.__name__}\.{field} must be"):
        cls(**fields)


@pytest.mark.parametrize(("cls", "fields", "kind"), VALID[:3])
def test_an_event_is_frozen(cls: type[Any], fields: dict[str, Any], kind: str) -> None:
    event = cls(**fields)
    name = next(iter(fields))
    with pytest.raises(AttributeError):
        setattr(event, name, fields[name])
    with pytest.raises(AttributeError):
        delattr(event, name)
    with pytest.raises(AttributeError):
        event.other = 1


def test_events_of_different_kinds_or_fields_differ() -> None:
    assert TextDelta(text="a") != ThinkingDelta(text="a")
    assert TextDelta(text="a") != TextDelta(text="b")
    assert ToolCallEnd(index=0) != ToolCallEnd(index=1)
    assert TextDelta(text="a") != "a"


def test_attempt_abandoned_defaults() -> None:
    event = AttemptAbandoned(attempt=2, error="timeout")
    assert (event.message, event.retry_in, event.text, event.events) == ("", None, "", 0)
    assert AttemptAbandoned(attempt=1, error="x", retry_in=2).retry_in == 2.0
