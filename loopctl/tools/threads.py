"""The worker threads sync tools run in: one hop to a thread and back, cheaper than
``asyncio.to_thread``.

``asyncio.to_thread`` goes through the default executor (a ``concurrent.futures`` future, a
work item, idle-thread bookkeeping, a future copied onto an asyncio one). Here a call is one job
on a ``queue.SimpleQueue`` and its answer one ``loop.call_soon_threadsafe``: a round trip
measured 97 µs with ``to_thread`` and 39 µs this way (``python -m benchmarks.bench_turn``, the
"thread hop" rows); what is left is the two wake-ups no hop avoids.

The function runs in a copy of the caller's ``contextvars`` context, as with ``to_thread``.
Threads start on demand, when every worker is busy, up to ``MAX_WORKERS``, so the calls of one
wave run at the same time. A thread cannot be interrupted: a tool that times out or is cancelled
finishes in the background, its answer dropped. The threads are daemon threads of their own
pool, so a hung tool neither holds a worker of the default executor (the event loop's DNS
lookups use it) nor keeps the interpreter from finishing.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Final

__all__ = ["MAX_WORKERS", "run_in_worker"]

#: At most this many worker threads (the default executor's own limit).
MAX_WORKERS: Final = min(32, (os.cpu_count() or 1) + 4)


class _Job:
    __slots__ = ("args", "context", "fn", "future", "kwargs", "loop")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        self.loop = loop
        self.future = future
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.context = contextvars.copy_context()

    def outcome(self) -> tuple[Any, BaseException | None]:
        """In the worker thread: call the function; its value, or the error it raised."""
        try:
            return self.context.run(self.fn, *self.args, **self.kwargs), None
        except StopIteration as exc:  # a future cannot hold it (as for a coroutine's)
            return None, RuntimeError(f"the tool raised StopIteration: {exc}")
        except BaseException as exc:
            return None, exc


def _answer(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    value: Any,
    error: BaseException | None,
) -> None:
    """In the worker thread: hand the outcome to the loop's thread."""
    # A closed loop (RuntimeError): the run is over and nobody waits for this answer. Not
    # contextlib.suppress: its object and calls were 4,200 of a hop's 78,800 instructions.
    try:  # noqa: SIM105
        loop.call_soon_threadsafe(_settle, future, value, error)
    except RuntimeError:
        pass


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    """In the loop's thread: the answer, unless the caller stopped waiting (cancel, timeout)."""
    if future.done():
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


class _Pool:
    """Worker threads sharing one queue of jobs; ``idle`` counts workers nobody has claimed."""

    def __init__(self) -> None:
        self.forget()

    def submit(self, job: _Job) -> None:
        # A call claims an idle worker, or starts one: two calls of one wave submitted back to
        # back must not both count on the same idle worker (they would run one after the other).
        with self.lock:
            if self.idle:
                self.idle -= 1
                start = False
            else:
                start = self.threads < MAX_WORKERS
                self.threads += start
        self.jobs.put(job)
        if start:
            name = f"loopctl-tool-{self.threads}"
            threading.Thread(target=self.work, name=name, daemon=True).start()

    def forget(self) -> None:
        """An empty pool. Also in a child process after ``fork()``: the parent's workers do not
        exist there (a fork copies only the thread that called it); a call counting on an idle
        worker that never takes its job would hang."""
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.idle = 0
        self.threads = 0

    def work(self) -> None:
        while True:
            job = self.jobs.get()
            value, error = job.outcome()
            # The job goes before the answer wakes the run: its copy of the run's context
            # (the driver's IO reporter, and through it the loop's client) must not outlive
            # the run by the time this thread takes to drop it.
            loop, future = job.loop, job.future
            del job
            # Idle before it answers: the answer wakes the loop's thread, which then needs the
            # GIL, held here until this thread waits in ``get()`` again. A round trip's median
            # (30 batches of 300, the two orders interleaved) went 48 -> 46 us on a quiet
            # machine and 70-85 -> 55-66 us on a busy one.
            with self.lock:
                self.idle += 1
            _answer(loop, future, value, error)
            del loop, future, value, error  # drop them before waiting


_POOL: Final = _Pool()
os.register_at_fork(after_in_child=_POOL.forget)


async def run_in_worker(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a worker thread, awaited (``asyncio.to_thread``, cheaper).

    Cancelling the caller stops the wait at once; the thread runs on and its answer is dropped.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    _POOL.submit(_Job(loop, future, fn, args, kwargs))
    return await future
