"""Rebuild the brain of a run from its trace, cut anywhere (a kill -9, a power cut, a Ctrl-C).

The brain is deterministic and a trace records every step and feed with the digest after it, so
the brain at the trace's last complete record is the header's brain given the recorded steps and
feeds (machine replay), every digest checked: exactly the one that was running, or the rebuild
says where it is not.

Checkpoints. A ``header`` and a periodic ``snapshot`` record (``TraceRecorder(snapshot_every=N)``)
each hold the whole brain. A first pass over the raw lines finds the last line that starts like
one (the writer's field order: a trace written otherwise is replayed from further back); the
second pass reads, validated, from there. A snapshot is checked against its digest, and against
the brain replayed up to it. A header that continues the previous run (v3: it names a digest, not
a snapshot) is no checkpoint: the rebuild goes through it on the previous run's ``next_run()``.

``ResumePoint`` also says what the trace holds beyond the brain: the results of the exchange in
flight (those tools ran and must not run again), results fed without their count (before format
version 4), and a manual compaction asked for (``compact_now``) and not answered yet.
``loopctl_sim.replay.continuation`` runs the rest of the run with the user's agent.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from loopctl.core import (
    CallTools,
    Compact,
    CompactReason,
    LoopMachine,
    Message,
    ProtocolError,
    ToolResult,
    ToolResults,
)
from loopctl_sim.errors import SimError
from loopctl_sim.replay.explain import NOT_CONTINUED, brain_divergence
from loopctl_sim.trace import (
    ContinuationError,
    EndRecord,
    FeedRecord,
    HeaderRecord,
    IoRecord,
    Record,
    StepRecord,
    TraceFormatError,
    TraceReader,
    lines_of,
    open_for_reading,
)

#: A line that starts like a checkpoint, as the writer writes one.
_CHECKPOINT: Final = re.compile(rb'\{"seq":[0-9]+,"type":"(?:header"|io","kind":"snapshot")')
#: What follows the last ``"scrub_key":`` of a header that continues the previous run (v3, the
#: writer's field order): no checkpoint, its brain is rebuilt from the records before it.
_CONTINUES: Final = re.compile(rb'"scrub_key":(?:null|"[0-9a-f]*"),"continues":"')


class ResumeError(SimError):
    """The trace cannot be resumed (its brain and the engine disagree, or no run to resume)."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


@dataclass
class ResumePoint:
    """The brain at a trace's last complete record, and what the trace says around it."""

    path: str
    machine: LoopMachine
    #: the line of the last complete record, and of the checkpoint the brain was restored from
    line: int
    checkpoint: int
    restored_from: str  # "header" or "snapshot"
    #: records read (and replayed, for steps and feeds) after the checkpoint
    replayed: int = 0
    #: results the trace holds of the exchange the brain awaits, by call id (those tools ran)
    results: dict[str, ToolResult] = field(default_factory=dict)
    #: an exchange's results fed last without their count (version 3 and before)
    uncounted: Message | None = None
    ended: bool = False  # the run's end record is in the trace
    #: a ``compact_now`` not answered yet: the killed driver still held it, the continuation
    #: asks again
    compact_requested: bool = False
    scrubbed: bool = False  # the rebuilt brain holds placeholders of scrubbed secrets
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _checkpoints(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """``(offset, line)`` of every line that starts like a checkpoint (the raw first pass)."""
    found: list[tuple[int, int]] = []
    offset = 0
    with open_for_reading(path) as f:
        for line, raw in enumerate(lines_of(f), 1):
            if _CHECKPOINT.match(raw) and not _CONTINUES.match(raw, raw.rfind(b'"scrub_key":')):
                found.append((offset, line))
            offset += len(raw)
    return found


def resume_point(path: str | os.PathLike[str]) -> ResumePoint:
    """The brain of the last run in the trace at ``path`` at its last complete record.
    ``TraceFormatError``: unreadable; ``ResumeError``: the replayed brain leaves the trace."""
    reader = TraceReader(path)
    try:
        starts = _checkpoints(path)
    except OSError as exc:
        raise TraceFormatError(reader.path, 0, f"cannot open: {exc.strerror or exc}") from None
    except Exception:  # damaged compressed data: the validated pass says where
        starts = []
    # The last checkpoint may be the torn last line: try the ones before it, then the start.
    for start in [*reversed(starts[-3:]), None]:
        point = _replay_from(TraceReader(path), start)
        if point is not None:
            return point
    raise TraceFormatError(reader.path, 1, "no complete header record to resume from")


def _replay_from(reader: TraceReader, start: tuple[int, int] | None) -> ResumePoint | None:
    """The resume point replayed from ``start``; None when the record there is no checkpoint
    after all (a torn last line, a line that only looked like one)."""
    point: ResumePoint | None = None
    for line, rec in reader.numbered(start):
        if isinstance(rec, HeaderRecord) and rec.continues is not None:
            if point is None:
                return None  # (the raw pass took it for a checkpoint: a trace written otherwise)
            point = _continued(reader.path, line, rec, point)
        elif isinstance(rec, HeaderRecord):
            machine = header_brain(reader.path, line, rec)
            point = ResumePoint(reader.path, machine, line, line, "header", scrubbed=rec.scrubbed)
        elif isinstance(rec, IoRecord) and rec.kind == "snapshot":
            point = _from_snapshot(reader.path, line, rec, point)
        elif point is None:
            return None  # the first record read is no checkpoint
        else:
            _apply(point, line, rec)
    if point is not None:
        point.warnings = list(reader.warnings)
    return point


def header_brain(
    path: str, line: int, rec: HeaderRecord, previous: LoopMachine | None = None
) -> LoopMachine:
    """The brain a header holds (``previous``: the brain the previous run ended with); one that
    does not restore, or continues a run where none ended, is a damaged trace."""
    try:
        return rec.machine(previous)
    except ContinuationError as exc:
        raise TraceFormatError(path, line, str(exc)) from None
    except ValueError as exc:
        why = f"the header's snapshot does not restore: {exc}"
        raise TraceFormatError(path, line, why) from None


def _continued(path: str, line: int, rec: HeaderRecord, point: ResumePoint) -> ResumePoint:
    """The next run, from a header that continues the previous one (v3): the rebuilt brain's
    ``next_run()``, checked against the digest the header names."""
    machine = header_brain(path, line, rec, point.machine)
    scrubbed = point.scrubbed or rec.scrubbed
    if not scrubbed and machine.digest() != rec.continues:
        raise ResumeError(
            path, line, brain_divergence(NOT_CONTINUED, rec.continues, rec.brain, machine)[0]
        )
    return ResumePoint(
        path,
        machine,
        line,
        point.checkpoint,
        point.restored_from,
        replayed=point.replayed + 1,
        scrubbed=scrubbed,
        notes=point.notes,
    )


def _from_snapshot(path: str, line: int, rec: IoRecord, point: ResumePoint | None) -> ResumePoint:
    data = rec.data
    try:
        machine = LoopMachine.model_validate(data.get("snapshot"))
    except (ValidationError, ValueError) as exc:
        raise TraceFormatError(path, line, f"the snapshot does not restore: {exc}") from None
    if not rec.scrubbed and machine.digest() != data.get("digest"):
        raise TraceFormatError(
            path, line, f"the snapshot is not the brain it names (digest {data.get('digest')})"
        )
    if point is not None and not point.scrubbed and point.machine != machine:
        raise ResumeError(path, line, "the snapshot is not the brain the records before it build")
    if point is None:
        return ResumePoint(path, machine, line, line, "snapshot", scrubbed=rec.scrubbed)
    point.machine, point.line = machine, line  # the same brain: keep what was learnt
    return point


def recorded_result(data: Mapping[str, Any]) -> ToolResult:
    """The result a ``tool_result`` io record holds (the tool ran; its brain feed may not have)."""
    return ToolResult(
        call_id=str(data.get("id")),
        name=str(data.get("name")),
        content=str(data.get("content")),
        is_error=bool(data.get("is_error")),
    )


def _apply(point: ResumePoint, line: int, rec: Record) -> None:
    """One record after the checkpoint: a step asked, a feed given, an io record read."""
    point.line = line
    point.replayed += 1
    machine = point.machine
    if rec.scrubbed and not point.scrubbed:
        point.scrubbed = True
        point.notes.append(
            f"secrets were scrubbed from this trace at line {line}: the rebuilt brain holds "
            "their placeholders (the continuation sends those to the model)"
        )
    if isinstance(rec, IoRecord):
        if rec.kind == "tool_result":
            result = recorded_result(rec.data)
            point.results[result.call_id] = result
        return
    if isinstance(rec, StepRecord):
        try:
            step = machine.next_step(rec.policy)
        except ProtocolError as exc:
            raise ResumeError(
                point.path, line, f"the brain refuses the recorded step: {exc}"
            ) from None
        if step != rec.step and not rec.scrubbed:
            raise ResumeError(
                point.path,
                line,
                f"the brain asks {step.kind} where the trace has {rec.step.kind} (the engine "
                "decides differently from the one that wrote the trace)",
            )
        if isinstance(step, CallTools):
            point.results = {}
        manual = isinstance(step, Compact) and step.reason is CompactReason.MANUAL
        point.compact_requested = rec.policy.compact_now and not manual
        return
    if isinstance(rec, EndRecord):
        point.ended = True
    if not isinstance(rec, FeedRecord):
        return
    try:
        machine.feed(rec.args)
    except ProtocolError as exc:
        raise ResumeError(point.path, line, f"the brain refuses {rec.name}(): {exc}") from None
    if not point.scrubbed and machine.digest() != rec.digest:
        why = f"after {rec.name}() the brain is not the recorded one (its digest differs)"
        raise ResumeError(point.path, line, why)
    args = rec.args
    point.uncounted = None
    if isinstance(args, ToolResults) and args.context_tokens is None:
        point.uncounted = args.message
    if rec.name == "tool_results":
        point.results = {}
