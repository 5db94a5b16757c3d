"""The first divergence between two traces (times and durations ignored).

Both traces are streamed side by side and compared record by record as data, without the times
(a header's ``created``, an io record's ``duration_s``: they never decide anything).
``ignore_io`` skips io records; ``brain_only`` headers too, so a machine-level and a driver-level
trace of the same world compare equal (a driver trace holds a header for each resume). A fork
compared with its parent or any ancestor is compared from the branch on (``fork_branch``): the
records before it are the parent's, copied.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from loopctl.core import to_jsonable
from loopctl_sim.replay.fork_edits import trace_sha256
from loopctl_sim.replay.report import bounded_diff, unified_diff
from loopctl_sim.sim.session import run_at
from loopctl_sim.trace import EndRecord, HeaderRecord, TraceReader, lines_of, open_for_reading

#: Left out of a record compared: its seq (records are compared by position) and its times.
_TIMES = {"seq", "created", "duration_s"}


@dataclass(frozen=True)
class Branch:
    """Where one trace of a pair forks the other: ``child`` (``"a"`` or ``"b"``) branched after
    the other's record ``at``; its header at the branch point is its record ``header``."""

    child: str
    at: int
    header: int

    def skips(self, side: str, seq: int) -> bool:
        """Whether ``side``'s record ``seq`` is left out of the comparison (the shared prefix,
        the fork's header)."""
        return seq <= self.at or (side == self.child and seq == self.header)

    def note(self, path_a: str, path_b: str) -> str:
        child, parent = (path_a, path_b) if self.child == "a" else (path_b, path_a)
        return f"{child} forks {parent} at seq {self.at}: compared from the branch on"


def _forks(child: str, parent_sha: str) -> tuple[int, int] | None:
    """(branch seq, fork header seq) when ``child`` names the trace ``parent_sha`` as an
    ancestor (the first fork header that does)."""
    with open_for_reading(child) as f:
        for raw in lines_of(f):
            if b'"type":"header"' not in raw[:40] or b'"fork":' not in raw:
                continue
            try:
                rec = json.loads(raw)
            except ValueError:
                return None
            fork = (rec.get("metadata") or {}).get("fork") or {}
            chain = [a for a in fork.get("ancestors") or () if isinstance(a, dict)]
            for i, ancestor in enumerate(chain):
                if ancestor.get("sha256") == parent_sha:
                    # the child shares with that ancestor what every fork since kept of it: a
                    # later fork may have branched earlier than the one before it
                    ats = [at for a in chain[i:] if isinstance(at := a.get("at"), int)]
                    seq = rec.get("seq")
                    if len(ats) != len(chain) - i or not isinstance(seq, int):
                        return None
                    return min(ats), seq
    return None


def fork_branch(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> Branch | None:
    """The branch when ``b`` is a fork of ``a`` (or ``a`` of ``b``), through any ancestor;
    None otherwise (or when either is not a plain file: stdin)."""
    try:
        for child, parent, side in ((b, a, "b"), (a, b, "a")):
            found = _forks(os.fspath(child), trace_sha256(parent))
            if found is not None:
                return Branch(side, found[0], found[1])
    except (OSError, ValueError):
        return None
    return None


@dataclass
class TraceDiff:
    seq_a: int | None
    line_a: int | None
    seq_b: int | None
    line_b: int | None
    expected: Any
    actual: Any
    path_a: str
    path_b: str
    #: the fork relation of the pair, when one forks the other (compared from the branch on)
    branch: Branch | None = None

    @property
    def diff(self) -> str:
        return unified_diff(self.expected, self.actual, a=self.path_a, b=self.path_b)

    def report(self) -> str:
        def where(path: str, line: int | None, seq: int | None) -> str:
            if line is None:
                return f"{path}: ended"
            place = run_at(path, line) if os.path.isfile(path) else None  # a session's run
            return f"{path}:{line} (seq {seq}){', ' + place if place else ''}"

        fork = [] if self.branch is None else [self.branch.note(self.path_a, self.path_b)]
        return "\n".join(
            [
                *fork,
                "traces diverge at",
                f"  {where(self.path_a, self.line_a, self.seq_a)}",
                f"  {where(self.path_b, self.line_b, self.seq_b)}",
                *bounded_diff(self.expected, self.actual, self.diff),
            ]
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "a": {"path": self.path_a, "line": self.line_a, "seq": self.seq_a},
            "b": {"path": self.path_b, "line": self.line_b, "seq": self.seq_b},
            "expected": self.expected,
            "actual": self.actual,
            "diff": self.diff,
        }


def _stream(
    reader: TraceReader, skip: frozenset[str], branch: Branch | None, side: str, outcomes: list[Any]
) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(line, seq, comparable JSON) of the records compared; every run's outcome in ``outcomes``
    (None for a run that never reached its end record)."""
    open_run = False
    for line, record in reader.numbered():
        if isinstance(record, HeaderRecord) and not (record.snapshot and record.snapshot.started):
            if open_run:
                outcomes.append(None)
            open_run = True
        elif isinstance(record, EndRecord):
            outcomes.append(None if record.outcome is None else to_jsonable(record.outcome))
            open_run = False
        if record.type in skip or (branch is not None and branch.skips(side, record.seq)):
            continue
        yield line, record.seq, record.model_dump(mode="json", exclude=_TIMES)
    if open_run:
        outcomes.append(None)


def positions(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str],
    branch: Branch | None,
    *,
    ignore_io: bool = False,
    brain_only: bool = False,
    outcomes: tuple[list[Any], list[Any]] | None = None,
) -> Iterator[TraceDiff | None]:
    """Every position compared, in order: None where the two records agree, else where they
    differ (``None`` on the side that has no record there). ``outcomes`` collects each side's
    runs' outcomes."""
    skip = frozenset({"io", "header"} if brain_only else {"io"} if ignore_io else ())
    ra, rb = TraceReader(a), TraceReader(b)
    outcomes_a, outcomes_b = outcomes or ([], [])
    ia = _stream(ra, skip, branch, "a", outcomes_a)
    ib = _stream(rb, skip, branch, "b", outcomes_b)
    while True:
        na, nb = next(ia, None), next(ib, None)
        if na is None and nb is None:
            return
        da = None if na is None else na[2]
        db = None if nb is None else nb[2]
        if da == db:
            yield None
            continue
        yield TraceDiff(
            seq_a=None if na is None else na[1],
            line_a=None if na is None else na[0],
            seq_b=None if nb is None else nb[1],
            line_b=None if nb is None else nb[0],
            expected=da,
            actual=db,
            path_a=ra.path,
            path_b=rb.path,
            branch=branch,
        )


def diff_traces(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str],
    *,
    ignore_io: bool = False,
    brain_only: bool = False,
) -> TraceDiff | None:
    """None when the traces hold the same records; else where they first differ."""
    found = positions(a, b, fork_branch(a, b), ignore_io=ignore_io, brain_only=brain_only)
    return next((d for d in found if d is not None), None)
