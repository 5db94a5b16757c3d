"""Check 1 of a case, the invariants, checked at every step and feed of the run.

At machine level, ``CheckingMachine`` is a ``RecordingMachine`` (the checked run is also the
trace a failure is saved as) that runs the pure checkers of ``loopctl_sim.props.invariants``
around each call the simulator makes. At driver level, ``DriverChecker`` makes the same checks
from outside a real ``BareLoop`` through its public seams: ``before_step`` (chained last into
the loop's), the observer's steps and feeds (a ``Done`` or ``Compact`` step copies the brain, so
the exit door and the compaction are judged against it), and ``run_started`` without an input,
a resume, which must be exact.

Checking inside the run, not afterwards over the trace, names the first step or feed that broke
a promise (``Violation``). The checkers are looked up on the ``invariants`` module at every call,
so a test can plant a bug in one with ``monkeypatch``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loopctl.core import (
    AwaitingTools,
    CallTools,
    CommitPending,
    Compact,
    CompactionResult,
    DiscardPending,
    Done,
    Feed,
    LoopMachine,
    MachinePolicy,
    MachineSnapshot,
    MachineState,
    MachineStep,
    Terminal,
)
from loopctl.driver import StepPoint
from loopctl.observe import LoopObserver
from loopctl_sim.errors import SimError
from loopctl_sim.props import invariants as inv
from loopctl_sim.trace import RecordingMachine


class Violation(SimError):
    """The invariant problems found at one place of a run (``where``: a step, a feed, a crash)."""

    def __init__(self, problems: Sequence[str], where: str) -> None:
        super().__init__(f"{where}: {'; '.join(problems)}")
        self.problems = list(problems)
        self.where = where


def _check(problems: Sequence[str], where: str, step: object = None) -> None:
    """Raise ``Violation`` for ``problems`` found ``where`` (the step's repr made only then)."""
    if problems:
        raise Violation(problems, where if step is None else f"{where} ({step!r})")


def step_problems(
    before: MachineSnapshot,
    policy: MachinePolicy,
    step: MachineStep,
    machine: LoopMachine,
    dispatched: set[str],
    again: frozenset[str] | set[str] = frozenset(),
) -> list[str]:
    """What is wrong with one ``next_step``: the step itself, the transition table, the decision
    order in ``Start``, the loop verdict, terminal stickiness, and a call id dispatched twice
    (``dispatched`` is updated; ids in ``again`` may be dispatched once more: a crash
    interrupted them)."""
    problems = inv.check_step(machine, step, policy)
    problems += inv.check_transition(before.state.kind, "next_step", machine.state.kind)
    problems += inv.check_start_decision(before, policy, step)
    problems += loop_problems(before, policy, step, machine)
    if isinstance(before.state, Terminal) and machine.state != before.state:
        problems.append(f"{inv.InvariantCode.TERMINAL_STICKY}: next_step left {before.state!r}")
    if isinstance(step, CallTools):
        twice = [c.id for c in step.calls if c.id in dispatched and c.id not in again]
        if twice:
            problems.append(f"{inv.InvariantCode.DISPATCH}: call ids dispatched twice: {twice}")
        dispatched.update(c.id for c in step.calls)
    return problems


def loop_problems(
    before: MachineSnapshot, policy: MachinePolicy, step: MachineStep, machine: LoopMachine
) -> list[str]:
    """The loop verdict of a step asked in ``Start``, against the reference judge of the calls
    the brain recorded before it (``before.loop``) under the policy's window, limit and action,
    and whether it was warned already (``check_loop_decision``)."""
    loop = before.loop
    verdict = inv.reference_loop_verdict(loop.calls, loop.unjudged, policy)
    return inv.check_loop_decision(before, machine, step, verdict, loop.warned, policy)


def feed_problems(
    name: str,
    before_state: MachineState,
    machine: LoopMachine,
    copy: LoopMachine | None = None,
    args: Mapping[str, Any] | None = None,
) -> list[str]:
    """What is wrong with one feed: the transition table and stickiness, plus the commit,
    salvage and compaction rules around the exit doors and a compaction (``copy``: the machine
    just before the feed, needed for those three)."""
    problems = inv.check_transition(before_state.kind, name, machine.state.kind)
    if isinstance(before_state, Terminal) and machine.state != before_state:
        problems.append(f"{inv.InvariantCode.TERMINAL_STICKY}: {name} left {before_state!r}")
    if copy is not None and name == "commit_pending":
        problems += inv.check_commit(copy, machine)
    elif copy is not None and name == "discard_pending":
        problems += inv.check_salvage(copy, machine)
    elif copy is not None and name == "compaction_result" and args is not None:
        problems += inv.check_compaction_commit(
            copy, machine, list(args["compacted"]), int(args["after"])
        )
    return problems


class CheckingMachine(RecordingMachine):
    """A ``RecordingMachine`` that checks the invariants before every step and after every feed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.policy: MachinePolicy | None = None
        self.steps = 0
        self.dispatched: set[str] = set()

    def next_step(self, policy: MachinePolicy) -> MachineStep:
        self.steps += 1
        where = f"step {self.steps}"
        _check(inv.check_machine(self.machine, policy), f"before {where}")
        before = self.machine.snapshot()
        step = super().next_step(policy)
        problems = step_problems(before, policy, step, self.machine, self.dispatched)
        _check(problems, where, step)
        self.policy = policy
        return step

    def feed(self, feed: Feed) -> None:
        """Record ``feed`` (the seed-named methods come here too), then check it."""
        name = feed.name
        before_state = self.machine.state
        copy_needed = isinstance(feed, CommitPending | DiscardPending | CompactionResult)
        before = LoopMachine.from_snapshot(self.machine.snapshot()) if copy_needed else None
        super().feed(feed)
        problems = feed_problems(name, before_state, self.machine, before, feed.args())
        _check(problems, f"step {self.steps}: feed {name}")
        if isinstance(feed, CommitPending | DiscardPending):
            _check(inv.check_machine(self.machine, self.policy), f"after {name}")

    def replace(self, machine: LoopMachine) -> None:
        # the sim restored the brain from its snapshot: it must resume exactly
        _check(inv.check_resume(machine, self.policy), f"crash before step {self.steps + 1}")
        super().replace(machine)


class DriverChecker(LoopObserver):
    """Checks a ``BareLoop`` run, its resumes and a heal run after it at every step and feed."""

    def __init__(self) -> None:
        self.policy: MachinePolicy | None = None
        self.steps = 0
        self.dispatched: set[str] = set()
        self.again: set[str] = set()
        self._before: MachineSnapshot | None = None
        self._state: MachineState | None = None
        self._copy: LoopMachine | None = None

    def before_step(self, point: StepPoint) -> None:
        """The loop's last ``before_step`` hook: the brain as the driver asks its next step."""
        machine = point.machine
        _check(inv.check_machine(machine, self.policy), f"before step {self.steps + 1}")
        self._before = machine.snapshot()

    def run_started(self, machine: LoopMachine, input: Any) -> None:
        if input is None and machine.started:
            _check(inv.check_resume(machine, self.policy), f"resume at step {self.steps}")
            exchange = machine.exchange
            if isinstance(machine.state, AwaitingTools) and exchange is not None:
                self.again.update(c.id for c in exchange.dispatch)
        self._state = machine.state

    def step(self, policy: MachinePolicy, step: MachineStep, machine: LoopMachine) -> None:
        self.steps += 1
        before = self._before if self._before is not None else machine.snapshot()
        self._before = None
        problems = step_problems(before, policy, step, machine, self.dispatched, self.again)
        _check(problems, f"step {self.steps}", step)
        self.policy = policy
        self._state = machine.state
        self._copy = (
            LoopMachine.from_snapshot(machine.snapshot())
            if isinstance(step, Done | Compact)
            else None
        )

    def feed(self, name: str, args: Mapping[str, Any], machine: LoopMachine) -> None:
        before_state = self._state if self._state is not None else machine.state
        problems = feed_problems(name, before_state, machine, self._copy, args)
        if name in ("commit_pending", "discard_pending"):
            problems += inv.check_machine(machine, self.policy)
            self.again.clear()
        _check(problems, f"step {self.steps}: feed {name}")
        self._state = machine.state
        self._copy = None
