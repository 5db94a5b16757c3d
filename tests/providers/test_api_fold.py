"""``fold_events`` with reasoning and provider parts, and its inverses (``reply_events``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.api import (
    ModelRequest,
    PartEvent,
    StopEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    fold_events,
    reply_events,
)
from loopctl.core import Message, ProviderPart, TextPart, ThinkingPart, ToolCall
from loopctl.testing import reply_events as scripted_events

THINK = ThinkingPart(provider="anthropic", text="hmm", signature="s")
BLOCK = ProviderPart(provider="anthropic", data={"type": "web_search_tool_result"})


def call(i: int) -> list[Any]:
    return [
        ToolCallStart(index=i, id=f"c{i}", name="f"),
        ToolCallDelta(index=i, arguments=json.dumps({"n": i})),
        ToolCallEnd(index=i),
    ]


def c(i: int) -> ToolCall:
    return ToolCall(id=f"c{i}", name="f", arguments={"n": i})


@pytest.mark.parametrize(
    "events, parts",
    [
        # no reasoning: one text part, then the calls (text after a call joins it, as before)
        ([TextDelta(text="a"), *call(0), TextDelta(text="b")], (TextPart(text="ab"), c(0))),
        # a part closes the text and calls before it
        (
            [ThinkingDelta(text="hm"), PartEvent(part=THINK), TextDelta(text="a"), *call(0)],
            (THINK, TextPart(text="a"), c(0)),
        ),
        (
            [TextDelta(text="a"), PartEvent(part=BLOCK), TextDelta(text="b"), *call(0)],
            (TextPart(text="a"), BLOCK, TextPart(text="b"), c(0)),
        ),
        ([*call(0), PartEvent(part=THINK), *call(1)], (c(0), THINK, c(1))),
        ([PartEvent(part=THINK), PartEvent(part=BLOCK)], (THINK, BLOCK)),
        ([ThinkingDelta(text="only watchers see this")], ()),
    ],
    ids=[
        "plain",
        "thinking-first",
        "block-between-texts",
        "thinking-between-calls",
        "parts",
        "delta",
    ],
)
def test_the_fold_keeps_the_providers_order(events: list[Any], parts: tuple[Any, ...]) -> None:
    assert fold_events(events).message.parts == parts


def test_arguments_of_a_call_after_a_part_still_reach_it() -> None:
    events = [ToolCallStart(index=0, id="c0", name="f"), PartEvent(part=BLOCK)]
    events += [ToolCallDelta(index=0, arguments='{"n": 0}'), ToolCallEnd(index=0)]
    assert fold_events(events).message.parts == (c(0), BLOCK)


_TEXT = st.text(min_size=1, max_size=6)
_PART = st.sampled_from([THINK, BLOCK, ThinkingPart(provider="ollama", text="t")])


@st.composite
def folded_messages(draw: st.DrawFn) -> Message:
    """Messages as the fold makes them: segments of (text, then calls) between parts."""
    parts: list[Any] = []
    n = 0
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            parts.append(TextPart(text=draw(_TEXT)))
        for _ in range(draw(st.integers(0, 2))):
            keys = draw(st.lists(st.sampled_from("zyxab"), unique=True, max_size=3))
            parts.append(ToolCall(id=f"c{n}", name="f", arguments={k: draw(_TEXT) for k in keys}))
            n += 1
        parts.append(draw(_PART))
    if draw(st.booleans()):
        parts.append(TextPart(text=draw(_TEXT)))
    return Message(role="assistant", parts=tuple(parts))


@settings(max_examples=200, deadline=None)
@given(folded_messages())
def test_reply_events_fold_back_to_the_message(message: Message) -> None:
    folded = fold_events(reply_events(message)).message
    assert folded == message
    # byte for byte: argument keys keep their order, so a replayed reply keeps its digest
    assert folded.model_dump_json() == message.model_dump_json()
    assert fold_events(scripted_events(message, chunk=3)).message == message


def test_reply_events_carry_usage_and_the_stop_reason() -> None:
    usage = Usage(input_tokens=3, output_tokens=2, reasoning_tokens=1)
    events = reply_events(Message.assistant("hi"), usage, "max_tokens")
    assert events[-1] == StopEvent(reason="max_tokens")
    folded = fold_events(events)
    assert (folded.usage, folded.stop_reason) == (usage, "max_tokens")
    assert reply_events(Message.assistant(tool_calls=[c(0)]))[-1] == StopEvent(reason="tool_use")


def test_usage_adds_reasoning_tokens_and_requests_carry_server_tools() -> None:
    total = Usage(output_tokens=5, reasoning_tokens=2) + Usage(output_tokens=4, reasoning_tokens=3)
    assert total.reasoning_tokens == 5
    request = ModelRequest(messages=(), server_tools=({"type": "web_search"},))
    assert request.server_tools == ({"type": "web_search"},)
    assert ModelRequest(messages=()).server_tools == ()
