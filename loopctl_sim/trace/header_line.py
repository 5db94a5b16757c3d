"""A header line read for driver-level replay: its small fields checked at once, its snapshot only
when it is needed.

A trace of many runs in one conversation has a header per run, and each holds the whole brain
(the history so far): in a 10,000-record trace of 53 runs of 20 turns, the headers are 6.3 MB of
the trace's 10 MB, and validating them with pydantic, restoring their brains and comparing them
with the replayed brain was half of a replay's instructions (measured below) and made it four
times slower than a replay of one long run of as many records. Yet the header of a run that
follows a replayed run holds nothing new: it must be exactly the brain the replay already has
(``previous.next_run()``). So ``TraceReader.numbered(lazy_headers=True)`` gives such a line
as a ``HeaderLine``: the line is validated by pydantic
with its snapshot cut out (``null``), so every other field is checked in its place as before,
and the snapshot's text is hashed (``sha256``, about 1 ms for 1 MB). ``holds(machine)`` compares
that hash with ``machine.checksum()``, which is ``sha256(machine.canonical_json())``, the very
bytes a writer puts in a header: equal, the snapshot is that brain, text for text, and is never
built. In every other case (the first header, a resume after a kill, a snapshot that differs)
``record()`` validates the whole line with pydantic and gives the ``HeaderRecord`` (or the same
``TraceFormatError``, with the same reason, as reading it eagerly does).

Measured on the benchmark's 10,000-record trace of 53 runs: its agent replay 590,000 -> 319,000
instructions a record (cachegrind).
"""

from __future__ import annotations

import hashlib
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
    """A header whose snapshot is held as its JSON text's hash; see the module docstring."""

    __slots__ = ("_record", "_validate", "checksum", "fields", "line", "raw")

    type: Literal["header"] = "header"

    def __init__(
        self,
        line: int,
        raw: bytes,
        fields: HeaderRecord,
        checksum: str,
        validate: Callable[[bytes, int], HeaderRecord],
    ) -> None:
        self.line = line
        self.raw = raw
        self.fields = fields  # the header validated with ``snapshot: null``
        self.checksum = checksum  # sha256 of the snapshot's JSON text, as written
        self._validate = validate
        self._record: HeaderRecord | None = None

    @property
    def seq(self) -> int:
        return self.fields.seq

    def holds(self, machine: LoopMachine) -> bool:
        """Whether the header's snapshot is ``machine``'s canonical JSON, byte for byte."""
        return self.checksum == machine.checksum()

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
    try:
        found = _SNAPSHOT_OF.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    snapshot = bytes(found.snapshot)
    at = raw.find(snapshot)
    if found.type != "header" or len(snapshot) < LAZY_FROM or at < 0:
        return None
    try:
        fields = validate_json(raw[:at] + b"null" + raw[at + len(snapshot) :])
    except ValueError:  # pydantic's ValidationError: the line is read whole, for its reason
        return None
    if not isinstance(fields, HeaderRecord) or fields.snapshot is not None:
        return None
    if fields.seq != line - 1:
        return None
    return HeaderLine(line, raw, fields, hashlib.sha256(snapshot).hexdigest(), validate)
