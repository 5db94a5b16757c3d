"""When the brain asks to compact, why, and what each compaction feed does."""

from __future__ import annotations

import pytest
from brain_helpers import (
    POLICY,
    after_exchange,
    answer,
    ask,
    awaiting_compaction,
    awaiting_model,
    call,
    started,
)

from loopctl import (
    CallLLM,
    Compact,
    CompactReason,
    Done,
    Failed,
    LoopError,
    LoopMachine,
    Message,
    ProtocolError,
)
from loopctl.core import AwaitingCompaction, Start, Terminal

MANUAL = POLICY.model_copy(update={"compact_now": True})


@pytest.mark.parametrize(
    ("tokens", "manual", "expected"),
    [
        (0, False, None),
        (799, False, None),
        (800, False, CompactReason.THRESHOLD_EXCEEDED),  # at the threshold
        (949, False, CompactReason.THRESHOLD_EXCEEDED),
        (950, False, CompactReason.EMERGENCY),  # at the emergency line
        (5000, False, CompactReason.EMERGENCY),
        (0, True, CompactReason.MANUAL),
        (850, True, CompactReason.MANUAL),  # manual before threshold
        (960, True, CompactReason.MANUAL),  # manual before emergency
    ],
)
def test_compaction_reasons_in_order(
    tokens: int, manual: bool, expected: CompactReason | None
) -> None:
    m = after_exchange()
    m.set_context_tokens(tokens)
    step = m.next_step(MANUAL if manual else POLICY)
    if expected is None:
        assert step == CallLLM(turn=2)
    else:
        assert step == Compact(reason=expected)
        assert m.state == AwaitingCompaction(reason=expected)


def test_max_turns_is_checked_before_compaction() -> None:
    m = after_exchange()
    m.set_context_tokens(960)
    step = m.next_step(MANUAL.model_copy(update={"max_turns": 1}))
    assert step.kind == "done"


@pytest.mark.parametrize("reason", list(CompactReason))
def test_compaction_result_is_a_commit_point(reason: CompactReason) -> None:
    m = awaiting_compaction(reason)
    summary = [Message.user("summary of the conversation so far")]
    m.compaction_result(summary, m.context_tokens, 120)
    assert list(m.history) == summary
    assert m.pending == ()
    assert m.context_tokens == 120
    assert m.state == Start()
    assert m.next_step(POLICY) == CallLLM(turn=2)


@pytest.mark.parametrize("end", ["fail", "cancel"])
def test_a_run_that_compacts_then_fails_keeps_the_compacted_history(end: str) -> None:
    m = awaiting_compaction(CompactReason.THRESHOLD_EXCEEDED)
    summary = [Message.user("summary")]
    m.compaction_result(summary, 850, 100)
    m.next_step(POLICY)  # turn 2 is asked, then the world breaks
    if end == "fail":
        m.fail(LoopError(kind="network", message="gone"))
    else:
        m.cancel()
    m.discard_pending()
    assert list(m.history) == summary


def _turn(m: LoopMachine, tokens: int) -> None:
    """One tool-using turn whose reply reports ``tokens`` of context."""
    c = call(f"g{m.turns_taken}", n=m.turns_taken)
    m.model_response(ask(c), tokens)
    m.next_step(POLICY)
    m.tool_results(answer(c))


def test_threshold_noop_is_not_asked_again_until_the_context_grows() -> None:
    m = awaiting_compaction(CompactReason.THRESHOLD_EXCEEDED)
    m.compaction_noop(850, 850)
    assert m.state == Start()
    assert m.next_step(POLICY) == CallLLM(turn=2)  # same size: not asked again
    _turn(m, 850)
    assert m.next_step(POLICY) == CallLLM(turn=3)  # still that size: still not asked
    _turn(m, 851)  # grown past the size of the no-op
    assert m.next_step(POLICY) == Compact(reason=CompactReason.THRESHOLD_EXCEEDED)


def test_a_noop_does_not_suppress_the_emergency_line() -> None:
    m = awaiting_compaction(CompactReason.THRESHOLD_EXCEEDED)
    m.compaction_noop(850, 850)
    m.set_context_tokens(955)
    assert m.next_step(POLICY) == Compact(reason=CompactReason.EMERGENCY)


def test_a_real_compaction_lifts_the_suppression() -> None:
    m = awaiting_compaction(CompactReason.THRESHOLD_EXCEEDED)
    m.compaction_noop(850, 850)
    m.next_step(MANUAL)
    m.compaction_result([Message.user("s")], 850, 850)
    assert m.next_step(POLICY) == Compact(reason=CompactReason.THRESHOLD_EXCEEDED)


def test_manual_noop_goes_on() -> None:
    m = awaiting_compaction(CompactReason.MANUAL)
    m.compaction_noop(10, 10)
    assert m.state == Start()
    assert m.next_step(POLICY) == CallLLM(turn=2)


def test_emergency_noop_fails_with_context_overflow() -> None:
    m = awaiting_compaction(CompactReason.EMERGENCY)
    m.compaction_noop(960, 958)
    step = m.next_step(POLICY)
    assert isinstance(step, Done) and isinstance(step.outcome, Failed)
    error = step.outcome.error
    assert error.kind == "context_overflow"
    assert error.details == {"before": 960, "after": 958}
    assert m.context_tokens == 958


def test_overflow_reported_while_awaiting_the_model_withdraws_the_call() -> None:
    m = awaiting_model()
    m.set_context_tokens(951)
    step = m.next_step(POLICY)
    assert step == Compact(reason=CompactReason.EMERGENCY)
    assert m.state == AwaitingCompaction(reason=CompactReason.EMERGENCY)
    assert m.turns_taken == 0  # the withdrawn call is not counted
    m.compaction_result([Message.user("go (compacted)")], 951, 200)
    assert m.next_step(POLICY) == CallLLM(turn=1)  # the same turn is asked again


def test_a_count_under_the_line_while_awaiting_the_model_changes_nothing() -> None:
    m = awaiting_model()
    m.set_context_tokens(900)  # over the threshold, under the emergency line
    assert m.next_step(POLICY) == CallLLM(turn=1)


def test_a_fresh_machine_over_the_line_compacts_before_the_first_call() -> None:
    m = started(context_tokens=2000)
    assert m.next_step(POLICY) == Compact(reason=CompactReason.EMERGENCY)
    m.compaction_noop(2000, 2000)
    assert isinstance(m.state, Terminal)


@pytest.mark.parametrize(
    "bad",
    [
        [Message.user("q"), {"role": "assistant", "parts": []}],  # a dict, not a Message
        [Message.user("q"), Message.assistant("", [call("c1", "read")])],  # a call, no result
    ],
    ids=["not-a-message", "open-call"],
)
def test_the_constructor_and_a_compaction_hold_a_history_to_the_same_rules(
    bad: list[object],
) -> None:
    """One check for a history handed in: the constructor raises ``ValueError``, a compaction
    is refused with a ``ProtocolError`` and leaves the machine as it was."""
    with pytest.raises(ValueError, match="not a valid history: ") as raised:
        LoopMachine(bad)  # type: ignore[arg-type]
    why = str(raised.value).removeprefix("not a valid history: ")
    m = awaiting_compaction(CompactReason.MANUAL)
    before = m.model_dump_json()
    with pytest.raises(ProtocolError, match="compacted history is not valid: ") as refused:
        m.compaction_result(bad, 900, 100)  # type: ignore[arg-type]
    assert str(refused.value).endswith(why)
    assert m.model_dump_json() == before
