"""Whole runs of BareLoop against scripted clients: the driver's main paths."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from loopctl.api import ModelReply, ModelRequest, Usage
from loopctl.core import (
    MAX_LOOP_WINDOW,
    Cancelled,
    Completed,
    Failed,
    LoopError,
    LoopMachine,
    MaxTurnsExceeded,
    Message,
    coherence_problem,
)
from loopctl.driver.config import RunConfig, SessionConfig
from loopctl.driver.loop import BareLoop, Hooks
from loopctl.driver.reflect import ReflectionContext
from loopctl.testing import FunctionClient, ScriptedClient
from loopctl.tools import Deny, Replace, tool
from tests.driver.helpers import answer, ask, call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def echo(text: str) -> str:
    """Say it back."""
    return text


async def test_multi_turn_tool_use(recorder) -> None:
    client = ScriptedClient(
        [
            ask(call("c1", "add", a=2, b=3), text="adding"),
            ask(call("c2", "add", a=5, b=10)),
            answer("15"),
        ]
    )
    loop = BareLoop(client, tools=[add], observers=[recorder])
    result = await loop.run("what is 2+3+10?")

    assert isinstance(result.outcome, Completed)
    assert result.final_text == "15"
    assert result.turns == 3
    assert result.error is None
    contents = [r.content for m in result.messages for r in m.tool_results]
    assert contents == ["5", "15"]
    assert [m.role for m in result.messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    # the model saw the tool and the growing conversation
    assert [t.name for t in client.requests[0].tools] == ["add"]
    assert [len(r.messages) for r in client.requests] == [1, 3, 5]
    assert [r.turn for r in client.requests] == [1, 2, 3]
    # committed: history holds the whole run
    assert loop.machine.history == result.messages
    assert recorder.feed_names()[0] == "accept_input"
    assert recorder.feed_names()[-1] == "commit_pending"
    assert recorder.started == recorder.ended == 1


async def test_second_run_continues_the_conversation() -> None:
    client = ScriptedClient([answer("hello"), answer("again")])
    loop = BareLoop(client)
    await loop.run("hi")
    second = await loop.run("once more")
    assert second.final_text == "again"
    assert [m.text for m in client.requests[1].messages] == ["hi", "hello", "once more"]
    assert [m.text for m in second.messages] == ["once more", "again"]
    assert len(loop.machine.history) == 4


def test_run_sync() -> None:
    loop = BareLoop(ScriptedClient([answer("ok")]))
    assert loop.run_sync("go").final_text == "ok"


async def test_run_needs_input_and_refuses_input_while_resuming() -> None:
    loop = BareLoop(ScriptedClient([answer("ok")]))
    with pytest.raises(ValueError, match="needs an input"):
        await loop.run()
    machine = LoopMachine()
    machine.accept_input("x")
    resumed = BareLoop.from_machine(machine, ScriptedClient([answer("ok")]))
    with pytest.raises(ValueError, match="resume"):
        await resumed.run("another")


async def test_system_prompt_and_options_reach_the_request() -> None:
    client = ScriptedClient([answer("ok")])
    session = SessionConfig(system_prompt="be brief", options={"temperature": 0})
    await BareLoop(client, session=session).run("x")
    assert client.requests[0].system == "be brief"
    assert client.requests[0].options == {"temperature": 0}


async def test_usage_is_summed_and_context_comes_from_usage() -> None:
    replies = [
        ModelReply(
            message=ask(call("c1", "add", a=1, b=1)),
            usage=Usage(input_tokens=10, output_tokens=2, context_tokens=12),
        ),
        ModelReply(
            message=answer("2"), usage=Usage(input_tokens=20, output_tokens=3, context_tokens=23)
        ),
    ]
    loop = BareLoop(ScriptedClient(replies), tools=[add])
    result = await loop.run("1+1")
    assert result.usage.input_tokens == 30
    assert result.usage.output_tokens == 5
    assert loop.machine.context_tokens == 23


async def test_unknown_tool_is_answered_with_an_error_and_never_dispatched() -> None:
    client = ScriptedClient([ask(call("c1", "nope"), call("c2", "add", a=1, b=2)), answer("ok")])
    result = await BareLoop(client, tools=[add]).run("x")
    results = result.messages[2].tool_results
    assert [r.call_id for r in results] == ["c1", "c2"]
    assert results[0].is_error and "not available" in results[0].content
    assert results[1].content == "3" and not results[1].is_error


async def test_tool_exception_becomes_an_error_result_the_model_sees() -> None:
    @tool
    def boom() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    client = ScriptedClient([ask(call("c1", "boom")), answer("sorry")])
    result = await BareLoop(client, tools=[boom]).run("x")
    assert result.final_text == "sorry"
    error = client.requests[1].messages[-1].tool_results[0]
    assert error.is_error and "disk on fire" in error.content


async def test_tool_timeout_becomes_an_error_result() -> None:
    @tool(timeout=0.01)
    async def slow() -> str:
        """Never finishes in time."""
        await asyncio.sleep(3600)
        return "late"

    client = ScriptedClient([ask(call("c1", "slow")), answer("gave up")])
    result = await BareLoop(client, tools=[slow]).run("x")
    error = result.messages[2].tool_results[0]
    assert error.is_error and "timed out" in error.content


async def test_parallel_safe_calls_overlap_in_one_wave() -> None:
    barrier = asyncio.Barrier(2)

    @tool
    async def meet(who: str) -> str:
        """Returns only once two calls are inside at the same time."""
        await asyncio.wait_for(barrier.wait(), timeout=5)
        return who

    client = ScriptedClient(
        [ask(call("a", "meet", who="a"), call("b", "meet", who="b")), answer("met")]
    )
    result = await BareLoop(client, tools=[meet]).run("x")
    assert [r.content for r in result.messages[2].tool_results] == ["a", "b"]


async def test_hooks_deny_and_replace() -> None:
    def guard(c):
        if c.name == "add" and c.arguments.get("a") == 666:
            return Deny("that number is not allowed")
        if c.name == "echo":
            return Replace({"text": "redacted"})
        return None

    client = ScriptedClient(
        [ask(call("c1", "add", a=666, b=1), call("c2", "echo", text="secret")), answer("ok")]
    )
    result = await BareLoop(client, tools=[add, echo], hooks=Hooks(pre_tool=[guard])).run("x")
    denied, replaced = result.messages[2].tool_results
    assert denied.is_error and "not allowed" in denied.content
    assert replaced.content == "redacted"


async def test_hooks_middleware_and_tool_timeout_changed_between_runs_take_effect() -> None:
    """The loop binds its tool pipeline once and again only when what it is built from changed:
    a new ``hooks``, a hook added to the same list, new middleware or a new tool timeout."""
    seen: list[str] = []

    def deny_all(c):
        return Deny("not today")

    async def tag(c, call_next):
        seen.append(c.id)
        return await call_next(c)

    client = ScriptedClient(
        [ask(call(f"c{n}", "add", a=n, b=1)) if n % 2 else answer("ok") for n in range(1, 11)]
    )
    loop = BareLoop(client, tools=[add])
    first = await loop.run("x")
    assert first.messages[2].tool_results[0].content == "2"
    dispatcher = loop._dispatcher()
    assert loop._dispatcher() is dispatcher  # nothing changed: the same pipeline

    loop.hooks = Hooks(pre_tool=[deny_all])
    denied = await loop.run("x")
    assert "not today" in denied.messages[2].tool_results[0].content

    pre: list = []
    loop.hooks = Hooks(pre_tool=pre)
    assert (await loop.run("x")).messages[2].tool_results[0].content == "6"
    pre.append(deny_all)  # the same Hooks, a hook added to its list
    assert "not today" in (await loop.run("x")).messages[2].tool_results[0].content

    loop.hooks = Hooks()
    loop.middleware = (tag,)
    await loop.run("x")
    assert seen == ["c9"]
    loop.config = RunConfig(tool_timeout=1.5)
    assert loop._dispatcher().default_timeout == 1.5


async def test_tool_and_model_middleware_order() -> None:
    order: list[str] = []

    def tool_mw(tag):
        async def mw(c, call_next):
            order.append(f"tool {tag} in")
            result = await call_next(c)
            order.append(f"tool {tag} out")
            return result

        return mw

    def model_mw(tag):
        async def mw(request, call_next):
            order.append(f"model {tag} in")
            reply = await call_next(request)
            order.append(f"model {tag} out")
            return reply

        return mw

    client = ScriptedClient([ask(call("c1", "add", a=1, b=1)), answer("2")])
    loop = BareLoop(
        client,
        tools=[add],
        middleware=[tool_mw("A"), tool_mw("B")],
        model_middleware=[model_mw("X"), model_mw("Y")],
    )
    await loop.run("x")
    assert order == [
        "model X in",
        "model Y in",
        "model Y out",
        "model X out",
        "tool A in",
        "tool B in",
        "tool B out",
        "tool A out",
        "model X in",
        "model Y in",
        "model Y out",
        "model X out",
    ]


async def test_model_middleware_can_answer_from_a_cache() -> None:
    async def cached(request: ModelRequest, call_next):
        return ModelReply(message=answer("from cache"))

    client = ScriptedClient([])
    result = await BareLoop(client, model_middleware=[cached]).run("x")
    assert result.final_text == "from cache"
    assert client.requests == []


async def test_max_turns_salvages_completed_turns() -> None:
    client = ScriptedClient([ask(call(f"c{i}", "add", a=i, b=i)) for i in range(5)])
    loop = BareLoop(client, tools=[add], config=RunConfig(max_turns=2, loop_action="off"))
    result = await loop.run("x")
    assert isinstance(result.outcome, MaxTurnsExceeded)
    assert result.turns == 2
    assert len(loop.machine.history) == 5  # input + two complete exchanges
    assert coherence_problem(loop.machine.history) is None


async def test_fatal_provider_error_fails_at_once_and_salvages(clock) -> None:
    auth = LoopError(kind="auth", message="invalid key; set OPENAI_API_KEY", status=401)
    client = ScriptedClient([ask(call("c1", "add", a=1, b=1)), auth])
    loop = BareLoop(client, tools=[add], sleep=clock.sleep)
    result = await loop.run("x")
    assert isinstance(result.outcome, Failed)
    assert result.error == auth
    assert clock.sleeps == []
    assert len(loop.machine.history) == 3  # the completed exchange survives


async def test_retries_with_backoff_and_retry_after(clock, recorder) -> None:
    from loopctl.api import ApiError

    limited = ApiError(
        LoopError(kind="rate_limited", message="slow down", retryable=True, status=429),
        retry_after=1.5,
    )
    overloaded = LoopError(kind="overloaded", message="busy", retryable=True, status=529)
    client = ScriptedClient([limited, overloaded, answer("finally")])
    loop = BareLoop(
        client, sleep=clock.sleep, rng=lambda: 0.0, observers=[recorder], config=RunConfig()
    )
    result = await loop.run("x")
    assert result.final_text == "finally"
    assert clock.sleeps == [1.5, 1.0]  # retry-after honoured, then 0.5 * 2**1
    assert recorder.io_kinds().count("retry") == 2


async def test_retries_exhausted_fail_the_run(clock) -> None:
    busy = LoopError(kind="overloaded", message="busy", retryable=True, status=529)
    client = ScriptedClient([busy, busy, busy, answer("never")])
    result = await BareLoop(client, sleep=clock.sleep, rng=lambda: 0.5).run("x")
    assert isinstance(result.outcome, Failed) and result.error == busy
    assert clock.sleeps == [0.5 * 0.875, 1.0 * 0.875]


async def test_invalid_tool_arguments_json_is_retried_then_fails(clock) -> None:
    from loopctl.api import StopEvent, ToolCallDelta, ToolCallStart

    class BadJson:
        calls = 0

        async def stream(self, request):
            self.calls += 1
            yield ToolCallStart(index=0, id="c1", name="add")
            yield ToolCallDelta(index=0, arguments='{"a": 1,')
            yield StopEvent(reason="tool_use")

    client = BadJson()
    result = await BareLoop(client, tools=[add], sleep=clock.sleep).run("x")
    assert isinstance(result.outcome, Failed)
    assert result.error is not None and "invalid JSON" in result.error.message
    assert client.calls == 3


async def test_a_broken_stream_becomes_a_loop_error() -> None:
    class Broken:
        async def stream(self, request):
            raise KeyError("choices")
            yield

    result = await BareLoop(Broken()).run("x")
    assert isinstance(result.outcome, Failed)
    assert result.error is not None and result.error.kind == "provider"
    assert "KeyError" in result.error.message


async def test_duplicate_call_ids_from_the_model_fail_cleanly(clock) -> None:
    dup = ask(call("same", "add", a=1, b=1), call("same", "add", a=2, b=2))
    result = await BareLoop(ScriptedClient([dup, dup, dup]), tools=[add], sleep=clock.sleep).run(
        "x"
    )
    assert isinstance(result.outcome, Failed)
    assert result.error is not None and "duplicate" in result.error.message


async def test_reflector_is_asked_after_tool_errors() -> None:
    seen: list[ReflectionContext] = []

    class Coach:
        async def reflect(self, context: ReflectionContext) -> Message | None:
            seen.append(context)
            return Message.user("check the tool name")

    client = ScriptedClient([ask(call("c1", "missing")), answer("ok")])
    result = await BareLoop(client, tools=[add], reflector=Coach()).run("x")
    assert len(seen) == 1 and seen[0].errors[0].call_id == "c1"
    assert client.requests[1].messages[-1].text == "check the tool name"
    assert result.messages[3].text == "check the tool name"


async def test_function_client_sees_the_conversation() -> None:
    def fn(request: ModelRequest) -> Message:
        last = request.messages[-1]
        if last.tool_results:
            return answer(f"sum={last.tool_results[0].content}")
        return ask(call("c1", "add", a=20, b=22))

    result = await BareLoop(FunctionClient(fn), tools=[add]).run("x")
    assert result.final_text == "sum=42"


async def test_scripted_client_running_out_fails_clearly() -> None:
    result = await BareLoop(ScriptedClient([])).run("x")
    assert isinstance(result.outcome, Failed)
    assert result.error is not None and "ran out of replies" in result.error.message


async def test_cancel_before_start_salvages_nothing() -> None:
    from loopctl.driver.cancel import CancelSignal

    cancel = CancelSignal()
    cancel.cancel()
    loop = BareLoop(ScriptedClient([answer("never")]))
    result = await loop.run("x", cancel)
    assert isinstance(result.outcome, Cancelled)
    assert loop.machine.history == ()


def test_run_config_refuses_a_loop_window_the_brain_cannot_keep() -> None:
    """Checked when the config is made, not at the first step of a run."""
    RunConfig(loop_window=MAX_LOOP_WINDOW)
    with pytest.raises(ValidationError):
        RunConfig(loop_window=MAX_LOOP_WINDOW + 1)
