"""The trace writer: records appended one a line, flushed record by record, secrets scrubbed.

The writer appends and flushes record by record (optionally fsyncs), so a crash loses at most the
record being written. Every typed helper (``header``, ``step``, ``feed``, ``io``, ``end``) builds
the record with the next ``seq`` and scrubs what could hold a credential before writing it.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping
from typing import IO, Any, Final, TypeVar

from pydantic import BaseModel

import loopctl
from loopctl.core import MachinePolicy, MachineSnapshot, MachineStep
from loopctl.observe import IoEvent
from loopctl_sim.trace.feeds import FeedArgs, decode_feed_args
from loopctl_sim.trace.records import (
    BrainSummary,
    EndRecord,
    FeedRecord,
    HeaderRecord,
    IoRecord,
    StepRecord,
    feed_record,
)
from loopctl_sim.trace.scrub import Scrubber, default_scrubber

__all__ = ["TraceWriter"]

_R = TypeVar("_R", bound=BaseModel)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class TraceWriter:
    """Append-only trace writer: builds each record with the next ``seq``, writes it, flushes.

    ``target`` is a path (opened for writing, truncated) or an open text file. ``fsync=True``
    also syncs every record to disk. Secrets are scrubbed from every record written, whatever
    its kind (``scrubber``: by default the one the environment sets up,
    ``loopctl_sim.trace.scrub.default_scrubber``); a record that lost a secret is marked
    ``scrubbed``.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | IO[str],
        *,
        fsync: bool = False,
        scrubber: Scrubber | None = None,
    ) -> None:
        if isinstance(target, str | os.PathLike):
            self._file: IO[str] = open(target, "w", encoding="utf-8")  # noqa: SIM115
            self._owned = True
            self.path: str = os.fspath(target)
        else:
            self._file = target
            self._owned = False
            self.path = getattr(target, "name", "<stream>")
        self._fsync = fsync
        self.scrubber = scrubber if scrubber is not None else default_scrubber()
        self.seq = 0
        self.closed = False

    # context manager
    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._owned:
            self._file.close()
        else:
            self._file.flush()

    def write(self, record: BaseModel) -> None:
        """Write one record built by the caller; its ``seq`` must be the next one.

        The record is written as given: the typed helpers below are the ones that scrub."""
        seq = getattr(record, "seq", None)
        if seq != self.seq:
            raise ValueError(f"record seq {seq} is not the next seq {self.seq}")
        self._write_line(record.model_dump_json())

    def _write_line(self, text: str) -> None:
        self._file.write(text + "\n")
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())
        self.seq += 1

    def _scrubbed(self, record: _R, text: str) -> tuple[_R, str]:
        """``record`` and its JSON, or, when the JSON holds a secret, the record rebuilt from its
        scrubbed data and marked ``scrubbed`` (one search settles most records)."""
        if not self.scrubber.might_hold(text):
            return record, text
        data = record.model_dump(mode="json")
        clean = self.scrubber(data)
        if clean is data:
            return record, text
        clean["scrubbed"] = True
        rebuilt = type(record).model_validate(clean)
        return rebuilt, rebuilt.model_dump_json()

    def header(
        self,
        snapshot: MachineSnapshot | None,
        metadata: Mapping[str, Any] | None = None,
        *,
        created: str | None = None,
        engine_version: str | None = None,
    ) -> HeaderRecord:
        record = HeaderRecord(
            seq=self.seq,
            engine_version=engine_version or loopctl.__version__,
            created=created or _now(),
            snapshot=snapshot,
            metadata=_jsonable(dict(metadata or {})),
            scrub_key=self.scrubber.key_id,
        )
        record, text = self._scrubbed(record, record.model_dump_json())
        self._write_line(text)
        return record

    def step(self, policy: MachinePolicy, step: MachineStep) -> StepRecord:
        record = StepRecord(seq=self.seq, policy=policy, step=step)
        record, text = self._scrubbed(record, record.model_dump_json())
        self._write_line(text)
        return record

    def feed(
        self,
        name: str,
        args: Mapping[str, Any] | FeedArgs,
        digest: str,
        brain: BrainSummary | None = None,
    ) -> FeedRecord:
        """A feed record; ``brain`` is the brain's summary after the feed (``BrainSummary.of``)."""
        record = feed_record(self.seq, name, decode_feed_args(name, args), digest, brain=brain)
        record, text = self._scrubbed(record, record.model_dump_json())
        self._write_line(text)
        return record

    def io(
        self,
        event: IoEvent | str,
        *,
        turn: int | None = None,
        data: Mapping[str, Any] | None = None,
        duration_s: float | None = None,
    ) -> IoRecord:
        kind: str
        if isinstance(event, IoEvent):
            kind, turn, data, duration_s = event.kind, event.turn, event.data, event.duration_s
        else:
            kind = event
        plain = _jsonable(dict(data or {}))
        record = IoRecord(seq=self.seq, kind=kind, turn=turn, data=plain, duration_s=duration_s)
        record, text = self._scrubbed(record, record.model_dump_json())
        self._write_line(text)
        return record

    def end(self, outcome: Any, digest: str) -> EndRecord:
        record = EndRecord(seq=self.seq, outcome=outcome, digest=digest)
        record, text = self._scrubbed(record, record.model_dump_json())
        self._write_line(text)
        return record


_LEAVES: Final = frozenset({str, int, float, bool, type(None)})


def _jsonable(value: Any) -> Any:
    """Turn pydantic models (messages, errors, usage) inside IO data into JSON data."""
    kind = type(value)
    if kind in _LEAVES:  # the usual values, settled without the checks below
        return value
    if kind is dict:
        return {
            k if type(k) is str else str(k): v if type(v) in _LEAVES else _jsonable(v)
            for k, v in value.items()
        }
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return repr(value)

