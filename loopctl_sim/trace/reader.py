"""The streaming trace reader: records line by line, each checked in its place; memory stays flat.

A malformed line is a ``TraceFormatError`` naming ``file:line``; an unparseable last line without
a newline (a write cut short) is reported as a warning and skipped; another format or version is
refused with a reason. Well-formed lines read for machine replay take a fast path
(``loopctl_sim.trace.fast``) that gives the same items; every other line is validated by pydantic.
A gzip-compressed trace is read as the plain one (``loopctl_sim.trace.files``; one cut short
gives its records up to the cut, and says so), and ``-`` reads stdin.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import IO, Final, Literal, cast, overload

from pydantic import ValidationError

from loopctl_sim.trace.fast import BatchDecoder, ViewDecoder, make_batch_decoder, make_view_decoder
from loopctl_sim.trace.files import CutShort, display_name, lines_of, open_for_reading
from loopctl_sim.trace.header_line import HeaderLine, header_line
from loopctl_sim.trace.records import (
    READABLE_VERSIONS,
    RECORD,
    TRACE_FORMAT,
    HeaderRecord,
    Record,
    ReplayItem,
    StepLine,
    TraceFormatError,
    feed_line,
)
from loopctl_sim.trace.views import View

__all__ = ["READ_AHEAD", "TraceReader", "read_trace"]


def _explain(exc: ValidationError) -> str:
    first = exc.errors(include_url=False)[0]
    if first["type"] == "json_invalid":
        return f"not valid JSON ({first['msg']})"
    loc = ".".join(str(p) for p in first["loc"])
    more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
    return f"invalid record: {loc or 'record'}: {first['msg']}{more}"


def _header_problem(raw: bytes) -> str | None:
    """A clear reason when ``raw`` is a header of another format or version."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # nested too deep for json: pydantic's reason stands
        return None
    if not isinstance(data, dict) or data.get("type") != "header":
        return None
    fmt = data.get("format")
    if fmt != TRACE_FORMAT:
        return f"not a loopctl trace (format {fmt!r}, expected {TRACE_FORMAT!r})"
    version = data.get("version")
    if version not in READABLE_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_VERSIONS)
        return (
            f"trace format version {version!r} is not supported: this loopctl_sim reads "
            f"versions {readable}; use the loopctl that wrote it, or upgrade"
        )
    return None


#: How many lines ``TraceReader.replay_batches`` reads at a time.
READ_AHEAD: Final = 64


class TraceReader:
    """Stream a trace's records, checking ``seq`` and the header; memory stays flat.

    Iterate to get records; ``numbered()`` also gives each one's line number. ``warnings``
    collects non-fatal problems (a truncated last line).

    ``replay_batches()`` gives the records in the form machine replay needs; there, well-formed
    lines take a fast path (``loopctl_sim.trace.fast``: ``msgspec``, and only what the brain is
    handed is built), and any line it is not sure of is validated by pydantic, so the items and
    every error are the same either way. ``fast=False`` turns it off (the reference it is
    tested against). Full records are always built by pydantic: it builds them faster than
    Python could.
    """

    def __init__(self, path: str | os.PathLike[str], *, fast: bool = True) -> None:
        self.source = os.fspath(path)  # what is opened; ``path`` is what messages name
        self.path = display_name(path)
        self.warnings: list[str] = []
        self.header: HeaderRecord | None = None
        self.line = 0
        self.fast = fast

    def __iter__(self) -> Iterator[Record]:
        for _, record in self.numbered():
            yield record

    @overload
    def numbered(
        self, start: tuple[int, int] | None = None, *, lazy_headers: Literal[False] = False
    ) -> Iterator[tuple[int, Record]]: ...

    @overload
    def numbered(
        self, start: tuple[int, int] | None = None, *, lazy_headers: Literal[True]
    ) -> Iterator[tuple[int, Record | HeaderLine]]: ...

    def numbered(
        self, start: tuple[int, int] | None = None, *, lazy_headers: bool = False
    ) -> Iterator[tuple[int, Record | HeaderLine]]:
        """``(line number, record)`` for every record; from ``start`` (a byte offset into the
        trace's text, decompressed, and the line that begins there), when given: a resume reads
        from its last checkpoint, a record inside a run (a header or a ``snapshot``).
        ``lazy_headers``: a header holding a big snapshot comes as a ``HeaderLine``
        (``loopctl_sim.trace.header_line``: checked but for its snapshot, which is built only
        when asked for)."""
        items = self._numbered(start, lazy_headers, None)  # (no views without their decoder)
        return cast(Iterator[tuple[int, Record | HeaderLine]], items)

    def replay_lines(self) -> Iterator[tuple[int, Record | HeaderLine | View]]:
        """``(line number, record)`` for every record, as driver-level replay reads them: a
        header with a big snapshot as a ``HeaderLine``, and (on the fast path) step, feed and
        ``io`` lines as views (``loopctl_sim.trace.views``: decoded by msgspec, compared as they
        are, their pydantic record built only for a report); every other line as ``numbered``
        gives it, with the same checks and errors."""
        view = make_view_decoder() if self.fast else None
        return self._numbered(None, True, view)

    def _numbered(
        self, start: tuple[int, int] | None, lazy_headers: bool, view: ViewDecoder | None
    ) -> Iterator[tuple[int, Record | HeaderLine | View]]:
        expected_seq = 0
        in_run = False  # a header was read, and no end since
        validate = RECORD.validator.validate_json
        first = 1
        with self._open() as f:
            if start is not None:
                offset, first = start
                f.seek(offset)
                in_run, expected_seq = True, first - 1
            lines = lines_of(f)
            try:
                for lineno, raw in enumerate(lines, first):
                    self.line = lineno
                    # a view only inside a run: outside, pydantic's path words the error
                    if view is not None and in_run:
                        seen = view(raw, lineno - 1)
                        if seen is not None:
                            expected_seq += 1
                            yield lineno, seen
                            continue
                    # (a header as the writer starts one: not a call for every line)
                    lazy = (
                        lazy_headers
                        and raw.find(b'"type":"header"', 0, 48) > 0
                        and header_line(raw, lineno, validate, self._header)
                    )
                    if lazy:
                        in_run = True
                        expected_seq += 1
                        yield lineno, lazy
                        continue
                    record = self._validated(validate, raw, lineno, in_run, self.warnings)
                    if record is None:  # a truncated last line
                        return
                    in_run = record.type != "end"  # a header opens a run, an end closes it
                    expected_seq += 1
                    yield lineno, record
            except CutShort as exc:
                raise TraceFormatError(self.path, self.line + 1, exc.detail) from None
            self._ended_early(lines, self.line, self.warnings)
        if expected_seq == 0:
            raise TraceFormatError(self.path, 1, "empty trace (no header record)")

    def _header(self, raw: bytes, lineno: int) -> HeaderRecord:
        """A ``HeaderLine``'s whole record, read as ``numbered`` reads any line."""
        record = self._validated(RECORD.validator.validate_json, raw, lineno, True, self.warnings)
        assert isinstance(record, HeaderRecord)  # a complete header line (HeaderLine's check)
        return record

    def replay_records(self) -> Iterator[tuple[int, ReplayItem]]:
        """``(line number, item)`` for every record, in replay form (``replay_batches``, a
        record at a time)."""
        line = 0
        for batch in self.replay_batches():
            for item in batch:
                line += 1
                yield line, item

    def replay_batches(self) -> Iterator[list[ReplayItem]]:
        """Every record in the form machine replay needs, in lists of up to ``READ_AHEAD``: an
        ``io`` record comes as ``None`` (checked exactly as ``numbered()`` checks it, but not
        built), a step as a ``StepLine``, a feed as a ``FeedLine``, headers and ends as records.
        The lists hold consecutive records from the first line on, so a record's line number
        is its count (and its ``seq`` that minus one): nothing carries it.

        Lists, and not a record at a time: replay then reads a run of lines and feeds the brain
        a run of records, rather than switching between the two at every line, which measured
        10-15% faster end to end (the caches stay warm), and a loop over a list costs less than
        one over a generator. What is met while reading keeps its place: an error is raised,
        and a truncated last line's warning added, only once the records before it were handed
        out. ``line`` and ``header`` may run ahead of the records handed out."""
        validate = RECORD.validator.validate_json
        take: BatchDecoder | None = make_batch_decoder() if self.fast else None
        deferred: list[str] = []  # the warnings, added once the records before them are out
        seq = 0  # the records read so far: the next line's seq (and its number minus one)
        in_run = False  # a header was read, and no end since
        truncated = False
        with self._open() as f:
            source = lines_of(f)
            while not truncated:
                try:
                    lines = list(islice(source, READ_AHEAD))
                except CutShort as exc:
                    raise TraceFormatError(self.path, seq + 1, exc.detail) from None
                if not lines:
                    break
                batch: list[ReplayItem] = []
                i = 0
                try:
                    while True:
                        if take is not None and in_run:  # the fast path, for a run of lines
                            taken = take(lines, i, seq, batch)
                            seq += taken - i
                            i = taken
                        if i == len(lines):
                            break
                        self.line = seq + 1
                        record = self._validated(validate, lines[i], seq + 1, in_run, deferred)
                        if record is None:  # a truncated last line
                            truncated = True
                            break
                        in_run = record.type != "end"  # a header opens a run, an end closes it
                        batch.append(_replay_form(record))
                        seq += 1
                        i += 1
                except Exception:
                    if batch:
                        yield batch
                    raise
                self.line = seq + truncated
                if batch:
                    yield batch
            self._ended_early(source, seq, deferred)
        if seq == 0 and not truncated:
            raise TraceFormatError(self.path, 1, "empty trace (no header record)")
        self.warnings.extend(deferred)

    def _open(self) -> IO[bytes]:
        try:
            return open_for_reading(self.source)
        except OSError as exc:
            raise TraceFormatError(self.path, 0, f"cannot open: {exc.strerror or exc}") from None

    def _ended_early(self, lines: object, read: int, warnings: list[str]) -> None:
        """A compressed trace that stopped before its end marker (its writer was killed)."""
        if getattr(lines, "cut", False):
            warnings.append(
                f"{self.path}:{read + 1}: the compressed trace ends early (its writer stopped "
                f"before closing it): {read} complete records read"
            )

    def _validated(
        self,
        validate: Callable[[bytes], Record],
        raw: bytes,
        lineno: int,
        in_run: bool,
        warnings: list[str],
    ) -> Record | None:
        """The record on line ``lineno`` (its seq ``lineno - 1``), validated by pydantic and
        checked in its place; None for a truncated last line (its warning added to
        ``warnings``). ``validate``: the core validator itself (``TypeAdapter.validate_json``
        adds a Python call per line)."""
        path = self.path
        try:
            record = validate(raw)
        except ValidationError as exc:
            complete = raw.endswith(b"\n")
            if not complete and raw.strip():
                if lineno == 1:
                    raise TraceFormatError(
                        path,
                        lineno,
                        "no complete record: the only line is truncated (no newline at end of "
                        "file)",
                    ) from None
                warnings.append(
                    f"{path}:{lineno}: truncated last line (no newline at end of file, "
                    f"{len(raw)} bytes) skipped"
                )
                return None
            if not raw.strip():
                raise TraceFormatError(path, lineno, "empty line") from None
            reason = _header_problem(raw) or _explain(exc)
            raise TraceFormatError(path, lineno, reason) from None
        if record.seq != lineno - 1:
            raise TraceFormatError(
                path, lineno, f"seq {record.seq} is not consecutive (expected {lineno - 1})"
            )
        kind = record.type  # not isinstance: through pydantic's metaclass, it costs more
        if kind == "header":
            if record.continues is not None and (in_run or lineno == 1):  # type: ignore[union-attr]
                where = "starts the trace" if lineno == 1 else "is inside a run (no end before it)"
                raise TraceFormatError(
                    path, lineno, f"a header that continues the previous run {where}"
                )
            self.header = record  # type: ignore[assignment]
        elif not in_run:
            # a record outside a run: before the first header, or after an end
            if lineno == 1:
                reason = f"a trace starts with a header record, not {kind!r}"
            else:
                reason = f"a {kind!r} record after the end of a run (no header)"
            raise TraceFormatError(path, lineno, reason)
        return record


def _replay_form(record: Record) -> ReplayItem:
    kind = record.type
    if kind == "header" or kind == "end":
        return record  # type: ignore[return-value]
    if kind == "io":
        return None
    if kind == "step":
        return StepLine(record.policy, record.step)  # type: ignore[union-attr]
    return feed_line(record)  # type: ignore[arg-type]


def read_trace(path: str | os.PathLike[str]) -> list[Record]:
    """All records of a (small) trace; prefer ``TraceReader`` to stream big ones."""
    return list(TraceReader(Path(path)))
