"""Cancel: between steps, during a model stream, during a hung tool, from another thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from loopctl.api import ModelRequest, StopEvent, TextDelta
from loopctl.core import Cancelled, coherence_problem
from loopctl.driver.cancel import CancelSignal
from loopctl.driver.loop import BareLoop
from loopctl.testing import ScriptedClient
from loopctl.tools import tool
from tests.driver.helpers import answer, ask, call


async def test_cancel_during_a_hung_tool_ends_the_run_and_cancels_the_tool(recorder) -> None:
    entered = asyncio.Event()
    saw_cancel = asyncio.Event()

    @tool
    async def hang() -> str:
        """Sleeps forever."""
        entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            saw_cancel.set()
            raise
        return "never"

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    client = ScriptedClient(
        [ask(call("c1", "add", a=1, b=2)), ask(call("c2", "hang")), answer("never")]
    )
    cancel = CancelSignal()
    loop = BareLoop(client, tools=[add, hang], observers=[recorder])

    async def fire() -> None:
        await entered.wait()
        cancel.cancel()

    result, _ = await asyncio.gather(loop.run("x", cancel), fire())
    assert isinstance(result.outcome, Cancelled)
    assert saw_cancel.is_set()
    # salvage: the first exchange survives, the in-flight call is dropped
    history = loop.machine.history
    assert len(history) == 3 and coherence_problem(history) is None
    assert "cancel" in recorder.feed_names() and recorder.feed_names()[-1] == "discard_pending"
    assert client.remaining == 1


class HangingStream:
    """Sends a little text, then never finishes; notes when it is cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def stream(self, request: ModelRequest):
        yield TextDelta(text="thinking")
        self.started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        yield StopEvent(reason="end_turn")


async def test_cancel_during_a_model_stream() -> None:
    client = HangingStream()
    cancel = CancelSignal()
    loop = BareLoop(client)

    async def fire() -> None:
        await client.started.wait()
        cancel.cancel()

    result, _ = await asyncio.gather(loop.run("x", cancel), fire())
    assert isinstance(result.outcome, Cancelled)
    assert client.cancelled
    assert loop.machine.history == ()  # no exchange completed: nothing salvaged


async def test_cancel_from_another_thread() -> None:
    client = HangingStream()
    cancel = CancelSignal()
    loop = BareLoop(client)

    async def fire() -> None:
        await client.started.wait()
        thread = threading.Thread(target=cancel.cancel)
        thread.start()
        await asyncio.to_thread(thread.join)

    result, _ = await asyncio.gather(loop.run("x", cancel), fire())
    assert isinstance(result.outcome, Cancelled)


async def test_cancel_signal_is_idempotent_and_wakes_every_waiter() -> None:
    cancel = CancelSignal()
    waiters = [asyncio.ensure_future(cancel.wait()) for _ in range(3)]
    await asyncio.sleep(0)
    cancel.cancel()
    cancel.cancel()
    await asyncio.gather(*waiters)
    assert cancel.cancelled
    await cancel.wait()  # returns at once once fired


async def test_a_cancelled_loop_can_run_again() -> None:
    cancel = CancelSignal()
    cancel.cancel()
    loop = BareLoop(ScriptedClient([answer("second")]))
    await loop.run("first", cancel)
    result = await loop.run("again")
    assert result.final_text == "second"


async def test_cancelling_the_run_task_cancels_the_tools_too() -> None:
    entered = asyncio.Event()
    tool_cancelled = asyncio.Event()

    @tool
    async def hang() -> str:
        """Sleeps forever."""
        entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            tool_cancelled.set()
            raise
        return "never"

    loop = BareLoop(ScriptedClient([ask(call("c1", "hang"))]), tools=[hang])
    run = asyncio.ensure_future(loop.run("x"))
    await entered.wait()
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    await asyncio.wait_for(tool_cancelled.wait(), timeout=5)
    assert tool_cancelled.is_set()
