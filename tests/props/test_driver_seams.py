"""The driver's property layer, piece by piece: the checks DriverWatch gained for issue 34
(``check_run_messages``, ``check_compact_now``), the world's misbehaving compactor through a real
``BareLoop``, and the seams a hunt strikes at (a crash between a wave's results and the next
step; a compaction requested from ``before_step`` and from a post-tool hook)."""

from __future__ import annotations

import pytest

from loopctl.core import (
    AwaitingCompaction,
    Completed,
    Failed,
    MachinePolicy,
    MaxTurnsExceeded,
    Message,
    ProtocolError,
    ToolCall,
    ToolResult,
)
from loopctl.driver import BareLoop, RunConfig
from loopctl.testing import ScriptedClient
from loopctl.tools import tool
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.driver_machine import DriverMachine
from loopctl_sim.props.driver_watch import DriverWatch
from loopctl_sim.props.driver_world import PlannedCompactor
from loopctl_sim.sim.body import run_simulated


@tool
def look(path: str) -> str:
    """Read a path."""
    return f"contents of {path}"


def _calls(*ids: str) -> Message:
    return Message.assistant(
        "looking", [ToolCall(id=i, name="look", arguments={"path": i}) for i in ids]
    )


def _results(*ids: str) -> Message:
    return Message.from_results(
        [ToolResult(call_id=i, name="look", content=f"contents of {i}") for i in ids]
    )


# --- the checkers --------------------------------------------------------------------------------


def test_run_messages_must_be_what_the_run_said() -> None:
    said = [Message.user("go"), _calls("a", "b"), _results("a", "b"), Message.assistant("done")]
    assert inv.check_run_messages(said, said) == []
    lost = inv.check_run_messages(said, [said[0], said[1], said[3]])
    assert lost and all(p.startswith(f"{inv.InvariantCode.RUN_MESSAGES}:") for p in lost), lost
    swapped = [said[0], said[1], _results("b", "a"), said[3]]
    problems = inv.check_run_messages(swapped, swapped)
    assert problems == [
        f"{inv.InvariantCode.RUN_MESSAGES}: message 1's calls ['a', 'b'] are answered by ['b', 'a']"
    ]
    # a run that ended with tools in flight: the last calls may be open
    assert inv.check_run_messages(said[:2], said[:2]) == []


def test_a_requested_compaction_must_be_in_the_policy() -> None:
    assert inv.check_compact_now(MachinePolicy(compact_now=True)) == []
    assert inv.check_compact_now(MachinePolicy())[0].startswith(f"{inv.InvariantCode.POLICY}:")


# --- the world's compactor through a real loop ---------------------------------------------------


def _loop(compactor: PlannedCompactor) -> BareLoop:
    replies = [_calls("a"), Message.assistant("done"), Message.assistant("again")]
    loop = BareLoop(ScriptedClient(replies), tools=[look], compactor=compactor)
    return loop


@pytest.mark.parametrize("mode", ["orphan_results", "calls_unanswered", "reordered_pair"])
def test_a_refused_compaction_propagates_and_loses_nothing(mode: str) -> None:
    compactor = PlannedCompactor([mode])
    loop = _loop(compactor)
    first = run_simulated(loop.run("go"))
    assert isinstance(first.outcome, Completed)
    loop.request_compaction()
    with pytest.raises(ProtocolError, match="compacted history is not valid"):
        run_simulated(loop.run("and now?"))
    assert isinstance(loop.machine.state, AwaitingCompaction)
    assert list(loop.machine.messages()) == compactor.handed  # nothing lost
    mended = BareLoop.from_machine(loop.machine, loop.client, [look], compactor=compactor)
    result = run_simulated(mended.run())  # the plan is spent: the compactor cuts
    assert isinstance(result.outcome, Completed) and compactor.done == [mode, "cut"]


def test_a_raising_compactor_fails_the_run_with_a_compaction_error() -> None:
    loop = _loop(PlannedCompactor(["raise"]))
    run_simulated(loop.run("go"))
    loop.request_compaction()
    result = run_simulated(loop.run("and now?"))
    assert isinstance(result.outcome, Failed) and result.error is not None
    assert result.error.kind == "compaction" and "CompactorRaised" in result.error.message


# --- the seams a hunt strikes at -----------------------------------------------------------------


def test_a_crash_between_the_results_and_the_next_step_resumes_with_every_result_once() -> None:
    machine = DriverMachine()
    machine.run(
        [("calls", ["ok", "slow", "ok"]), ("calls", ["ok"]), ("final", "done")],
        [("results_crash", 1)],
        "go",
    )
    result = machine.last
    assert result is not None and isinstance(result.outcome, Completed)
    assert machine.watch.results_fed == 2 and not machine.watch.plan  # the crash struck
    answered = [r.call_id for m in result.messages for r in m.tool_results]
    assert answered == ["c1", "c2", "c3", "c4"]  # once each, in call order, across the restart


@pytest.mark.parametrize("seam", ["before_step", "hook"])
def test_a_compaction_requested_at_a_seam_is_asked_for(seam: str) -> None:
    watch = DriverWatch([(seam, 1, "compact")])
    replies = [_calls("a"), Message.assistant("done")]
    loop = watch.install(BareLoop(ScriptedClient(replies), tools=[look], config=RunConfig()))
    result = run_simulated(loop.run("go"))
    assert isinstance(result.outcome, Completed)
    assert not watch.plan and not watch.compact_owed  # struck, and a step asked for it
    assert watch.check_result(result) == []


def test_a_loop_warning_given_as_the_run_runs_out_of_turns_is_in_what_the_run_said() -> None:
    """The brain adds its loop warning when asked for a step, not at a feed; when the run then
    ends at once (its turns used up), no feed follows, and the watch must still count the
    warning among the messages the run said (the result keeps it: salvage)."""
    watch = DriverWatch()
    same = [
        Message.assistant("again", [ToolCall(id=f"c{i}", name="look", arguments={"path": "x"})])
        for i in range(3)
    ]
    config = RunConfig(max_turns=3, loop_repeat_limit=3, loop_action="warn")
    loop = watch.install(BareLoop(ScriptedClient(same), tools=[look], config=config))
    result = run_simulated(loop.run("go"))
    assert isinstance(result.outcome, MaxTurnsExceeded)
    assert any("Loop warning" in m.text for m in result.messages)
    assert watch.check_result(result) == []
