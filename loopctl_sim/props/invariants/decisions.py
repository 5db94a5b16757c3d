"""Decisions in ``Start`` and ``AwaitingModel``: independent references for what the brain must
decide there (the loop verdict from the run's whole call record, not the brain's window), and
checkers that compare the brain's decision with them. A harness keeps the call record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from loopctl.core import (
    AwaitingCompaction,
    AwaitingModel,
    CallLLM,
    Compact,
    CompactReason,
    Done,
    Failed,
    LoopMachine,
    MachinePolicy,
    MachineSnapshot,
    MachineStep,
    MaxTurnsExceeded,
    Start,
    Terminal,
    ToolCall,
)
from loopctl_sim.props.invariants.problems import InvariantCode
from loopctl_sim.props.invariants.problems import problem as _p


def check_start_decision(
    before: MachineSnapshot, policy: MachinePolicy, step: MachineStep
) -> list[str]:
    """A reference for the contract's order of decisions in ``Start`` (``before``: the snapshot
    just before asking); [] outside ``Start`` and where a loop verdict may be due (left to
    ``check_loop_decision``)."""
    if not isinstance(before.state, Start) or not before.started:
        return []
    if policy.loop_action != "off" and before.loop.unjudged:
        return []
    tokens = before.context_tokens
    expected: MachineStep
    if before.turns_taken >= policy.max_turns:
        if isinstance(step, Done) and isinstance(step.outcome, MaxTurnsExceeded):
            return []
        return [
            _p(InvariantCode.DECISION, f"in Start expected Done(MaxTurnsExceeded()), got {step!r}")
        ]
    if policy.compact_now:
        expected = Compact(reason=CompactReason.MANUAL)
    elif tokens >= policy.context_window * policy.emergency_threshold:
        expected = Compact(reason=CompactReason.EMERGENCY)
    elif tokens >= policy.context_window * policy.compact_threshold and (
        before.noop_floor is None or tokens > before.noop_floor
    ):
        expected = Compact(reason=CompactReason.THRESHOLD_EXCEEDED)
    else:
        expected = CallLLM(turn=before.turns_taken + 1)
    if expected == step:
        return []
    return [_p(InvariantCode.DECISION, f"in Start expected {expected!r}, got {step!r}")]


def check_awaiting_model_decision(
    before: MachineSnapshot, after: LoopMachine, step: MachineStep, policy: MachinePolicy
) -> list[str]:
    """A question asked in ``AwaitingModel`` (``before``, the snapshot just before it).

    A count at or over the emergency line (a context overflow the driver reported with
    ``set_context_tokens``) withdraws the call: ``Compact(EMERGENCY)``, the machine awaiting that
    compaction, the turn not counted and nothing added to pending. Under the line the same
    call is asked again: ``CallLLM`` of the awaited turn, nothing changed. Not applicable
    elsewhere: returns [].
    """
    state = before.state
    if not isinstance(state, AwaitingModel):
        return []
    problems: list[str] = []
    over = before.context_tokens >= policy.context_window * policy.emergency_threshold
    if over:
        expected: MachineStep = Compact(reason=CompactReason.EMERGENCY)
        if after.state != AwaitingCompaction(reason=CompactReason.EMERGENCY):
            problems.append(
                _p(InvariantCode.DECISION, f"an overflow left the machine in {after.state!r}")
            )
    else:
        expected = CallLLM(turn=state.turn)
        if after.state != state:
            problems.append(
                _p(InvariantCode.DECISION, f"asking again left {state!r} for {after.state!r}")
            )
    if step != expected:
        problems.append(
            _p(
                InvariantCode.DECISION,
                f"in AwaitingModel at {before.context_tokens} tokens expected "
                f"{expected!r}, got {step!r}",
            )
        )
    if after.turns_taken != before.turns_taken or after.pending_len() != len(before.pending):
        problems.append(
            _p(InvariantCode.DECISION, "a question in AwaitingModel changed turns or pending")
        )
    return problems


def reference_call_key(call: ToolCall) -> str:
    """Name plus canonical JSON arguments (the reference's own encoding)."""
    return call.name + "|" + json.dumps(call.arguments, sort_keys=True, separators=(",", ":"))


def reference_loop_verdict(keys: Sequence[str], unjudged: int, policy: MachinePolicy) -> str | None:
    """The contract's loop verdict (``"repeat"``, ``"ping_pong"`` or None) on the latest
    exchange: ``keys``, every call of the run, oldest first (``reference_call_key``), the last
    ``unjudged`` of them not judged yet."""
    if policy.loop_action == "off" or unjudged == 0:
        return None
    recent = list(keys[-policy.loop_window :])
    latest = keys[-unjudged:]
    if any(recent.count(k) >= policy.loop_repeat_limit for k in latest):
        return "repeat"
    tail = recent[-4:]
    if len(tail) == 4 and tail[0] == tail[2] and tail[1] == tail[3] and tail[0] != tail[1]:
        return "ping_pong"
    return None


def check_loop_decision(
    before: MachineSnapshot,
    after: LoopMachine,
    step: MachineStep,
    verdict: str | None,
    warned: bool,
    policy: MachinePolicy,
) -> list[str]:
    """After a ``next_step`` asked in ``Start`` (``before``), given the reference ``verdict`` and
    whether the run was already warned: a verdict fails the run (action ``fail``, or a repeat
    after a warning) or appends exactly one note to pending (``warn``); no verdict, no note.
    The step after a warning note is left to ``check_start_decision``."""
    if not isinstance(before.state, Start) or not before.started:
        return []
    failed = (
        isinstance(step, Done)
        and isinstance(step.outcome, Failed)
        and step.outcome.error.kind == "loop_detected"
    )
    grew = len(after.pending) - len(before.pending)
    if verdict is not None and (policy.loop_action == "fail" or warned):
        if not failed:
            return [_p(InvariantCode.LOOP, f"a {verdict} loop should fail the run; got {step!r}")]
        return []
    if failed:
        return [
            _p(InvariantCode.LOOP, f"failed for a loop the reference does not see ({verdict=})")
        ]
    if verdict is not None and (grew != 1 or after.pending[-1].role != "user"):
        return [
            _p(InvariantCode.LOOP, f"a {verdict} loop should append one warning note; grew {grew}")
        ]
    if verdict is None and grew and not isinstance(after.state, Terminal):
        return [_p(InvariantCode.LOOP, f"pending grew by {grew} without a loop verdict")]
    return []
