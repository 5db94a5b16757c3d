"""The campaign's executors: where chunks of seeds run, in this process or in a pool of processes.

A campaign is embarrassingly parallel (every seed is independent and deterministic), so all an
executor does is run ``job`` on each chunk and hand each chunk's results to ``take`` as they come.
It decides nothing about the results: the campaign's summary does not depend on the order chunks
finish in (``loopctl_sim.fuzz.campaign`` sorts what it keeps), which is why ``--workers N`` gives
the same summary as one process.

Seeds go out in chunks rather than one by one so that a worker process's cost of receiving a job
and sending back results is spread over many seeds; the chunk size keeps about eight chunks per
worker, so a slow chunk near the end does not leave the other workers idle for long.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import TypeVar

__all__ = ["chunks", "default_chunk_size", "default_workers", "run_here", "run_in_processes"]

R = TypeVar("R")


def default_chunk_size(seeds: int, workers: int) -> int:
    """About eight chunks per worker, at most 100 seeds in one, at least one."""
    return max(1, min(100, seeds // max(1, workers * 8)))


def chunks(seeds: Sequence[int], size: int) -> Iterator[Sequence[int]]:
    """``seeds`` in consecutive slices of ``size`` (the last one may be shorter)."""
    for i in range(0, len(seeds), size):
        yield seeds[i : i + size]


def run_here(
    job: Callable[[Sequence[int]], R], parts: Iterable[Sequence[int]], take: Callable[[R], None]
) -> None:
    """Run every chunk in this process, one after the other, in order."""
    for part in parts:
        take(job(part))


def run_in_processes(
    job: Callable[[Sequence[int]], R],
    parts: Iterable[Sequence[int]],
    take: Callable[[R], None],
    workers: int,
) -> None:
    """Run the chunks in ``workers`` processes; ``take`` sees each chunk's results as it finishes.

    ``job`` must pickle (a module-level function, or a ``functools.partial`` of one).
    """
    with ProcessPoolExecutor(max_workers=workers) as pool:
        pending: set[Future[R]] = {pool.submit(job, part) for part in parts}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                take(fut.result())


def default_workers() -> int:
    """One worker process per CPU."""
    return max(1, (os.cpu_count() or 1))
