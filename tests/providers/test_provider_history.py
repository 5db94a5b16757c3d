"""History conversion: to each wire format and back gives the same messages."""

from __future__ import annotations

from typing import Any

import pytest
from wire_inverse import anthropic_from_wire, ollama_from_wire, openai_from_wire

from loopctl.core import Message, ToolCall, ToolResult
from loopctl.providers import _anthropic, _ollama, _openai

CALL_A = ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"})
CALL_B = ToolCall(id="call_b", name="get_time", arguments={"tz": "Asia/Tokyo", "fmt": {"h": 24}})
CALL_C = ToolCall(id="call_c", name="read_file", arguments={})

HISTORY = [
    Message.user("Weather in Paris, and the time in Tokyo?"),
    Message.assistant("Let me look.", [CALL_A, CALL_B]),
    Message.from_results(
        [
            ToolResult(call_id="call_a", name="get_weather", content="18 C and sunny"),
            ToolResult(call_id="call_b", name="get_time", content="21:04"),
        ]
    ),
    Message.assistant("", [CALL_C]),
    Message.from_results([ToolResult(call_id="call_c", name="read_file", content="")]),
    Message.assistant("Paris: 18 C. Tokyo: 21:04. The file is empty."),
    Message.user("Thanks! Unicode too: \u00e9t\u00e9 \u2603"),
]


def openai_round_trip(messages: list[Message], system: str | None) -> Any:
    return openai_from_wire(_openai.messages_to_wire(messages, system))


def anthropic_round_trip(messages: list[Message], system: str | None) -> Any:
    return anthropic_from_wire(*_anthropic.messages_to_wire(messages, system))


def ollama_round_trip(messages: list[Message], system: str | None) -> Any:
    return ollama_from_wire(_ollama.messages_to_wire(messages, system))


ROUND_TRIPS = [openai_round_trip, anthropic_round_trip, ollama_round_trip]


@pytest.mark.parametrize("round_trip", ROUND_TRIPS)
@pytest.mark.parametrize("system", [None, "You are terse."])
def test_multi_turn_history_round_trips(round_trip: Any, system: str | None) -> None:
    assert round_trip(HISTORY, system) == (system, HISTORY)


def test_anthropic_carries_is_error() -> None:
    history = [
        Message.user("go"),
        Message.assistant("", [CALL_A]),
        Message.from_results(
            [ToolResult(call_id="call_a", name="get_weather", content="boom", is_error=True)]
        ),
    ]
    system, wire = _anthropic.messages_to_wire(history)
    assert wire[2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "call_a",
        "content": "boom",
        "is_error": True,
    }
    assert anthropic_from_wire(system, wire) == (None, history)


def test_openai_wire_shape() -> None:
    wire = _openai.messages_to_wire(HISTORY[:3], "sys")
    assert wire == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Weather in Paris, and the time in Tokyo?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {
                        "name": "get_time",
                        "arguments": '{"tz":"Asia/Tokyo","fmt":{"h":24}}',
                    },
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "18 C and sunny"},
        {"role": "tool", "tool_call_id": "call_b", "content": "21:04"},
    ]


def test_anthropic_merges_consecutive_user_messages_results_first() -> None:
    note = Message.user("Note: you are repeating yourself.")
    results = Message.from_results(
        [ToolResult(call_id="call_a", name="get_weather", content="18 C")]
    )
    history = [Message.user("go"), Message.assistant("", [CALL_A]), note, results]
    system, wire = _anthropic.messages_to_wire(history, "sys")
    assert system == "sys"
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_a", "content": "18 C"},
        {"type": "text", "text": "Note: you are repeating yourself."},
    ]


def test_anthropic_puts_system_messages_top_level() -> None:
    history = [Message.system("Summary of earlier turns."), Message.user("go on")]
    system, wire = _anthropic.messages_to_wire(history, "Be terse.")
    assert system == "Be terse.\n\nSummary of earlier turns."
    assert wire == [{"role": "user", "content": "go on"}]


def test_openai_text_riding_with_results_follows_the_tool_messages() -> None:
    mixed = Message(
        role="user",
        parts=(
            ToolResult(call_id="call_a", name="get_weather", content="18 C"),
            *Message.user("and hurry").parts,
        ),
    )
    wire = _openai.messages_to_wire([Message.assistant("", [CALL_A]), mixed])
    assert [m["role"] for m in wire] == ["assistant", "tool", "user"]
    assert wire[2]["content"] == "and hurry"


def test_ollama_wire_shape() -> None:
    wire = _ollama.messages_to_wire(HISTORY[1:3])
    assert wire[0]["tool_calls"][0] == {
        "id": "call_a",
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
    }
    assert wire[1] == {
        "role": "tool",
        "content": "18 C and sunny",
        "tool_name": "get_weather",
        "tool_call_id": "call_a",
    }


def test_an_empty_assistant_reply() -> None:
    history = [Message.user("hi"), Message.assistant(""), Message.user("hello?")]
    _, wire = _anthropic.messages_to_wire(history)
    assert wire == [{"role": "user", "content": [
        {"type": "text", "text": "hi"}, {"type": "text", "text": "hello?"}]}]  # fmt: skip
    assert _openai.messages_to_wire(history)[1] == {"role": "assistant", "content": ""}
    assert openai_round_trip(history, None) == (None, history)
    assert ollama_round_trip(history, None) == (None, history)
