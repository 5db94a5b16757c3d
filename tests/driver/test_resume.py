"""Save mid-run, restore into a fresh BareLoop, and finish: the same outcome and history as the
uninterrupted run, whatever the boundary the crash hit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from loopctl.api import ModelRequest
from loopctl.core import LoopMachine, Message
from loopctl.driver.config import RunConfig
from loopctl.driver.loop import BareLoop
from loopctl.observe import LoopObserver
from loopctl.testing import FunctionClient
from loopctl.tools import tool
from tests.driver.helpers import answer, ask, call


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def world(request: ModelRequest) -> Message:
    """A deterministic model: three additions, then the total."""
    done = sum(1 for m in request.messages for _ in m.tool_results)
    if done < 3:
        return ask(call(f"t{request.turn}", "add", a=done, b=10))
    return answer(f"total after {done} calls")


class Crash(Exception):
    pass


class CrashAfter(LoopObserver):
    """Saves the brain after feed number ``k`` (or, with ``at_steps``, at the k-th decision
    boundary: right after the brain answered a step, before the driver carried it out) and then
    crashes the run."""

    def __init__(self, k: int, at_steps: bool = False) -> None:
        self.k = k
        self.at_steps = at_steps
        self.count = 0
        self.saved: str | None = None

    def _tick(self, machine: LoopMachine) -> None:
        self.count += 1
        if self.count == self.k:
            self.saved = machine.model_dump_json()
            raise Crash

    def feed(self, name: str, args: Mapping[str, Any], machine: LoopMachine) -> None:
        if not self.at_steps:
            self._tick(machine)

    def step(self, policy: Any, step: Any, machine: LoopMachine) -> None:
        if self.at_steps:
            self._tick(machine)


def fresh_loop(**kwargs: Any) -> BareLoop:
    return BareLoop(FunctionClient(world), tools=[add], config=RunConfig(), **kwargs)


async def uninterrupted(at_steps: bool = False) -> tuple[Any, LoopMachine, int]:
    counter = CrashAfter(k=-1, at_steps=at_steps)
    loop = fresh_loop(observers=[counter])
    result = await loop.run("add things")
    return result, loop.machine, counter.count


async def crash_and_resume(k: int, at_steps: bool) -> tuple[Any, LoopMachine]:
    crasher = CrashAfter(k, at_steps)
    with pytest.raises(Crash):
        await fresh_loop(observers=[crasher]).run("add things")
    assert crasher.saved is not None
    machine = LoopMachine.model_validate_json(crasher.saved)
    resumed = BareLoop.from_machine(machine, FunctionClient(world), [add], RunConfig())
    return await resumed.run(), resumed.machine


# The scripted run answers 8 steps (4 model calls, 3 tool waves, Done) through 9 feeds: the input,
# 4 replies, 3 waves' results (each with its count) and the commit.
N_STEPS = 8
N_FEEDS = 9


async def test_the_scripted_run_has_the_expected_shape() -> None:
    assert (await uninterrupted(at_steps=True))[2] == N_STEPS
    assert (await uninterrupted())[2] == N_FEEDS


@pytest.mark.parametrize("k", range(1, N_STEPS + 1))
async def test_resume_from_any_decision_boundary_is_exact(k: int) -> None:
    """A checkpoint taken at a step is resumed exactly: same outcome, history and digest."""
    expected, expected_machine, _ = await uninterrupted(at_steps=True)
    result, machine = await crash_and_resume(k, at_steps=True)
    assert result.outcome == expected.outcome
    assert machine.history == expected_machine.history
    assert machine.digest() == expected_machine.digest()


@pytest.mark.parametrize("k", range(1, N_FEEDS))  # after the last feed (commit) the run is over
async def test_resume_after_a_crash_at_any_feed_finishes_the_same(k: int) -> None:
    """A crash between two feeds of one step may lose the driver's token estimate, which the
    next provider count replaces; the outcome and the history are the same."""
    expected, expected_machine, _ = await uninterrupted()
    result, machine = await crash_and_resume(k, at_steps=False)
    assert result.outcome == expected.outcome
    assert machine.history == expected_machine.history


async def test_into_machine_and_from_machine_round_trip() -> None:
    loop = fresh_loop()
    await loop.run("add things")
    machine = loop.into_machine()
    assert loop.machine.history == ()  # the body is left with a fresh brain
    again = BareLoop.from_machine(
        LoopMachine.model_validate_json(machine.model_dump_json()),
        FunctionClient(lambda r: answer("more")),
        [add],
    )
    result = await again.run("and now?")
    assert result.final_text == "more"
    assert again.machine.history[: len(machine.history)] == machine.history


async def test_a_finished_run_has_nothing_to_resume() -> None:
    _, machine, _ = await uninterrupted()
    loop = BareLoop.from_machine(machine, FunctionClient(world), [add])
    with pytest.raises(ValueError, match="needs an input"):
        await loop.run()
