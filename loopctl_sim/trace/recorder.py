"""Recorders: ``TraceRecorder`` (a ``LoopObserver`` for ``BareLoop(observers=[...])``) and
``RecordingMachine`` (around a bare ``LoopMachine``: the machine-level simulator drives one).

Every feed record carries ``machine.digest()``, a running hash: recording costs O(the feed), not
O(history) (``benchmarks/bench_replay.py``). ``snapshot_every=N`` also writes the whole brain
after every N-th feed (O(history) each), so ``loopctl_sim.replay.resume`` restores the last one
instead of replaying the run. A run that goes on from the brain the previous run ended with gets
a header naming that brain's digest (``HeaderRecord.continues``), so a session writes its
conversation once; ``snapshot_headers=True`` makes every header a checkpoint instead, at
O(runs x history) bytes.

An exception that escapes a run still ends it in the trace (``EndRecord.error``), so a replay
tells a failure that happens again from one that no longer does; a ``BaseException`` that is
not an ``Exception`` (a simulated kill) writes nothing, and ``record_raised`` lets a harness
leave its own stops out. A recorder that cannot write (a full disk) does not take the run down:
it keeps the error (``error``), warns once on the ``loopctl.trace`` logger and records no more.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import IO, Any, Final

from loopctl.api import ModelRequest
from loopctl.core import (
    FEED_TYPES,
    CommitPending,
    DiscardPending,
    Feed,
    LoopMachine,
    MachinePolicy,
    MachineStep,
    Terminal,
)
from loopctl.observe import IoEvent, LoopObserver
from loopctl_sim.trace.records import BrainSummary, RunError
from loopctl_sim.trace.requests import RequestLog, RequestSeen
from loopctl_sim.trace.writer import TraceWriter

#: The feeds that end a run (after them, the recorder writes the end record).
_EXIT_DOOR: Final = (CommitPending, DiscardPending)

logger = logging.getLogger("loopctl.trace")


def _writer(target: str | os.PathLike[str] | IO[str] | TraceWriter, fsync: bool) -> TraceWriter:
    if isinstance(target, TraceWriter):
        return target
    return TraceWriter(target, fsync=fsync)


def end_outcome(machine: LoopMachine) -> Any:
    state = machine.state
    return state.outcome if isinstance(state, Terminal) else None


def _continued(ended: LoopMachine | None, machine: LoopMachine) -> str | None:
    """The digest a header names when ``machine`` is ``ended.next_run()`` (``ended``: the brain
    whose end record was written last), else None: the header holds its snapshot. The digest
    goes on from the cached JSON: O(history) in copying a list, not in hashing it."""
    if ended is None or machine.started or not (ended.is_terminal and ended.finalized):
        return None
    digest = machine.digest()
    return digest if ended.next_run().digest() == digest else None


class TraceRecorder(LoopObserver):
    """Observer that writes one trace (one header per run) for a ``BareLoop``."""

    def __init__(
        self,
        target: str | os.PathLike[str] | IO[str] | TraceWriter,
        *,
        metadata: Mapping[str, Any] | None = None,
        fsync: bool = False,
        created: str | None = None,
        snapshot_every: int | None = None,
        snapshot_headers: bool = False,
        record_raised: Callable[[Exception], bool] | None = None,
    ) -> None:
        if snapshot_every is not None and snapshot_every < 1:
            raise ValueError(f"snapshot_every must be at least 1, got {snapshot_every}")
        self.writer = _writer(target, fsync)
        self.metadata = dict(metadata or {})
        self._created = created
        self.requests = RequestLog()
        #: the last model request as recorded (its digest and context)
        self.last_request: RequestSeen | None = None
        self._machine: LoopMachine | None = None
        self.snapshot_every = snapshot_every
        self._feeds = 0  # of the current run, for snapshot_every
        self._header_for: LoopMachine | None = None  # whose header is already written
        self._ended: LoopMachine | None = None  # the brain whose end record was written last
        self.snapshot_headers = snapshot_headers
        #: why the trace stopped being written (None: every record was written)
        self.error: OSError | None = None
        #: which escaped exceptions end the run in the trace (None: all); a harness leaves out
        #: its own (a checker's violation stops the run as a kill would)
        self.record_raised = record_raised

    def _lost(self, exc: OSError) -> None:
        """The trace cannot be written: keep the first error, say so once, record no more."""
        if self.error is None:
            self.error = exc
            logger.warning("%s; the run goes on without recording", exc)

    def continue_run(self, machine: LoopMachine, metadata: Mapping[str, Any]) -> None:
        """Write the header of a run resumed from a trace now, before ``run()`` starts (records
        finishing what the trace was cut in the middle of follow it); ``run_started`` for this
        brain then writes no second header."""
        self._machine = machine
        self._feeds = 0
        self._header_for = machine
        if self.error is not None:
            return
        try:
            self.writer.header(
                machine.snapshot(), {**self.metadata, **metadata}, created=self._created
            )
        except OSError as exc:
            self._lost(exc)

    def run_started(self, machine: LoopMachine, input: Any) -> None:
        self._machine = machine
        ended, self._ended = self._ended, None
        if self._header_for is machine:
            self._header_for = None
            return
        self._feeds = 0
        if self.error is not None:
            return
        continues = None if self.snapshot_headers else _continued(ended, machine)
        try:
            if continues is None:
                self.writer.header(machine.snapshot(), self.metadata, created=self._created)
            else:
                brain = BrainSummary.of(machine)
                self.writer.header(
                    None, self.metadata, created=self._created, continues=continues, brain=brain
                )
        except OSError as exc:
            self._lost(exc)

    def step(self, policy: MachinePolicy, step: MachineStep, machine: LoopMachine) -> None:
        self._machine = machine
        if self.error is not None:
            return
        try:
            self.writer.step(policy, step)
        except OSError as exc:
            self._lost(exc)

    def feed(self, name: str, args: Mapping[str, Any], machine: LoopMachine) -> None:
        if self.error is not None:
            return
        try:
            feed = FEED_TYPES[name](**args)
            self.writer.feed(feed, machine)
            every = self.snapshot_every
            if every is not None:
                self._feeds += 1
                if self._feeds % every == 0 and not machine.is_terminal:
                    self.writer.snapshot(machine, turn=getattr(machine.state, "turn", None))
        except OSError as exc:
            self._lost(exc)

    def io(self, event: IoEvent) -> None:
        if self.error is not None:
            return
        request = event.data.get("request")
        try:
            if event.kind == "model_request" and isinstance(request, ModelRequest):
                data = event.data
                brain = self._machine.digest() if self._machine is not None else None
                seen = self.requests.see(request, data.get("model"), data.get("provider"), brain)
                self.last_request = seen
                self.writer.io("model_request", turn=event.turn, data=seen.data)
                return
            self.writer.io(event)
        except OSError as exc:
            self._lost(exc)

    def run_ended(self, machine: LoopMachine) -> None:
        self._ended = machine
        if self.error is not None:
            return
        try:
            self.writer.end(end_outcome(machine), machine.digest())
        except OSError as exc:
            self._lost(exc)

    def run_raised(self, machine: LoopMachine, error: Exception) -> None:
        """The run ended by ``error`` escaping it: an end record that says so."""
        if self.error is not None or (
            self.record_raised is not None and not self.record_raised(error)
        ):
            return
        try:
            self.writer.end(end_outcome(machine), machine.digest(), error=RunError.of(error))
        except OSError as exc:
            self._lost(exc)

    def close(self) -> None:
        """Close the trace; a failure to write its end is reported as any other (``error``)."""
        try:
            self.writer.close()
        except OSError as exc:
            self._lost(exc)


class RecordingMachine:
    """A bare ``LoopMachine`` that records every ``next_step`` and feed it is given: the header
    at once, the end record after the exit door or ``end()``; a refused feed records nothing.
    Everything else passes through to the wrapped machine."""

    def __init__(
        self,
        machine: LoopMachine | None = None,
        target: str | os.PathLike[str] | IO[str] | TraceWriter | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        fsync: bool = False,
        created: str | None = None,
    ) -> None:
        self.machine = machine if machine is not None else LoopMachine()
        self.writer: TraceWriter | None = None if target is None else _writer(target, fsync)
        self.ended = False
        if self.writer is not None:
            self.writer.header(self.machine.snapshot(), metadata, created=created)

    def __getattr__(self, name: str) -> Any:
        feed_type = FEED_TYPES.get(name)
        if feed_type is not None:  # a seed-named feed method: recorded through ``feed``
            return lambda *args, **kwargs: self.feed(feed_type(*args, **kwargs))
        return getattr(self.machine, name)

    def next_step(self, policy: MachinePolicy) -> MachineStep:
        step = self.machine.next_step(policy)
        if self.writer is not None:
            self.writer.step(policy, step)
        return step

    def feed(self, feed: Feed) -> None:
        """Give the machine ``feed`` and record it (the seed-named methods come here too)."""
        self.machine.feed(feed)
        if self.writer is not None:
            self.writer.feed(feed, self.machine)
        if type(feed) in _EXIT_DOOR:
            self.end()

    def io(self, event: IoEvent | str, **fields: Any) -> None:
        """Record what the world did (model errors, retries, tool calls, a crash)."""
        if self.writer is not None:
            self.writer.io(event, **fields)

    def replace(self, machine: LoopMachine) -> None:
        """Swap in a restored machine (a crash and restore); the trace goes on."""
        self.machine = machine

    def end(self) -> None:
        """Write the end record (once)."""
        if self.writer is not None and not self.ended:
            self.writer.end(end_outcome(self.machine), self.machine.digest())
        self.ended = True

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
