"""``dispatch``: waves, call order, recovery into error results, events, cancellation."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopctl.core import ToolCall, ToolResult
from loopctl.observe import IoEvent
from loopctl.tools import ToolError, ToolRegistry, dispatch, tool
from loopctl.tools.dispatch import plan_waves

SAFETY = 5.0
"""A generous timeout that only ends a test that would otherwise hang; never reached when the
code under test is right, so no assertion depends on it."""


def call(tool_name: str, /, *, id: str | None = None, **arguments: Any) -> ToolCall:
    return ToolCall(id=id or f"id-{tool_name}", name=tool_name, arguments=arguments)


@tool
def safe_a() -> str:
    return "a"


@tool(parallel_safe=False)
def lonely() -> str:
    return "lonely"


@pytest.mark.parametrize(
    ("names", "waves"),
    [
        ([], []),
        (["safe_a"], [(0,)]),
        (["safe_a", "safe_a", "safe_a"], [(0, 1, 2)]),
        (["lonely"], [(0,)]),
        (["lonely", "lonely"], [(0,), (1,)]),
        (["safe_a", "lonely", "safe_a"], [(0,), (1,), (2,)]),
        (["safe_a", "safe_a", "lonely", "safe_a", "unknown"], [(0, 1), (2,), (3, 4)]),
        (["unknown", "lonely", "unknown"], [(0,), (1,), (2,)]),
    ],
)
def test_plan_waves(names: list[str], waves: list[tuple[int, ...]]) -> None:
    calls = [call(n, id=str(i)) for i, n in enumerate(names)]
    assert plan_waves(calls, ToolRegistry([safe_a, lonely])) == waves


@given(st.lists(st.sampled_from(["safe_a", "lonely", "unknown"]), max_size=12))
def test_waves_are_consecutive_runs_of_the_calls_in_order(names: list[str]) -> None:
    """What ``Dispatcher.run`` relies on to gather results in call order, wave after wave:
    the waves, one after the other, are the call indices 0, 1, 2, ... once each; a call that is
    not parallel-safe is alone in its wave."""
    calls = [call(n, id=str(i)) for i, n in enumerate(names)]
    waves = plan_waves(calls, ToolRegistry([safe_a, lonely]))
    assert [i for wave in waves for i in wave] == list(range(len(calls)))
    assert all(wave for wave in waves)
    assert all(len(wave) == 1 for wave in waves if any(names[i] == "lonely" for i in wave))


async def test_parallel_safe_calls_of_one_wave_overlap() -> None:
    barrier = asyncio.Barrier(3)

    @tool(timeout=SAFETY)
    async def meet(who: str) -> str:
        await barrier.wait()  # completes only when all three calls are running at once
        return who

    calls = [call("meet", id=str(i), who=w) for i, w in enumerate("xyz")]
    results = await dispatch(calls, ToolRegistry([meet]))
    assert [(r.content, r.is_error) for r in results] == [("x", False), ("y", False), ("z", False)]


async def test_a_sync_tool_does_not_block_the_event_loop() -> None:
    flag = threading.Event()

    @tool
    def wait_for_flag() -> str:
        return "ok" if flag.wait(SAFETY) else "the event loop was blocked"

    @tool
    async def set_flag() -> str:
        flag.set()
        return "set"

    results = await dispatch(
        [call("wait_for_flag"), call("set_flag")], ToolRegistry([wait_for_flag, set_flag])
    )
    assert [r.content for r in results] == ["ok", "set"]


async def test_a_non_parallel_safe_call_runs_alone_and_in_order() -> None:
    log: list[str] = []
    running: set[str] = set()
    peers: dict[str, set[str]] = {}

    async def work(label: str) -> str:
        log.append(f"start {label}")
        running.add(label)
        peers[label] = set()
        for _ in range(5):  # yield to the loop so that any concurrent call would interleave
            await asyncio.sleep(0)
            peers[label] |= running - {label}
        running.discard(label)
        log.append(f"end {label}")
        return label

    @tool
    async def fast(label: str) -> str:
        return await work(label)

    @tool(parallel_safe=False)
    async def exclusive(label: str) -> str:
        return await work(label)

    calls = [
        call("fast", id="1", label="f1"),
        call("fast", id="2", label="f2"),
        call("exclusive", id="3", label="x"),
        call("fast", id="4", label="f3"),
    ]
    results = await dispatch(calls, ToolRegistry([fast, exclusive]))
    assert [r.content for r in results] == ["f1", "f2", "x", "f3"]
    # the first wave overlapped; the exclusive call waited for it and finished before the next
    assert log[:2] == ["start f1", "start f2"]
    assert log[4:] == ["start x", "end x", "start f3", "end f3"]
    assert peers == {"f1": {"f2"}, "f2": {"f1"}, "x": set(), "f3": set()}


async def test_max_concurrency_caps_a_wave_and_keeps_call_order() -> None:
    running: set[str] = set()
    peers: dict[str, set[str]] = {}

    @tool
    async def work(label: str) -> str:
        running.add(label)
        peers[label] = set()
        for _ in range(5):
            await asyncio.sleep(0)
            peers[label] |= running - {label}
        running.discard(label)
        return label

    calls = [call("work", id=str(i), label=label) for i, label in enumerate("abcd")]
    results = await dispatch(calls, ToolRegistry([work]), max_concurrency=2)
    assert [r.content for r in results] == ["a", "b", "c", "d"]
    assert all(len(p) <= 1 for p in peers.values())
    assert peers["a"] == {"b"}


async def test_max_concurrency_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_concurrency must be at least 1"):
        await dispatch([call("safe_a")], ToolRegistry([safe_a]), max_concurrency=0)


async def test_results_come_back_in_call_order_not_finish_order() -> None:
    gates = {name: asyncio.Event() for name in "abc"}

    @tool(timeout=SAFETY)
    async def step(label: str, then: str) -> str:
        await gates[label].wait()
        if then:
            gates[then].set()
        return label

    gates["c"].set()  # c finishes first, then releases b, which releases a
    calls = [
        call("step", id="1", label="a", then=""),
        call("step", id="2", label="b", then="a"),
        call("step", id="3", label="c", then="b"),
    ]
    results = await dispatch(calls, ToolRegistry([step]))
    assert [(r.call_id, r.content, r.is_error) for r in results] == [
        ("1", "a", False),
        ("2", "b", False),
        ("3", "c", False),
    ]


async def test_unknown_names_become_error_results() -> None:
    results = await dispatch([call("ghost"), call("safe_a")], ToolRegistry([safe_a]))
    assert results == [
        ToolResult(
            call_id="id-ghost",
            name="ghost",
            content="tool 'ghost' is not available; available tools: safe_a",
            is_error=True,
        ),
        ToolResult(call_id="id-safe_a", name="safe_a", content="a"),
    ]


async def test_validation_errors_become_error_results() -> None:
    @tool
    def square(n: int) -> int:
        return n * n

    (result,) = await dispatch([call("square", n="four")], ToolRegistry([square]))
    assert result.is_error
    assert result.content.startswith("invalid arguments for tool 'square':\n- n: ")


class Boom(Exception):
    pass


def raise_value_error() -> None:
    raise ValueError("bad input")


def raise_bare() -> None:
    raise Boom


def raise_tool_error() -> None:
    raise ToolError("the file is locked; try again later")


def raise_own_timeout() -> None:
    raise TimeoutError("upstream timed out")


def return_unencodable() -> object:
    return object()


@pytest.mark.parametrize(
    ("fn", "content"),
    [
        (raise_value_error, "tool 'broken' raised ValueError: bad input"),
        (raise_bare, "tool 'broken' raised Boom"),
        (raise_tool_error, "the file is locked; try again later"),
        (raise_own_timeout, "tool 'broken' raised TimeoutError: upstream timed out"),
        (
            return_unencodable,
            "tool 'broken' returned a value of type object that cannot be encoded as JSON",
        ),
    ],
    ids=lambda v: getattr(v, "__name__", "content"),
)
async def test_tool_exceptions_become_error_results(fn: Any, content: str) -> None:
    broken = tool(name="broken", timeout=SAFETY)(fn)
    results = await dispatch([call("broken"), call("safe_a")], ToolRegistry([broken, safe_a]))
    assert results[0].is_error
    assert results[0].content.startswith(content)
    assert results[1] == ToolResult(call_id="id-safe_a", name="safe_a", content="a")


async def test_async_tool_exceptions_become_error_results() -> None:
    @tool
    async def fails() -> None:
        raise KeyError("k")

    (result,) = await dispatch([call("fails")], ToolRegistry([fails]))
    assert (result.content, result.is_error) == ("tool 'fails' raised KeyError: 'k'", True)


async def test_a_tool_raising_cancelled_error_itself_is_an_error_result() -> None:
    @tool
    async def awaits_a_cancelled_future() -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.cancel()
        await future

    (result,) = await dispatch(
        [call("awaits_a_cancelled_future")], ToolRegistry([awaits_a_cancelled_future])
    )
    assert result.is_error
    assert result.content == "tool 'awaits_a_cancelled_future' was cancelled"


async def test_timeout_of_the_tool_cancels_it_and_reports_it() -> None:
    saw_cancel = asyncio.Event()

    @tool(timeout=0.05)
    async def hang() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            saw_cancel.set()
            raise

    (result,) = await dispatch([call("hang")], ToolRegistry([hang]), default_timeout=SAFETY)
    assert (result.content, result.is_error) == ("tool 'hang' timed out after 0.05 s", True)
    assert saw_cancel.is_set()


async def test_default_timeout_applies_to_tools_without_their_own() -> None:
    @tool
    async def hang() -> None:
        await asyncio.Event().wait()

    (result,) = await dispatch([call("hang")], ToolRegistry([hang]), default_timeout=0.05)
    assert (result.content, result.is_error) == ("tool 'hang' timed out after 0.05 s", True)


async def test_a_timed_out_call_does_not_hold_back_the_rest_of_its_wave() -> None:
    @tool(timeout=0.05)
    async def hang() -> None:
        await asyncio.Event().wait()

    results = await dispatch([call("hang"), call("safe_a")], ToolRegistry([hang, safe_a]))
    assert [(r.content, r.is_error) for r in results] == [
        ("tool 'hang' timed out after 0.05 s", True),
        ("a", False),
    ]


async def test_cancelling_dispatch_cancels_every_running_tool_and_propagates() -> None:
    started = {"one": asyncio.Event(), "two": asyncio.Event()}
    cancelled: list[str] = []
    later_ran: list[str] = []

    @tool
    async def forever(label: str) -> None:
        started[label].set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(label)
            raise

    @tool(parallel_safe=False)
    async def afterwards() -> None:
        later_ran.append("afterwards")

    calls = [
        call("forever", id="1", label="one"),
        call("forever", id="2", label="two"),
        call("afterwards", id="3"),
    ]
    task = asyncio.create_task(dispatch(calls, ToolRegistry([forever, afterwards])))
    await started["one"].wait()
    await started["two"].wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == ["one", "two"]
    assert later_ran == []


async def test_cancelling_dispatch_during_a_sync_tool_returns_promptly() -> None:
    release = threading.Event()
    entered = threading.Event()

    @tool
    def blocking() -> str:
        entered.set()
        release.wait(SAFETY)
        return "done"

    task = asyncio.create_task(dispatch([call("blocking")], ToolRegistry([blocking])))
    await asyncio.to_thread(entered.wait, SAFETY)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()  # the worker thread cannot be interrupted; let it finish


async def test_events_are_reported_for_every_call_in_call_order() -> None:
    events: list[IoEvent] = []
    calls = [call("safe_a", id="1"), call("ghost", id="2", x=1), call("lonely", id="3")]
    await dispatch(calls, ToolRegistry([safe_a, lonely]), on_event=events.append, turn=4)
    summary = [(e.kind, e.data["id"]) for e in events]
    assert summary == [
        ("tool_call", "1"),
        ("tool_call", "2"),
        ("tool_result", "1"),
        ("tool_result", "2"),
        ("tool_call", "3"),
        ("tool_result", "3"),
    ]
    assert events[1].data == {"id": "2", "name": "ghost", "arguments": {"x": 1}}
    assert events[1].duration_s is None
    assert events[3].data == {
        "id": "2",
        "name": "ghost",
        "content": "tool 'ghost' is not available; available tools: safe_a, lonely",
        "is_error": True,
    }
    assert events[5].data == {"id": "3", "name": "lonely", "content": "lonely", "is_error": False}
    assert all(e.turn == 4 for e in events)
    results = [e for e in events if e.kind == "tool_result"]
    assert all(isinstance(e.duration_s, float) and e.duration_s >= 0 for e in results)


async def test_no_calls_no_results() -> None:
    events: list[IoEvent] = []
    assert await dispatch([], ToolRegistry([safe_a]), on_event=events.append) == []
    assert events == []


@tool
def _breaks() -> str:
    raise ValueError("inner")


@tool
async def _dispatches_inside(fail: bool) -> str:
    """Runs a dispatch of its own, unwatched, of a tool that raises; then raises if asked."""
    [inner] = await dispatch([call("_breaks")], ToolRegistry([_breaks]))
    if fail:
        raise KeyError("outer")
    return inner.content


@pytest.mark.parametrize("limit", [None, 1])
async def test_an_unwatched_dispatch_keeps_its_exceptions_to_itself(limit: int | None) -> None:
    """A dispatch nobody watches reports no exceptions, not even into the call of a watched
    dispatch it runs within (whose event holds only that call's own), with or without a cap."""
    events: list[IoEvent] = []
    calls = [call("_dispatches_inside", id="ok", fail=False), call("_dispatches_inside", fail=True)]
    registry = ToolRegistry([_dispatches_inside])
    results = await dispatch(calls, registry, on_event=events.append, max_concurrency=limit)
    assert [r.content for r in results] == [
        "tool '_breaks' raised ValueError: inner",
        "tool '_dispatches_inside' raised KeyError: 'outer'",
    ]
    raised = [
        [(where, name, type(exc).__name__) for where, name, exc in e.raised]
        for e in events
        if e.kind == "tool_result"
    ]
    assert raised == [[], [("tool", "_dispatches_inside", "KeyError")]]


async def test_without_hooks_or_middleware_a_call_is_answered_as_through_them() -> None:
    """A dispatcher with no hook and no middleware sends calls to the executor straight; what
    comes back is what a pass-through hook and middleware let through, call for call: an
    unknown name, invalid arguments, a tool's exception, an answer."""

    @tool
    def square(n: int) -> int:
        return n * n

    def allow(call: ToolCall) -> None:
        return None

    async def passes(call: ToolCall, next: Any) -> ToolResult:
        result: ToolResult = await next(call)
        return result

    broken = tool(name="broken")(raise_value_error)
    registry = ToolRegistry([square, broken])
    calls = [call("ghost"), call("square", n="four"), call("broken"), call("square", n=3)]
    events: list[IoEvent] = []
    bare = await dispatch(calls, registry, on_event=events.append)
    through = await dispatch(calls, registry, pre_hooks=[allow], middleware=[passes])
    assert bare == through
    assert [r.content for r in bare][2:] == ["tool 'broken' raised ValueError: bad input", "9"]
    raised = [[(w, n) for w, n, _ in e.raised] for e in events if e.kind == "tool_result"]
    assert raised == [[], [], [("tool", "broken")], []]
