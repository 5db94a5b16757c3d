"""A tool's first step runs before its deadline is armed; a tool that waits goes on exactly as
an awaited coroutine would: values sent in, cancels thrown in, its value or error returned, its
deadline counted from its start."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loopctl.core import ToolCall
from loopctl.tools import ToolError, ToolRegistry, dispatch, tool
from loopctl.tools.dispatch import _resumed

SAFETY = 5.0
"""Only ends a test that would otherwise hang; no assertion depends on it."""


async def _twice(value: str) -> str:
    await asyncio.sleep(0)
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(future.set_result, value)
    return await future


async def _waits_then_raises() -> str:
    await asyncio.sleep(0)
    raise ValueError("after a wait")


async def _waits_then_refuses() -> str:
    await asyncio.sleep(0)
    raise ToolError("no, after a wait")


async def _catches_its_own_cancel() -> str:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(future.cancel)
    try:
        await future
    except asyncio.CancelledError:
        return "caught"
    return "not reached"


@pytest.mark.parametrize(
    ("fn", "content", "is_error"),
    [
        (_twice, "x", False),
        (_waits_then_raises, "tool '_waits_then_raises' raised ValueError: after a wait", True),
        (_waits_then_refuses, "no, after a wait", True),
        (_catches_its_own_cancel, "caught", False),
    ],
)
async def test_a_tool_that_waits_answers_as_when_awaited(
    fn: Any, content: str, is_error: bool
) -> None:
    wrapped = tool(fn)
    arguments = {"value": "x"} if fn is _twice else {}
    call = ToolCall(id="c", name=wrapped.name, arguments=arguments)
    [result] = await dispatch([call], ToolRegistry([wrapped]), default_timeout=SAFETY)
    assert (result.content, result.is_error) == (content, is_error)
    if not is_error:  # the tool awaited plainly gives the same text
        assert await wrapped.run(arguments) == content


async def test_a_tool_that_waits_past_its_deadline_times_out() -> None:
    @tool(timeout=0.01)
    async def hangs() -> str:
        await asyncio.Event().wait()
        return "never"

    [result] = await dispatch([ToolCall(id="c", name="hangs")], ToolRegistry([hangs]))
    assert result.is_error and "timed out" in result.content


async def test_the_deadline_counts_from_the_calls_start() -> None:
    """A first step longer than the limit: the deadline has passed when the tool first waits."""
    loop = asyncio.get_running_loop()

    @tool(timeout=0.05)
    async def slow_start() -> str:
        started = loop.time()
        while loop.time() - started < 0.06:  # busy, never waiting: nothing can interrupt it
            pass
        await asyncio.sleep(0)  # its first wait: the deadline is already over
        return "late"

    [result] = await dispatch([ToolCall(id="c", name="slow_start")], ToolRegistry([slow_start]))
    assert result.is_error and "timed out" in result.content


async def test_cancelling_the_caller_cancels_a_waiting_tool() -> None:
    entered, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def waits() -> str:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    running = asyncio.ensure_future(
        dispatch([ToolCall(id="c", name="waits")], ToolRegistry([waits]), default_timeout=SAFETY)
    )
    await asyncio.wait_for(entered.wait(), SAFETY)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert cancelled.is_set()


class _Pause:
    """An awaitable that suspends once, yielding a marker (no event loop needed)."""

    def __await__(self) -> Any:
        return (yield "paused")


def test_a_resumed_wait_passes_answers_in_and_returns_the_value() -> None:
    async def twice() -> Any:
        first = await _Pause()
        second = await _Pause()
        return (first, second)

    coroutine = twice()
    resumed = _resumed(coroutine, coroutine.send(None))
    assert resumed.send(None) == "paused"  # the first suspension, handed on
    assert resumed.send("a") == "paused"
    with pytest.raises(StopIteration) as done:
        resumed.send("b")
    assert done.value.value == ("a", "b")


def test_a_resumed_wait_throws_in_and_the_coroutine_may_recover() -> None:
    async def recovers() -> str:
        try:
            await _Pause()
        except KeyError:
            return "recovered"
        return "not reached"

    coroutine = recovers()
    resumed = _resumed(coroutine, coroutine.send(None))
    assert resumed.send(None) == "paused"
    with pytest.raises(StopIteration) as done:
        resumed.throw(KeyError("k"))
    assert done.value.value == "recovered"


def test_closing_a_resumed_wait_closes_the_coroutine() -> None:
    closed: list[bool] = []

    async def waiting() -> None:
        try:
            await _Pause()
        finally:
            closed.append(True)

    coroutine = waiting()
    resumed = _resumed(coroutine, coroutine.send(None))
    assert resumed.send(None) == "paused"
    resumed.close()
    assert closed == [True]
