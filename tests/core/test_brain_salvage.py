"""Coherence and salvage: the shape rules a provider enforces, checked as pure functions."""

from __future__ import annotations

import pytest
from brain_helpers import answer, ask, call

from loopctl import Message, TextPart, ToolResult, coherence_problem, coherent_prefix_length

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
