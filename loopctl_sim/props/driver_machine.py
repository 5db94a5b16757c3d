"""``DriverMachine``: the hands (``BareLoop``) under hypothesis's stateful testing.

Hypothesis plays the world. Each ``run`` rule starts one run of a ``BareLoop`` over the same
conversation, with a scripted model (``driver_world``: tool calls, final texts, calls of tools
that do not exist, provider failures of one to three attempts or persistent ones, with and
without retry-after, context overflows) and one scripted tool, ``work(n, mode)``, whose ``mode``
makes it answer, answer late, raise, hang (until its timeout), cancel the run while it works, or
crash the process while it works. Further cancels, crashes and config changes strike at
arbitrary steps and feeds. A crash is followed by what a real restart does: the brain is saved
to JSON, restored, put into a fresh body and resumed with ``run()``.

Checked after every step and feed, by the ``DriverWatch`` put into every body: the digest first,
the brain invariants, and the hands' promises (results in call order, every pending call
dispatched exactly once across a crash, attempts as the retry config says with delays no
shorter than the server's retry-after, an overflow followed by ``Compact(EMERGENCY)``, the
estimate grown after tool results, a config change in force at the next step), with bounds on
steps, attempts and dispatches so that a driver that loops fails instead of hanging. Checked
after every run: it ended (terminal, pending committed or discarded, within a bounded number of
resumes), the result agrees with the brain, no tool call ran twice except a call that was in
flight when a crash struck (the contract: pending tool calls are dispatched again on resume),
and every answered call ran.

Run it as a test::

    from loopctl_sim.props.driver_machine import TestDriver   # collected by pytest

Rules run their loop with ``asyncio.run``; retries sleep through the watch's no-op sleep and the
jitter is fixed, so a run takes milliseconds (a hanging tool waits for its 20 ms timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from typing import Any, ClassVar, Final

from hypothesis import event as _hypothesis_event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from loopctl.core import (
    AwaitingTools,
    Completed,
    Failed,
    LoopMachine,
    Terminal,
)
from loopctl.driver import BareLoop, CancelSignal, RunConfig, RunResult
from loopctl.testing import FunctionClient
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.driver_watch import Broken, Crash, DriverWatch, Strike, unwrap
from loopctl_sim.props.driver_world import (
    MODES,
    ReplySpec,
    ScriptedModel,
    World,
    config_changes,
    reply_specs,
    run_configs,
)

__all__ = ["MODES", "Crash", "DriverMachine", "TestDriver", "reply_specs", "run_configs"]

#: The most crash-and-resume cycles one run may need (each drawn crash strikes once).
_MAX_RESUMES: Final = 20

_INTERRUPTS: Final = st.lists(
    st.tuples(st.sampled_from(["cancel", "crash"]), st.integers(1, 25)), max_size=2
)


def event(text: str) -> None:
    """``hypothesis.event``, and nothing when a rule is called outside hypothesis."""
    with contextlib.suppress(InvalidArgument):
        _hypothesis_event(text)


class DriverMachine(RuleBasedStateMachine):
    """Hypothesis drives ``BareLoop`` runs in a scripted world. See the module docstring.

    Override ``configs`` (a strategy of ``RunConfig``) to test your own run settings, and
    ``changes`` (a strategy of ``RunConfig`` field updates) for the changes made mid-run.
    ``tolerated`` names brain problem codes reported nowhere (known issues); ``skip`` names
    driver property codes not checked; ``max_steps`` bounds the steps of one run.
    """

    configs: ClassVar[st.SearchStrategy[RunConfig]] = run_configs()
    changes: ClassVar[st.SearchStrategy[dict[str, Any]]] = config_changes()
    tolerated: ClassVar[frozenset[str]] = frozenset({inv.RESTORE_OPEN_TAIL_CODE})
    skip: ClassVar[frozenset[str]] = frozenset()
    max_steps: ClassVar[int] = 200

    def __init__(self) -> None:
        super().__init__()
        self.machine = LoopMachine()
        self.config = RunConfig()
        self.signal = CancelSignal()
        self.world = World(lambda: self.signal)
        self.allowed: Counter[int] = Counter()  # extra executions a crash in flight allows
        self.runs = 0
        self.last: RunResult | None = None
        self.watch = DriverWatch()
        self.model = ScriptedModel(self.watch, [])

    @property
    def executions(self) -> Counter[int]:
        """Executions of ``work`` by ``n``."""
        return self.world.executions

    # --- the world -----------------------------------------------------------------------------

    def _body(self, machine: LoopMachine) -> BareLoop:
        """A fresh body holding ``machine``, before the watch is installed."""
        return BareLoop.from_machine(
            machine, FunctionClient(self.model), [self.world.tool], self.config
        )

    # --- rules ---------------------------------------------------------------------------------

    @initialize(data=st.data())
    def setup(self, data: st.DataObject) -> None:
        self.config = data.draw(self.configs, label="config")

    @rule(
        replies=st.lists(reply_specs(), max_size=6),
        interrupts=_INTERRUPTS,
        text=st.sampled_from(["go", "continue", "and now?"]),
        data=st.data(),
    )
    def run(
        self,
        replies: list[ReplySpec],
        interrupts: list[tuple[str, int]],
        text: str,
        data: st.DataObject | None = None,
    ) -> None:
        strikes: list[Strike] = list(interrupts)
        if data is not None:
            changes = data.draw(st.lists(self.changes, max_size=2), label="config changes")
            at = data.draw(st.lists(st.integers(1, 12), min_size=len(changes), max_size=2))
            strikes += [("config", k, c) for k, c in zip(at, changes, strict=False)]
        self.signal = CancelSignal()
        watch = self.watch = DriverWatch(
            strikes,
            signal=self.signal,
            tolerated=self.tolerated,
            skip=self.skip,
            max_steps=self.max_steps,
        )
        self.model = ScriptedModel(watch, [self.world.entry(s) for s in replies])
        loop = watch.install(self._body(self.machine))
        result: RunResult | None = None
        resumes = 0
        first = True
        while result is None:
            try:
                result = asyncio.run(loop.run(text if first else None, self.signal))
            except BaseException as exc:  # a Crash, possibly wrapped in a group by the tools
                broken = unwrap(exc, Broken)
                if isinstance(broken, Broken):
                    raise broken.violation() from None
                if unwrap(exc, Crash) is None:
                    raise
                resumes += 1
                assert resumes <= _MAX_RESUMES, "the run keeps crashing: no progress"
                restarted = self._restart(loop, watch)
                if restarted is None:  # the crash struck after the exit door: the run is over
                    break
                loop = restarted
            first = False
        if result is not None:
            self.machine = loop.machine
        self.runs += 1
        self.last = result
        if result is not None:
            state = self.machine.state
            assert isinstance(state, Terminal) and state.outcome == result.outcome
            event(f"outcome {result.outcome.kind}")
            if isinstance(result.outcome, Completed):
                assert result.final_text == result.outcome.final_text
            if isinstance(result.outcome, Failed):
                assert result.error == result.outcome.error
        if resumes:
            event("resumed after a crash")

    def _restart(self, loop: BareLoop, watcher: DriverWatch) -> BareLoop | None:
        """What a restarted process does: restore the saved brain into a fresh body."""
        machine = loop.machine
        if isinstance(machine.state, AwaitingTools) and machine.exchange is not None:
            for call in machine.exchange.dispatch:
                n = call.arguments.get("n")
                if isinstance(n, int) and self.executions[n]:
                    self.allowed[n] += 1  # it may run again on resume
        if machine.is_terminal and machine.finalized:
            self.machine = machine
            return None
        text = machine.model_dump_json()
        try:
            restored = LoopMachine.model_validate_json(text)
        except ValueError:
            problems = inv.check_resume(machine)
            real = [p for p in problems if inv.problem_code(p) not in self.tolerated]
            assert not real, real
            event("known issue: a terminal machine with calls in flight does not restore")
            restored = machine
        else:
            assert restored == machine and restored.digest() == machine.digest()
        self.machine = restored
        return watcher.restarted(self._body(restored))

    @rule()
    def save_and_restore_between_runs(self) -> None:
        if self.machine.is_terminal and not self.machine.finalized:
            return
        self.machine = LoopMachine.model_validate_json(self.machine.model_dump_json())

    # --- invariants ----------------------------------------------------------------------------

    @invariant()
    def every_run_ended(self) -> None:
        m = self.machine
        if self.runs:
            assert m.is_terminal and m.finalized, m
        problems = [p for p in inv.check_machine(m) if inv.problem_code(p) not in self.tolerated]
        assert not problems, problems

    @invariant()
    def no_tool_call_ran_twice_except_after_a_crash(self) -> None:
        for n, times in self.executions.items():
            assert times <= 1 + self.allowed[n], (n, times, self.allowed[n])

    @invariant()
    def every_answered_call_ran(self) -> None:
        """The lower bound: a ``work`` call answered in the conversation was executed (the
        world's calls are never denied and their arguments are always valid)."""
        for message in self.machine.messages():
            for result in message.tool_results:
                if result.name == "work" and result.call_id.startswith("c"):
                    n = int(result.call_id[1:])
                    assert self.executions[n] >= 1, f"call {result.call_id} answered, never run"


TestDriver = DriverMachine.TestCase
