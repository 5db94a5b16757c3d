"""The campaign's executors: where chunks of seeds run, in this process or in a pool of processes.

Every seed is independent and deterministic, so an executor only runs ``job`` on each chunk and
hands each result to ``take``; the summary does not depend on the order, so ``--workers N``
gives the same one as one process. Chunks (about eight per worker) spread a worker's per-job
cost without leaving workers idle behind a slow chunk; each carries its place (``Chunk.index``),
by which the campaign dedupes and its state file records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol, TypeVar

from loopctl_sim.errors import SimError

R = TypeVar("R")


@dataclass(frozen=True)
class Chunk:
    """Consecutive seeds of a campaign, and the chunk's place among its chunks (from 0)."""

    index: int
    seeds: tuple[int, ...]


class Executor(Protocol):
    """Where chunks run: ``executor(job, chunks, take)`` runs ``job`` on every chunk and calls
    ``take`` with each chunk's result, in any order, before it returns; it raises what a job or
    ``take`` raised (and then runs no more chunks)."""

    def __call__(
        self, job: Callable[[Chunk], R], parts: Sequence[Chunk], take: Callable[[R], None]
    ) -> None: ...


class WorkerSetupError(SimError):
    """A worker cannot run the campaign at all (the agent or a check does not import there):
    one message for the user, naming the host, instead of one traceback per chunk."""


def default_chunk_size(seeds: int, workers: int) -> int:
    """About eight chunks per worker, at most 100 seeds in one, at least one."""
    return max(1, min(100, seeds // max(1, workers * 8)))


def chunks(seeds: Sequence[int], size: int) -> Iterator[Chunk]:
    """``seeds`` in consecutive chunks of ``size`` (the last one may be shorter)."""
    for index, i in enumerate(range(0, len(seeds), size)):
        yield Chunk(index, tuple(seeds[i : i + size]))


def run_here(job: Callable[[Chunk], R], parts: Iterable[Chunk], take: Callable[[R], None]) -> None:
    """Run every chunk in this process, one after the other, in order."""
    for part in parts:
        take(job(part))


def in_processes(workers: int) -> Executor:
    """The executor of ``--workers N`` (``job`` must pickle). When a job or ``take`` raises
    (Ctrl-C included), the chunks not yet started are cancelled rather than run to the end:
    what finished is what a campaign's state file holds."""

    def run(job: Callable[[Chunk], R], parts: Sequence[Chunk], take: Callable[[R], None]) -> None:
        pool = ProcessPoolExecutor(max_workers=workers)
        try:
            pending: set[Future[R]] = {pool.submit(job, part) for part in parts}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    take(fut.result())
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    return run
