"""A trace read as a driver-level replay needs it: in order, streamed, with a short lookahead.

The replaying driver does what the recorded one did, in the same order, so one cursor serves
the checker (the next brain record for each step and feed), the model client (the next ``io``
records of an attempt) and the recorded tools and compactor (a look ahead to the feed holding
their answers). The lookahead never passes the next brain record: memory stays flat.

Records are read as today's driver feeds them: before trace format version 4 an exchange's
results were fed without a count and directly followed by ``set_context_tokens(n)``; that pair
reads as the one feed ``tool_results(message, n)`` with the second record's seq, digest and brain
summary (``folded``). Machine replay applies the pair as it is (both feeds are valid).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from loopctl.core import SetContextTokens, ToolResults
from loopctl_sim.errors import SimError
from loopctl_sim.trace import IoRecord, Record, TraceReader

#: A record with its line number in the trace; ``rec.type`` tells the kinds apart.
Numbered = tuple[int, Record]


def folded(records: Iterable[Numbered]) -> Iterator[Numbered]:
    """``records`` with each old pair (results without a count, directly followed by
    ``set_context_tokens``) made the one ``tool_results`` feed with the count (see the module
    docstring); the line is the second record's."""
    held: Numbered | None = None
    for line, rec in records:
        if held is not None:
            first, held = held, None
            if rec.type == "feed" and type(rec.args) is SetContextTokens:
                pair = first[1]
                args = ToolResults(pair.args.message, rec.args.n)  # type: ignore[union-attr]
                scrubbed = pair.scrubbed or rec.scrubbed
                fields = {"seq": rec.seq, "digest": rec.digest, "brain": rec.brain, "args": args}
                yield line, pair.model_copy(update={**fields, "scrubbed": scrubbed})
                continue
            yield first
        if rec.type == "feed" and type(rec.args) is ToolResults and rec.args.context_tokens is None:
            held = line, rec
        else:
            yield line, rec
    if held is not None:
        yield held


class TraceEnded(SimError):
    """The trace has no more records (``line``: the last one read)."""

    def __init__(self, line: int) -> None:
        super().__init__(f"the trace ends at line {line}")
        self.line = line


class Cursor:
    """The records of a trace, in order; see the module docstring."""

    def __init__(self, reader: TraceReader) -> None:
        self.reader = reader
        self._records: Iterator[Numbered] = folded(reader.numbered())
        self._ahead: deque[Numbered] = deque()
        # The brain record in ``_ahead``, kept: it is asked for several times a record.
        self._brain: Numbered | None = None
        #: the line of the last record taken: the records taken (an old pair counts two)
        self.line = 0
        self.io = 0  # io records taken or skipped

    def peek(self) -> Numbered | None:
        """The next record, not taken (None at the end of the trace)."""
        if not self._ahead:
            item = next(self._records, None)
            if item is None:
                return None
            self._ahead.append(item)
        return self._ahead[0]

    def take(self) -> Numbered:
        """The next record, taken; ``TraceEnded`` at the end of the trace."""
        item = self._ahead.popleft() if self._ahead else next(self._records, None)
        if item is None:
            raise TraceEnded(self.line)
        if item is self._brain:
            self._brain = None
        self.line = item[0]
        if item[1].type == "io":
            self.io += 1
        return item

    def take_brain(self) -> tuple[Numbered, list[IoRecord]]:
        """The next brain record, taken, with the ``io`` records skipped on the way."""
        skipped: list[IoRecord] = []
        while True:
            line, record = self.take()
            if record.type == "io":
                skipped.append(record)
                continue
            return (line, record), skipped

    def take_io(self, kinds: frozenset[str]) -> tuple[int, IoRecord] | None:
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
        while (item := next(self._records, None)) is not None:
            self._ahead.append(item)
            if item[1].type != "io":
                self._brain = item
                return item
        return None
