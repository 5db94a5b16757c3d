"""The parts ``BrainMachine`` is built from, on hand-built machines: the misuse tables
(``loopctl_sim.props.brain_misuse``) and the reference model (``brain_reference``).

The state machine uses them on whatever states hypothesis reaches; here every state is built on
purpose, so that each table entry and each reference rule is seen to work at least once.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from loopctl import (
    CallLLM,
    Compact,
    CompactReason,
    Completed,
    LoopError,
    LoopMachine,
    MachinePolicy,
    Message,
    ToolCall,
    ToolResult,
)
from loopctl.core import FEED_TYPES, FEEDS, TRANSITIONS
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.brain_misuse import PLAUSIBLE_FEEDS, bad_inputs, wrong_feeds
from loopctl_sim.props.brain_reference import BrainReference
from loopctl_sim.props.invariants.decisions import reference_call_key

POLICY = MachinePolicy(tools=("read",), context_window=1000, max_turns=5)


def _exchange(m: LoopMachine, call_id: str = "c1") -> ToolCall:
    """From ``Start`` (run under way): one turn whose reply calls ``read``, up to awaiting tools."""
    assert isinstance(m.next_step(POLICY), CallLLM)
    call = ToolCall(id=call_id, name="read")
    m.model_response(Message.assistant(tool_calls=[call]), 10)
    m.next_step(POLICY)
    return call


def _not_started() -> LoopMachine:
    return LoopMachine()


def _started() -> LoopMachine:
    m = LoopMachine()
    m.accept_input("go")
    return m


def _awaiting_model() -> LoopMachine:
    m = _started()
    m.next_step(POLICY)
    return m


def _awaiting_tools() -> LoopMachine:
    m = _started()
    _exchange(m)
    return m


def _awaiting_compaction() -> LoopMachine:
    m = _started()
    m.set_context_tokens(990)
    assert isinstance(m.next_step(POLICY), Compact)
    return m


def _completed() -> LoopMachine:
    m = _awaiting_model()
    m.model_response(Message.assistant("done"), 10)
    return m


def _failed() -> LoopMachine:
    m = _started()
    m.fail(LoopError(kind="network", message="reset"))
    return m


def _finalized() -> LoopMachine:
    m = _completed()
    m.commit_pending()
    return m


STATES: dict[str, Callable[[], LoopMachine]] = {
    "not started": _not_started,
    "started": _started,
    "awaiting the model": _awaiting_model,
    "awaiting tools": _awaiting_tools,
    "awaiting a compaction": _awaiting_compaction,
    "completed": _completed,
    "failed": _failed,
    "finalized": _finalized,
}


# --- the misuse tables ------------------------------------------------------------------------


def test_every_feed_has_plausible_arguments() -> None:
    assert set(PLAUSIBLE_FEEDS) == set(FEEDS)


@pytest.mark.parametrize("state", STATES)
def test_every_wrong_feed_is_refused_and_changes_nothing(state: str) -> None:
    kind = STATES[state]().state.kind
    wrong = wrong_feeds(kind)
    assert wrong == [f for f in FEEDS if (kind, FEED_TYPES[f]) not in TRANSITIONS]
    for feed in wrong:
        assert inv.check_refused(STATES[state](), PLAUSIBLE_FEEDS[feed]) == [], feed


@pytest.mark.parametrize("state", STATES)
def test_every_bad_input_is_refused_and_changes_nothing(state: str) -> None:
    cases = bad_inputs(STATES[state](), POLICY)
    assert cases, "every state has some misuse to refuse"
    for what, call in cases:
        assert inv.check_refused(STATES[state](), call) == [], what


def test_bad_inputs_follow_the_state() -> None:
    names = {
        state: {what for what, _ in bad_inputs(build(), POLICY)} for state, build in STATES.items()
    }
    assert "next_step before input" in names["not started"]
    assert "a second input" in names["started"]
    assert "duplicate call ids" in names["awaiting the model"]
    assert "one result short" in names["awaiting tools"]
    assert "a compaction with an open call" in names["awaiting a compaction"]
    assert "commit a failed run" in names["failed"]
    assert "discard a completed run" in names["completed"]
    assert {"commit twice", "discard twice"} <= names["finalized"]
    assert "next_run too early" not in names["finalized"]


# --- the reference model ----------------------------------------------------------------------


def test_next_run_resets_the_run_but_keeps_tokens_and_tools() -> None:
    ref = BrainReference(
        turns=3,
        tokens=70,
        outcome=Completed(final_text="done"),
        loop_keys=["read|{}"],
        loop_unjudged=1,
        loop_warned=True,
        noop_floor=70,
        advertised=("read",),
    )
    ref.next_run()
    assert ref == BrainReference(tokens=70, advertised=("read",))


@pytest.mark.parametrize(
    ("reason", "floor"),
    [
        (CompactReason.THRESHOLD_EXCEEDED, 800),
        (CompactReason.MANUAL, None),
        (CompactReason.EMERGENCY, None),
    ],
)
def test_only_a_threshold_noop_sets_the_floor(reason: CompactReason, floor: int | None) -> None:
    ref = BrainReference()
    ref.compaction_noop(reason, 800)
    assert (ref.tokens, ref.noop_floor) == (800, floor)
    ref.compacted(100)
    assert (ref.tokens, ref.noop_floor) == (100, None)


def test_counts_follow_the_feeds() -> None:
    ref = BrainReference()
    ref.replied(40)
    ref.replied(60)
    ref.counted(5)
    assert (ref.turns, ref.tokens) == (2, 5)


def test_asked_records_advertised_tools_and_judges_decisions() -> None:
    ref = BrainReference()
    m = _started()
    before = m.snapshot()
    step = m.next_step(POLICY)
    assert ref.asked(before, m, step, POLICY) == ([], None)
    assert ref.advertised == POLICY.tools


def test_asked_reports_a_wrong_decision() -> None:
    """The reference decision order: at 990 of 1000 the brain must compact, not call the model."""
    ref = BrainReference()
    m = _started()
    m.set_context_tokens(990)
    before = m.snapshot()
    problems, label = ref.asked(before, m, CallLLM(turn=1), POLICY)
    assert [inv.problem_code(p) for p in problems] == [inv.InvariantCode.DECISION] and label is None


@pytest.mark.parametrize(
    ("action", "label", "warned"),
    [("warn", "loop verdict repeat (warn)", True), ("fail", "loop verdict repeat (fail)", False)],
)
def test_asked_sees_a_loop_and_marks_a_warning(action: str, label: str, warned: bool) -> None:
    policy = POLICY.model_copy(update={"loop_action": action, "loop_repeat_limit": 2})
    ref = BrainReference()
    m = _started()
    for i in range(2):
        before = m.snapshot()
        step = m.next_step(policy)
        ref.asked(before, m, step, policy)
        call = ToolCall(id=f"c{i}", name="read")
        m.model_response(Message.assistant(tool_calls=[call]), 10)
        m.next_step(policy)
        m.tool_results(Message.from_results([ToolResult(call_id=call.id, name="read", content="")]))
        ref.record_calls([call])
    assert ref.loop_keys == [reference_call_key(ToolCall(id="x", name="read"))] * 2
    before = m.snapshot()
    step = m.next_step(policy)
    problems, seen = ref.asked(before, m, step, policy)
    assert problems == [] and seen == label
    assert ref.loop_warned is warned and ref.loop_unjudged == 0
    assert ref.verdicts == {label.removeprefix("loop verdict "): 1}
    if warned:  # the next repeat fails the warned run: told apart from a fail policy's
        m.next_step(policy)
        call = ToolCall(id="c9", name="read")
        m.model_response(Message.assistant(tool_calls=[call]), 10)
        m.next_step(policy)
        m.tool_results(Message.from_results([ToolResult(call_id=call.id, name="read", content="")]))
        ref.record_calls([call])
        before = m.snapshot()
        step = m.next_step(policy)
        problems, seen = ref.asked(before, m, step, policy)
        assert problems == [] and seen == "loop verdict repeat (fail after a warning)"
