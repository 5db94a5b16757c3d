"""Messages: constructors, read helpers, immutability and their encoding (a list's, here)."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from loopctl import Message, ProviderPart, TextPart, ThinkingPart, ToolCall, ToolResult

MESSAGES = TypeAdapter(list[Message])

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
    with pytest.raises(AttributeError):
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


# --- reasoning and provider parts ----------------------------------------------------------------

THINKING = ThinkingPart(provider="anthropic", text="Let me check.", signature="EqQBCgIYAhIM")
REDACTED = ThinkingPart(provider="anthropic", redacted="EmwKAhgBEgy3va3pzix/LafPsn4a")
ITEM = ThinkingPart(
    provider="openai-responses",
    text="Looking up the weather.",
    signature="gAAAAB",
    data={"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB"},
)
SERVER = ProviderPart(
    provider="anthropic",
    data={"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}},
)


def test_reasoning_and_provider_parts_round_trip_through_the_shared_adapter() -> None:
    messages = [
        Message.user("weather?"),
        Message(role="assistant", parts=(THINKING, REDACTED, SERVER, TextPart(text="ok"), CALL)),
        Message.from_results([RESULT]),
        Message(role="assistant", parts=(ITEM,)),
    ]
    assert MESSAGES.validate_json(MESSAGES.dump_json(messages)) == messages
    assert MESSAGES.validate_python(MESSAGES.dump_python(messages, mode="json")) == messages


def test_reasoning_and_provider_parts_are_data_the_read_helpers_keep_apart() -> None:
    m = Message(role="assistant", parts=(THINKING, TextPart(text="a"), SERVER, CALL, REDACTED))
    assert m.text == "a"  # reasoning is not what the model said
    assert m.tool_calls == [CALL]  # a server tool's call is never one for the registry
    assert m.thinking == [THINKING, REDACTED]
    assert ThinkingPart().text == "" and ThinkingPart().signature is None


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("thinking", {"provider": "anthropic", "text": "t", "signature": "s"}),
        ("provider", {"provider": "anthropic", "data": {"type": "web_search_tool_result"}}),
    ],
)
def test_new_parts_are_discriminated_on_kind(kind: str, payload: dict[str, object]) -> None:
    (message,) = MESSAGES.validate_python(
        [{"role": "assistant", "parts": [{"kind": kind, **payload}]}]
    )
    assert type(message.parts[0]) is {"thinking": ThinkingPart, "provider": ProviderPart}[kind]


@pytest.mark.parametrize(
    "part",
    [
        {"kind": "provider", "provider": "anthropic"},
        {"kind": "provider", "data": {}},
        {"kind": "provider", "provider": "x", "data": []},
        {"kind": "thinking", "text": "t", "mood": "pensive"},
        {"kind": "thinking", "signature": 7},
    ],
    ids=["no-data", "no-provider", "data-not-object", "extra-field", "signature-not-text"],
)
def test_malformed_new_parts_are_rejected(part: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        MESSAGES.validate_python([{"role": "assistant", "parts": [part]}])


def test_new_parts_are_frozen() -> None:
    with pytest.raises(AttributeError):
        THINKING.text = "changed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        SERVER.provider = "openai"  # type: ignore[misc]
