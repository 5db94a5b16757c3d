"""The hands' checkers (``loopctl_sim.props.invariants.driver``) on hand-built observations:
each passes what a correct driver does and catches the violation it is for. The planted-bug
tests (``test_planted_bugs.py``) show them catching real bugs in a patched driver."""

from __future__ import annotations

from typing import Any

import pytest

from loopctl.api import ApiError
from loopctl.core import (
    CallLLM,
    Cancelled,
    Compact,
    CompactReason,
    Done,
    Failed,
    LoopError,
    MachinePolicy,
    Message,
    ToolCall,
    ToolResult,
)
from loopctl.driver import RetryConfig, RunConfig, SessionConfig, build_policy
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.invariants.driver import reference_retry


def codes(problems: list[str]) -> set[str]:
    return {inv.problem_code(p) for p in problems}


CALLS = [ToolCall(id="a", name="t"), ToolCall(id="b", name="t")]


def results(*ids: str) -> Message:
    return Message.from_results([ToolResult(call_id=i, name="t", content="") for i in ids])


def test_check_result_order() -> None:
    assert inv.check_result_order(CALLS, results("a", "b")) == []
    assert codes(inv.check_result_order(CALLS, results("b", "a"))) == {
        inv.InvariantCode.RESULT_ORDER
    }


@pytest.mark.parametrize(
    ("dispatched", "ok"),
    [({"a": 1, "b": 1}, True), ({"a": 1}, False), ({"a": 2, "b": 1}, False), ({}, False)],
)
def test_check_dispatched_once(dispatched: dict[str, int], ok: bool) -> None:
    problems = inv.check_dispatched_once(CALLS, dispatched)
    assert (problems == []) is ok
    assert ok or codes(problems) == {inv.InvariantCode.DISPATCH_ONCE}


def error(kind: Any = "network", retryable: bool = True, **hints: Any) -> ApiError:
    return ApiError(LoopError(kind=kind, message="x", retryable=retryable), **hints)


RETRY2 = RetryConfig(max_retries=2)


@pytest.mark.parametrize(
    ("error_", "attempt", "expected"),
    [
        (error(), 0, 0.0),
        (error(), 2, None),  # no retries left
        (error(retryable=False), 0, None),
        (error(retryable=False, should_retry=True), 0, 0.0),  # the server's word wins
        (error(should_retry=False), 0, None),
        (error(retry_after=3.0), 1, 3.0),
        (error(retry_after=500.0), 0, 0.0),  # over max_retry_after: not a floor
    ],
)
def test_reference_retry(error_: ApiError, attempt: int, expected: float | None) -> None:
    assert reference_retry(error_, attempt, RETRY2) == expected


E = error()
LATE = error(retry_after=3.0)
OVERFLOW = error("context_overflow", retryable=False)
PARSE = ApiError(LoopError(kind="provider", message="bad", retryable=True, details={"parse": 1}))
PARSE2 = ApiError(LoopError(kind="provider", message="other", retryable=True, details={"parse": 1}))

#: (attempts, delays, feed, the codes expected)
MODEL_CALLS: list[tuple[list[ApiError | None], list[float], str, set[str]]] = [
    ([None], [], "model_response", set()),
    ([E, None], [0.4], "model_response", set()),
    ([E, E, E], [0.4, 0.8], "fail", set()),  # persistent: max_retries + 1 attempts
    ([E, E], [0.4], "fail", {inv.InvariantCode.RETRY}),  # gave up one retry early
    ([E, E, E, E], [0.4, 0.8, 1.6], "fail", {inv.InvariantCode.RETRY}),  # one retry too many
    ([LATE, None], [3.0], "model_response", set()),
    ([LATE, None], [0.4], "model_response", {inv.InvariantCode.RETRY_AFTER}),
    ([E, None], [], "model_response", {inv.InvariantCode.RETRY}),  # no sleep before the retry
    (
        [None, None],
        [0.0],
        "model_response",
        {inv.InvariantCode.RETRY},
    ),  # called again after a reply
    ([OVERFLOW], [], "set_context_tokens", set()),
    ([OVERFLOW], [], "fail", {inv.InvariantCode.OVERFLOW}),
    ([E], [], "cancel", set()),  # cancelled: not judged
    ([None], [], "fail", {inv.InvariantCode.RETRY}),
    # a body that fails to parse the same way twice is not retried again
    ([PARSE, PARSE], [0.4], "fail", set()),
    ([PARSE, PARSE, None], [0.4, 0.8], "model_response", {inv.InvariantCode.RETRY}),
    ([PARSE, PARSE2, None], [0.4, 0.8], "model_response", set()),
]


@pytest.mark.parametrize(("attempts", "delays", "feed", "expected"), MODEL_CALLS)
def test_check_model_call(
    attempts: list[ApiError | None], delays: list[float], feed: str, expected: set[str]
) -> None:
    assert codes(inv.check_model_call(attempts, delays, RETRY2, feed)) == expected


def test_check_after_overflow() -> None:
    assert inv.check_after_overflow(Compact(reason=CompactReason.EMERGENCY)) == []
    assert inv.check_after_overflow(Done(outcome=Cancelled())) == []
    failed = Done(outcome=Failed(error=LoopError(kind="context_overflow", message="too long")))
    for step in (Compact(reason=CompactReason.MANUAL), failed, CallLLM(turn=1)):
        assert codes(inv.check_after_overflow(step)) == {inv.InvariantCode.OVERFLOW}


def test_check_estimate() -> None:
    assert inv.check_estimate(100, 20, 120) == []
    assert inv.check_estimate(100, 20, 500) == []  # a provider's count may be larger
    assert codes(inv.check_estimate(100, 20, 100)) == {inv.InvariantCode.ESTIMATE}


def test_check_policy() -> None:
    session, config = SessionConfig(context_window=1000), RunConfig(max_turns=7)
    policy = build_policy(session, config, tools=["t"])
    assert inv.check_policy(policy, session, config, ["t"]) == []
    changed = config.model_copy(update={"loop_action": "fail"})
    assert codes(inv.check_policy(policy, session, changed, ["t"])) == {inv.InvariantCode.POLICY}
    assert codes(inv.check_policy(policy, session, config, ["t", "u"])) == {
        inv.InvariantCode.POLICY
    }
    manual = policy.model_copy(update={"compact_now": True})  # the driver's own flag
    assert inv.check_policy(manual, session, config, ["t"]) == []
    assert isinstance(policy, MachinePolicy)
