"""``BrainFeeds``: the brain's interface as hypothesis rules, the base of ``BrainMachine``.

One rule per feed, in the states that take it, and one for ``next_step``. Each feeds what a
driver would report and checks what that feed promises (an allowed move, a sticky terminal state,
input taken as given, a commit that kept what it must, the reference model's counts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, Literal

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from loopctl.core import (
    AwaitingCompaction,
    CallLLM,
    Cancelled,
    Compact,
    CompactReason,
    Completed,
    Done,
    Failed,
    LoopError,
    LoopMachine,
    MachinePolicy,
    MachineStep,
    Message,
    Terminal,
    TextPart,
    ToolCall,
    ToolResult,
)
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.brain_compactions import MISBEHAVIOURS, REFUSED, misbehaving_compaction
from loopctl_sim.props.brain_misuse import calling
from loopctl_sim.props.brain_reference import BrainReference
from loopctl_sim.props.brain_strategies import (
    CALLS,
    COMPACTION_MODES,
    ERRORS,
    TEXTS,
    TOKEN_FRACTIONS,
    CallSpec,
    compaction_of,
)


def _clone(machine: LoopMachine) -> LoopMachine:
    """An independent copy (messages are frozen and shared; the lists are copied)."""
    return type(machine).from_snapshot(machine.snapshot())


class BrainFeeds(RuleBasedStateMachine):
    """One ``LoopMachine`` (``machine``) fed by rules, the reference model (``ref``) beside it;
    use ``BrainMachine``, which adds the rest. ``tolerated``: invariant problem codes reported
    as known issues, not failed on; keep it as small as the brain allows."""

    tolerated: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.machine = LoopMachine()
        self.policy = MachinePolicy()
        self.manual = False  # the driver's compact_now flag for the next ask
        self.next_id = 0
        self.ref = BrainReference()  # what the brain should hold, kept independently
        # cancel and fail wait until this many turns were taken in the run, so that runs get
        # somewhere before they are interrupted (drawn per run)
        self.patience = 0

    @property
    def kind(self) -> str:
        return self.machine.state.kind

    @property
    def started(self) -> bool:
        return self.machine.snapshot().started

    @property
    def interruptible(self) -> bool:
        """cancel and fail are enabled: a run under way, past its drawn patience."""
        return (
            self.kind != "terminal" and self.started and self.machine.turns_taken >= self.patience
        )

    def asking_policy(self) -> MachinePolicy:
        if self.manual:
            return self.policy.model_copy(update={"compact_now": True})
        return self.policy

    def _fail_on(self, problems: Sequence[str], what: str) -> None:
        real = [p for p in problems if inv.problem_code(p) not in self.tolerated]
        inv.assert_no_problems(real, f"{what} on {self.machine!r}")

    def _feed(self, feed: str, do: Callable[[LoopMachine], None]) -> LoopMachine:
        """Apply a valid feed; check it against the table and stickiness; return the copy of
        the machine before it, for feed-specific checks."""
        before = _clone(self.machine)
        do(self.machine)
        event(f"feed {feed} in {before.state.kind}")
        problems = inv.check_transition(before.state.kind, feed, self.kind)
        problems += inv.check_terminal_sticky(before, self.machine)
        self._fail_on(problems, feed)
        return before

    def _reply(self, text: str, calls: Sequence[CallSpec]) -> Message:
        tools = self.machine.snapshot().advertised
        parts: list[ToolCall] = []
        for known, index, arguments in calls:
            name = tools[index % len(tools)] if known and tools else f"missing_{index}"
            self.next_id += 1
            parts.append(ToolCall(id=f"call_{self.next_id}", name=name, arguments=arguments))
        return Message.assistant(text, tool_calls=parts)

    def _peek(self) -> MachineStep | None:
        """Ask a deep copy (never the machine under test)."""
        try:
            return _clone(self.machine).next_step(self.asking_policy())
        except Exception:
            return None

    def _setup(
        self, policy: MachinePolicy, history: list[Message], patience: int, start: bool
    ) -> None:
        self.policy = policy
        self.machine = LoopMachine(history)
        self.patience = patience
        # most programs start with the run under way (swarm testing may disable both rules that
        # start one); the rest leave accept_input to the rules
        if start:
            self.accept_input("hello", False)

    @precondition(lambda self: self.kind != "start" or self.started)
    @rule()
    def next_step(self) -> None:
        policy = self.asking_policy()
        before = self.machine.snapshot()
        step: MachineStep = self.machine.next_step(policy)
        event(f"step {step!r}" if isinstance(step, Compact) else f"step {step.kind}")
        problems = inv.check_step(self.machine, step, policy)
        problems += inv.check_transition(before.state.kind, "next_step", self.kind)
        judged, label = self.ref.asked(before, self.machine, step, policy)
        problems += judged
        problems += inv.check_awaiting_model_decision(before, self.machine, step, policy)
        if label is not None:
            event(label)
        if isinstance(step, CallLLM) and step.turn > policy.max_turns:
            problems.append(
                f"{inv.InvariantCode.TURNS}: {step!r} with max_turns={policy.max_turns}"
            )
        if isinstance(before.state, Terminal) and step != Done(outcome=before.state.outcome):
            problems.append(
                f"{inv.InvariantCode.TERMINAL_STICKY}: a terminal machine answered {step!r}"
            )
        self._fail_on(problems, f"next_step -> {step!r}")
        if (isinstance(step, Compact) and step.reason is CompactReason.MANUAL) or isinstance(
            step, Done
        ):
            self.manual = False

    @precondition(lambda self: self.kind == "start" and not self.started)
    @rule(text=TEXTS, as_message=st.booleans())
    def accept_input(self, text: str, as_message: bool) -> None:
        given: str | Message = Message.user(text) if as_message else text
        self._feed("accept_input", lambda m: m.accept_input(given))
        assert self.machine.pending[-1] == Message.user(text)

    @precondition(lambda self: self.kind == "awaiting_model")
    @rule(text=TEXTS, calls=CALLS, tokens=TOKEN_FRACTIONS)
    def model_response(self, text: str, calls: list[CallSpec], tokens: float) -> None:
        reply = self._reply(text, calls)
        count = int(tokens * self.policy.context_window)
        advertised = self.ref.advertised
        assert self.machine.snapshot().advertised == advertised, "advertised names drifted"
        before = self._feed("model_response", lambda m: m.model_response(reply, count))
        self.ref.replied(count)
        added = list(self.machine.pending[before.pending_len() :])
        assert added[0] == reply, "the reply was not appended as given"
        known = [c for c in reply.tool_calls if c.name in advertised]
        if not reply.tool_calls:
            assert self.machine.state == Terminal(outcome=Completed(final_text=reply.text))
        elif not known:
            # every call unknown: the exchange completes at once with the pre-answers
            assert self.kind == "start", self.kind
            assert len(added) == 2 and all(r.is_error for r in added[1].tool_results)
            assert [r.call_id for r in added[1].tool_results] == [c.id for c in reply.tool_calls]
            self.ref.record_calls(reply.tool_calls)
        else:
            exchange = self.machine.exchange
            assert exchange is not None and list(exchange.dispatch) == known

    @precondition(lambda self: self.kind == "awaiting_tools")
    @rule(
        rotate=st.integers(0, 3),
        errors=st.lists(st.booleans(), max_size=3),
        tokens=st.none() | TOKEN_FRACTIONS,
    )
    def tool_results(self, rotate: int, errors: list[bool], tokens: float | None = None) -> None:
        """The results, with the driver's count after them (``tokens``, a fraction of the
        window) or without one (None: the count stays)."""
        exchange = self.machine.exchange
        assert exchange is not None
        dispatch = list(exchange.dispatch)
        r = rotate % len(dispatch)
        order = dispatch[r:] + dispatch[:r]
        results = [
            ToolResult(
                call_id=c.id,
                name=c.name,
                content=f"result of {c.id}",
                is_error=bool(errors[i]) if i < len(errors) else False,
            )
            for i, c in enumerate(order)
        ]
        message = Message.from_results(results)
        count = None if tokens is None else int(tokens * self.policy.context_window)
        before = self._feed("tool_results", lambda m: m.tool_results(message, count))
        if count is not None:
            self.ref.counted(count)
        added = list(self.machine.pending[before.pending_len() :])
        assert len(added) == 1, "tool_results must append exactly one message"
        merged = added[0].tool_results
        assert [x.call_id for x in merged] == [c.id for c in exchange.calls], "not in call order"
        by_id = {x.call_id: x for x in [*results, *exchange.preanswered]}
        assert merged == [by_id[c.id] for c in exchange.calls], "results were altered"
        self.ref.record_calls(exchange.calls)

    @precondition(lambda self: self.kind == "awaiting_compaction")
    @rule(mode=st.sampled_from(COMPACTION_MODES), tokens=TOKEN_FRACTIONS)
    def compaction_result(self, mode: str, tokens: float) -> None:
        compacted = compaction_of(self.machine.messages(), mode, self.machine.history_len())
        self._compacted(compacted, int(tokens * self.policy.context_window))

    def _compacted(self, compacted: list[Message], count: int) -> None:
        """Feed an accepted compaction and check what its commit kept."""
        before_tokens = self.machine.context_tokens
        before = self._feed(
            "compaction_result", lambda m: m.compaction_result(compacted, before_tokens, count)
        )
        self.ref.compacted(count)
        self._fail_on(
            inv.check_compaction_commit(before, self.machine, compacted, count), "compaction"
        )

    @precondition(lambda self: self.kind == "awaiting_compaction")
    @rule(kind=st.sampled_from(sorted(MISBEHAVIOURS)), tokens=TOKEN_FRACTIONS)
    def misbehaving_compaction(self, kind: str, tokens: float) -> None:
        """A compactor that misbehaves (``brain_compactions``). Every history that separates a
        call from its result is handed over first, and each must be refused (``ProtocolError``,
        nothing changed, still awaiting a compaction); then ``kind``: a refused one leaves the
        brain waiting, one that only drops system messages or grows is a commit."""
        messages = self.machine.messages()
        count = int(tokens * self.policy.context_window)
        before_tokens = self.machine.context_tokens
        event(f"misbehaving compaction {kind}")
        for refused in sorted(REFUSED):
            bad = misbehaving_compaction(messages, refused)
            call = calling("compaction_result", bad, before_tokens, count)
            problems = inv.check_refused(self.machine, call)
            self._fail_on(problems, f"a compaction that is {refused}")
        if kind in REFUSED:
            return
        self._compacted(misbehaving_compaction(messages, kind), count)

    @precondition(lambda self: self.kind == "awaiting_compaction")
    @rule(tokens=TOKEN_FRACTIONS)
    def compaction_noop(self, tokens: float) -> None:
        assert isinstance(self.machine.state, AwaitingCompaction)
        reason = self.machine.state.reason
        count = int(tokens * self.policy.context_window)
        before_tokens = self.machine.context_tokens
        self._feed("compaction_noop", lambda m: m.compaction_noop(before_tokens, count))
        self.ref.compaction_noop(reason, count)
        if reason is CompactReason.EMERGENCY:
            assert self.kind == "terminal", "a no-op after an emergency must fail the run"
        else:
            assert self.kind == "start"

    @precondition(lambda self: self.kind != "terminal")
    @rule(tokens=TOKEN_FRACTIONS)
    def set_context_tokens(self, tokens: float) -> None:
        count = int(tokens * self.policy.context_window)
        self._feed("set_context_tokens", lambda m: m.set_context_tokens(count))
        self.ref.counted(count)

    @precondition(lambda self: self.kind == "start" and self.started)
    @rule(role=st.sampled_from(["user", "system", "assistant"]), text=TEXTS)
    def inject(self, role: Literal["user", "system", "assistant"], text: str) -> None:
        message = Message(role=role, parts=(TextPart(text=text),))
        self._feed("inject", lambda m: m.inject(message))
        assert self.machine.pending[-1] == message

    @precondition(lambda self: self.interruptible)
    @rule()
    def cancel(self) -> None:
        self._feed("cancel", lambda m: m.cancel())
        assert self.machine.state == Terminal(outcome=Cancelled())

    @precondition(lambda self: self.interruptible)
    @rule(error=ERRORS)
    def fail(self, error: LoopError) -> None:
        self._feed("fail", lambda m: m.fail(error))
        assert self.machine.state == Terminal(outcome=Failed(error=error))

    @precondition(lambda self: self.kind == "terminal")
    @rule(error=st.none() | ERRORS)
    def cancel_or_fail_when_terminal(self, error: LoopError | None) -> None:
        """Both are no-ops on a finished machine: nothing at all changes."""
        before = self.machine.model_dump_json()
        if error is None:
            self._feed("cancel", lambda m: m.cancel())
        else:
            self._feed("fail", lambda m: m.fail(error))
        assert self.machine.model_dump_json() == before, "a terminal machine changed"

    @precondition(
        lambda self: (
            isinstance(self.machine.state, Terminal)
            and isinstance(self.machine.state.outcome, Completed)
            and not self.machine.finalized
        )
    )
    @rule()
    def commit_pending(self) -> None:
        before = self._feed("commit_pending", lambda m: m.commit_pending())
        self._fail_on(inv.check_commit(before, self.machine), "commit_pending")

    @precondition(
        lambda self: (
            isinstance(self.machine.state, Terminal)
            and not isinstance(self.machine.state.outcome, Completed)
            and not self.machine.finalized
        )
    )
    @rule()
    def discard_pending(self) -> None:
        before = self._feed("discard_pending", lambda m: m.discard_pending())
        self._fail_on(inv.check_salvage(before, self.machine), "discard_pending")

    @precondition(lambda self: self.kind == "start" and self.started)
    @rule()
    def request_manual_compaction(self) -> None:
        self.manual = True
