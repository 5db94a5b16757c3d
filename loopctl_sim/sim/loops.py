"""The event loop simulated runs run on: one per thread, reused, instead of ``asyncio.run`` each.

A campaign or a hypothesis machine runs thousands of short simulated runs, and ``asyncio.run``
builds and tears down a loop each time (556,000 instructions a run; a kept loop took a
simulated run of 20 turns from 9.93M to 9.34M instructions, cachegrind). So the harness keeps
one loop per thread and per process, closed when the process exits. As with ``asyncio.run``, the
coroutine is refused inside a running loop, and the tasks a run leaves behind are cancelled and
awaited before the next run starts; a Ctrl-C ends the run and cancels what it left.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


class _ThreadLoop(threading.local):
    loop: asyncio.AbstractEventLoop | None = None
    pid: int = 0


_LOCAL = _ThreadLoop()


def run_simulated(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` on this thread's kept loop (see the module docstring)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise RuntimeError("a simulated run cannot be started from a running event loop")
    loop = _LOCAL.loop
    pid = os.getpid()
    if loop is None or loop.is_closed() or _LOCAL.pid != pid:
        loop = asyncio.new_event_loop()
        _LOCAL.loop, _LOCAL.pid = loop, pid
        atexit.register(loop.close)
    try:
        return loop.run_until_complete(coro)
    finally:
        _cancel_leftovers(loop)


def synchronous(run: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """``run``, an async simulator (``simulate_driver_async``), for callers outside an event
    loop (``simulate_driver``): the same arguments, run by ``run_simulated``. Each simulator is
    written once, async."""

    def sync(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_simulated(run(*args, **kwargs))

    functools.update_wrapper(sync, run)
    sync.__name__ = sync.__qualname__ = run.__name__.removesuffix("_async")
    return sync


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel and await the tasks a run left behind (none, after a run that ended normally)."""
    left = asyncio.all_tasks(loop)
    if not left:
        return
    for task in left:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
