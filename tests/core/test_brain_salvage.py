"""Coherence and salvage: the shape rules a provider enforces, checked as pure functions."""

from __future__ import annotations

import pytest
from brain_helpers import answer, ask, call
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl import Message, TextPart, ToolCall, ToolResult
from loopctl.core import coherence_problem, coherent_prefix_length

A, B = call("a"), call("b", "write")
U = Message.user("go")
NOTE = Message.user("note")


@pytest.mark.parametrize(
    ("pending", "keep"),
    [
        ([], 0),
        ([U], 0),
        ([U, Message.assistant("thinking")], 0),
        ([U, ask(A)], 0),
        ([U, ask(A), answer(A)], 3),
        ([U, ask(A), answer(A), NOTE], 3),
        ([U, ask(A), answer(A), ask(B)], 3),
        ([U, ask(A), answer(A), ask(B), answer(B)], 5),
        ([U, ask(A), answer(A), ask(B), answer(B), NOTE, ask(A)], 5),
    ],
    ids=[
        "empty",
        "input-only",
        "text-reply",
        "calls-in-flight",
        "one-exchange",
        "note-after-exchange",
        "second-exchange-in-flight",
        "two-exchanges",
        "tail-after-two",
    ],
)
def test_coherent_prefix_ends_after_the_last_complete_exchange(
    pending: list[Message], keep: int
) -> None:
    assert coherent_prefix_length(pending) == keep
    assert coherence_problem(pending[:keep]) is None


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([], None),
        ([U, Message.assistant("hi")], None),
        ([U, ask(A, B), answer(A, B), Message.assistant("ok")], None),
        ([U, ask(A, B), answer(B, A)], None),
        ([U, ask(A)], "have no results"),
        ([U, ask(A), U], "does not answer"),
        ([U, ask(A, B), answer(A)], "does not answer"),
        ([U, ask(A), answer(A), answer(A)], "for no tool call"),
        ([U, answer(A)], "for no tool call"),
        ([U, ask(A), Message(role="assistant", parts=answer(A).parts)], "does not answer"),
        ([Message(role="assistant", parts=answer(A).parts)], "for no tool call"),
        ([Message(role="user", parts=ask(A).parts)], "outside an assistant message"),
        ([ask(A, call("a"))], "duplicate or empty"),
        ([ask(call(""))], "duplicate or empty"),
        (
            [ask(A), Message(role="user", parts=(*answer(A).parts, TextPart(text="and")))],
            None,
        ),
    ],
    ids=[
        "empty",
        "plain",
        "exchange",
        "results-in-any-order",
        "open-call",
        "call-then-text",
        "missing-result",
        "result-twice",
        "result-without-call",
        "results-from-assistant",
        "results-outside-user",
        "calls-outside-assistant",
        "duplicate-ids",
        "empty-id",
        "results-with-text",
    ],
)
def test_coherence_problem(messages: list[Message], problem: str | None) -> None:
    found = coherence_problem(messages)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_open_tail_allows_only_the_last_calls_to_be_unanswered() -> None:
    assert coherence_problem([U, ask(A)], open_tail=True) is None
    assert coherence_problem([U, ask(A), U], open_tail=True) is not None
    wrong = Message.from_results([ToolResult(call_id="zz", name="read", content="")])
    assert coherence_problem([U, ask(A), wrong, ask(B)], open_tail=True) is not None


def _reference_problem(messages: list[Message], open_tail: bool) -> bool:
    """The rule as written in the module docstring, without fast paths: is there a problem?"""
    expected: list[str] | None = None
    for msg in messages:
        results = [p.call_id for p in msg.parts if isinstance(p, ToolResult)]
        calls = [p.id for p in msg.parts if isinstance(p, ToolCall)]
        if expected is not None:
            if msg.role != "user" or sorted(results) != sorted(expected):
                return True
            expected = None
        elif results:
            return True
        if results and msg.role != "user":
            return True
        if calls:
            if msg.role != "assistant" or len(set(calls)) != len(calls) or not all(calls):
                return True
            expected = calls
    return expected is not None and not open_tail


_IDS = st.sampled_from(["a", "b", ""])
_PART = st.one_of(
    st.builds(TextPart, text=st.sampled_from(["", "x"])),
    st.builds(ToolCall, id=_IDS, name=st.just("t")),
    st.builds(ToolResult, call_id=_IDS, name=st.just("t"), content=st.just("ok")),
)
_MESSAGE = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant"]),
    parts=st.lists(_PART, max_size=3).map(tuple),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_MESSAGE, max_size=8), st.booleans())
def test_coherence_problem_follows_the_rule(messages: list[Message], open_tail: bool) -> None:
    """The checker's fast paths (one call, one result) decide as the plain rule does."""
    found = coherence_problem(messages, open_tail=open_tail) is not None
    assert found == _reference_problem(messages, open_tail)
