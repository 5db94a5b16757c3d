"""Driver level: the same worlds through BareLoop, and replay of traces through BareLoop."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from sim_helpers import SCENARIOS, adding_world, lines, write_lines

from loopctl import BareLoop, Cancelled, Completed, Failed, tool
from loopctl_sim.cli import main
from loopctl_sim.props.driver_watch import DriverWatch
from loopctl_sim.replay import replay_driver, replay_trace
from loopctl_sim.sim import simulate_driver
from loopctl_sim.sim.faults import Fault
from loopctl_sim.sim.machine import simulate
from loopctl_sim.sim.scenario import load_scenario
from loopctl_sim.trace import StepRecord, read_trace

SCENARIO_FILES = sorted(SCENARIOS.glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: p.stem)
def test_the_driver_and_the_machine_level_simulator_agree(path: Path, tmp_path: Path) -> None:
    """The same world ends in the same brain, bit for bit, whether BareLoop or the machine-level
    simulator drives it: the simulator's model of the driver is faithful for every fault."""
    scenario = load_scenario(path)
    trace = tmp_path / "driver.jsonl"
    by_driver = simulate_driver(scenario.world(), trace)
    by_machine = simulate(scenario.world())
    assert by_driver.outcome.kind == scenario.expect
    assert by_driver.digest == by_machine.digest
    assert (by_driver.retries, by_driver.tool_calls, by_driver.crashes) == (
        by_machine.retries,
        by_machine.tool_calls,
        by_machine.crashes,
    )
    assert replay_trace(trace).ok
    assert replay_driver(trace).ok


def test_a_hung_tool_is_cancelled_through_the_drivers_cancel_path(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    result = simulate_driver(
        adding_world(Fault(kind="tool_hang", tool_call=1), tool_timeout=None), trace
    )
    assert isinstance(result.outcome, Cancelled)
    kinds = [r.kind for r in read_trace(trace) if r.type == "io"]  # type: ignore[union-attr]
    assert kinds[-1] == "cancel" and "tool_result" not in kinds


def test_driver_retries_use_the_worlds_limit() -> None:
    result = simulate_driver(
        adding_world(Fault(kind="overloaded", model_call=1, times=9), max_retries=4)
    )
    assert isinstance(result.outcome, Failed) and result.outcome.error.kind == "overloaded"
    assert result.retries == 4 and result.model_requests == 5


def test_driver_crashes_resume_with_from_machine(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    faults = [Fault(kind="crash", step=k) for k in (1, 3, 4)]
    result = simulate_driver(adding_world(*faults), trace)
    assert isinstance(result.outcome, Completed) and result.crashes == 3
    headers = [r for r in read_trace(trace) if r.type == "header"]
    assert len(headers) == 4
    replayed = replay_trace(trace)
    assert replayed.ok and (replayed.runs, replayed.resumes) == (1, 3)


def _driver_trace(tmp_path: Path, *faults: Fault) -> Path:
    trace = tmp_path / "t.jsonl"
    simulate_driver(adding_world(*faults), trace)
    return trace


def test_driver_replay_notices_a_different_request(tmp_path: Path) -> None:
    trace = _driver_trace(tmp_path)
    records = lines(trace)
    seq = [r["seq"] for r in records if r["type"] == "io" and r["kind"] == "model_request"][1]
    records[seq]["data"]["n_messages"] = 99
    write_lines(trace, records)
    assert replay_trace(trace).ok  # the brain does not see requests
    d = replay_driver(trace).divergence
    assert d is not None and d.what == "request" and '-  "n_messages": 99' in d.diff


def test_driver_replay_notices_a_different_reply(tmp_path: Path) -> None:
    trace = _driver_trace(tmp_path)
    records = lines(trace)
    seq = next(r["seq"] for r in records if r["type"] == "io" and r["kind"] == "model_reply")
    records[seq]["data"]["message"]["parts"][0]["text"] = "Let me subtract."
    write_lines(trace, records)
    d = replay_driver(trace).divergence
    assert d is not None and d.what == "feed" and "Let me subtract." in d.diff


def test_driver_replay_notices_a_missing_retry(tmp_path: Path) -> None:
    trace = _driver_trace(tmp_path, Fault(kind="timeout", model_call=1))
    records = [r for r in lines(trace) if not (r["type"] == "io" and r["kind"] == "retry")]
    for i, r in enumerate(records):
        r["seq"] = i
    write_lines(trace, records)
    d = replay_driver(trace).divergence  # without the retry the driver fails the run
    assert d is not None and d.what == "feed" and "fail" in d.diff


def test_driver_replay_of_a_truncated_trace_replays_up_to_its_last_record(
    tmp_path: Path,
) -> None:
    """A trace cut under a run (a crash, a Ctrl-C while recording) is not a divergence: it
    replays up to its last record and says so."""
    trace = _driver_trace(tmp_path)
    records = lines(trace)
    cut = next(r["seq"] for r in records if r["type"] == "feed" and r["name"] == "tool_results")
    write_lines(trace, records[:cut])
    result = replay_driver(trace)
    assert result.ok and not result.complete
    assert result.records == cut and result.steps > 0
    assert any(f"ends at line {cut}" in note for note in result.notes), result.notes


def test_driver_replay_of_a_trace_that_goes_on_after_its_end_is_a_divergence(
    tmp_path: Path,
) -> None:
    trace = _driver_trace(tmp_path)
    records = lines(trace)
    end = next(r["seq"] for r in records if r["type"] == "end")
    write_lines(trace, [*records[: end - 1], {**records[end], "seq": end - 1}])
    d = replay_driver(trace).divergence
    assert d is not None and d.line == end and d.seq == end - 1


def test_cli_run_and_replay_at_driver_level(tmp_path: Path) -> None:
    runner = CliRunner()
    trace = tmp_path / "t.jsonl"
    ran = runner.invoke(
        main, ["run", str(SCENARIOS / "context_overflow.yaml"), "--driver", "--trace", str(trace)]
    )
    assert ran.exit_code == 0 and ran.output.startswith("context_overflow: completed")
    assert lines(trace)[0]["metadata"]["level"] == "driver"
    replayed = runner.invoke(main, ["replay", str(trace), "--driver"])
    assert replayed.exit_code == 0 and replayed.output.startswith(f"ok: {trace}")
    records = lines(trace)
    seq = next(r["seq"] for r in records if r["type"] == "io" and r["kind"] == "model_reply")
    records[seq]["data"]["message"]["parts"][0]["text"] = "changed"
    write_lines(trace, records)
    diverged = runner.invoke(main, ["replay", str(trace), "--driver"])
    assert diverged.exit_code == 1 and "divergence at seq" in diverged.output


def test_trace_recorder_on_a_real_bare_loop_with_real_tools(tmp_path: Path) -> None:
    """TraceRecorder as a user installs it: BareLoop, @tool functions, two runs in one trace."""
    from loopctl import Message, ToolCall
    from loopctl.driver import BareLoop, RunConfig
    from loopctl.testing import ScriptedClient
    from loopctl.tools import tool
    from loopctl_sim.trace import TraceRecorder

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    client = ScriptedClient(
        [
            Message.assistant("", [ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})]),
            Message.assistant("5"),
            Message.assistant("", [ToolCall(id="c2", name="add", arguments={"a": 5, "b": "x"})]),
            Message.assistant("oops"),
        ]
    )
    path = tmp_path / "real.jsonl"
    recorder = TraceRecorder(path, metadata={"authorization": "Bearer secret"})
    loop = BareLoop(client, [add], RunConfig(max_turns=5), observers=[recorder])
    assert loop.run_sync("2 + 3?").final_text == "5"
    assert loop.run_sync("5 + x?").final_text == "oops"
    recorder.close()
    assert "secret" not in path.read_text()
    records = read_trace(path)
    assert [r.type for r in records].count("header") == 2
    machine_level = replay_trace(path)
    assert machine_level.ok and (machine_level.runs, machine_level.resumes) == (2, 0)
    driver_level = replay_driver(path)
    assert driver_level.ok, driver_level.summary()
    assert driver_level.final_digest == loop.machine.digest()


def test_a_crash_after_the_last_step_resumes_into_the_exit_door(tmp_path: Path) -> None:
    trace = _driver_trace(tmp_path, Fault(kind="crash", step=6))
    result = replay_driver(trace)
    assert result.ok, result.summary()
    assert (result.runs, result.resumes) == (1, 1)


async def test_simulate_driver_inside_an_event_loop() -> None:
    from loopctl_sim.sim import simulate_driver_async

    result = await simulate_driver_async(adding_world(Fault(kind="timeout", model_call=1)))
    assert isinstance(result.outcome, Completed) and result.retries == 1


def test_a_simulated_run_without_faults_leaves_no_cyclic_garbage() -> None:
    # Every object of a fault-free simulated run is freed by reference counting: a run that
    # left cycles (its whole brain and conversation) made the garbage collector's passes a
    # twentieth of a simulated run.
    import gc

    simulate_driver(adding_world())
    gc.collect()
    gc.disable()
    try:
        result = simulate_driver(adding_world())
        unreachable = gc.collect()
    finally:
        gc.enable()
    assert isinstance(result.outcome, Completed)
    assert unreachable == 0


@tool(name="add")
def _add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _adding_agent(client=None, observers=()):  # type: ignore[no-untyped-def]
    # the tool is built once, at import: a @tool built per call is a new pydantic model class
    # each time, cyclic garbage of the factory's own
    return BareLoop(client, [_add], observers=observers)


@pytest.mark.parametrize("kind", ["driver", "agent"])
def test_runs_with_provider_errors_leave_no_cyclic_garbage(kind: str) -> None:
    # A raised provider error held by the frame that raised it, and an agent run's closures
    # over its loop, were cycles that kept a finished run alive until a collector pass.
    import gc

    from loopctl_sim.sim import AgentWorld, run_agent

    faults = (Fault(kind="rate_limited", model_call=2), Fault(kind="network", model_call=3))
    world = adding_world(*faults)
    agent = AgentWorld(
        _adding_agent, world.input, script=list(world.model.replies), faults=list(faults)
    )

    def once() -> object:
        return simulate_driver(world) if kind == "driver" else run_agent(agent)

    once()
    gc.collect()
    gc.disable()
    try:
        result = once()
        unreachable = gc.collect()
    finally:
        gc.enable()
    assert isinstance(result.outcome, Completed)  # type: ignore[attr-defined]
    assert result.retries == 2  # type: ignore[attr-defined]
    assert unreachable == 0


@pytest.mark.parametrize("step", [1, 3, 5])
def test_a_compaction_requested_at_a_crash_survives_it_under_a_watch(
    step: int, tmp_path: Path
) -> None:
    """The restarted body is asked for the compaction again, with a ``DriverWatch`` installed
    as without one: the checked run of a fuzz case compacts where its unchecked twin does."""
    world = adding_world(Fault(kind="compact_now", step=step), Fault(kind="crash", step=step))
    plain, watched = tmp_path / "plain.jsonl", tmp_path / "watched.jsonl"
    simulate_driver(world, plain)
    simulate_driver(world, watched, watch=DriverWatch(brain=False, max_steps=100))
    manual = [
        [r.step for r in read_trace(t) if isinstance(r, StepRecord) and r.step.kind == "compact"]
        for t in (plain, watched)
    ]
    assert len(manual[0]) == 1 and getattr(manual[0][0], "reason", None) == "manual"
    assert manual[0] == manual[1]
