"""Every feed type-checks its arguments, and a feed in the wrong state changes nothing.

Two tables: each feed, in a state where it is valid, given arguments of the wrong type (None, a
string, a list of numbers, a float, a bool, an object, a mapping, bytes, a message where a list
is due, a negative count), must raise ``ProtocolError`` and leave the machine exactly as it was
(its JSON and its equality); and each feed in each state where the transition table has no
entry for it must do the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from loopctl import LoopError, LoopMachine, MachinePolicy, Message, ProtocolError, ToolCall
from loopctl.core import FEED_TYPES, FEEDS, TRANSITIONS
from loopctl.core.machine import STATES

POLICY = MachinePolicy(tools=("t",))


def started() -> LoopMachine:
    machine = LoopMachine()
    machine.accept_input("hi")
    return machine


def awaiting_model() -> LoopMachine:
    machine = started()
    machine.next_step(POLICY)
    return machine


def awaiting_tools() -> LoopMachine:
    machine = awaiting_model()
    call = ToolCall(id="c1", name="t", arguments={"a": 1})
    machine.model_response(Message.assistant(tool_calls=[call]), 5)
    machine.next_step(POLICY)
    return machine


def awaiting_compaction() -> LoopMachine:
    machine = started()
    machine.next_step(MachinePolicy(tools=("t",), compact_now=True))
    return machine


def terminal() -> LoopMachine:
    machine = awaiting_model()
    machine.model_response(Message.assistant("done"), 5)
    return machine


MAKERS: dict[str, Callable[[], LoopMachine]] = {
    "start": LoopMachine,
    "awaiting_model": awaiting_model,
    "awaiting_tools": awaiting_tools,
    "awaiting_compaction": awaiting_compaction,
    "terminal": terminal,
}

WRONG: list[Any] = [
    None,
    "abc",
    [1, 2],
    1.5,
    True,
    object(),
    {"role": "user"},
    b"bytes",
    -1,
]
NOT_A_LIST = [*WRONG, Message.user("one message, not a list"), [Message.user("x"), 3]]

#: (feed, maker, how the wrong value is placed among valid arguments, the wrong values)
CASES: list[tuple[str, Callable[[], LoopMachine], Callable[[Any], tuple[Any, ...]], list[Any]]] = [
    ("accept_input", LoopMachine, lambda v: (v,), [v for v in WRONG if v != "abc"]),
    ("model_response", awaiting_model, lambda v: (v, 5), WRONG),
    ("model_response", awaiting_model, lambda v: (Message.assistant("ok"), v), WRONG),
    ("tool_results", awaiting_tools, lambda v: (v,), WRONG),
    ("compaction_result", awaiting_compaction, lambda v: (v, 10, 5), NOT_A_LIST),
    ("compaction_result", awaiting_compaction, lambda v: ([], v, 5), WRONG),
    ("compaction_result", awaiting_compaction, lambda v: ([], 10, v), WRONG),
    ("compaction_noop", awaiting_compaction, lambda v: (v, 5), WRONG),
    ("compaction_noop", awaiting_compaction, lambda v: (10, v), WRONG),
    ("set_context_tokens", started, lambda v: (v,), WRONG),
    ("inject", started, lambda v: (v,), WRONG),
    ("fail", started, lambda v: (v,), WRONG),
]

TYPED = [
    pytest.param(feed, make, place, value, id=f"{feed}-{i}-{type(value).__name__}")
    for feed, make, place, values in CASES
    for i, value in enumerate(values)
]


def assert_refused_and_unchanged(machine: LoopMachine, call: Callable[[], None]) -> None:
    before_json = machine.model_dump_json()
    before = LoopMachine.model_validate_json(before_json)
    with pytest.raises(ProtocolError):
        call()
    assert machine.model_dump_json() == before_json
    assert machine == before


@pytest.mark.parametrize(("feed", "make", "place", "value"), TYPED)
def test_a_feed_given_the_wrong_type_refuses_it_and_changes_nothing(
    feed: str, make: Callable[[], LoopMachine], place: Callable[[Any], tuple[Any, ...]], value: Any
) -> None:
    machine = make()
    assert_refused_and_unchanged(machine, lambda: getattr(machine, feed)(*place(value)))


def test_compaction_result_refuses_the_cases_the_issue_names() -> None:
    for value in ([1, 2], None, "abc"):
        machine = awaiting_compaction()
        feed = machine.compaction_result
        assert_refused_and_unchanged(machine, lambda f=feed, v=value: f(v, 1, 1))


VALID_ARGS: dict[str, tuple[Any, ...]] = {
    "accept_input": ("hi",),
    "model_response": (Message.assistant("ok"), 5),
    "tool_results": (Message.from_results([]),),
    "compaction_result": ([], 10, 5),
    "compaction_noop": (10, 5),
    "set_context_tokens": (5,),
    "inject": (Message.user("note"),),
    "cancel": (),
    "fail": (LoopError(kind="internal", message="x"),),
    "commit_pending": (),
    "discard_pending": (),
}

WRONG_STATE = [
    pytest.param(state, feed, id=f"{state}-{feed}")
    for state in STATES
    for feed in FEEDS
    if (state, FEED_TYPES[feed]) not in TRANSITIONS
]


@pytest.mark.parametrize(("state", "feed"), WRONG_STATE)
def test_a_feed_in_the_wrong_state_refuses_and_changes_nothing(state: str, feed: str) -> None:
    machine = MAKERS[state]()
    assert machine.state.kind == state
    assert_refused_and_unchanged(machine, lambda: getattr(machine, feed)(*VALID_ARGS[feed]))


def test_the_tables_cover_every_feed() -> None:
    assert set(VALID_ARGS) == set(FEEDS)
    assert len(WRONG_STATE) == len(STATES) * len(FEEDS) - len(TRANSITIONS)
