"""Messages: constructors, read helpers, immutability and the one shared encoding (``MESSAGES``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from loopctl import MESSAGES, Message, TextPart, ToolCall, ToolResult

CALL = ToolCall(id="c1", name="read", arguments={"path": "/a", "n": 2})
RESULT = ToolResult(call_id="c1", name="read", content="text", is_error=True)


@pytest.mark.parametrize(
    ("message", "role", "parts"),
    [
        (Message.system("be brief"), "system", (TextPart(text="be brief"),)),
        (Message.user("hi"), "user", (TextPart(text="hi"),)),
        (Message.assistant("hello"), "assistant", (TextPart(text="hello"),)),
        (Message.assistant(), "assistant", ()),
        (Message.assistant(tool_calls=[CALL]), "assistant", (CALL,)),
        (
            Message.assistant("let me", tool_calls=(CALL,)),
            "assistant",
            (TextPart(text="let me"), CALL),
        ),
        (Message.from_results([RESULT]), "user", (RESULT,)),
    ],
    ids=[
        "system",
        "user",
        "assistant",
        "assistant-empty",
        "calls-only",
        "text-and-calls",
        "results",
    ],
)
def test_constructors_build_role_and_parts(
    message: Message, role: str, parts: tuple[object, ...]
) -> None:
    assert message.role == role
    assert message.parts == parts


def test_read_helpers_pick_their_parts() -> None:
    other = ToolCall(id="c2", name="write")
    m = Message(role="assistant", parts=(TextPart(text="a"), CALL, TextPart(text="b"), other))
    assert m.text == "ab"  # streamed text is one piece split arbitrarily: no separator
    assert m.tool_calls == [CALL, other]
    assert m.tool_results == []
    r = Message.from_results([RESULT])
    assert r.tool_results == [RESULT]
    assert r.text == ""


def test_tool_call_arguments_default_to_empty() -> None:
    assert ToolCall(id="x", name="now").arguments == {}
    assert ToolResult(call_id="x", name="now", content="").is_error is False


@pytest.mark.parametrize(
    ("target", "field", "value"),
    [
        (Message.user("hi"), "role", "assistant"),
        (TextPart(text="a"), "text", "b"),
        (CALL, "name", "write"),
        (RESULT, "content", "changed"),
    ],
    ids=["message", "text", "call", "result"],
)
def test_messages_are_frozen(target: object, field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        setattr(target, field, value)


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [Message.system("s"), Message.user("u")],
        [Message.assistant("t", tool_calls=[CALL]), Message.from_results([RESULT])],
        [Message(role="user", parts=(TextPart(text='ü ✓ \n"q"'),))],
    ],
    ids=["empty", "plain", "exchange", "unicode"],
)
def test_messages_round_trip_through_the_shared_adapter(messages: list[Message]) -> None:
    assert MESSAGES.validate_json(MESSAGES.dump_json(messages)) == messages
    assert MESSAGES.validate_python(MESSAGES.dump_python(messages, mode="json")) == messages


def test_parts_are_discriminated_on_kind() -> None:
    data = [
        {
            "role": "user",
            "parts": [{"kind": "tool_result", "call_id": "c", "name": "n", "content": "x"}],
        }
    ]
    (message,) = MESSAGES.validate_python(data)
    assert isinstance(message.parts[0], ToolResult)


@pytest.mark.parametrize(
    "data",
    [
        [{"role": "robot", "parts": []}],
        [{"role": "user", "parts": [{"kind": "image", "url": "x"}]}],
        [{"role": "user", "parts": [{"kind": "text"}]}],
        [{"role": "user", "parts": [], "extra": 1}],
        [{"role": "user", "parts": [{"kind": "text", "text": "a", "bold": True}]}],
    ],
    ids=["bad-role", "unknown-kind", "missing-field", "extra-message-field", "extra-part-field"],
)
def test_malformed_messages_are_rejected(data: object) -> None:
    with pytest.raises(ValidationError):
        MESSAGES.validate_python(data)
