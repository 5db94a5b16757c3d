"""The ``before_step`` seam (``loopctl.driver.control``): run-level events at a step boundary."""

from __future__ import annotations

import pytest

from loopctl import (
    BareLoop,
    Cancelled,
    Compact,
    CompactReason,
    Completed,
    LoopMachine,
    Message,
    ProtocolError,
    tool,
)
from loopctl.api import ModelRequest
from loopctl.driver import StepPoint
from loopctl.testing import FunctionClient, ScriptedClient
from tests.driver.conftest import Recorder
from tests.driver.helpers import answer, ask, call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _three_turns() -> ScriptedClient:
    return ScriptedClient(
        [ask(call("c1", "add", a=1, b=2)), ask(call("c2", "add", a=3, b=4)), answer("done")]
    )


async def test_the_hook_runs_before_every_step_and_sees_the_brain() -> None:
    seen: list[tuple[str, int]] = []

    def hook(point: StepPoint) -> None:
        seen.append((point.machine.state.kind, point.machine.turns_taken))

    recorder = Recorder()
    loop = BareLoop(_three_turns(), [add], observers=[recorder], before_step=hook)
    result = await loop.run("go")
    assert isinstance(result.outcome, Completed)
    # one call per step the brain answered, the last one (Done) included
    assert len(seen) == len(recorder.steps)
    assert seen[0] == ("start", 0)
    assert seen[-1] == ("terminal", 3)


async def test_inject_at_a_step_reaches_the_next_request_and_the_observers() -> None:
    requests: list[ModelRequest] = []

    def model(request: ModelRequest) -> Message:
        requests.append(request)
        return answer("ok") if len(requests) > 1 else ask(call("c1", "add", a=1, b=2))

    def hook(point: StepPoint) -> None:
        if point.machine.turns_taken == 1 and point.machine.state.kind == "start":
            point.inject(Message.user("be brief"))

    recorder = Recorder()
    loop = BareLoop(FunctionClient(model), [add], observers=[recorder], before_step=hook)
    await loop.run("go")
    assert requests[1].messages[-1] == Message.user("be brief")
    assert ("inject", {"message": Message.user("be brief")}) in recorder.feeds


async def test_cancel_at_a_step_is_a_cancelled_run_with_its_event_and_salvage() -> None:
    def hook(point: StepPoint) -> None:
        if point.machine.turns_taken == 2 and point.machine.state.kind == "start":
            point.cancel({"reason": "budget"})  # both exchanges complete, no third model call

    recorder = Recorder()
    loop = BareLoop(_three_turns(), [add], observers=[recorder], before_step=hook)
    result = await loop.run("go")
    assert isinstance(result.outcome, Cancelled)
    cancels = [e for e in recorder.io_events if e.kind == "cancel"]
    assert [e.data for e in cancels] == [{"reason": "budget"}]
    assert recorder.feed_names()[-2:] == ["cancel", "discard_pending"]
    # both completed exchanges were salvaged into history
    assert len(loop.machine.history) == 5


async def test_request_compaction_at_a_step_asks_a_manual_compaction() -> None:
    asked: list[int] = []

    def hook(point: StepPoint) -> None:
        if point.machine.turns_taken == 1 and point.machine.state.kind == "start" and not asked:
            asked.append(1)
            point.request_compaction()

    recorder = Recorder()
    loop = BareLoop(_three_turns(), [add], observers=[recorder], before_step=hook)
    await loop.run("go")
    assert Compact(reason=CompactReason.MANUAL) in recorder.steps


async def test_a_feed_the_brain_refuses_raises_and_changes_nothing() -> None:
    machine_before: list[str] = []

    def hook(point: StepPoint) -> None:
        if point.machine.state.kind == "awaiting_tools":
            machine_before.append(point.machine.model_dump_json())
            point.inject(Message.user("too late"))

    saved = LoopMachine()
    saved.accept_input("go")
    saved.next_step(BareLoop(ScriptedClient([]), [add]).policy())
    saved.model_response(ask(call("c1", "add", a=1, b=2)), 10)  # a brain awaiting its tools
    loop = BareLoop.from_machine(saved, ScriptedClient([answer("ok")]), [add], before_step=hook)
    with pytest.raises(ProtocolError, match="inject"):
        await loop.run()
    assert loop.machine.model_dump_json() == machine_before[0]


async def test_raising_is_a_crash_the_saved_brain_resumes_from() -> None:
    class Crash(Exception):
        pass

    steps = 0

    def crash_at_the_fourth_step(point: StepPoint) -> None:
        nonlocal steps
        steps += 1
        if steps == 4:
            raise Crash

    whole = BareLoop(_three_turns(), [add])
    uninterrupted = await whole.run("go")

    recorder = Recorder()
    client = _three_turns()
    loop = BareLoop(client, [add], observers=[recorder], before_step=crash_at_the_fourth_step)
    with pytest.raises(Crash):
        await loop.run("go")
    assert recorder.ended == 0  # the exit door was not taken
    saved = loop.into_machine().model_dump_json()
    resumed = BareLoop.from_machine(LoopMachine.model_validate_json(saved), client, [add])
    result = await resumed.run()
    assert result.outcome == uninterrupted.outcome
    assert resumed.machine.digest() == whole.machine.digest()


async def test_replace_keeps_the_agent_and_swaps_what_is_given() -> None:
    from loopctl import Hooks, RunConfig, SessionConfig

    def deny_nothing(call: object) -> None:
        return None

    original = BareLoop(
        ScriptedClient([answer("from the original client")]),
        [add],
        RunConfig(max_turns=7),
        SessionConfig(system_prompt="be kind"),
        hooks=Hooks(pre_tool=[deny_nothing]),
    )
    original.config = RunConfig(max_turns=9)  # a change after construction counts
    recorder = Recorder()
    copy = original.replace(client=ScriptedClient([answer("replayed")]), observers=[recorder])
    assert copy is not original and copy.machine is original.machine
    assert copy.registry is original.registry and copy.hooks is original.hooks
    assert copy.config.max_turns == 9 and copy.session.system_prompt == "be kind"
    result = await copy.run("hi")
    assert result.final_text == "replayed" and recorder.ended == 1
    fresh = original.replace(machine=LoopMachine())
    assert fresh.machine is not original.machine
