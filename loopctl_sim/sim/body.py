"""The body a simulated or replayed run gets: tools that can be advertised but never run, the
driver's configs from a recorded policy, no sleeping, the crash a harness raises at a step, and
the event loop simulated runs run on. The driver-level simulator and the driver-level replay
build their ``BareLoop`` the same way; this is that shared part.

Simulated runs run on one kept event loop per thread, not ``asyncio.run`` each: a campaign runs
thousands of short runs, and a loop built and torn down per run took a 20-turn agent run from
8.5M to 12.4M instructions (cachegrind). As with ``asyncio.run``, a run is refused inside a
running loop, and the tasks a run leaves behind are cancelled before it returns.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from loopctl.core import MachinePolicy
from loopctl.driver import RetryConfig, RunConfig, SessionConfig
from loopctl.tools import Tool, ToolRegistry
from loopctl_sim.sim.world import World


async def no_sleep(seconds: float) -> None:
    """The driver's sleep in a simulated world: retries and backoff take no time."""
    return None


@functools.lru_cache(maxsize=256)
def stub_tools(names: tuple[str, ...]) -> ToolRegistry:
    """Tools the driver can advertise; a middleware answers every call, so they never run. Built
    once per set of names (a registry and its tools are immutable): building a ``Tool`` makes a
    pydantic model and its JSON schema, a millisecond, a tenth of a simulated run."""

    def stub() -> str:  # pragma: no cover - never called
        raise AssertionError("a world tool runs through the middleware")

    return ToolRegistry(
        [Tool(stub, name=name, description=f"scripted tool {name}") for name in names]
    )


def configs_for(
    policy: MachinePolicy, world: World | None = None
) -> tuple[RunConfig, SessionConfig]:
    """The run and session configs that make the driver hand the brain ``policy``: with a
    ``world``, its retries and tool timeout; without one (replaying), the trace decides when an
    error is retried, so the retry budget is unbounded."""
    run = RunConfig(
        max_turns=policy.max_turns,
        compact_threshold=policy.compact_threshold,
        emergency_threshold=policy.emergency_threshold,
        loop_window=policy.loop_window,
        loop_repeat_limit=policy.loop_repeat_limit,
        loop_action=policy.loop_action,
        retry=world.retry_config() if world is not None else RetryConfig(max_retries=10**6),
        tool_timeout=world.tool_timeout if world is not None else None,
    )
    return run, SessionConfig(context_window=policy.context_window)


def agent_failure(error: Exception) -> bool:
    """Whether ``error``, escaped from a simulated run, is the agent's failure (recorded as the
    run's end) rather than the harness's own stop (a checker's violation, the step bound: an
    exception of ``loopctl_sim``'s, which leaves the trace where it struck, as a kill would)."""
    return not type(error).__module__.startswith("loopctl_sim.")


class Crash(BaseException):
    """Raised by a harness's ``before_step`` hook: the run stops as a killed process would (no
    exit door; a ``BaseException``, which the driver does not report to its observers as the
    run's end), and the harness resumes the saved brain in a fresh body."""

    def __init__(self, step: int) -> None:
        super().__init__(f"crash before step {step}")
        self.step = step


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
