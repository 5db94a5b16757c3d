"""The invariants at driver level: ``CheckingMachine``'s checks, made from outside a real
``BareLoop`` through its public seams.

- ``DriverChecker.before_step`` (chained last into the loop's ``before_step``) checks the
  machine right before the driver asks its next step and keeps the snapshot the decision is
  judged against;
- as an observer, ``step`` and ``feed`` check each step and feed; at a ``Done`` or ``Compact``
  step it copies the brain, so the exit door and the compaction are judged against it;
- ``run_started`` without an input is a resume after a crash: the brain must resume exactly,
  and the calls it still has to dispatch may be dispatched again.

The first problem raises ``Violation`` out of ``run()``, naming the step or feed that broke a
promise, as at machine level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loopctl.core import (
    AwaitingTools,
    Compact,
    Done,
    LoopMachine,
    MachinePolicy,
    MachineSnapshot,
    MachineState,
    MachineStep,
)
from loopctl.driver import StepPoint
from loopctl.observe import LoopObserver
from loopctl_sim.fuzz.checker import feed_problems, raise_problems, step_problems
from loopctl_sim.props import invariants as inv


class DriverChecker(LoopObserver):
    """Checks a ``BareLoop`` run at every step and feed; see the module docstring. One checker
    watches a run and its resumes (and a heal run after it)."""

    tolerated: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.policy: MachinePolicy | None = None
        self.steps = 0
        self.dispatched: set[str] = set()
        self.again: set[str] = set()
        self._before: MachineSnapshot | None = None
        self._state: MachineState | None = None
        self._copy: LoopMachine | None = None

    def _raise(self, problems: Sequence[str], where: str, step: object = None) -> None:
        raise_problems(problems, self.tolerated, where, step)

    def before_step(self, point: StepPoint) -> None:
        """The loop's last ``before_step`` hook: the brain as the driver asks its next step."""
        machine = point.machine
        self._raise(inv.check_machine(machine, self.policy), f"before step {self.steps + 1}")
        self._before = machine.snapshot()

    def run_started(self, machine: LoopMachine, input: Any) -> None:
        if input is None and machine.started:
            self._raise(inv.check_resume(machine, self.policy), f"resume at step {self.steps}")
            exchange = machine.exchange
            if isinstance(machine.state, AwaitingTools) and exchange is not None:
                self.again.update(c.id for c in exchange.dispatch)
        self._state = machine.state

    def step(self, policy: MachinePolicy, step: MachineStep, machine: LoopMachine) -> None:
        self.steps += 1
        before = self._before if self._before is not None else machine.snapshot()
        self._before = None
        problems = step_problems(before, policy, step, machine, self.dispatched, self.again)
        self._raise(problems, f"step {self.steps}", step)
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
        self._raise(problems, f"step {self.steps}: feed {name}")
        self._state = machine.state
        self._copy = None
