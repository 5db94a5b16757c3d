"""The fault layers around a real loop (loopctl_sim.sim.layers) and one agent run under them
(loopctl_sim.sim.agent_run): every fault kind does what the catalogue says, on the sample
agent's real tools, hooks and configs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shop_project import AGENT, make_project

from loopctl import BareLoop, Message, ToolCall, tool
from loopctl.api import ApiError, ModelRequest, fold_events
from loopctl.core import Cancelled, Completed, LoopMachine
from loopctl.driver import RunConfig, StepPoint
from loopctl.testing import ExploringClient
from loopctl_sim.sim import (
    AgentRunError,
    AgentWorld,
    Fault,
    FaultPlan,
    FaultyClient,
    ScriptSource,
    ToolFaults,
    live_tools,
    run_agent,
)
from loopctl_sim.sim.world import OVERSIZED, ModelScript


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from make_project(tmp_path, monkeypatch)


def call(name: str, cid: str = "c1", **arguments: Any) -> Message:
    return Message.assistant("", [ToolCall(id=cid, name=name, arguments=arguments)])


LOOKUP = call("lookup_order", order_id="A-1001")
DONE = Message.assistant("done")


def world(*faults: Fault, script: list[Message] | None = None, **kwargs: Any) -> AgentWorld:
    return AgentWorld(
        AGENT, "refund A-1001", script=script or [LOOKUP, DONE], faults=faults, **kwargs
    )


def results(run: Any) -> list[Any]:
    return [p for m in run.machine.history for p in m.tool_results]


# --- the model side -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "error_kind"),
    [
        ("network", "network"),
        ("timeout", "timeout"),
        ("rate_limited", "rate_limited"),
        ("server_error", "provider"),
        ("overloaded", "overloaded"),
        ("context_overflow", "context_overflow"),
    ],
)
def test_error_faults_raise_the_provider_error(kind: str, error_kind: str) -> None:
    source = ScriptSource(ModelScript([DONE]))
    client = FaultyClient(source, FaultPlan([Fault(kind=kind, model_call=1)]), _policy)
    request = ModelRequest(messages=(Message.user("hi"),))
    with pytest.raises(ApiError) as raised:
        asyncio.run(_drain(client, request))
    assert raised.value.error.kind == error_kind
    assert client.fired == {kind: 1} and client.replies == 0 and source.delivered == 0
    asyncio.run(_drain(client, request))  # the next request is not faulted: the reply comes
    assert client.script == [DONE] and source.delivered == 1


def _policy() -> Any:
    from loopctl.core import MachinePolicy

    return MachinePolicy()


async def _drain(client: FaultyClient, request: ModelRequest) -> Any:
    return fold_events([e async for e in client.stream(request)])


def test_stream_faults_break_the_stream_and_keep_the_reply_for_the_retry() -> None:
    source = ScriptSource(ModelScript([LOOKUP, DONE]))
    faults = [
        Fault(kind="invalid_tool_json", model_call=1),
        Fault(kind="duplicate_call_ids", model_call=2),
        Fault(kind="unknown_tool", model_call=3),
    ]
    client = FaultyClient(source, FaultPlan(faults), _policy)
    request = ModelRequest(messages=(Message.user("hi"),))
    with pytest.raises(ApiError, match="invalid JSON"):
        asyncio.run(_drain(client, request))
    duplicated = asyncio.run(_drain(client, request)).message
    assert [c.id for c in duplicated.tool_calls] == ["c1", "c1"]
    renamed = asyncio.run(_drain(client, request)).message  # a rename is delivered: used up
    assert renamed.tool_calls[0].name == "no_such_tool" and client.replies == 1
    assert asyncio.run(_drain(client, request)).message == DONE


def test_the_exploring_model_retried_answers_the_same(project: Path) -> None:
    faults = (Fault(kind="network", model_call=1, times=2),)
    plain = run_agent(AgentWorld(AGENT, "hi", explore=5))
    retried = run_agent(AgentWorld(AGENT, "hi", explore=5, faults=faults))
    assert retried.retries == 2 and retried.fired == {"network": 2}
    assert retried.script == plain.script and retried.digest == plain.digest
    assert retried.moves == plain.moves and sum(plain.moves.values()) == len(plain.script)


# --- the tool side, on the agent's real tools -------------------------------------------------


def test_a_tool_exception_is_an_error_result_and_the_tool_does_not_run(project: Path) -> None:
    run = run_agent(world(Fault(kind="tool_exception", tool="lookup_order", message="db down")))
    (result,) = results(run)
    assert result.is_error and result.content == "tool 'lookup_order' raised RuntimeError: db down"
    assert run.executions == {} and run.faulted_tools == {"lookup_order"}
    assert isinstance(run.outcome, Completed)


def test_a_timeout_runs_the_tool_and_loses_its_result(project: Path) -> None:
    run = run_agent(world(Fault(kind="tool_timeout", tool_call=1)))
    (result,) = results(run)
    assert result.is_error and result.content == "tool 'lookup_order' timed out after 60.0 s"
    assert run.executions == {"c1": 1}  # it ran: the side effect happened, the answer is lost


def test_a_hang_ends_at_the_timeout_or_cancels_the_run(project: Path) -> None:
    run = run_agent(world(Fault(kind="tool_hang", tool_call=1)))
    assert results(run)[0].content == "tool 'lookup_order' timed out after 60.0 s"
    from shop_project import edit

    edit(project, "RunConfig(max_turns=12)", "RunConfig(max_turns=12, tool_timeout=None)")
    hung = run_agent(world(Fault(kind="tool_hang", tool_call=1)))
    assert isinstance(hung.outcome, Cancelled)


def test_output_faults_change_a_real_result(project: Path) -> None:
    big = run_agent(world(Fault(kind="tool_oversized", tool_call=1, size=5000)))
    content = results(big)[0].content
    assert len(content) == 5000 and content.startswith('{"amount": 800')
    default = run_agent(world(Fault(kind="tool_oversized", tool_call=1)))
    assert len(results(default)[0].content) == OVERSIZED
    broken = run_agent(world(Fault(kind="tool_non_json", tool_call=1)))
    text = results(broken)[0].content
    assert text.endswith("502 Bad Gateway</h1></body></html>")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_simulated_tools_validate_and_never_run(project: Path) -> None:
    bad = call("shipping_quote", cid="c2", country="DE", weight_kg="lots")
    run = run_agent(world(script=[LOOKUP, bad, DONE], tools="simulated"))
    first, second = results(run)
    assert json.loads(first.content) == {
        "tool": "lookup_order",
        "simulated": True,
        "arguments": {"order_id": "A-1001"},
    }
    assert second.is_error and "invalid arguments for tool 'shipping_quote'" in second.content
    assert run.executions == {} and run.live == frozenset()
    import shop.agent as shop

    assert shop.REFUNDS == []


def test_exempt_tools_are_never_faulted_and_modes_name_tools(project: Path) -> None:
    faults = (Fault(kind="tool_exception", tool="lookup_order"),)
    run = run_agent(world(*faults, exempt=frozenset({"lookup_order"})))
    assert not results(run)[0].is_error and run.fired == {}
    live = live_tools("live:refund", ["refund", "lookup_order"])
    assert live("refund") and not live("lookup_order")
    assert not live_tools("simulated:refund", ["refund", "x"])("refund")
    with pytest.raises(ValueError, match="unknown tool"):
        live_tools("live:nope", ["refund"])
    with pytest.raises(ValueError, match="expected live"):
        live_tools("sometimes", ["refund"])


def test_scripted_tools_answer_instead_of_the_agents(project: Path) -> None:
    run = run_agent(world(scripted={"lookup_order": lambda args: "scripted"}))
    assert results(run)[0].content == "scripted" and run.executions == {}


def test_faults_strike_parallel_calls_in_call_order() -> None:
    @tool
    async def slow(n: int) -> str:
        """Answers after n turns of the event loop (the later calls finish first)."""
        for _ in range(5 - n):
            await asyncio.sleep(0)
        return f"slow {n}"

    plan = FaultPlan([Fault(kind="tool_exception", tool_call=2)])
    layer = ToolFaults(plan)
    calls = [ToolCall(id=f"p{n}", name="slow", arguments={"n": n}) for n in range(4)]
    script = ScriptSource(ModelScript([Message.assistant("", calls), DONE]))
    client = FaultyClient(script, FaultPlan(), _policy)
    loop = BareLoop(client, [slow], before_step=layer.before_step, middleware=[layer.middleware])
    loop.run_sync("go")
    answered = [r for m in loop.machine.history for r in m.tool_results]
    assert [r.is_error for r in answered] == [False, True, False, False]


# --- run-level faults, and the factory builds every body ----------------------------------------


def test_run_faults_cancel_crash_compact_and_inject(project: Path) -> None:
    script = [LOOKUP, call("lookup_order", cid="c2", order_id="A-1002"), DONE]
    built: list[BareLoop] = []

    import shop.agent as shop

    def factory(**kwargs: Any) -> BareLoop:
        loop = shop.build(**kwargs)
        built.append(loop)
        return loop

    faults = (
        Fault(kind="crash", step=3),
        Fault(kind="compact_now", step=4),
        Fault(kind="inject", step=5, text="be brief"),
    )
    run = run_agent(AgentWorld(factory, "go", script=script, faults=faults))
    assert run.crashes == 1 and len(built) == 2  # the crash resumed in a loop the factory built
    assert run.fired == {"crash": 1, "compact_now": 1, "inject": 1}
    assert isinstance(run.outcome, Completed)
    texts = [m.text for m in run.machine.history if m.role == "user"]
    assert "be brief" in texts
    cancelled = run_agent(
        AgentWorld(AGENT, "go", script=script, faults=[Fault(kind="cancel", step=3)])
    )
    assert isinstance(cancelled.outcome, Cancelled)


def test_a_crash_restores_the_brain_exactly(project: Path) -> None:
    plain = run_agent(world(script=[LOOKUP, DONE]))
    assert plain.steps == 4  # call the model, run the tool, call the model, done
    for step in range(1, 5):
        crashed = run_agent(world(Fault(kind="crash", step=step), script=[LOOKUP, DONE]))
        assert crashed.digest == plain.digest and crashed.crashes == 1, step


def test_what_escapes_the_run_carries_the_run_so_far(project: Path) -> None:
    def before(point: StepPoint) -> None:
        if point.machine.turns_taken == 1:
            raise KeyError("the harness's own bug")

    with pytest.raises(AgentRunError) as raised:
        run_agent(world(), before_step=before)
    assert isinstance(raised.value.error, KeyError)
    assert raised.value.run.script == [LOOKUP] and raised.value.run.outcome is None


def test_a_run_on_an_earlier_history_continues_it(project: Path) -> None:
    first = run_agent(world())
    again = run_agent(world(script=[DONE]), machine=first.machine)
    assert len(again.machine.history) == len(first.machine.history) + 2
    assert isinstance(LoopMachine.model_validate_json(again.machine.model_dump_json()), LoopMachine)


def test_a_loop_built_without_the_factory_accepting_client_gets_it_swapped_in(
    project: Path,
) -> None:
    import shop.agent as shop

    def no_keywords() -> BareLoop:
        return shop.build(client=ExploringClient(99)).replace(config=RunConfig(max_turns=3))

    run = run_agent(AgentWorld(no_keywords, "go", script=[LOOKUP, DONE]))
    assert run.script == [LOOKUP, DONE] and run.policy is not None and run.policy.max_turns == 3


# --- recorded tools: answered from the user's own traces ------------------------------------------


def test_recorded_tools_answer_from_traces_and_never_run(project: Path) -> None:
    from loopctl_sim.sim.agent_run import recorded_answers

    traces = str(project / "shop" / "traces")
    recorded = recorded_answers([traces])
    answer = recorded(ToolCall(id="x", name="lookup_order", arguments={"order_id": "A-1001"}))
    assert answer is not None and json.loads(answer.content)["amount"] == 800
    # another call with the same tool and arguments gets the same answer, under its own id
    again = recorded(ToolCall(id="y", name="lookup_order", arguments={"order_id": "A-1001"}))
    assert again is not None and again.content == answer.content and again.call_id == "y"
    assert recorded(ToolCall(id="z", name="lookup_order", arguments={"order_id": "nope"})) is None
    refund = call("refund", cid="c2", order_id="A-1001", amount=800)
    unknown = call("lookup_order", cid="c3", order_id="A-9999")
    run = run_agent(
        world(script=[LOOKUP, refund, unknown, DONE], tools="recorded", recorded=[traces])
    )
    looked, refunded, stood_in = results(run)
    assert looked.content == answer.content and refunded.content.startswith("refunded 800")
    assert json.loads(stood_in.content)["simulated"] is True  # never recorded: the stand-in
    import shop.agent as shop

    assert shop.REFUNDS == [] and run.executions == {}
    mixed = run_agent(world(tools="recorded:refund", recorded=[traces]))
    assert mixed.executions == {"c1": 1}  # lookup_order ran live, refund would be recorded
    from loopctl_sim.sim.agent_run import tool_modes

    modes = tool_modes({"refund": "recorded"}, ["refund", "lookup_order"])
    assert (modes("refund"), modes("lookup_order")) == ("recorded", "live")
    with pytest.raises(ValueError, match="expected live, simulated, recorded"):
        tool_modes({"refund": "sometimes"}, ["refund"])
