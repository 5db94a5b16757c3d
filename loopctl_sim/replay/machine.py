"""Machine-level replay: re-ask every recorded step, re-apply every feed, compare everything.

The brain is deterministic, so a fresh machine from the header's snapshot, asked the recorded
steps and given the recorded feeds, must answer the same steps and reach the same digests; the
first record where it does not is a *divergence*. IO records are not replayed (a replayer that
re-runs effects is not a replayer). The brain summaries a trace holds (after each feed; in a
header that continues a run) are checked against the replayed brain too, so no reader can trust
a summary that replay did not check. Digests and summaries are compared up to a run's first
scrubbed record: from there the arguments hold placeholders.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from msgspec.structs import astuple

from loopctl.core import Feed, LoopMachine, ProtocolError, to_jsonable
from loopctl_sim.replay.explain import NOT_CONTINUED, brain_divergence
from loopctl_sim.replay.report import Diverged, Divergence, RecentFeed, ReplayResult
from loopctl_sim.replay.resume import header_brain
from loopctl_sim.trace import (
    BrainSummary,
    EndRecord,
    FeedRecord,
    HeaderRecord,
    IoRecord,
    Record,
    StepRecord,
    TraceFormatError,
    TraceReader,
    end_outcome,
)


def replay_trace(
    path: str | os.PathLike[str],
    *,
    until: int | None = None,
    digest_every: int = 1,
) -> ReplayResult:
    """Replay the trace at ``path`` against the brain. Raises ``TraceFormatError`` when the trace
    cannot be read; a divergence is reported in the result, not raised.

    ``digest_every=N`` (N > 1) is a faster first pass that compares the digest only every N feeds
    and before a header, an end, ``until`` and the trace's end (steps, refusals and outcomes at
    every record). If it finds anything, the trace is replayed again digest by digest so the
    report names the first divergent record exactly. It cannot see a difference that heals
    between two checkpoints, nor a damaged digest between them: hence the default of 1.
    """
    if digest_every > 1:
        try:
            first = _MachineReplay(path, digest_every).run(until)
        except TraceFormatError:
            first = None  # the exact pass raises it again, or finds a divergence before it
        if first is not None and first.divergence is None:
            return first
    return _MachineReplay(path, 1).run(until)


def summary_divergence(
    brain: BrainSummary, machine: LoopMachine, where: str, digest: str | None
) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """None when ``brain``, a summary the trace recorded (``where``: ``after tool_results()``,
    ``in the header``, with the ``digest`` beside it), describes ``machine``; else the sentence
    naming the fields that differ, and both sides for the report. Asked after every feed, so
    the agreeing case compares two tuples and builds nothing (the model's fields are in the
    order ``summary_values`` gives them)."""
    if astuple(brain) == machine.summary_values():
        return None
    sentence = f"the brain summary recorded {where} does not describe the replayed brain"
    why, expected, actual = brain_divergence(sentence, digest, brain, machine)
    if actual["digest"] == digest:
        why += "; the digest matches, so the record's summary was altered"
    return why, {**expected, "digest": digest}, actual


def _diverged(
    rec: Record, line: int, what: str, message: str, expected: Any, actual: Any
) -> Diverged:
    return Diverged(Divergence(rec.seq, line, what, message, expected, actual))


class _MachineReplay:
    """One pass over a trace: a handler per record type (``handlers``), each checking its record
    against the brain it replays and raising ``Diverged`` at the first difference."""

    def __init__(self, path: str | os.PathLike[str], digest_every: int) -> None:
        self.reader = TraceReader(path)
        self.result = ReplayResult(path=self.reader.path)
        self.digest_every = digest_every
        self.machine: LoopMachine | None = None
        # (seq, line, name, args) of the last feeds, made ``RecentFeed`` only for a report
        self.feeds: deque[tuple[int, int, str, Feed]] = deque(maxlen=3)
        # Where secrets were first scrubbed, and whether this run's digests are still
        # comparable: from a run's first scrubbed record on, the brain replayed holds
        # placeholders where the recorded one held secrets.
        self.scrubbed_at: int | None = None
        self.exact = True
        # The last feed whose digest was not compared yet (a checkpointed pass), and its line.
        self.unchecked: tuple[FeedRecord, int] | None = None
        self.since_check = 0

    @property
    def brain(self) -> LoopMachine:
        assert self.machine is not None  # the reader guarantees a header first
        return self.machine

    def header(self, line: int, rec: HeaderRecord) -> None:
        self.check_unchecked()
        result = self.result
        if rec.snapshot is not None and rec.snapshot.started:
            result.resumes += 1
        else:
            result.runs += 1
        result.complete = False
        self.feeds.clear()
        self.exact = not rec.scrubbed
        if rec.scrubbed and self.scrubbed_at is None:
            self.scrubbed_at = rec.seq
        previous = self.machine
        machine = self.machine = header_brain(self.reader.path, line, rec, previous)
        if rec.continues is not None:  # (v3) the previous brain's next_run()
            if self.exact and machine.digest() != rec.continues:
                found = brain_divergence(NOT_CONTINUED, rec.continues, rec.brain, machine)
                raise _diverged(rec, line, "snapshot", *found)
            if self.exact and rec.brain is not None:
                self.check_summary(rec, line, "in the header", rec.continues, rec.brain)
        elif previous is not None:
            # After an end: the next run's brain. In the middle of a run: a resume after a
            # crash, which must restore the brain exactly as it was.
            nxt = previous.is_terminal and previous.finalized
            expected = previous.next_run() if nxt else previous
            if expected != machine:
                what = "previous run's next_run()" if nxt else "brain it resumes"
                raise _diverged(
                    rec,
                    line,
                    "snapshot",
                    f"the header's snapshot is not the {what}",
                    expected.model_dump(),
                    machine.model_dump(),
                )

    def step(self, line: int, rec: StepRecord) -> None:
        self.result.steps += 1
        try:
            actual = self.brain.next_step(rec.policy)
        except ProtocolError as exc:
            raise _diverged(
                rec,
                line,
                "protocol_error",
                f"next_step() raised: {exc}",
                to_jsonable(rec.step),
                {"ProtocolError": str(exc)},
            ) from None
        if actual != rec.step:
            raise _diverged(
                rec,
                line,
                "step",
                f"the brain answered {actual.kind}, the trace says {rec.step.kind}",
                to_jsonable(rec.step),
                to_jsonable(actual),
            )

    def feed(self, line: int, rec: FeedRecord) -> None:
        self.result.feeds += 1
        if rec.scrubbed:
            self.exact = False
            if self.scrubbed_at is None:
                self.scrubbed_at = rec.seq
        self.feeds.append((rec.seq, line, rec.name, rec.args))
        machine = self.brain
        try:
            machine.feed(rec.args)
        except ProtocolError as exc:
            raise _diverged(
                rec,
                line,
                "protocol_error",
                f"{rec.name}() was refused: {exc}",
                {"digest": rec.digest},
                {"ProtocolError": str(exc)},
            ) from None
        if not self.exact:
            self.unchecked = None
            return
        self.since_check += 1
        if self.since_check < self.digest_every:
            self.unchecked = (rec, line)
        else:
            self.since_check = 0
            self.unchecked = None
            if machine.digest() != rec.digest:
                self.digest_diverged(rec, line)
        brain = rec.brain  # after the digest: it names a real change
        if brain is not None and astuple(brain) != machine.summary_values():
            self.check_summary(rec, line, f"after {rec.name}()", rec.digest, brain)

    def io(self, line: int, rec: IoRecord) -> None:
        """What the world did: not replayed (a replayer that re-runs effects is not one)."""
        self.result.io += 1

    def end(self, line: int, rec: EndRecord) -> None:
        self.check_unchecked()
        machine = self.brain
        outcome = end_outcome(machine)
        actual = None if outcome is None else to_jsonable(outcome)
        expected = None if rec.outcome is None else to_jsonable(rec.outcome)
        if actual != expected:
            raise _diverged(
                rec, line, "outcome", "the run ended with another outcome", expected, actual
            )
        digest = machine.digest()
        if self.exact and digest != rec.digest:
            raise _diverged(
                rec,
                line,
                "digest",
                "the final machine is not the recorded one",
                {"digest": rec.digest},
                {"digest": digest},
            )
        self.result.complete = True
        self.result.outcome = actual

    handlers: Final[dict[str, Callable[[Any, int, Any], None]]] = {
        "header": header,
        "step": step,
        "feed": feed,
        "io": io,
        "end": end,
    }

    def digest_diverged(self, rec: FeedRecord, line: int) -> None:
        """Raise ``Diverged``: the brain's digest is not the one recorded after ``rec``; the
        report names the brain's fields that differ (from the feed's brain summary, v2)."""
        sentence = f"the brain after {rec.name}() is not the recorded one"
        raise _diverged(
            rec, line, "digest", *brain_divergence(sentence, rec.digest, rec.brain, self.brain)
        )

    def check_unchecked(self) -> None:
        """A checkpoint: the digest after the last feed not compared yet."""
        if self.unchecked is not None:
            rec, line = self.unchecked
            self.unchecked = None
            if self.brain.digest() != rec.digest:
                self.digest_diverged(rec, line)

    def check_summary(
        self,
        rec: Record,
        line: int,
        where: str,
        digest: str | None,
        brain: BrainSummary,
    ) -> None:
        """Raise ``Diverged`` if ``brain``, recorded ``where``, is not the replayed brain's."""
        found = summary_divergence(brain, self.brain, where, digest)
        if found is not None:
            raise _diverged(rec, line, "summary", *found)

    def run(self, until: int | None) -> ReplayResult:
        """Every record (up to the one with seq ``until``) through its handler."""
        result, handlers = self.result, self.handlers
        line = 0
        try:
            for line, rec in self.reader.numbered():
                handlers[rec.type](self, line, rec)
                if until is not None and rec.seq >= until:
                    result.stopped_at = rec.seq
                    break
            self.check_unchecked()
        except Diverged as stop:
            result.divergence = self.reported(stop.divergence)
        if self.scrubbed_at is not None and result.divergence is None:
            result.notes.append(
                f"digests compared up to seq {self.scrubbed_at} in its run: the trace holds "
                "scrubbed secrets from there on (steps and outcomes are still compared)"
            )
        result.records = line
        result.warnings = self.reader.warnings
        result.machine = machine = self.machine
        if machine is not None and result.divergence is None:
            result.final_digest = machine.digest()
            if result.outcome is None:
                outcome = end_outcome(machine)
                result.outcome = None if outcome is None else to_jsonable(outcome)
        return result

    def reported(self, divergence: Divergence) -> Divergence:
        """``divergence`` with the feeds before it and what scrubbing hid."""
        divergence.recent_feeds = [RecentFeed(*feed) for feed in self.feeds]
        if self.scrubbed_at is not None:
            divergence.note = (
                f"secrets were scrubbed from this trace at seq {self.scrubbed_at}: the digests "
                "of a run are compared up to its first scrubbed record"
            )
        return divergence
