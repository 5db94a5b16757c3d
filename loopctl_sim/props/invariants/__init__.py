"""Invariant checkers for the brain, usable after every step.

Every checker is pure: it reads machines (and their snapshots) and returns a list of problems,
an empty list meaning "all good". It never feeds the machine it is given; where a check has to
ask a question (``check_resume``), it asks a copy restored from a snapshot.

A problem is a string ``"<code>: <what is wrong>"``. The code (one of the ``*_CODE`` names below,
or the module's ``CODES``) lets a harness tolerate a known issue narrowly; the text says what was
found. ``assert_machine`` and ``assert_no_problems`` raise ``InvariantViolation`` instead.

The checkers hold an independent model of "provider-valid" (``provider_problems``) rather than
calling the brain's own ``coherence_problem``: a checker that trusts the code under test cannot
catch it lying.

Two kinds of checker:
- state checks, true of any machine at any time: ``check_machine``;
- relational checks over a before/after pair or a question asked: ``check_step``,
  ``check_start_decision``, ``check_salvage``, ``check_commit``, ``check_compaction_commit``,
  ``check_terminal_sticky``, ``check_transition``, ``check_refused``, ``check_next_run`` and
  ``check_resume``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Final

from pydantic import ValidationError

from loopctl.core import (
    STEP_TRANSITIONS,
    TRANSITIONS,
    AwaitingCompaction,
    AwaitingModel,
    AwaitingTools,
    CallLLM,
    CallTools,
    Cancelled,
    Compact,
    CompactReason,
    Completed,
    Done,
    Failed,
    LoopMachine,
    MachinePolicy,
    MachineSnapshot,
    MachineStep,
    MaxTurnsExceeded,
    Message,
    ProtocolError,
    Start,
    Terminal,
    ToolCall,
    ToolResult,
    coherent_prefix_length,
)

__all__ = [
    "CODES",
    "InvariantViolation",
    "assert_machine",
    "assert_no_problems",
    "check_commit",
    "check_compaction_commit",
    "check_loop_decision",
    "check_machine",
    "check_next_run",
    "check_refused",
    "check_resume",
    "check_salvage",
    "check_start_decision",
    "check_step",
    "check_terminal_sticky",
    "check_trace",
    "check_transition",
    "maximal_coherent_prefix",
    "open_tail_allowed",
    "problem_code",
    "provider_problems",
    "reference_call_key",
    "reference_loop_verdict",
]

# --- problem codes ---------------------------------------------------------------------------
HISTORY_CODE: Final = "history-invalid"
CONVERSATION_CODE: Final = "conversation-invalid"
OPEN_TAIL_CODE: Final = "open-tail"
TURNS_CODE: Final = "turns"
DISPATCH_CODE: Final = "dispatch"
ANSWERED_TWICE_CODE: Final = "answered-twice"
SHAPE_CODE: Final = "shape"
STEP_CODE: Final = "step"
DECISION_CODE: Final = "decision"
SALVAGE_CODE: Final = "salvage"
COMMIT_CODE: Final = "commit"
COMPACTION_CODE: Final = "compaction"
STICKY_CODE: Final = "terminal-sticky"
TABLE_CODE: Final = "table"
REFUSAL_CODE: Final = "refusal"
NEXT_RUN_CODE: Final = "next-run"
RESUME_CODE: Final = "resume"
#: A terminal machine whose pending still ends with unanswered calls (cancelled or failed while
#: tools ran, before the exit door) does not restore. The brain once had this bug (fixed in
#: 03137d1); the code stays so that a regression is named precisely.
RESTORE_OPEN_TAIL_CODE: Final = "restore-terminal-open-tail"
IDEMPOTENCE_CODE: Final = "idempotence"
LOOP_CODE: Final = "loop"

CODES: Final = (
    HISTORY_CODE,
    CONVERSATION_CODE,
    OPEN_TAIL_CODE,
    TURNS_CODE,
    DISPATCH_CODE,
    ANSWERED_TWICE_CODE,
    SHAPE_CODE,
    STEP_CODE,
    DECISION_CODE,
    SALVAGE_CODE,
    COMMIT_CODE,
    COMPACTION_CODE,
    STICKY_CODE,
    TABLE_CODE,
    REFUSAL_CODE,
    NEXT_RUN_CODE,
    RESUME_CODE,
    RESTORE_OPEN_TAIL_CODE,
    IDEMPOTENCE_CODE,
    LOOP_CODE,
)


class InvariantViolation(AssertionError):
    """One or more invariants do not hold; ``problems`` lists them."""

    def __init__(self, problems: Sequence[str], context: str = "") -> None:
        self.problems = list(problems)
        head = f"{context}: " if context else ""
        super().__init__(head + "; ".join(self.problems))


def problem_code(problem: str) -> str:
    """The code of a problem string (the part before the first colon)."""
    return problem.split(":", 1)[0]


def assert_no_problems(problems: Sequence[str], context: str = "") -> None:
    if problems:
        raise InvariantViolation(problems, context)


def _p(code: str, text: str) -> str:
    return f"{code}: {text}"


# --- an independent model of provider validity ----------------------------------------------


def _calls(message: Message) -> list[ToolCall]:
    return [p for p in message.parts if isinstance(p, ToolCall)]


def _results(message: Message) -> list[ToolResult]:
    return [p for p in message.parts if isinstance(p, ToolResult)]


def provider_problems(messages: Sequence[Message], *, open_tail: bool = False) -> list[str]:
    """Why ``messages`` would be rejected by a provider; [] when it is valid.

    Tool calls only in assistant messages, results only in user messages; an assistant message
    with calls is followed at once by one user message answering exactly those calls, each once;
    a result answers a call of the message right before it. ``open_tail`` allows the last
    message's calls to be still unanswered (tools in flight).
    """
    problems: list[str] = []
    awaiting: list[str] | None = None
    for i, message in enumerate(messages):
        calls = _calls(message)
        results = _results(message)
        if calls and message.role != "assistant":
            problems.append(f"message {i} ({message.role}) holds tool calls")
        if results and message.role != "user":
            problems.append(f"message {i} ({message.role}) holds tool results")
        ids = [r.call_id for r in results]
        if awaiting is not None:
            if message.role != "user" or Counter(ids) != Counter(awaiting):
                problems.append(f"message {i} answers {ids} but the calls before it are {awaiting}")
            awaiting = None
        elif results:
            problems.append(f"message {i} holds results {ids} for no call right before it")
        if calls:
            awaiting = [c.id for c in calls]
            if len(set(awaiting)) != len(awaiting) or "" in awaiting:
                problems.append(f"message {i} repeats a call id or has an empty one: {awaiting}")
    if awaiting is not None and not open_tail:
        problems.append(f"the last message's calls {awaiting} have no results")
    return problems


def maximal_coherent_prefix(history: Sequence[Message], pending: Sequence[Message]) -> int:
    """The independent reference for salvage: the largest k such that history + pending[:k] is
    provider-valid and pending[:k] ends right after a complete exchange (0 if none does)."""
    for k in range(len(pending), 0, -1):
        last = pending[k - 1]
        if last.role != "user" or not _results(last) or k < 2:
            continue
        if not provider_problems([*history, *pending[:k]]):
            return k
    return 0


def open_tail_allowed(machine: LoopMachine) -> bool:
    """Unanswered calls at the end are allowed while tools run, and on a machine cancelled or
    failed while tools ran until its exit door (``discard_pending``) drops them."""
    state = machine.state
    if isinstance(state, AwaitingTools):
        return True
    return (
        isinstance(state, Terminal)
        and isinstance(state.outcome, Cancelled | Failed)
        and not machine.finalized
    )


# --- state checks ----------------------------------------------------------------------------


def check_machine(machine: LoopMachine, policy: MachinePolicy | None = None) -> list[str]:
    """Everything that must hold of any machine at any time (given the policy in force)."""
    problems: list[str] = []
    snap = machine.snapshot()
    history = list(machine.history)
    pending = list(machine.pending)
    state = machine.state

    for text in provider_problems(history):
        problems.append(_p(HISTORY_CODE, text))
    allowed = open_tail_allowed(machine)
    for text in provider_problems([*history, *pending], open_tail=allowed):
        problems.append(_p(CONVERSATION_CODE, text))

    if isinstance(state, AwaitingTools):
        tail_calls = _calls(pending[-1]) if pending else []
        if not tail_calls:
            problems.append(_p(OPEN_TAIL_CODE, "awaiting tools but pending ends without calls"))

    if machine.turns_taken < 0 or machine.context_tokens < 0:
        problems.append(_p(SHAPE_CODE, "negative turn or token count"))
    if policy is not None and machine.turns_taken > policy.max_turns:
        problems.append(
            _p(TURNS_CODE, f"{machine.turns_taken} turns taken, max_turns is {policy.max_turns}")
        )
    if isinstance(state, AwaitingModel) and state.turn != machine.turns_taken + 1:
        problems.append(
            _p(TURNS_CODE, f"awaiting the model for turn {state.turn} after {machine.turns_taken}")
        )

    exchange = machine.exchange
    if isinstance(state, AwaitingTools):
        if exchange is None:
            problems.append(_p(SHAPE_CODE, "awaiting tools with no exchange"))
        else:
            if exchange.turn != state.turn or state.turn != machine.turns_taken:
                problems.append(
                    _p(TURNS_CODE, f"exchange turn {exchange.turn}, state turn {state.turn}")
                )
            dispatch = exchange.dispatch
            if not dispatch:
                problems.append(_p(DISPATCH_CODE, "awaiting tools with nothing to dispatch"))
            unknown = [c.name for c in dispatch if c.name not in snap.advertised]
            if unknown:
                problems.append(_p(DISPATCH_CODE, f"would dispatch unadvertised tools {unknown}"))
            for result in exchange.preanswered:
                if result.name in snap.advertised or not result.is_error:
                    problems.append(
                        _p(DISPATCH_CODE, f"pre-answered a known call: {result.call_id}")
                    )
            if pending and [c.id for c in _calls(pending[-1])] != [c.id for c in exchange.calls]:
                problems.append(_p(SHAPE_CODE, "the exchange is not the last message's calls"))
    elif exchange is not None:
        problems.append(_p(SHAPE_CODE, f"an exchange is held in state {state.kind}"))

    counts = Counter(r.call_id for m in [*history, *pending] for r in _results(m))
    twice = sorted(i for i, n in counts.items() if n > 1)
    if twice:
        problems.append(_p(ANSWERED_TWICE_CODE, f"call ids answered more than once: {twice}"))

    if machine.finalized:
        if not isinstance(state, Terminal):
            problems.append(_p(SHAPE_CODE, f"finalized but in state {state.kind}"))
        if pending:
            problems.append(_p(SHAPE_CODE, "finalized but pending is not empty"))
    if isinstance(state, Terminal) and isinstance(state.outcome, Completed):
        convo = [*history, *pending]
        last = convo[-1] if convo else None
        if last is None or last.role != "assistant" or _calls(last):
            problems.append(_p(SHAPE_CODE, "completed but the last message is no final answer"))
        elif last.text != state.outcome.final_text:
            problems.append(_p(SHAPE_CODE, "completed with a final_text not the last reply's"))
    return problems


def assert_machine(machine: LoopMachine, policy: MachinePolicy | None = None) -> None:
    """``check_machine``, raising ``InvariantViolation`` on any problem."""
    assert_no_problems(check_machine(machine, policy), repr(machine))


# --- relational checks -----------------------------------------------------------------------


def check_step(machine: LoopMachine, step: MachineStep, policy: MachinePolicy) -> list[str]:
    """After ``step = machine.next_step(policy)``: the state waits on exactly that step."""
    problems: list[str] = []
    state = machine.state
    snap = machine.snapshot()
    if isinstance(step, CallLLM):
        if not (isinstance(state, AwaitingModel) and state.turn == step.turn):
            problems.append(_p(STEP_CODE, f"{step!r} answered in state {state!r}"))
        if step.turn != machine.turns_taken + 1:
            problems.append(_p(TURNS_CODE, f"{step!r} after {machine.turns_taken} turns"))
    elif isinstance(step, CallTools):
        exchange = machine.exchange
        if not isinstance(state, AwaitingTools) or exchange is None:
            problems.append(_p(STEP_CODE, f"CallTools answered in state {state!r}"))
        elif step.calls != exchange.dispatch or step.turn != exchange.turn:
            problems.append(_p(STEP_CODE, "CallTools does not carry the exchange's dispatch"))
        if not step.calls:
            problems.append(_p(DISPATCH_CODE, "CallTools with no calls"))
        unknown = [c.name for c in step.calls if c.name not in snap.advertised]
        if unknown:
            problems.append(_p(DISPATCH_CODE, f"CallTools carries unadvertised tools {unknown}"))
        ids = [c.id for c in step.calls]
        if len(set(ids)) != len(ids):
            problems.append(_p(DISPATCH_CODE, f"CallTools repeats call ids {ids}"))
    elif isinstance(step, Compact):
        if not (isinstance(state, AwaitingCompaction) and state.reason == step.reason):
            problems.append(_p(STEP_CODE, f"{step!r} answered in state {state!r}"))
    elif isinstance(step, Done) and not (
        isinstance(state, Terminal) and state.outcome == step.outcome
    ):
        problems.append(_p(STEP_CODE, f"{step!r} answered in state {state!r}"))
    return problems


def check_start_decision(
    before: MachineSnapshot, policy: MachinePolicy, step: MachineStep
) -> list[str]:
    """A reference for the order of decisions in ``Start`` (the contract's list).

    ``before`` is the snapshot taken just before asking. Cases where a loop verdict may be due
    (the loop detector on, with an exchange not judged yet) are left to the loop tests: this
    checker returns [] for them. Not applicable outside ``Start``: returns [].
    """
    if not isinstance(before.state, Start) or not before.started:
        return []
    if policy.loop_action != "off" and before.loop.unjudged:
        return []
    tokens = before.context_tokens
    expected: MachineStep
    if before.turns_taken >= policy.max_turns:
        if isinstance(step, Done) and isinstance(step.outcome, MaxTurnsExceeded):
            return []
        return [_p(DECISION_CODE, f"in Start expected Done(MaxTurnsExceeded()), got {step!r}")]
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
    return [_p(DECISION_CODE, f"in Start expected {expected!r}, got {step!r}")]


def check_salvage(before: LoopMachine, after: LoopMachine) -> list[str]:
    """``before``: a copy taken just before ``after.discard_pending()``."""
    problems: list[str] = []
    old_history, old_pending = list(before.history), list(before.pending)
    new_history = list(after.history)
    for text in provider_problems(new_history):
        problems.append(_p(SALVAGE_CODE, f"salvaged history is invalid: {text}"))
    if after.pending:
        problems.append(_p(SALVAGE_CODE, "pending not emptied"))
    if not after.finalized:
        problems.append(_p(SALVAGE_CODE, "not marked finalized"))
    if after.state != before.state:
        problems.append(_p(SALVAGE_CODE, f"state changed: {before.state!r} -> {after.state!r}"))
    k = len(new_history) - len(old_history)
    if new_history[: len(old_history)] != old_history or k < 0:
        problems.append(_p(SALVAGE_CODE, "the old history was not kept as it was"))
        return problems
    if new_history[len(old_history) :] != old_pending[:k]:
        problems.append(_p(SALVAGE_CODE, "what was salvaged is not a prefix of pending"))
        return problems
    best = maximal_coherent_prefix(old_history, old_pending)
    if k != best:
        problems.append(_p(SALVAGE_CODE, f"salvaged {k} of pending, the maximal prefix is {best}"))
    brain = coherent_prefix_length(old_pending)
    if brain != best:
        problems.append(
            _p(SALVAGE_CODE, f"coherent_prefix_length says {brain}, the reference says {best}")
        )
    return problems


def check_commit(before: LoopMachine, after: LoopMachine) -> list[str]:
    """``before``: a copy taken just before ``after.commit_pending()``."""
    problems: list[str] = []
    if list(after.history) != [*before.history, *before.pending]:
        problems.append(_p(COMMIT_CODE, "history is not old history + pending"))
    if after.pending or not after.finalized:
        problems.append(_p(COMMIT_CODE, "pending not emptied or not marked finalized"))
    if after.state != before.state:
        problems.append(_p(COMMIT_CODE, "the state changed"))
    return problems


def check_compaction_commit(
    before: LoopMachine, after: LoopMachine, compacted: Sequence[Message], tokens_after: int
) -> list[str]:
    """``before``: a copy taken just before ``after.compaction_result(compacted, ...)``."""
    problems: list[str] = []
    if list(after.history) != list(compacted):
        problems.append(_p(COMPACTION_CODE, "history is not the compacted conversation"))
    if after.pending:
        problems.append(_p(COMPACTION_CODE, "pending not emptied (compaction is a commit point)"))
    if after.context_tokens != tokens_after:
        problems.append(_p(COMPACTION_CODE, f"context {after.context_tokens} != {tokens_after}"))
    if not isinstance(after.state, Start):
        problems.append(_p(COMPACTION_CODE, f"state {after.state!r} after a compaction"))
    if after.turns_taken != before.turns_taken:
        problems.append(_p(COMPACTION_CODE, "the turn count changed"))
    for text in provider_problems(list(after.history)):
        problems.append(_p(COMPACTION_CODE, f"compacted history is invalid: {text}"))
    return problems


def check_terminal_sticky(before: LoopMachine, after: LoopMachine) -> list[str]:
    """Once terminal, a machine stays terminal with the same outcome, whatever was fed."""
    if not isinstance(before.state, Terminal):
        return []
    if after.state != before.state:
        return [_p(STICKY_CODE, f"left {before.state!r} for {after.state!r}")]
    return []


def check_transition(before_kind: str, feed: str, after_kind: str) -> list[str]:
    """The move ``before_kind --feed--> after_kind`` is one the brain's tables allow.

    ``feed`` is a feed name or ``"next_step"``.
    """
    if feed == "next_step":
        entry = STEP_TRANSITIONS.get(before_kind)  # type: ignore[call-overload]
    else:
        entry = TRANSITIONS.get((before_kind, feed))  # type: ignore[arg-type]
    if entry is None:
        return [_p(TABLE_CODE, f"{feed} succeeded in state {before_kind}, which the table lacks")]
    if after_kind not in entry.targets:
        return [
            _p(
                TABLE_CODE,
                f"{feed} in {before_kind} led to {after_kind}, not one of {entry.targets}",
            )
        ]
    return []


def check_refused(machine: LoopMachine, call: Callable[[LoopMachine], Any]) -> list[str]:
    """``call(machine)`` must raise ``ProtocolError`` and leave the machine exactly as it was.

    This one does feed ``machine`` (that is the point): pass a copy if you need the original.
    """
    before = machine.model_dump_json()
    try:
        call(machine)
    except ProtocolError:
        pass
    except Exception as exc:  # report anything else as what it is
        return [_p(REFUSAL_CODE, f"raised {type(exc).__name__}: {exc} instead of ProtocolError")]
    else:
        return [_p(REFUSAL_CODE, "accepted instead of raising ProtocolError")]
    if machine.model_dump_json() != before:
        return [_p(REFUSAL_CODE, "raised ProtocolError but changed the machine")]
    return []


def check_next_run(before: LoopMachine, fresh: LoopMachine) -> list[str]:
    """``fresh = before.next_run()``: Start, same history, nothing pending, counters reset."""
    problems: list[str] = []
    if not isinstance(fresh.state, Start):
        problems.append(_p(NEXT_RUN_CODE, f"fresh machine in {fresh.state!r}"))
    if fresh.history != before.history:
        problems.append(_p(NEXT_RUN_CODE, "history not carried over"))
    if fresh.pending or fresh.turns_taken or fresh.exchange is not None or fresh.finalized:
        problems.append(_p(NEXT_RUN_CODE, "pending, turns, exchange or finalized not reset"))
    if fresh.loop_window.calls or fresh.loop_window.warned:
        problems.append(_p(NEXT_RUN_CODE, "loop detector not reset"))
    return problems


def _restore(text: str, cls: type[LoopMachine] = LoopMachine) -> LoopMachine:
    return cls.model_validate_json(text)


def _ask(machine: LoopMachine, policy: MachinePolicy) -> MachineStep | str:
    try:
        return machine.next_step(policy)
    except ProtocolError as exc:
        return f"ProtocolError({exc})"


def check_resume(machine: LoopMachine, policy: MachinePolicy | None = None) -> list[str]:
    """Exact resume, without touching ``machine`` (beyond its derived JSON cache).

    ``model_dump_json()`` is the snapshot model's own JSON and ``digest()`` its hash; the snapshot
    restores to an equal machine with an equal digest and the same JSON; with a
    policy, two restored copies answer ``next_step`` identically, and asking one twice gives the
    same answer and leaves it as the first ask did (idempotence).
    """
    problems: list[str] = []
    text = machine.model_dump_json()
    if text != machine.snapshot().model_dump_json():
        problems.append(_p(RESUME_CODE, "model_dump_json() is not the snapshot model's JSON"))
    if machine.digest() != hashlib.sha256(text.encode()).hexdigest()[:16]:
        problems.append(_p(RESUME_CODE, "digest() is not the hash of model_dump_json()"))
    try:
        first = _restore(text, type(machine))
    except (ValidationError, ValueError) as exc:
        if open_tail_allowed(machine) and isinstance(machine.state, Terminal):
            return [_p(RESTORE_OPEN_TAIL_CODE, f"a terminal machine with calls in flight: {exc}")]
        return [_p(RESUME_CODE, f"the snapshot does not restore: {exc}")]
    if first != machine:
        problems.append(_p(RESUME_CODE, "the restored machine is not equal to the original"))
    if first.digest() != machine.digest():
        problems.append(_p(RESUME_CODE, "the digest changed across save/restore"))
    if first.model_dump_json() != text:
        problems.append(_p(RESUME_CODE, "the snapshot is not a fixed point of save/restore"))
    try:
        via_dict = type(machine).model_validate(machine.model_dump())
    except (ValidationError, ValueError) as exc:
        problems.append(_p(RESUME_CODE, f"model_dump() does not restore: {exc}"))
    else:
        if via_dict != machine:
            problems.append(_p(RESUME_CODE, "model_dump() restores to another machine"))
    if policy is None:
        return problems
    second = _restore(text, type(machine))
    a1 = _ask(first, policy)
    after_first = first.model_dump_json()
    a2 = _ask(second, policy)
    if a1 != a2 or after_first != second.model_dump_json():
        problems.append(_p(RESUME_CODE, f"two restored copies decide differently: {a1!r} {a2!r}"))
    again = _ask(first, policy)
    if again != a1:
        problems.append(_p(IDEMPOTENCE_CODE, f"asked twice: {a1!r}, then {again!r}"))
    if first.model_dump_json() != after_first:
        problems.append(_p(IDEMPOTENCE_CODE, "asking again changed the machine"))
    return problems


# --- a recorded trace, checked feed by feed --------------------------------------------------


def check_trace(path: str | os.PathLike[str], *, resume_every: int = 1) -> list[str]:
    """Walk a recorded trace on a bare brain, checking the invariants after every step and feed.

    Replay (``loopctl_sim.replay.machine``) checks that the brain makes the recorded decisions; this
    checks that those decisions keep the brain's promises: ``check_machine`` (with the step's
    policy) after every record, ``check_step`` and ``check_start_decision`` after every step,
    ``check_salvage``, ``check_commit`` and ``check_compaction_commit`` around their feeds,
    ``check_terminal_sticky`` and ``check_transition`` around every feed, and ``check_resume``
    after every ``resume_every``-th feed (0: never). Problems are prefixed with the record's
    ``seq``; a feed the brain refuses or a record before a header ends the walk with a problem.
    """
    from loopctl_sim.trace.feeds import apply_feed
    from loopctl_sim.trace.records import HeaderRecord, StepRecord, TraceReader

    problems: list[str] = []
    machine: LoopMachine | None = None
    policy: MachinePolicy | None = None
    feeds = 0
    for record in TraceReader(path):
        seq = record.seq
        found: list[str] = []
        if isinstance(record, HeaderRecord):
            machine = record.machine()
            found += check_machine(machine)
        elif machine is None:
            continue
        elif isinstance(record, StepRecord):
            policy = record.policy
            before = machine.snapshot()
            try:
                step = machine.next_step(policy)
            except ProtocolError as exc:
                problems.append(f"seq {seq}: {_p(REFUSAL_CODE, f'next_step refused: {exc}')}")
                return problems
            found += check_step(machine, step, policy)
            found += check_start_decision(before, policy, step)
            found += check_transition(before.state.kind, "next_step", machine.state.kind)
            found += check_machine(machine, policy)
        elif record.type == "feed":
            name = record.name
            before_machine = LoopMachine.from_snapshot(machine.snapshot())
            try:
                apply_feed(machine, name, record.args)
            except ProtocolError as exc:
                problems.append(f"seq {seq}: {_p(REFUSAL_CODE, f'{name} refused: {exc}')}")
                return problems
            found += check_transition(before_machine.state.kind, name, machine.state.kind)
            found += check_terminal_sticky(before_machine, machine)
            if name == "discard_pending":
                found += check_salvage(before_machine, machine)
            elif name == "commit_pending":
                found += check_commit(before_machine, machine)
            elif name == "compaction_result":
                found += check_compaction_commit(
                    before_machine, machine, list(machine.history), machine.context_tokens
                )
            found += check_machine(machine, policy)
            feeds += 1
            if resume_every and feeds % resume_every == 0:
                found += check_resume(machine, policy)
        problems += [f"seq {seq}: {p}" for p in found]
    return problems


# --- a reference for loop detection ----------------------------------------------------------


def reference_call_key(call: ToolCall) -> str:
    """Name plus canonical JSON arguments (the reference's own encoding)."""
    return call.name + "|" + json.dumps(call.arguments, sort_keys=True, separators=(",", ":"))


def reference_loop_verdict(keys: Sequence[str], unjudged: int, policy: MachinePolicy) -> str | None:
    """The contract's loop verdict on the latest exchange, from the run's whole call record.

    ``keys`` are every recorded call of the run, oldest first (``reference_call_key``);
    ``unjudged`` the number of calls of the latest exchange not judged yet. Returns ``"repeat"``,
    ``"ping_pong"`` or None.
    """
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
            return [_p(LOOP_CODE, f"a {verdict} loop should fail the run; got {step!r}")]
        return []
    if failed:
        return [_p(LOOP_CODE, f"failed for a loop the reference does not see ({verdict=})")]
    if verdict is not None and (grew != 1 or after.pending[-1].role != "user"):
        return [_p(LOOP_CODE, f"a {verdict} loop should append one warning note; grew {grew}")]
    if verdict is None and grew and not isinstance(after.state, Terminal):
        return [_p(LOOP_CODE, f"pending grew by {grew} without a loop verdict")]
    return []
