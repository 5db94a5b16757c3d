"""A trace read as a driver-level replay needs it: in order, streamed, with a short lookahead.

The replaying driver does what the recorded one did, in the same order, so one cursor serves
everyone: the checker takes the next brain record (``header``, ``step``, ``feed``, ``end``) for
each step and feed the driver reports, the model client takes the next ``io`` records of a model
attempt, and the recorded tools and compactor look ahead to the feed that holds their answers.
The lookahead never goes past the next brain record, so the buffer holds one step's records at
most and memory stays flat whatever the trace's length.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from loopctl_sim.errors import SimError
from loopctl_sim.trace import (
    FeedView,
    HeaderLine,
    IoRecord,
    IoView,
    Record,
    StepView,
    TraceReader,
    View,
)

__all__ = ["Cursor", "Io", "Numbered", "TraceEnded", "feed_values", "whole"]

#: A record with its line number in the trace. A header holding a big snapshot comes as a
#: ``HeaderLine`` (its brain built only when the replay needs it: ``loopctl_sim.trace.
#: header_line``), most steps, feeds and ``io`` records as views (``loopctl_sim.trace.views``);
#: ``rec.type`` tells the kinds apart (not ``isinstance``, which for a pydantic class goes
#: through its metaclass: about 750 instructions a miss, and the cursor asks several times a
#: record).
Numbered = tuple[int, Record | HeaderLine | View]

#: An ``io`` record, as a record or as a view.
Io = IoRecord | IoView


def whole(rec: Record | HeaderLine | View) -> Record:
    """The record itself: a view's or a ``HeaderLine``'s validated by pydantic (for a report, or
    for the typed arguments of the few feeds whose values the replay hands on)."""
    if isinstance(rec, HeaderLine | IoView | StepView | FeedView):
        return rec.record()
    return rec


def feed_values(rec: Record | View) -> tuple[Any, ...]:
    """A feed's argument values in field order (the machine method's): a view's built from what
    msgspec decoded (``FeedView.values``: the line's record is not validated, about 80 us for a
    run's ``accept_input``), a record's from its arguments' model."""
    if type(rec) is FeedView:
        return rec.values()
    record = whole(rec)
    assert record.type == "feed"
    args = record.args
    return tuple(getattr(args, name) for name in type(args).model_fields)


class TraceEnded(SimError):
    """The trace has no more records (``line``: the last one read)."""

    def __init__(self, line: int) -> None:
        super().__init__(f"the trace ends at line {line}")
        self.line = line


class Cursor:
    """The records of a trace, in order; see the module docstring."""

    def __init__(self, reader: TraceReader) -> None:
        self.reader = reader
        self._records: Iterator[Numbered] = reader.replay_lines()
        self._ahead: deque[Numbered] = deque()
        # The brain record in ``_ahead`` (None: not read yet). Asked for several times a record
        # (is a header next? which feed holds the results?), it is looked for once.
        self._brain: Numbered | None = None
        self.line = 0  # the line of the last record taken
        self.records = 0  # records taken
        self.io = 0  # io records taken or skipped
        self.done = False

    def _read(self) -> Numbered | None:
        if self.done:
            return None
        item = next(self._records, None)
        if item is None:
            self.done = True
        return item

    def peek(self) -> Numbered | None:
        """The next record, not taken (None at the end of the trace)."""
        if not self._ahead:
            item = self._read()
            if item is None:
                return None
            self._ahead.append(item)
        return self._ahead[0]

    def take(self) -> Numbered:
        """The next record, taken; ``TraceEnded`` at the end of the trace."""
        item = self._ahead.popleft() if self._ahead else self._read()
        if item is None:
            raise TraceEnded(self.line)
        if item is self._brain:
            self._brain = None
        self.line = item[0]
        self.records += 1
        if item[1].type == "io":
            self.io += 1
        return item

    def take_brain(self) -> tuple[Numbered, list[Io]]:
        """The next brain record, taken, with the ``io`` records skipped on the way."""
        skipped: list[Io] = []
        while True:
            line, record = self.take()
            if record.type == "io":
                skipped.append(record)
                continue
            return (line, record), skipped

    def take_io(self, kinds: frozenset[str]) -> tuple[int, Io] | None:
        """The next ``io`` record of one of ``kinds``, taken, skipping other ``io`` records; None
        when a brain record comes first (it is not taken) or the trace ends."""
        while True:
            item = self.peek()
            if item is None:
                return None
            line, record = item
            if record.type != "io":
                return None
            self.take()
            if record.kind in kinds:
                return line, record

    def last_read(self) -> int:
        """The line of the last record read (taken or kept ahead): where a report points when
        the trace has nothing after it (never line 0: a cursor is asked after its header)."""
        return max(self._ahead[-1][0] if self._ahead else self.line, 1)

    def next_brain(self) -> Numbered | None:
        """The next brain record, not taken (the ``io`` records before it are read ahead and
        kept); None at the end of the trace."""
        if self._brain is not None:
            return self._brain
        for kept in self._ahead:
            if kept[1].type != "io":
                self._brain = kept
                return kept
        while True:
            item = self._read()
            if item is None:
                return None
            self._ahead.append(item)
            if item[1].type != "io":
                self._brain = item
                return item
