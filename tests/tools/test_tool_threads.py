"""Where a sync tool runs: the worker threads (``loopctl.tools.threads``) or, with
``inline=True``, on the event loop; what each answers is the same."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest

from loopctl.core import ToolCall, ToolResult
from loopctl.tools import ToolError, ToolRegistry, dispatch, threads, tool
from loopctl.tools.threads import MAX_WORKERS, run_in_worker

SAFETY = 5.0
"""Only ends a test that would otherwise hang; no assertion depends on it."""

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


def _thread() -> str:
    return threading.current_thread().name


async def test_run_in_worker_answers_in_another_thread() -> None:
    name = await run_in_worker(_thread)
    assert name.startswith("loopctl-tool-") and name != _thread()
    assert await run_in_worker(int, "ff", base=16) == 255


async def test_run_in_worker_raises_what_the_function_raised() -> None:
    def fails() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        await run_in_worker(fails)


async def test_stop_iteration_becomes_a_runtime_error() -> None:
    def stops() -> None:
        raise StopIteration("done")

    with pytest.raises(RuntimeError, match="StopIteration"):
        await run_in_worker(stops)


async def test_the_function_sees_the_callers_context_variables() -> None:
    REQUEST_ID.set("r-42")
    assert await run_in_worker(REQUEST_ID.get) == "r-42"


async def test_calls_at_the_same_time_run_in_threads_at_the_same_time() -> None:
    parties = min(3, MAX_WORKERS)
    barrier = threading.Barrier(parties, timeout=SAFETY)

    def meet(n: int) -> int:
        barrier.wait()  # returns only when every call is running at once
        return n

    results = await asyncio.gather(*(run_in_worker(meet, n) for n in range(parties)))
    assert results == list(range(parties))


async def test_a_cancelled_wait_stops_at_once_and_the_thread_finishes() -> None:
    release, finished = threading.Event(), threading.Event()

    def slow() -> str:
        release.wait(SAFETY)
        finished.set()
        return "late"

    waiting = asyncio.ensure_future(run_in_worker(slow))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert not finished.is_set()  # the wait ended while the thread still ran
    release.set()
    assert await asyncio.to_thread(finished.wait, SAFETY)


def _fails() -> None:
    raise KeyError("nobody listens")


@pytest.mark.parametrize("fn", [lambda: "late", _fails])
async def test_an_answer_nobody_waits_for_is_dropped_quietly(fn: Any) -> None:
    """The caller was cancelled (or timed out) before the thread answered: the answer, a value
    or an error, is dropped without an error in the loop."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    future: asyncio.Future[Any] = loop.create_future()
    future.cancel()
    job = threads._Job(loop, future, fn, (), {})
    threads._answer(loop, future, *job.outcome())  # the worker's side, run here
    await asyncio.sleep(0)  # the answer's callback, scheduled first, runs before this returns
    assert errors == [] and future.cancelled()


def test_an_answer_after_the_loop_closed_is_dropped_quietly() -> None:
    release, answered = threading.Event(), threading.Event()
    hooked: list[Any] = []
    previous = threading.excepthook
    threading.excepthook = hooked.append

    def slow() -> str:
        release.wait(SAFETY)
        return "late"

    async def main() -> None:
        waiting = asyncio.ensure_future(run_in_worker(slow))
        await asyncio.sleep(0)
        waiting.cancel()

    try:
        asyncio.run(main())  # returns at once: the worker is a daemon of its own pool
        release.set()
        assert run_after_close(answered)
    finally:
        threading.excepthook = previous
    assert hooked == []


def run_after_close(answered: threading.Event) -> bool:
    """A job after the closed loop's one: the pool still works once the closed loop's answer
    was dropped."""

    async def main() -> str:
        result: str = await run_in_worker(lambda: "alive")
        answered.set()
        return result

    return asyncio.run(main()) == "alive" and answered.is_set()


# --- inline tools ------------------------------------------------------------------------------


def add(a: int, b: int) -> int:
    return a + b


def refuses(a: int, b: int) -> int:
    raise ToolError("no sums today")


def breaks(a: int, b: int) -> int:
    raise ValueError("broken")


@pytest.mark.parametrize("fn", [add, refuses, breaks])
async def test_inline_and_threaded_tools_answer_alike(fn: Any) -> None:
    calls = [ToolCall(id="c1", name=fn.__name__, arguments={"a": 1, "b": 2})]
    bad = [ToolCall(id="c2", name=fn.__name__, arguments={"a": "x"})]
    answers = []
    for inline in (False, True):
        registry = ToolRegistry([tool(inline=inline)(fn)])
        answers.append(await dispatch([*calls, *bad], registry, default_timeout=SAFETY))
    threaded, inline_ = answers
    assert threaded == inline_
    assert all(isinstance(r, ToolResult) for r in inline_)
    assert inline_[1].is_error and "invalid arguments" in inline_[1].content


async def test_an_inline_tool_runs_on_the_event_loops_thread() -> None:
    here = _thread()

    @tool(inline=True)
    def where() -> str:
        return _thread()

    @tool
    def elsewhere() -> str:
        return _thread()

    assert await where.run({}) == here
    assert await elsewhere.run({}) != here


async def test_an_inline_tool_takes_no_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default timeout is not applied to an inline tool: it could not fire while the tool
    blocks the loop. A threaded tool still gets one, counted from the call's start."""
    deadlines: list[float | None] = []
    real = asyncio.timeout_at
    loop = asyncio.get_running_loop()

    def spy(when: float | None) -> asyncio.Timeout:
        deadlines.append(when)
        return real(when)

    monkeypatch.setattr(asyncio, "timeout_at", spy)
    registry = ToolRegistry([tool(inline=True)(add), tool(name="threaded")(add)])
    calls = [
        ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2}),
        ToolCall(id="c2", name="threaded", arguments={"a": 1, "b": 2}),
    ]
    before = loop.time()
    results = await dispatch(calls, registry, default_timeout=SAFETY)
    assert [(r.content, r.is_error) for r in results] == [("3", False), ("3", False)]
    [when] = deadlines
    assert when is not None and before + SAFETY <= when <= loop.time() + SAFETY


# --- the deadline of a threaded call -----------------------------------------------------------


def _timers(monkeypatch: pytest.MonkeyPatch) -> list[asyncio.TimerHandle]:
    """Every timer the running loop (the test's own) arms from now on."""
    loop = asyncio.get_running_loop()
    armed: list[asyncio.TimerHandle] = []
    real = loop.call_at

    def spy(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        armed.append(real(when, callback, *args, **kwargs))
        return armed[-1]

    monkeypatch.setattr(loop, "call_at", spy)
    return armed


async def test_a_threaded_call_past_its_deadline_is_the_timed_out_error_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wait ends at the deadline with the text the model reads for a timeout; the thread,
    which cannot be interrupted, finishes later and its answer is dropped without an error."""
    release, settled = threading.Event(), asyncio.Event()
    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    real = threads._settle

    def settle(*args: Any) -> None:  # the late answer, on the loop's thread
        real(*args)
        settled.set()

    monkeypatch.setattr(threads, "_settle", settle)

    @tool(timeout=0.05)
    def hangs() -> str:
        release.wait(SAFETY)
        return "late"

    [result] = await dispatch([ToolCall(id="c", name="hangs")], ToolRegistry([hangs]))
    assert (result.content, result.is_error) == ("tool 'hangs' timed out after 0.05 s", True)
    assert not settled.is_set()  # the wait ended while the thread still ran
    release.set()
    await asyncio.wait_for(settled.wait(), SAFETY)
    assert errors == []


async def test_a_threaded_call_answered_in_time_cancels_its_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timers = _timers(monkeypatch)
    registry = ToolRegistry([tool(add)])
    [result] = await dispatch(
        [ToolCall(id="c", name="add", arguments={"a": 1, "b": 2})], registry, default_timeout=SAFETY
    )
    assert (result.content, result.is_error) == ("3", False)
    [timer] = timers
    assert timer.cancelled()  # not left in the loop until the deadline


async def test_cancelling_a_threaded_call_stops_the_wait_and_its_timer_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timers = _timers(monkeypatch)
    release, entered = threading.Event(), threading.Event()

    @tool
    def blocking() -> str:
        entered.set()
        release.wait(SAFETY)
        return "done"

    registry = ToolRegistry([blocking])
    task = asyncio.ensure_future(
        dispatch([ToolCall(id="c", name="blocking")], registry, default_timeout=SAFETY)
    )
    try:
        assert await asyncio.to_thread(entered.wait, SAFETY)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        [timer] = timers
        assert timer.cancelled() and not release.is_set()
    finally:
        release.set()  # the worker thread cannot be interrupted; let it finish


async def test_a_threaded_calls_own_timeout_error_is_not_its_deadline() -> None:
    def upstream() -> str:
        raise TimeoutError("upstream timed out")

    registry = ToolRegistry([tool(upstream)])
    [result] = await dispatch([ToolCall(id="c", name="upstream")], registry, default_timeout=SAFETY)
    assert result.content == "tool 'upstream' raised TimeoutError: upstream timed out"


def _returns_a_coroutine(seconds: float) -> Any:
    """A sync function handing back a coroutine (an async one behind a sync wrapper)."""

    async def later() -> str:
        await asyncio.sleep(seconds)
        return "awaited"

    return later()


@pytest.mark.parametrize(
    ("seconds", "content"),
    [(0.0, "awaited"), (SAFETY, "tool '_returns_a_coroutine' timed out after 0.05 s")],
)
async def test_a_coroutine_returned_by_a_sync_tool_is_awaited_within_the_deadline(
    seconds: float, content: str
) -> None:
    registry = ToolRegistry([tool(timeout=0.05)(_returns_a_coroutine)])
    call = ToolCall(id="c", name="_returns_a_coroutine", arguments={"seconds": seconds})
    [result] = await dispatch([call], registry)
    assert result.content == content


def test_an_inline_tool_cannot_take_a_timeout() -> None:
    with pytest.raises(ValueError, match="an inline tool cannot be timed out"):
        tool(inline=True, timeout=1.0)(add)


def test_an_async_tool_cannot_be_inline() -> None:
    async def aadd(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ValueError, match="inline=True is for sync functions"):
        tool(inline=True)(aadd)


def test_inline_is_kept_and_shown() -> None:
    assert tool(inline=True)(add).inline and not tool(add).inline
    assert (
        repr(tool(inline=True)(add)) == "<Tool 'add' parallel_safe=True timeout=None inline=True>"
    )
    assert repr(tool(add)) == "<Tool 'add' parallel_safe=True timeout=None>"
