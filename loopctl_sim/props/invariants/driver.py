"""The hands' promises around each step: what ``BareLoop`` must do between the brain's question
and its next feed, as pure checkers over what a harness observed from outside the driver.

They catch what the brain's checkers cannot: a driver that feeds something valid but wrong
(results in completion order, a retry too many, retry-after ignored, an overflow fed as a
failure, a count never grown after results, a stale policy). The references are written here,
never the driver's own code: ``reference_retry`` restates ``loopctl.driver.retry``'s contract.
docs/testing.md lists each checker's promise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from loopctl.api import ApiError
from loopctl.core import (
    Cancelled,
    Compact,
    CompactReason,
    Done,
    MachinePolicy,
    MachineStep,
    Message,
    ToolCall,
)
from loopctl.driver import RetryConfig, RunConfig, SessionConfig
from loopctl_sim.props.invariants.problems import InvariantCode
from loopctl_sim.props.invariants.problems import problem as _p


def check_result_order(calls: Sequence[ToolCall], results: Message) -> list[str]:
    """The ``tool_results`` message answers ``calls`` (a ``CallTools`` step's) in their order."""
    got = [r.call_id for r in results.tool_results]
    expected = [c.id for c in calls]
    if got == expected:
        return []
    return [
        _p(InvariantCode.RESULT_ORDER, f"results fed in the order {got}, the calls were {expected}")
    ]


def check_dispatched_once(calls: Sequence[ToolCall], dispatched: Mapping[str, int]) -> list[str]:
    """Each of ``calls`` went through dispatch exactly once (``dispatched``: call id -> times,
    counted since the body asked this ``CallTools``)."""
    wrong = {c.id: dispatched.get(c.id, 0) for c in calls if dispatched.get(c.id, 0) != 1}
    if not wrong:
        return []
    return [
        _p(
            InvariantCode.DISPATCH_ONCE,
            f"calls answered after being dispatched {wrong} times, not 1",
        )
    ]


def reference_retry(
    error: ApiError, attempt: int, retry: RetryConfig, previous: ApiError | None = None
) -> float | None:
    """The least delay before retry number ``attempt + 1`` after ``error``, or None when the
    contract says to give up (not retryable, ``max_retries`` retries made, or a body that failed
    to parse the same way as the ``previous`` attempt's: it will fail so again)."""
    retryable = error.should_retry if error.should_retry is not None else error.error.retryable
    if not retryable or attempt >= retry.max_retries:
        return None
    parse = _parse_failure(error)
    if parse is not None and previous is not None and parse == _parse_failure(previous):
        return None
    after = error.retry_after
    if after is not None and 0 <= after <= retry.max_retry_after:
        return float(after)
    return 0.0


def _parse_failure(error: ApiError) -> str | None:
    return error.error.message if (error.error.details or {}).get("parse") else None


def check_model_call(
    attempts: Sequence[ApiError | None],
    delays: Sequence[float],
    retry: RetryConfig,
    feed: str,
) -> list[str]:
    """One ``CallLLM``'s attempts as the client saw them (an ``ApiError`` raised, or None for a
    reply), the delays slept between them, the retry config in force and the feed that followed
    (``model_response``, ``fail``, ``set_context_tokens``; a ``cancel`` is not judged)."""
    if feed == "cancel" or not attempts:
        return []
    problems: list[str] = []
    for i, outcome in enumerate(attempts[:-1]):
        if outcome is None:
            problems.append(
                _p(InvariantCode.RETRY, f"attempt {i + 1} got a reply and was made again")
            )
            continue
        least = reference_retry(outcome, i, retry, attempts[i - 1] if i else None)
        if least is None:
            why = f"retried after attempt {i + 1} ({outcome.error.kind}); max_retries is "
            why += f"{retry.max_retries}, retryable {outcome.error.retryable}"
            problems.append(_p(InvariantCode.RETRY, why))
        elif i < len(delays) and delays[i] < least:
            why = f"slept {delays[i]}s before retry {i + 1}; retry-after {least}"
            problems.append(_p(InvariantCode.RETRY_AFTER, why))
    if len(delays) != len(attempts) - 1:
        problems.append(
            _p(InvariantCode.RETRY, f"{len(delays)} sleeps for {len(attempts) - 1} retries")
        )
    last = attempts[-1]
    n = len(attempts)
    if last is None:
        if feed != "model_response":
            problems.append(
                _p(InvariantCode.RETRY, f"a reply was followed by {feed}, not model_response")
            )
        return problems
    if reference_retry(last, n - 1, retry, attempts[-2] if n > 1 else None) is not None:
        why = f"gave up after {n} attempts ({last.error.kind}); max_retries is "
        why += f"{retry.max_retries}, so retry {n} was due"
        problems.append(_p(InvariantCode.RETRY, why))
    expected = "set_context_tokens" if last.error.kind == "context_overflow" else "fail"
    if feed != expected:
        code = InvariantCode.OVERFLOW if expected == "set_context_tokens" else InvariantCode.RETRY
        problems.append(_p(code, f"the last error ({last.error.kind}) was followed by {feed}"))
    return problems


def check_after_overflow(step: MachineStep) -> list[str]:
    """The first step after the model reported a context overflow: ``Compact(EMERGENCY)``
    (the brain withdrew the call), or ``Done(Cancelled())`` when a cancel came first."""
    if isinstance(step, Compact) and step.reason is CompactReason.EMERGENCY:
        return []
    if isinstance(step, Done) and isinstance(step.outcome, Cancelled):
        return []
    return [_p(InvariantCode.OVERFLOW, f"a context overflow was followed by {step!r}")]


def check_estimate(before: int, estimate: int, after: int) -> list[str]:
    """After tool results: the count (``before`` them) grew by at least their ``estimate``."""
    if after >= before + estimate:
        return []
    why = f"context {after} after tool results estimated at {estimate} on {before}"
    return [_p(InvariantCode.ESTIMATE, why)]


def check_policy(
    policy: MachinePolicy, session: SessionConfig, config: RunConfig, tools: Sequence[str]
) -> list[str]:
    """The policy a step was asked with is the configs in force at that step, field by field
    (``compact_now`` is the driver's own flag and not compared)."""
    expected = {
        "max_turns": config.max_turns,
        "context_window": session.context_window,
        "compact_threshold": config.compact_threshold,
        "emergency_threshold": config.emergency_threshold,
        "loop_window": config.loop_window,
        "loop_repeat_limit": config.loop_repeat_limit,
        "loop_action": config.loop_action,
        "tools": tuple(tools),
    }
    stale = {
        name: (getattr(policy, name), value)
        for name, value in expected.items()
        if not _same(getattr(policy, name), value)
    }
    if not stale:
        return []
    return [_p(InvariantCode.POLICY, f"the step's policy is not the configs in force: {stale}")]


def check_compact_now(policy: MachinePolicy) -> list[str]:
    """A step asked after a manual compaction was requested (by a hook, ``before_step`` or the
    user) and before any step asked for it: its policy says ``compact_now``."""
    if policy.compact_now:
        return []
    return [
        _p(InvariantCode.POLICY, "a compaction was requested, the step's policy does not ask it")
    ]


def check_run_messages(said: Sequence[Message], messages: Sequence[Message]) -> list[str]:
    """``messages`` (a ``RunResult``'s) are ``said`` (what the run said, as its observer saw
    the brain take it), and every call in them is answered once, in call order, by the message
    after it (the last one's calls may be open: a run that ended with tools in flight)."""
    problems: list[str] = []
    for i, message in enumerate(messages):
        calls = [c.id for c in message.tool_calls]
        if not calls or i + 1 >= len(messages):
            continue
        answered = [r.call_id for r in messages[i + 1].tool_results]
        if answered != calls:
            why = f"message {i}'s calls {calls} are answered by {answered}"
            problems.append(_p(InvariantCode.RUN_MESSAGES, why))
    if list(messages) != list(said):
        lost = [m for m in said if m not in messages]
        problems.append(
            _p(
                InvariantCode.RUN_MESSAGES,
                f"the result holds {len(messages)} messages, the run said {len(said)}"
                + (f"; lost {[(m.role, m.text or m.tool_results) for m in lost]}" if lost else ""),
            )
        )
    return problems


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b)
    return a == b
