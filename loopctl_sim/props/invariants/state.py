"""State checks: what holds of any machine at any time, and how one move (a step, a feed, a
refusal) relates to the state it leaves. Every checker but ``check_refused`` only reads the
machines it is given; ``check_refused`` feeds its machine: a refusal is only seen by trying.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from loopctl.core import (
    FEED_TYPES,
    STEP_TRANSITIONS,
    TRANSITIONS,
    AwaitingCompaction,
    AwaitingModel,
    AwaitingTools,
    CallLLM,
    CallTools,
    Compact,
    Completed,
    Done,
    LoopMachine,
    MachinePolicy,
    MachineStep,
    ProtocolError,
    Terminal,
)
from loopctl_sim.props.invariants.conversation import (
    calls_in,
    open_tail_allowed,
    provider_problems,
    results_in,
)
from loopctl_sim.props.invariants.problems import InvariantCode, assert_no_problems
from loopctl_sim.props.invariants.problems import problem as _p


def check_machine(machine: LoopMachine, policy: MachinePolicy | None = None) -> list[str]:
    """Everything that must hold of any machine at any time (given the policy in force)."""
    problems: list[str] = []

    def bad(code: InvariantCode, text: str) -> None:
        problems.append(_p(code, text))

    snap = machine.snapshot()
    history = list(machine.history)
    pending = list(machine.pending)
    state = machine.state

    for text in provider_problems(history):
        bad(InvariantCode.HISTORY_INVALID, text)
    allowed = open_tail_allowed(machine)
    for text in provider_problems([*history, *pending], open_tail=allowed):
        bad(InvariantCode.CONVERSATION_INVALID, text)

    if isinstance(state, AwaitingTools) and not (pending and calls_in(pending[-1])):
        bad(InvariantCode.OPEN_TAIL, "awaiting tools but pending ends without calls")

    if machine.turns_taken < 0 or machine.context_tokens < 0:
        bad(InvariantCode.SHAPE, "negative turn or token count")
    taken = machine.turns_taken
    if policy is not None and taken > policy.max_turns:
        bad(InvariantCode.TURNS, f"{taken} turns taken, max_turns is {policy.max_turns}")
    if isinstance(state, AwaitingModel) and state.turn != taken + 1:
        bad(InvariantCode.TURNS, f"awaiting the model for turn {state.turn} after {taken}")

    exchange = machine.exchange
    if isinstance(state, AwaitingTools):
        if exchange is None:
            bad(InvariantCode.SHAPE, "awaiting tools with no exchange")
        else:
            if exchange.turn != state.turn or state.turn != taken:
                bad(InvariantCode.TURNS, f"exchange turn {exchange.turn}, state turn {state.turn}")
            dispatch = exchange.dispatch
            if not dispatch:
                bad(InvariantCode.DISPATCH, "awaiting tools with nothing to dispatch")
            unknown = [c.name for c in dispatch if c.name not in snap.advertised]
            if unknown:
                bad(InvariantCode.DISPATCH, f"would dispatch unadvertised tools {unknown}")
            for result in exchange.preanswered:
                if result.name in snap.advertised or not result.is_error:
                    bad(InvariantCode.DISPATCH, f"pre-answered a known call: {result.call_id}")
            if pending and [c.id for c in calls_in(pending[-1])] != [c.id for c in exchange.calls]:
                bad(InvariantCode.SHAPE, "the exchange is not the last message's calls")
    elif exchange is not None:
        bad(InvariantCode.SHAPE, f"an exchange is held in state {state.kind}")

    counts = Counter(r.call_id for m in [*history, *pending] for r in results_in(m))
    twice = sorted(i for i, n in counts.items() if n > 1)
    if twice:
        bad(InvariantCode.ANSWERED_TWICE, f"call ids answered more than once: {twice}")

    if machine.finalized:
        if not isinstance(state, Terminal):
            bad(InvariantCode.SHAPE, f"finalized but in state {state.kind}")
        if pending:
            bad(InvariantCode.SHAPE, "finalized but pending is not empty")
    if isinstance(state, Terminal) and isinstance(state.outcome, Completed):
        convo = [*history, *pending]
        last = convo[-1] if convo else None
        if last is None or last.role != "assistant" or calls_in(last):
            bad(InvariantCode.SHAPE, "completed but the last message is no final answer")
        elif last.text != state.outcome.final_text:
            bad(InvariantCode.SHAPE, "completed with a final_text not the last reply's")
    return problems


def assert_machine(machine: LoopMachine, policy: MachinePolicy | None = None) -> None:
    """``check_machine``, raising ``InvariantViolation`` on any problem."""
    assert_no_problems(check_machine(machine, policy), repr(machine))


def check_step(machine: LoopMachine, step: MachineStep, policy: MachinePolicy) -> list[str]:
    """After ``step = machine.next_step(policy)``: the state waits on exactly that step."""
    problems: list[str] = []

    def bad(code: InvariantCode, text: str) -> None:
        problems.append(_p(code, text))

    state = machine.state
    snap = machine.snapshot()
    if isinstance(step, CallLLM):
        if not (isinstance(state, AwaitingModel) and state.turn == step.turn):
            bad(InvariantCode.STEP, f"{step!r} answered in state {state!r}")
        if step.turn != machine.turns_taken + 1:
            bad(InvariantCode.TURNS, f"{step!r} after {machine.turns_taken} turns")
    elif isinstance(step, CallTools):
        exchange = machine.exchange
        if not isinstance(state, AwaitingTools) or exchange is None:
            bad(InvariantCode.STEP, f"CallTools answered in state {state!r}")
        elif step.calls != exchange.dispatch or step.turn != exchange.turn:
            bad(InvariantCode.STEP, "CallTools does not carry the exchange's dispatch")
        if not step.calls:
            bad(InvariantCode.DISPATCH, "CallTools with no calls")
        unknown = [c.name for c in step.calls if c.name not in snap.advertised]
        if unknown:
            bad(InvariantCode.DISPATCH, f"CallTools carries unadvertised tools {unknown}")
        ids = [c.id for c in step.calls]
        if len(set(ids)) != len(ids):
            bad(InvariantCode.DISPATCH, f"CallTools repeats call ids {ids}")
    elif isinstance(step, Compact):
        if not (isinstance(state, AwaitingCompaction) and state.reason == step.reason):
            bad(InvariantCode.STEP, f"{step!r} answered in state {state!r}")
    elif isinstance(step, Done) and not (
        isinstance(state, Terminal) and state.outcome == step.outcome
    ):
        bad(InvariantCode.STEP, f"{step!r} answered in state {state!r}")
    return problems


def check_terminal_sticky(before: LoopMachine, after: LoopMachine) -> list[str]:
    """Once terminal, a machine stays terminal with the same outcome, whatever was fed."""
    if isinstance(before.state, Terminal) and after.state != before.state:
        return [_p(InvariantCode.TERMINAL_STICKY, f"left {before.state!r} for {after.state!r}")]
    return []


def check_transition(before_kind: str, feed: str, after_kind: str) -> list[str]:
    """The move ``before_kind --feed--> after_kind`` (``feed``: a feed name or
    ``"next_step"``) is one the brain's tables allow."""
    if feed == "next_step":
        entry = STEP_TRANSITIONS.get(before_kind)  # type: ignore[call-overload]
    else:
        entry = TRANSITIONS.get((before_kind, FEED_TYPES.get(feed)))  # type: ignore[arg-type]
    if entry is None:
        text = f"{feed} succeeded in state {before_kind}, which the table lacks"
    elif after_kind not in entry.targets:
        text = f"{feed} in {before_kind} led to {after_kind}, not one of {entry.targets}"
    else:
        return []
    return [_p(InvariantCode.TABLE, text)]


def check_refused(machine: LoopMachine, call: Callable[[LoopMachine], Any]) -> list[str]:
    """``call(machine)`` must raise ``ProtocolError`` and leave the machine exactly as it was.
    It feeds ``machine`` (that is the point): pass a copy if you need the original."""
    before = machine.model_dump_json()
    try:
        call(machine)
    except ProtocolError:
        if machine.model_dump_json() == before:
            return []
        text = "raised ProtocolError but changed the machine"
    except Exception as exc:  # report anything else as what it is
        text = f"raised {type(exc).__name__}: {exc} instead of ProtocolError"
    else:
        text = "accepted instead of raising ProtocolError"
    return [_p(InvariantCode.REFUSAL, text)]
