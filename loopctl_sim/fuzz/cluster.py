"""A campaign's seed chunks on a Dask cluster (``loopctl-sim fuzz --cluster``): what
``--cluster`` names (a scheduler's address, or ``local[:N]``: a ``LocalCluster`` this process
starts and stops), connecting with a short timeout, asking every worker up front whether it can
run the campaign, and the executor that sends chunks out as Dask futures. The campaign counts
each chunk once and writes failing seeds' files on this machine, so a cluster gives the same
summary and files as one process.

Why Dask rather than a home-made queue: it already schedules, balances, and runs a lost worker's
tasks again elsewhere, on a laptop and on a swarm alike. It is an optional extra
(``loopctl[dask]``) imported only here, only when a cluster is asked for.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from loopctl_sim.errors import SimError
from loopctl_sim.fuzz.executors import Chunk, WorkerSetupError

R = TypeVar("R")

#: What to install when ``distributed`` is missing.
INSTALL = "pip install 'loopctl[dask]'"

_ADDRESS = re.compile(
    r"^(?:(?P<scheme>[a-z][a-z0-9+.-]*)://)?(?P<host>[^\s/:]+|\[[^\]]+\]):(?P<port>\d+)$"
)


class ClusterError(SimError):
    """The cluster cannot be used: Dask is not installed, the scheduler cannot be reached, no
    worker joined, or a chunk kept killing its workers. One line for the user."""


@dataclass(frozen=True)
class ClusterSpec:
    """What ``--cluster`` named: a scheduler's ``address``, or a local cluster of ``workers``."""

    address: str | None
    workers: int = 0

    def __str__(self) -> str:
        return self.address if self.address is not None else f"local:{self.workers}"


def parse_cluster(text: str) -> ClusterSpec:
    """``local`` (one worker process per core), ``local:N``, or a scheduler's address
    (``tcp://host:8786``; ``host:8786`` means tcp)."""
    text = text.strip()
    if text == "local" or text.startswith("local:"):
        count = text.partition(":")[2]
        if not count:
            return ClusterSpec(None, max(1, os.cpu_count() or 1))
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"--cluster {text!r}: local:N needs N >= 1 worker processes")
        return ClusterSpec(None, int(count))
    found = _ADDRESS.match(text)
    if found is None:
        raise ValueError(
            f"--cluster {text!r}: expected a scheduler's address (tcp://host:8786) or local[:N]"
        )
    return ClusterSpec(f"{found['scheme'] or 'tcp'}://{found['host']}:{found['port']}")


def _distributed() -> Any:
    """The ``distributed`` module, or the error that says how to install it."""
    try:
        import distributed
    except ImportError:
        raise ClusterError(f"--cluster needs Dask distributed: {INSTALL}") from None
    return distributed


class DaskCluster:
    """A connection to a Dask cluster, the campaign's executor: ``with DaskCluster(spec) as
    cluster`` connects (or starts the ``LocalCluster``) and closes it (or stops it) after.
    ``connect_timeout`` bounds the wait for the scheduler and for a first worker."""

    def __init__(self, spec: ClusterSpec, *, connect_timeout: float = 10.0) -> None:
        self.spec = spec
        self.connect_timeout = connect_timeout
        # distributed's Client and LocalCluster (Any: much of distributed's API is untyped)
        self._client: Any = None
        self._local: Any = None

    def __enter__(self) -> DaskCluster:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        distributed = _distributed()
        try:
            if self.spec.address is None:
                self._local = distributed.LocalCluster(
                    n_workers=self.spec.workers,
                    threads_per_worker=1,  # a seed is pure Python: one per process, no GIL fight
                    processes=True,
                    host="127.0.0.1",
                    # no dashboard; the scheduler's HTTP routes on a free loopback port (by
                    # default they take 8787 on every interface, or warn that it is taken)
                    dashboard_address=None,
                    scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
                    silence_logs=logging.ERROR,
                )
                self._client = distributed.Client(self._local, set_as_default=False)
            else:
                self._client = distributed.Client(
                    self.spec.address, timeout=self.connect_timeout, set_as_default=False
                )
                self._client.wait_for_workers(1, timeout=self.connect_timeout)
        except Exception as exc:
            connected = self._client is not None
            self.close()
            if not isinstance(exc, OSError | TimeoutError):
                raise
            if not connected:
                raise ClusterError(
                    f"cannot reach the Dask scheduler at {self.spec}: {_one_line(exc)}"
                ) from None
            raise ClusterError(
                f"no worker joined the Dask scheduler at {self.spec} within "
                f"{self.connect_timeout:g} s"
            ) from None

    def close(self) -> None:
        client, local = self._client, self._local
        self._client = self._local = None
        if client is not None:
            client.close()
        if local is not None:
            local.close()

    @property
    def client(self) -> Any:
        if self._client is None:
            raise RuntimeError("the cluster is not open (use it in a with block)")
        return self._client

    @property
    def workers(self) -> int:
        """The threads the cluster runs tasks on now: how many chunks run at once."""
        threads: dict[str, int] = self.client.nthreads()
        return sum(threads.values()) or 1

    @property
    def where(self) -> str:
        """The cluster in words, for the campaign's first line."""
        workers = self.client.nthreads()
        scheduler = self.client.scheduler.address if self.client.scheduler else "?"
        kind = "LocalCluster" if self._local is not None else "Dask cluster"
        return f"{kind} at {scheduler}, {len(workers)} worker(s), {self.workers} thread(s)"

    def check_workers(self, setup: Callable[[], object]) -> None:
        """Run ``setup`` on every worker now; raise one ``WorkerSetupError`` naming each worker
        where it failed (the agent's module not installed there, or loopctl itself)."""
        answers = self.client.run(setup, on_error="return")
        problems = [
            f"worker {address}: {_worker_problem(answer)}"
            for address, answer in sorted(answers.items())
            if isinstance(answer, BaseException)
        ]
        if problems:
            raise WorkerSetupError("; ".join(problems))

    def __call__(
        self, job: Callable[[Chunk], R], parts: Sequence[Chunk], take: Callable[[R], None]
    ) -> None:
        """The executor: every chunk a future, ``take`` called on each result as it completes.

        A lost worker's chunks are run again by Dask on the others. A job that raises (a
        ``WorkerSetupError`` from a worker that joined after ``check_workers``) or ``take``
        raising (Ctrl-C) cancels the chunks still out and raises: the first error, once."""
        distributed = _distributed()
        if not parts:
            return
        client = self.client
        campaign = uuid.uuid4().hex[:12]
        keys = [f"loopctl-fuzz-{campaign}-{part.index}" for part in parts]
        futures = client.map(job, list(parts), key=keys, pure=False)
        # with_results: the results are fetched on Dask's event loop as futures finish, in
        # batches, rather than one blocking round trip per chunk here (12-16 ms a chunk on
        # this machine: benchmarks/bench_fuzz_cluster.py)
        done = distributed.as_completed(futures, loop=client.loop, with_results=True)
        try:
            for batch in done.batches():
                for future, result in batch:
                    future.release()
                    take(result)
        except distributed.KilledWorker as exc:
            raise ClusterError(
                f"a chunk of seeds killed every worker it ran on ({_one_line(exc)}): "
                "run its seeds with --workers 1 to see why"
            ) from None
        finally:
            client.cancel([f for f in futures if not f.done()])


def _worker_problem(error: BaseException) -> str:
    if isinstance(error, WorkerSetupError):
        return str(error)
    if isinstance(error, ImportError):
        return (
            f"cannot import the campaign's code ({_one_line(error)}): install loopctl "
            f"(with {INSTALL}) and the project on every worker"
        )
    return _one_line(error)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
