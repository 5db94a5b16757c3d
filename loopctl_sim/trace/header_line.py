"""A header line read for driver-level replay: its small fields checked at once, its snapshot only
when it is needed.

A trace of many runs in one conversation has a header per run, and each holds the whole brain
(the history so far): in a 10,000-record trace of 53 runs of 20 turns, the headers are 6.3 MB of
the trace's 10 MB, and validating them with pydantic, restoring their brains and comparing them
with the replayed brain was half of a replay's instructions (measured below) and made it four
times slower than a replay of one long run of as many records. Yet the header of a run that
follows a replayed run holds nothing new: it must be exactly the brain the replay already has
(``previous.next_run()``). So ``TraceReader.numbered(lazy_headers=True)`` gives such a line
as a ``HeaderLine``: the line is validated by pydantic with its snapshot cut out (``null``), so
every other field is checked in its place as in any header, and the snapshot's text is kept where it
stands in the line. ``holds(machine)`` compares that text with ``machine.canonical_json()``, the
very bytes a writer puts in a header, byte for byte: equal, the snapshot is that brain, and is
never built. In every other case (the first header, a resume after a kill, a snapshot that
differs) ``record()`` validates the whole line with pydantic and gives the ``HeaderRecord`` (or
the same ``TraceFormatError``, with the same reason, as reading it eagerly does).

Since trace format v3 a recorder writes the header of such a run without the snapshot (it names
the brain's digest: ``HeaderRecord.continues``), so this is for the traces written before, and
for those written with ``TraceRecorder(snapshot_headers=True)``.

Where the snapshot's text stands. A writer's header has its snapshot between the short fields
it starts with and ``,"metadata":``; where the rest of the line holds no backslash (so no key is
written with escapes) and the start no other object or list, the first ``"snapshot":`` is the
header's own key, and the last ``,"metadata":`` ends its value. The line is then cut there
without parsing the snapshot at all: ``holds`` only says yes to a text that is a brain's whole
canonical JSON, which is one complete JSON object, so a cut in the wrong place is never taken
for a brain (it is read whole). Any other line is cut where msgspec finds the snapshot's value.
Measured on a 240 KB header (the last of the benchmark's 53-run trace): msgspec finding the
value took 420 µs, finding its text in the line 300 µs and hashing it 170 µs; the cut by the
writer's layout takes about 3 µs, and ``holds`` (the brain's canonical JSON joined from its
cached message encodings, then compared) about 100 µs.

Measured on the benchmark's 10,000-record trace of 53 runs (cachegrind, instructions a record):
its agent replay 590,000 -> 319,000 with the snapshot's text hashed, then 194,300 -> 155,800
with it cut by the writer's layout and compared as bytes (reading the trace alone: 60,000 ->
23,400).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

import msgspec

from loopctl.core import LoopMachine
from loopctl_sim.trace.records import HeaderRecord

__all__ = ["LAZY_FROM", "HeaderLine", "header_line"]

#: A snapshot shorter than this is validated with its line: cutting it out would save little.
LAZY_FROM: Final = 2048


class _Snapshot(msgspec.Struct, gc=False):
    """A line's ``type`` and its ``snapshot`` as text; every other key skipped."""

    type: str = ""
    snapshot: msgspec.Raw = msgspec.Raw(b"null")


_SNAPSHOT_OF: Final = msgspec.json.Decoder(_Snapshot)


class HeaderLine:
    """A header whose snapshot is held as its JSON text, in the line; see the module docstring."""

    __slots__ = ("_record", "_validate", "fields", "line", "raw", "span")

    type: Literal["header"] = "header"

    def __init__(
        self,
        line: int,
        raw: bytes,
        fields: HeaderRecord,
        span: tuple[int, int],
        validate: Callable[[bytes, int], HeaderRecord],
    ) -> None:
        self.line = line
        self.raw = raw
        self.fields = fields  # the header validated with ``snapshot: null``
        self.span = span  # where the snapshot's JSON text stands in ``raw``
        self._validate = validate
        self._record: HeaderRecord | None = None

    @property
    def seq(self) -> int:
        return self.fields.seq

    def holds(self, machine: LoopMachine) -> bool:
        """Whether the header's snapshot is ``machine``'s canonical JSON, byte for byte."""
        start, end = self.span
        text = machine.canonical_json()
        return len(text) == end - start and self.raw.startswith(text, start)

    def record(self) -> HeaderRecord:
        """The whole header, validated by pydantic (once)."""
        if self._record is None:
            self._record = self._validate(self.raw, self.line)
        return self._record


def header_line(
    raw: bytes,
    line: int,
    validate_json: Callable[[bytes], object],
    validate: Callable[[bytes, int], HeaderRecord],
) -> HeaderLine | None:
    """``raw`` (on ``line``) as a ``HeaderLine``, or None when it is not a header with a big
    snapshot whose other fields pydantic accepts (the line is then read as every other line).
    ``validate_json``: the records' pydantic validator; ``validate``: the reader's own reading
    of a line (its checks and errors), for ``HeaderLine.record``. A last line without its
    newline is left to the reader, which may call it truncated."""
    if not raw.startswith(b'{"seq":') or b'"header"' not in raw[:64] or raw[-1:] != b"\n":
        return None
    span = _as_written(raw) or _found(raw)
    if span is None or span[1] - span[0] < LAZY_FROM:
        return None
    at, end = span
    try:
        fields = validate_json(raw[:at] + b"null" + raw[end:])
    except ValueError:  # pydantic's ValidationError: the line is read whole, for its reason
        return None
    if not isinstance(fields, HeaderRecord) or fields.snapshot is not None:
        return None
    if fields.seq != line - 1:
        return None
    return HeaderLine(line, raw, fields, span, validate)


_KEY: Final = b'"snapshot":'
_NEXT: Final = b',"metadata":'


def _as_written(raw: bytes) -> tuple[int, int] | None:
    """The snapshot's span by the writer's layout (the module docstring says when), or None."""
    key = raw.find(_KEY)
    end = raw.rfind(_NEXT)
    if key < 0 or end < key:
        return None
    at = key + len(_KEY)
    if (
        raw.find(b"\\", 0, at) >= 0
        or raw.find(b"\\", end) >= 0
        or raw.find(b"{", 1, at) >= 0
        or raw.find(b"[", 0, at) >= 0
        or raw.find(_KEY, end) >= 0
        or raw[at : at + 1] != b"{"
    ):
        return None
    return at, end


def _found(raw: bytes) -> tuple[int, int] | None:
    """The snapshot's span where msgspec finds its value (any layout), or None."""
    try:
        found = _SNAPSHOT_OF.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    snapshot = bytes(found.snapshot)
    at = raw.find(snapshot)
    if found.type != "header" or at < 0:
        return None
    return at, at + len(snapshot)
