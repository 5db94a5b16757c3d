"""Loop detection seen from the driver: the brain warns (a note reaches the model), then fails."""

from __future__ import annotations

from loopctl.core import Completed, Failed
from loopctl.driver.config import RunConfig
from loopctl.driver.loop import BareLoop
from loopctl.testing import ScriptedClient
from loopctl.tools import tool
from tests.driver.helpers import answer, ask, call


@tool
def search(q: str) -> str:
    """Search."""
    return "nothing"


def same_call(i: int):
    return ask(call(f"c{i}", "search", q="same"))


async def test_warn_then_fail() -> None:
    client = ScriptedClient([same_call(i) for i in range(10)])
    result = await BareLoop(client, tools=[search]).run("find it")
    assert isinstance(result.outcome, Failed)
    assert result.error is not None and result.error.kind == "loop_detected"
    warned = [r for r in client.requests if "Loop warning" in r.messages[-1].text]
    assert len(warned) == 1  # the model was told once before the run was stopped
    assert result.turns == 4


async def test_a_warned_model_that_changes_course_completes() -> None:
    replies = [same_call(i) for i in range(3)] + [answer("I will stop searching")]
    result = await BareLoop(ScriptedClient(replies), tools=[search]).run("find it")
    assert isinstance(result.outcome, Completed)


async def test_fail_at_once_and_off() -> None:
    fail = await BareLoop(
        ScriptedClient([same_call(i) for i in range(10)]),
        tools=[search],
        config=RunConfig(loop_action="fail"),
    ).run("x")
    assert isinstance(fail.outcome, Failed) and fail.turns == 3
    off = await BareLoop(
        ScriptedClient([*(same_call(i) for i in range(6)), answer("ok")]),
        tools=[search],
        config=RunConfig(loop_action="off"),
    ).run("x")
    assert isinstance(off.outcome, Completed) and off.turns == 7
