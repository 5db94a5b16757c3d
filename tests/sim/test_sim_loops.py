"""``run_simulated``: simulated runs share one event loop per thread (and per process), and
nothing one run leaves behind reaches into the next."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading

import pytest

from loopctl_sim.sim.body import run_simulated


async def _the_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def test_runs_on_one_thread_share_a_loop_and_return_their_values() -> None:
    first = run_simulated(_the_loop())
    assert run_simulated(_the_loop()) is first
    assert not first.is_running() and not first.is_closed()

    async def value() -> int:
        await asyncio.sleep(0)
        return 7

    assert run_simulated(value()) == 7


def test_what_a_run_leaves_behind_is_cancelled_before_it_returns() -> None:
    left: list[asyncio.Task[None]] = []

    async def leaves_a_task() -> str:
        left.append(asyncio.ensure_future(asyncio.sleep(3600)))
        return "done"

    assert run_simulated(leaves_a_task()) == "done"
    assert left[0].cancelled()


def test_an_exception_ends_the_run_and_its_tasks_are_cancelled() -> None:
    left: list[asyncio.Task[None]] = []

    async def fails() -> None:
        left.append(asyncio.ensure_future(asyncio.sleep(3600)))
        await asyncio.sleep(0)
        raise KeyError("boom")

    with pytest.raises(KeyError):
        run_simulated(fails())
    assert left[0].cancelled()
    assert run_simulated(_the_loop()).is_closed() is False  # the loop goes on serving


def test_it_refuses_to_start_inside_a_running_loop() -> None:
    async def nested() -> None:
        inner = _the_loop()
        with pytest.raises(RuntimeError, match="running event loop"):
            run_simulated(inner)
        assert inspect.getcoroutinestate(inner) == "CORO_CLOSED"  # no "never awaited" warning

    asyncio.run(nested())


def test_each_thread_has_its_own_loop() -> None:
    mine = run_simulated(_the_loop())
    theirs: list[asyncio.AbstractEventLoop] = []
    thread = threading.Thread(target=lambda: theirs.append(run_simulated(_the_loop())))
    thread.start()
    thread.join()
    assert theirs and theirs[0] is not mine


def test_a_forked_process_makes_its_own_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = run_simulated(_the_loop())
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as a forked child sees another pid
    child = run_simulated(_the_loop())
    assert child is not parent
    assert run_simulated(_the_loop()) is child
