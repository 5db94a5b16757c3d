"""``Message``'s constructors build what the validator builds from the same fields, and refuse
what it refuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from loopctl import LoopMachine, MachinePolicy, Message, ProtocolError, ToolCall, ToolResult
from loopctl.core import TextPart

CALL = ToolCall(id="c1", name="add", arguments={"a": 1, "b": [2, {"c": None}]})
CALL2 = ToolCall(id="c2", name="noargs")
RESULT = ToolResult(call_id="c1", name="add", content="3")
ERROR = ToolResult(call_id="c2", name="noargs", content="boom", is_error=True)

# (built by the constructor, the same message validated from its fields)
CASES: list[tuple[Callable[[], Message], dict[str, Any]]] = [
    (lambda: Message.user("hi"), {"role": "user", "parts": (TextPart(text="hi"),)}),
    (lambda: Message.user(""), {"role": "user", "parts": (TextPart(text=""),)}),
    (lambda: Message.system("be brief"), {"role": "system", "parts": (TextPart(text="be brief"),)}),
    (lambda: Message.assistant(), {"role": "assistant", "parts": ()}),
    (lambda: Message.assistant("done"), {"role": "assistant", "parts": (TextPart(text="done"),)}),
    (lambda: Message.assistant(tool_calls=[CALL]), {"role": "assistant", "parts": (CALL,)}),
    (
        lambda: Message.assistant("let me", (CALL, CALL2)),
        {"role": "assistant", "parts": (TextPart(text="let me"), CALL, CALL2)},
    ),
    (lambda: Message.from_results([RESULT, ERROR]), {"role": "user", "parts": (RESULT, ERROR)}),
    (lambda: Message.from_results(()), {"role": "user", "parts": ()}),
]


@pytest.mark.parametrize(("make", "fields"), CASES)
def test_a_constructor_builds_what_the_validator_builds(
    make: Callable[[], Message], fields: dict[str, Any]
) -> None:
    message = make()
    reference = Message.model_validate(fields)
    assert message == reference
    assert message.model_dump_json() == reference.model_dump_json()
    assert type(message.parts) is tuple


class Shout(str):
    pass


class NamedCall(ToolCall):
    pass


def test_constructors_check_nothing_and_the_brain_refuses_what_is_not_of_its_type() -> None:
    # Building a message checks nothing (msgspec); the brain checks what it is fed, so it never
    # holds what it could not read back, and reading checks every type.
    bad = [
        Message.user(5),  # type: ignore[arg-type]
        Message(role="user", parts=({"kind": "text", "text": "x"},)),  # type: ignore[arg-type]
        Message(role="tool", parts=()),  # type: ignore[arg-type]
        Message.from_results([ToolResult(call_id="x", name="t", content=3)]),  # type: ignore[arg-type]
    ]
    for message in bad:
        machine = LoopMachine()
        machine.accept_input("go")
        before = machine.model_dump_json()
        with pytest.raises(ProtocolError):
            machine.inject(message)
        assert machine.model_dump_json() == before
        if type(message.parts[0]) is not dict if message.parts else True:
            with pytest.raises(ValidationError):
                Message.model_validate(message.model_dump())
    machine = LoopMachine()
    machine.accept_input("go")
    machine.next_step(MachinePolicy(tools=("t",)))
    with pytest.raises(ProtocolError, match="arguments has a key that is not a string"):
        machine.model_response(
            Message.assistant(tool_calls=[ToolCall(id="1", name="t", arguments={1: 2})]), 1
        )  # type: ignore[dict-item]
    # a str subclass and a ToolCall subclass are kept
    shout = Message.user(Shout("HI"))
    assert shout == Message.model_validate(
        {"role": "user", "parts": [{"kind": "text", "text": "HI"}]}
    )
    call = NamedCall(id="n", name="add")
    assert Message.assistant(tool_calls=[call]).tool_calls == [call]


class Tagged(Message):
    """A user's subclass of Message: its constructors must validate into the subclass."""


def test_a_subclass_constructs_itself() -> None:
    for message in (
        Tagged.user("x"),
        Tagged.system("x"),
        Tagged.assistant("x", [CALL]),
        Tagged.from_results([RESULT]),
    ):
        assert type(message) is Tagged


def test_the_properties_pick_parts_by_kind() -> None:
    message = Message.assistant("a", [CALL, CALL2])
    assert message.text == "a"
    assert message.tool_calls == [CALL, CALL2]
    assert message.tool_results == []
    results = Message.from_results([RESULT, ERROR])
    assert results.tool_results == [RESULT, ERROR]
    assert results.text == "" and results.tool_calls == [] and results.thinking == []


@pytest.mark.parametrize(
    ("content", "is_error", "fields"),
    [
        ("3", False, {"call_id": "c1", "name": "add", "content": "3"}),
        ("", False, {"call_id": "c1", "name": "add", "content": ""}),
        ("boom", True, {"call_id": "c1", "name": "add", "content": "boom", "is_error": True}),
    ],
)
def test_a_result_answering_a_call_is_what_the_validator_builds(
    content: str, is_error: bool, fields: dict[str, Any]
) -> None:
    result = ToolResult.answering(CALL, content, is_error=is_error)
    reference = ToolResult.model_validate(fields)
    assert result == reference
