"""Loop detection seen from the driver: the brain warns (a note reaches the model), then fails."""

from __future__ import annotations

from loopctl.core import (
    Completed,
    Failed,
    LoopMachine,
    MachinePolicy,
    Message,
    ToolResult,
)
from loopctl.driver.config import RunConfig
from loopctl.driver.loop import BareLoop
from loopctl.driver.reflect import ReflectionContext
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


async def test_a_reflector_hears_of_the_coming_warning_once_from_the_brain() -> None:
    """The driver asks the brain (``loop_verdict``) whether its next step will warn of a loop, and
    tells the reflector so, before the warning: once, since a warned brain has nothing left to
    warn of."""
    seen: list[ReflectionContext] = []

    class Coach:
        async def reflect(self, context: ReflectionContext) -> Message | None:
            seen.append(context)
            return Message.user("try another query")

    client = ScriptedClient([same_call(i) for i in range(10)])
    result = await BareLoop(client, tools=[search], reflector=Coach()).run("find it")
    assert isinstance(result.outcome, Failed)
    assert [(c.turn, c.loop is not None) for c in seen] == [(3, True)]
    loop = seen[0].loop
    assert loop is not None and (loop.pattern, loop.tool, loop.count) == ("repeat", "search", 3)
    told = client.requests[3].messages  # the fourth request: the reflector's note, then the warning
    assert told[-2].text == "try another query" and "Loop warning" in told[-1].text


def test_loop_verdict_is_what_the_next_step_acts_on() -> None:
    policy = MachinePolicy(tools=("search",))
    machine = LoopMachine()
    machine.accept_input("find it")
    verdicts = []
    for i in range(4):
        machine.next_step(policy)
        machine.model_response(same_call(i), 10)
        machine.next_step(policy)
        machine.tool_results(
            Message.from_results([ToolResult(call_id=f"c{i}", name="search", content="")])
        )
        digest = machine.digest()
        verdicts.append(machine.loop_verdict(policy))
        assert machine.digest() == digest  # asking changes nothing
    assert [v is not None for v in verdicts] == [False, False, True, False]  # warned at the third
    assert machine.loop_verdict(policy.model_copy(update={"loop_action": "off"})) is None
