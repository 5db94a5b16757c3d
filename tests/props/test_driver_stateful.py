"""BareLoop under hypothesis: ``DriverMachine`` (loopctl_sim/driver_stateful.py).

Cancels, provider errors, failing and hanging tools and crash/restore at arbitrary points; the
brain invariants after every step and feed; every run ends; no tool call runs twice except after
a crash. Settings come from the ``HYPOTHESIS_PROFILE`` profile, with a small budget here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import settings

from loopctl.driver import RunConfig
from loopctl_sim.props.driver_machine import DriverMachine
from loopctl_sim.props.profiles import profile_settings

_profile = profile_settings()

TestDriver = DriverMachine.TestCase
TestDriver.settings = settings(
    _profile,
    max_examples=min(_profile.max_examples, 25),
    stateful_step_count=min(_profile.stateful_step_count, 8),
)


class _Forgetful(DriverMachine):
    """A harness that forgets that a crash allows a call in flight to run again: the check on
    repeated tool calls must then fail (it really sees re-dispatched calls)."""

    def _restart(self, loop: Any, watcher: Any) -> Any:
        allowed = Counter(self.allowed)
        restarted = super()._restart(loop, watcher)
        self.allowed = allowed
        return restarted


def _one_run(machine: DriverMachine, replies: list[Any], interrupts: list[Any]) -> None:
    machine.config = RunConfig(max_turns=4, tool_timeout=0.02)
    machine.run(replies=replies, interrupts=interrupts, text="go")


def test_a_call_in_flight_at_a_crash_runs_again_and_that_is_allowed() -> None:
    m = DriverMachine()
    _one_run(m, [("calls", ["crash"]), ("final", "done")], [])
    assert m.executions == Counter({1: 2})  # crashed while working, dispatched again on resume
    assert m.allowed == Counter({1: 1})
    m.no_tool_call_ran_twice_except_after_a_crash()
    m.every_run_ended()
    assert m.last is not None and m.last.final_text == "done"


def test_the_repeat_check_sees_calls_dispatched_again_after_a_crash() -> None:
    m = _Forgetful()
    _one_run(m, [("calls", ["ok", "crash"]), ("final", "done")], [])
    with pytest.raises(AssertionError):
        m.no_tool_call_ran_twice_except_after_a_crash()


def test_crash_and_cancel_at_observer_points() -> None:
    m = DriverMachine()
    _one_run(m, [("calls", ["ok"]), ("calls", ["ok"]), ("final", "x")], [("crash", 3)])
    assert m.executions == Counter({1: 1, 2: 1})  # a crash between steps re-runs nothing
    m.every_run_ended()
    c = DriverMachine()
    _one_run(c, [("calls", ["ok"]), ("final", "x")], [("cancel", 2)])
    assert c.last is not None and c.last.outcome.kind == "cancelled"
    c.every_run_ended()
