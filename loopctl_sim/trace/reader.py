"""The streaming trace reader: records line by line, each checked in its place; memory stays flat.

A malformed line is a ``TraceFormatError`` naming ``file:line``; a truncated last line (a write
cut short) is a warning, skipped; another format or version is refused with a reason.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import msgspec

from loopctl_sim.trace.feeds import complaint
from loopctl_sim.trace.files import CutShort, display_name, lines_of, open_for_reading
from loopctl_sim.trace.records import (
    READABLE_VERSIONS,
    TRACE_FORMAT,
    HeaderRecord,
    Record,
    TraceFormatError,
    read_record,
)


def _explain(exc: ValueError) -> str:
    """The reason a line is not a record: msgspec's (``Expected `int`, got `str` - at
    `$.seq```) with the place first, or a record's own check's."""
    if not isinstance(exc, msgspec.ValidationError) and isinstance(exc, msgspec.DecodeError):
        return f"not valid JSON ({exc})"
    where, what = complaint(exc)
    return f"invalid record: {where}: {what}" if where else f"invalid record: {what}"


def _header_problem(raw: bytes) -> str | None:
    """A clear reason when ``raw`` is a header of another format or version."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # nested too deep for json: msgspec's reason stands
        return None
    if not isinstance(data, dict) or data.get("type") != "header":
        return None
    fmt = data.get("format")
    if fmt != TRACE_FORMAT:
        return f"not a loopctl trace (format {fmt!r}, expected {TRACE_FORMAT!r})"
    version = data.get("version")
    if version not in READABLE_VERSIONS:
        *some, last = READABLE_VERSIONS
        return (
            f"trace format version {version!r} is not supported: this loopctl_sim reads "
            f"versions {', '.join(map(str, some))} and {last}; use the loopctl that wrote it, "
            "or upgrade"
        )
    return None


class TraceReader:
    """Stream a trace's records, checking ``seq`` and the header. Iterate to get records;
    ``numbered()`` also gives each one's line number; ``warnings`` collects non-fatal problems.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.source = os.fspath(path)  # what is opened; ``path`` is what messages name
        self.path = display_name(path)
        self.warnings: list[str] = []
        self.header: HeaderRecord | None = None
        self.line = 0

    def __iter__(self) -> Iterator[Record]:
        for _, record in self.numbered():
            yield record

    def numbered(self, start: tuple[int, int] | None = None) -> Iterator[tuple[int, Record]]:
        """``(line number, record)`` for every record; from ``start`` (a byte offset into the
        trace's text, decompressed, and the line that begins there), when given: a resume reads
        from its last checkpoint, a record inside a run (a header or a ``snapshot``)."""
        in_run = False  # a header was read, and no end since
        first = 1
        with self._open() as f:
            if start is not None:
                offset, first = start
                f.seek(offset)
                in_run = True
            lines = lines_of(f)
            lineno = 0
            try:
                for lineno, raw in enumerate(lines, first):
                    self.line = lineno
                    try:
                        record = read_record(raw)
                    except ValueError as exc:
                        self._last_line_cut(raw, lineno, exc)  # or it raises
                        return
                    kind = record.type
                    if record.seq != lineno - 1 or kind == "header" or not in_run:
                        self._check_place(record, lineno, in_run)
                    in_run = kind != "end"  # a header opens a run, an end closes it
                    yield lineno, record
            except CutShort as exc:
                raise TraceFormatError(self.path, self.line + 1, exc.detail) from None
            if getattr(lines, "cut", False):  # a compressed trace whose writer was killed
                self.warnings.append(
                    f"{self.path}:{self.line + 1}: the compressed trace ends early (its writer "
                    f"stopped before closing it): {self.line} complete records read"
                )
        if lineno == 0 and start is None:
            raise TraceFormatError(self.path, 1, "empty trace (no header record)")

    def _open(self) -> IO[bytes]:
        try:
            return open_for_reading(self.source)
        except OSError as exc:
            raise TraceFormatError(self.path, 0, f"cannot open: {exc.strerror or exc}") from None

    def _last_line_cut(self, raw: bytes, lineno: int, exc: ValueError) -> None:
        """Add the warning of a truncated last line (``raw``, which the reader refused with
        ``exc``), skipped; raise ``TraceFormatError`` for any other line that is not a record."""
        path = self.path
        if not raw.endswith(b"\n") and raw.strip():
            if lineno == 1:
                raise TraceFormatError(
                    path,
                    lineno,
                    "no complete record: the only line is truncated (no newline at end of file)",
                ) from None
            self.warnings.append(
                f"{path}:{lineno}: truncated last line (no newline at end of file, "
                f"{len(raw)} bytes) skipped"
            )
            return
        if not raw.strip():
            raise TraceFormatError(path, lineno, "empty line") from None
        raise TraceFormatError(path, lineno, _header_problem(raw) or _explain(exc)) from None

    def _check_place(self, record: Record, lineno: int, in_run: bool) -> None:
        """Raise if ``record`` (on line ``lineno``, so its seq ``lineno - 1``) is out of place;
        remember it as the header when it is one."""
        path = self.path
        if record.seq != lineno - 1:
            raise TraceFormatError(
                path, lineno, f"seq {record.seq} is not consecutive (expected {lineno - 1})"
            )
        kind = record.type
        if isinstance(record, HeaderRecord):
            if record.continues is not None and (in_run or lineno == 1):
                where = "starts the trace" if lineno == 1 else "is inside a run (no end before it)"
                raise TraceFormatError(
                    path, lineno, f"a header that continues the previous run {where}"
                )
            self.header = record
        elif not in_run:
            # a record outside a run: before the first header, or after an end
            if lineno == 1:
                reason = f"a trace starts with a header record, not {kind!r}"
            else:
                reason = f"a {kind!r} record after the end of a run (no header)"
            raise TraceFormatError(path, lineno, reason)


def read_trace(path: str | os.PathLike[str]) -> list[Record]:
    """All records of a (small) trace; prefer ``TraceReader`` to stream big ones."""
    return list(TraceReader(Path(path)))
