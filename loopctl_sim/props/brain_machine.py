"""``BrainMachine``: the brain under hypothesis's stateful testing, hypothesis playing the driver.

Random programs against one ``LoopMachine``: every feed where it is valid (``brain_feeds``), the
wrong feeds and bad input (``brain_misuse``: ``ProtocolError``, nothing changed), save/restore,
policy changes, ``next_run`` and ``drive`` (a well-behaved driver). The invariants and a reference
model (``brain_reference``) are checked after every rule; ``heal`` checks liveness at the end.
Use ``TestBrain``, or override ``policies`` (and ``histories``): the rules that draw from them are
rebuilt for each subclass::

    class MyBrain(BrainMachine):
        policies = st.builds(MachinePolicy, max_turns=st.integers(1, 50), tools=st.just(("grep",)))

    TestMyBrain = MyBrain.TestCase
    TestMyBrain.settings = settings(profile_settings(), stateful_step_count=40)

A failing program prints as Python. ``run_program`` drives the same machine with weighted
actions from a ``@given(st.data())`` test, reaching deeper runs (docs/testing.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Final

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from loopctl.core import (
    FEEDS,
    AwaitingTools,
    CallTools,
    Completed,
    LoopMachine,
    MachinePolicy,
    Message,
    Terminal,
)
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.brain_compactions import MISBEHAVIOURS
from loopctl_sim.props.brain_feeds import BrainFeeds
from loopctl_sim.props.brain_misuse import PLAUSIBLE_FEEDS, bad_inputs, wrong_feeds
from loopctl_sim.props.brain_strategies import (
    ERRORS,
    MOVES,
    PATIENCE,
    STARTS,
    TOKEN_FRACTIONS,
    CallSpec,
    Move,
    histories,
    policies,
)


class BrainMachine(BrainFeeds):
    """Hypothesis drives one ``LoopMachine`` as a (sometimes misbehaving) driver would. Replies
    call the advertised tools by index, so any tool names work."""

    policies: ClassVar[st.SearchStrategy[MachinePolicy]] = policies()
    histories: ClassVar[st.SearchStrategy[list[Message]]] = histories()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _install_policy_rules(cls)

    def _change_policy(self, drawn: MachinePolicy) -> None:
        """The driver rebuilds the policy every step; the run's max_turns stays."""
        self.policy = drawn.model_copy(update={"max_turns": self.policy.max_turns})

    def setup_from(self, data: st.DataObject) -> None:
        """``setup`` with its arguments drawn from ``data`` (for ``run_program``)."""
        self._setup(
            data.draw(self.policies, label="policy"),
            data.draw(self.histories, label="history"),
            data.draw(PATIENCE, label="patience"),
            data.draw(STARTS, label="start"),
        )

    def _next_run(self, policy: MachinePolicy) -> None:
        fresh = self.machine.next_run()
        self._fail_on(inv.check_next_run(self.machine, fresh), "next_run")
        self.machine = fresh
        self.policy = policy
        self.manual = False
        self.ref.next_run()

    @precondition(lambda self: not (self.kind == "terminal" and self.machine.finalized))
    @rule(moves=st.lists(MOVES, min_size=1, max_size=6))
    def drive(self, moves: list[Move]) -> None:
        """Iterations of a well-behaved driver: ask, do what was asked and report it (a move
        whose count is a whole window is a context overflow); the invariants are checked after
        every move."""
        for i, move in enumerate(moves):
            if self.kind == "terminal" and self.machine.finalized:
                return
            if i:
                self.check_all()
            self._move(*move)

    #: The moves ``heal`` may take to finish a run, and then to complete a fresh one.
    HEAL_BUDGET: ClassVar[int] = 12

    def heal(self) -> None:
        """Liveness: from wherever the program left the machine, a driver that reports final
        answers, small contexts and cutting compactions reaches the exit door within
        ``HEAL_BUDGET`` moves, and the next run completes. Safety alone would pass a brain that
        gets stuck (say, asking for the same compaction forever)."""
        self.manual = False
        if not self._heal_until(lambda: self.kind == "terminal" and self.machine.finalized):
            raise AssertionError(
                f"no exit after {self.HEAL_BUDGET} healthy moves: {self.machine!r}"
            )
        policy = self.policy
        self._next_run(policy.model_copy(update={"max_turns": max(1, policy.max_turns)}))
        self._heal_until(lambda: self.kind == "terminal")
        state = self.machine.state
        assert isinstance(state, Terminal) and isinstance(state.outcome, Completed), state

    def _heal_until(self, done: Callable[[], bool]) -> bool:
        """Healthy moves until ``done()``, within ``HEAL_BUDGET`` (False: not reached)."""
        for _ in range(self.HEAL_BUDGET):
            if done():
                return True
            self._move("healed", [], 0.0, "summary_only")
            self.check_all()
        return False

    def teardown(self) -> None:
        self.heal()

    def _move(self, text: str, calls: list[CallSpec], tokens: float, compaction: str) -> None:
        if self.kind == "start" and not self.started:
            self.accept_input(text, False)
            return
        if self.kind == "terminal":
            assert isinstance(self.machine.state, Terminal)
            if isinstance(self.machine.state.outcome, Completed):
                self.commit_pending()
            else:
                self.discard_pending()
            return
        self.next_step()
        kind = self.kind
        if kind == "awaiting_model" and tokens >= 1.0:
            # a context overflow: the driver reports the count (a whole window) and asks again;
            # the brain must withdraw the call for an emergency compaction
            self.set_context_tokens(tokens)
            self.next_step()
        elif kind == "awaiting_model":
            self.model_response(text, calls, tokens)
        elif kind == "awaiting_tools":
            self.tool_results(len(calls), [])
        elif kind == "awaiting_compaction" and compaction == "noop":
            self.compaction_noop(tokens)
        elif kind == "awaiting_compaction" and compaction in MISBEHAVIOURS:
            # the user's compactor misbehaves; a refused history leaves the brain waiting, and
            # the driver then hands it a valid one
            self.misbehaving_compaction(compaction, tokens)
            if self.kind == "awaiting_compaction":
                self.compaction_result("middle_out", tokens)
        elif kind == "awaiting_compaction":
            self.compaction_result(compaction, tokens)

    @rule()
    def save_and_restore(self) -> None:
        text = self.machine.model_dump_json()
        try:
            restored = LoopMachine.model_validate_json(text)
        except ValueError:
            self._fail_on(inv.check_resume(self.machine), "save_and_restore")
            return  # a tolerated known issue: carry on with the original
        assert restored == self.machine
        self.machine = restored

    @rule(index=st.integers(0, len(FEEDS) - 1))
    def feed_in_wrong_state(self, index: int) -> None:
        kind = self.kind
        invalid = wrong_feeds(kind)
        if invalid:
            feed = invalid[index % len(invalid)]
            problems = inv.check_refused(self.machine, PLAUSIBLE_FEEDS[feed])
            self._fail_on(problems, f"{feed} in {kind}")

    @rule(index=st.integers(0, 30))
    def bad_input_in_state(self, index: int) -> None:
        cases = bad_inputs(self.machine, self.policy)
        what, call = cases[index % len(cases)]
        self._fail_on(inv.check_refused(self.machine, call), f"{what} in {self.kind}")

    def check_all(self) -> None:
        """All the invariants at once (hypothesis runs them after every rule; ``drive`` also
        between its moves). The digest comes first: the others may save the machine, which
        refreshes the caches a stale digest would come from."""
        self.digest_matches_a_fresh_encoding()
        self.machine_is_sound()
        self.matches_reference_counts()
        self.terminal_is_sticky()
        self.resumes_exactly()
        self.awaiting_tools_has_an_exchange()

    @invariant()
    def digest_matches_a_fresh_encoding(self) -> None:
        """``digest()`` asked before anything saves the machine (hypothesis runs invariants in
        the order of their names; the only one that saves, ``resumes_exactly``, sorts after)."""
        self._fail_on(inv.check_digest(self.machine), "digest")

    @invariant()
    def machine_is_sound(self) -> None:
        self._fail_on(inv.check_machine(self.machine, self.policy), "check_machine")

    @invariant()
    def matches_reference_counts(self) -> None:
        ref = self.ref
        assert self.machine.turns_taken == ref.turns, (self.machine.turns_taken, ref.turns)
        assert self.machine.context_tokens == ref.tokens, (self.machine.context_tokens, ref.tokens)
        snap = self.machine.snapshot()
        assert snap.noop_floor == ref.noop_floor, (snap.noop_floor, ref.noop_floor)
        assert snap.loop.warned == ref.loop_warned, (snap.loop.warned, ref.loop_warned)

    @invariant()
    def terminal_is_sticky(self) -> None:
        state = self.machine.state
        if self.ref.outcome is not None:
            assert isinstance(state, Terminal) and state.outcome == self.ref.outcome, state
        elif isinstance(state, Terminal):
            self.ref.outcome = state.outcome
            error = getattr(state.outcome, "error", None)
            event(f"outcome {state.outcome.kind}" + (f" ({error.kind})" if error else ""))

    @invariant()
    def resumes_exactly(self) -> None:
        """Restored copies equal the machine, digest the same and decide the same, idempotently."""
        self._fail_on(inv.check_resume(self.machine, self.asking_policy()), "resume")

    @invariant()
    def awaiting_tools_has_an_exchange(self) -> None:
        if isinstance(self.machine.state, AwaitingTools):
            step = self._peek()
            assert isinstance(step, CallTools) and step.calls, step


def _install_policy_rules(cls: type[BrainMachine]) -> None:
    """The rules that draw from ``cls.policies`` / ``cls.histories``, built per class so that a
    subclass's strategies are used and the printed program stays plain Python
    (``state.setup(history=[...], patience=1, policy=MachinePolicy(...), start=True)``)."""

    @initialize(policy=cls.policies, history=cls.histories, patience=PATIENCE, start=STARTS)
    def setup(
        self: BrainMachine,
        policy: MachinePolicy,
        history: list[Message],
        patience: int,
        start: bool,
    ) -> None:
        self._setup(policy, history, patience, start)

    @precondition(lambda self: self.kind == "terminal" and self.machine.finalized)
    @rule(policy=cls.policies, patience=PATIENCE)
    def next_run(self: BrainMachine, policy: MachinePolicy, patience: int) -> None:
        self._next_run(policy)
        self.patience = patience

    @precondition(lambda self: self.kind != "terminal")
    @rule(policy=cls.policies)
    def change_policy(self: BrainMachine, policy: MachinePolicy) -> None:
        self._change_policy(policy)

    for function in (setup, next_run, change_policy):
        setattr(cls, function.__name__, function)


_install_policy_rules(BrainMachine)

TestBrain = BrainMachine.TestCase


#: How often ``run_program`` picks each kind of action (out of the sum).
PROGRAM_WEIGHTS: Final = {
    "drive": 12,
    "set_context_tokens": 2,
    "inject": 1,
    "manual": 1,
    "change_policy": 1,
    "save_and_restore": 2,
    "misuse": 2,
    "cancel": 1,
    "fail": 1,
}


def run_program(machine: BrainMachine, data: st.DataObject, steps: int) -> None:
    """Drive ``machine`` (after ``setup_from``) with ``steps`` actions weighted by
    ``PROGRAM_WEIGHTS``, checking every invariant after each: a driver that mostly behaves
    reaches the deep states (loops, several exchanges, a compaction then a failure) that
    hypothesis's uniform rule choice seldom does."""
    names = [name for name, weight in PROGRAM_WEIGHTS.items() for _ in range(weight)]
    for _ in range(steps):
        m = machine.machine
        if m.is_terminal and m.finalized:
            machine._next_run(data.draw(machine.policies, label="policy"))
            machine.patience = data.draw(PATIENCE, label="patience")
            machine.check_all()
            continue
        action = data.draw(st.sampled_from(names), label="action")
        kind, started = machine.kind, machine.started
        under_way = kind == "start" and started
        if action == "drive" or (action in ("cancel", "fail") and not machine.interruptible):
            machine.drive(data.draw(st.lists(MOVES, min_size=1, max_size=3), label="moves"))
        elif action == "set_context_tokens" and kind != "terminal":
            machine.set_context_tokens(data.draw(TOKEN_FRACTIONS, label="tokens"))
        elif action == "inject" and under_way:
            machine.inject(data.draw(st.sampled_from(["user", "system"])), "steer")
        elif action == "manual" and under_way:
            machine.request_manual_compaction()
        elif action == "change_policy" and kind != "terminal":
            machine._change_policy(data.draw(machine.policies, label="policy"))
        elif action == "save_and_restore":
            machine.save_and_restore()
        elif action == "misuse":
            index = data.draw(st.integers(0, 30), label="index")
            if data.draw(st.booleans(), label="wrong feed"):
                machine.feed_in_wrong_state(index)
            else:
                machine.bad_input_in_state(index)
        elif action == "cancel":
            machine.cancel()
        elif action == "fail":
            machine.fail(data.draw(ERRORS, label="error"))
        machine.check_all()
