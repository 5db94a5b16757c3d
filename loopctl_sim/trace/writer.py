"""The trace writer: records appended one a line, flushed record by record (a crash loses at most
the record being written), secrets scrubbed.

``snapshot(machine)`` writes the brain's whole snapshot as an ``io`` record of kind
``snapshot`` (``data``: the brain's ``digest`` and its ``snapshot``, the content form): a point
``loopctl-sim resume`` restores from instead of replaying the run from its start. Every reader
takes it as any ``io`` record (replay does not replay the world).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
from collections.abc import Iterable, Mapping
from typing import IO, Any, Final

import loopctl
from loopctl.core import (
    CallLLM,
    Feed,
    LoopMachine,
    MachinePolicy,
    MachineSnapshot,
    MachineStep,
    to_json,
)
from loopctl.observe import IoEvent
from loopctl_sim.errors import SimError
from loopctl_sim.trace.feeds import written
from loopctl_sim.trace.files import complete_prefix, is_gzip_name, open_for_writing
from loopctl_sim.trace.records import (
    TRACE_VERSION,
    BrainSummary,
    EndRecord,
    HeaderRecord,
    RunError,
    record_json,
)
from loopctl_sim.trace.scrub import Scrubber, default_scrubber

#: ``BrainSummary``'s fields, in the order ``LoopMachine.summary_values()`` gives them.
_SUMMARY_FIELDS: Final = BrainSummary.__struct_fields__


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class TraceWriteError(OSError, SimError):
    """The trace could not be written (a full disk): the writer is closed, a plain file cut back
    to its last whole record, and every later write raises this again. ``records``: the whole
    records kept (None when it cannot be told); ``error``: the ``OSError`` that stopped it."""

    def __init__(self, path: str, records: int | None, error: OSError) -> None:
        reason = error.strerror or str(error) or type(error).__name__
        kept = "" if records is None else f"; it ends after {records} whole records"
        self.text = f"cannot write the trace {path}: {reason}{kept}"
        super().__init__(error.errno, self.text)
        self.path = path
        self.records = records
        self.error = error

    def __str__(self) -> str:
        return self.text


class TraceWriter:
    """Append-only trace writer: builds each record with the next ``seq``, writes it, flushes.

    ``target`` is a path (truncated; gzip-compressed when it ends in ``.gz``; with
    ``append=True`` a plain trace is continued after its last whole line) or an open text file.
    ``seq`` is the first record's. Every record is scrubbed (``scrubber``: by default the
    environment's, ``default_scrubber``); a record that lost a secret is marked ``scrubbed``.

    A write that fails (``OSError``: a full disk) raises ``TraceWriteError``, once the file is
    closed and a plain one cut back to its last whole record (a record is never left torn);
    ``failed`` keeps the error, and every later write raises it again without trying.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | IO[str],
        *,
        fsync: bool = False,
        scrubber: Scrubber | None = None,
        append: bool = False,
        seq: int = 0,
    ) -> None:
        if isinstance(target, str | os.PathLike):
            if append and os.path.exists(target):
                seq, size = complete_prefix(target)
                os.truncate(target, size)  # a torn last line (a killed writer's) is cut off
            self._file: IO[str] = open_for_writing(target, append=append)
            self._owned = True
            self.path: str = os.fspath(target)
        else:
            self._file = target
            self._owned = False
            self.path = getattr(target, "name", "<stream>")
        self._fsync = fsync
        self.scrubber = scrubber if scrubber is not None else default_scrubber()
        # The last step's policy (a frozen model), its JSON, and whether that step was clean.
        self._policy: tuple[MachinePolicy | None, str, bool] = (None, "", False)
        self.seq = seq
        self.closed = False
        #: why the trace could not be written (None: every record so far was written)
        self.failed: TraceWriteError | None = None
        #: A record that builds the brain (a header's snapshot, a feed, a snapshot record) lost a
        #: secret: a reader's brain holds its placeholder from there on (sticky; see ``header``).
        self.brain_scrubbed = False

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file (flush a stream given open). Raises ``TraceWriteError`` when what was
        left to write (a compressed trace's end) cannot be written."""
        if self.closed:
            return
        self.closed = True
        try:
            if self._owned:
                self._file.close()
            else:
                self._file.flush()
        except OSError as exc:
            raise self._broken(exc) from exc

    def copy_lines(self, lines: Iterable[str]) -> None:
        """Write records already written elsewhere, as they are (a trace continued in a new
        file starts with the records of the one it continues); ``seq`` counts them."""
        for line in lines:
            self._write_line(line.rstrip("\n"))

    def _write_line(self, text: str) -> None:
        if self.failed is not None:
            raise self.failed
        try:
            self._file.write(text + "\n")
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
        except OSError as exc:
            raise self._broken(exc) from exc
        self.seq += 1

    def _broken(self, exc: OSError) -> TraceWriteError:
        """The file could not take a record: close it (what its buffer still holds is dropped)
        and cut a plain trace file back to its last whole record. The error to raise."""
        records: int | None = None
        self.closed = True
        if self._owned:
            with contextlib.suppress(OSError, ValueError):
                self._file.close()
            if not is_gzip_name(self.path):
                with contextlib.suppress(OSError):
                    records, size = complete_prefix(self.path)
                    os.truncate(self.path, size)  # less data: possible on a full disk
        error = self.failed = TraceWriteError(self.path, records, exc)
        return error

    def _write_record(self, text: str, user: str | None = None) -> bool:
        """Write one record's JSON ``text``, scrubbed first when it might hold a secret
        (``Scrubber.might_hold``); whether it was scrubbed.

        ``user``: the part of ``text`` that can hold user data (None: all of it; empty: none),
        the part searched unless the user has patterns; the rest is the record's own keys (none
        names a secret: a test keeps it so), seq, digests, counts, kinds and a policy found
        clean at the previous step. The search costs about 10,000 instructions a record plus 60
        a character searched (cachegrind): most of a record's text is not searched."""
        scrubbed = False
        scrubber = self.scrubber
        searched = text if user is None or scrubber.user_patterns else user
        if searched and scrubber.might_hold(searched):
            data = json.loads(text)
            clean = self.scrubber(data)
            if clean is not data:
                clean["scrubbed"] = scrubbed = True
                text = to_json(clean).decode()
        self._write_line(text)
        return scrubbed

    def header(
        self,
        snapshot: MachineSnapshot | None,
        metadata: Mapping[str, Any] | None = None,
        *,
        created: str | None = None,
        continues: str | None = None,
        brain: BrainSummary | None = None,
    ) -> None:
        """A run's header: its brain's ``snapshot`` (None: a fresh brain), or ``continues`` and
        ``brain`` (see ``HeaderRecord``). Such a header is marked ``scrubbed`` when a record
        that built the brain before it was: the rebuilt brain holds placeholders."""
        record = HeaderRecord(
            seq=self.seq,
            version=TRACE_VERSION,
            engine_version=loopctl.__version__,
            created=created or _now(),
            snapshot=snapshot,
            metadata={k if type(k) is str else str(k): v for k, v in (metadata or {}).items()},
            scrubbed=continues is not None and self.brain_scrubbed,
            scrub_key=self.scrubber.key_id,
            continues=continues,
            brain=brain,
        )
        text = record_json(record)
        # its own "scrub_key" holds a name's literal (key"): a text without it is searched
        scrubbed = self._write_record(text, text.replace('"scrub_key":', "", 1))
        if continues is None:
            self.brain_scrubbed = scrubbed  # the brain from here on is this snapshot's

    # The records written at every step of a run are written from their fields, in their
    # record's layout (``record_json``'s; a test holds them to it), without building a record
    # only to write it: the step's policy is written once a run and each record's user data
    # is known apart, the part searched for secrets. The reader checks every line it reads.

    def step(self, policy: MachinePolicy, step: MachineStep) -> None:
        """A step record. A loop hands the same policy to every step: its JSON is written once
        and searched again only after a step that was scrubbed (52,500 -> 29,800 instructions a
        step record of ``bench_fuzz_driver``'s traced run, with the call_llm rule, cachegrind)."""
        last, policy_json, clean = self._policy
        if policy is not last:
            policy_json, clean = to_json(policy).decode(), False
        step_json = to_json(step).decode()
        text = (
            f'{{"seq":{self.seq},"type":"step","policy":{policy_json},"step":{step_json},'
            '"scrubbed":false}'
        )
        # a call_llm step holds its turn alone: nothing of the user's
        user = ("" if type(step) is CallLLM else step_json) if clean else None
        scrubbed = self._write_record(text, user)
        self._policy = (policy, policy_json, not scrubbed)

    def feed(self, feed: Feed, machine: LoopMachine) -> None:
        """A feed record: ``feed``, and ``machine``'s digest and small fields after it. The
        user's data is the feed's arguments and the brain's last call (its tool's name): only
        they are searched."""
        brain = dict(zip(_SUMMARY_FIELDS, machine.summary_values(), strict=True))
        args = to_json(written(feed)).decode()
        text = (  # a digest is hex digits, a feed's name a literal: both JSON as they are
            f'{{"seq":{self.seq},"type":"feed","digest":"{machine.digest()}","scrubbed":false,'
            f'"brain":{to_json(brain).decode()},"name":"{feed.name}","args":{args}}}'
        )
        last_call = brain["last_call"]
        user = args if last_call is None else args + to_json(last_call).decode()
        scrubbed = self._write_record(text, user)
        self.brain_scrubbed = self.brain_scrubbed or scrubbed

    def io(
        self,
        event: IoEvent | str,
        *,
        turn: int | None = None,
        data: Mapping[str, Any] | None = None,
        duration_s: float | None = None,
    ) -> None:
        kind: str
        if isinstance(event, IoEvent):
            kind, turn, data, duration_s = event.kind, event.turn, event.data, event.duration_s
        else:
            kind = event
        kind_json = to_json(str(kind)).decode()
        # Written as pydantic writes it (as ``IoRecord``'s own JSON does: a model as its JSON, a
        # set as a list), what it does not know as its ``repr``: the driver's data, JSON data
        # already, is not walked first (that check cost 1.07M of a traced 20-turn run's 25.9M).
        data = data if type(data) is dict else dict(data or {})
        data_json = to_json(data, fallback=repr).decode()
        turn_json = "null" if turn is None else to_json(turn).decode()
        took = "null" if duration_s is None else to_json(float(duration_s)).decode()
        text = (
            f'{{"seq":{self.seq},"type":"io","kind":{kind_json},"turn":{turn_json},'
            f'"data":{data_json},"duration_s":{took},"scrubbed":false}}'
        )
        self._write_record(text, kind_json + turn_json + data_json)  # a turn is the caller's

    def snapshot(self, machine: LoopMachine, *, turn: int | None = None) -> None:
        """An ``io`` record of kind ``snapshot``: the brain's digest and whole snapshot."""
        data = {"digest": machine.digest(), "snapshot": machine.snapshot()}
        record = {"seq": self.seq, "type": "io", "kind": "snapshot", "turn": turn, "data": data}
        text = to_json({**record, "duration_s": None, "scrubbed": False}).decode()
        scrubbed = self._write_record(text)
        self.brain_scrubbed = self.brain_scrubbed or scrubbed

    def end(self, outcome: Any, digest: str, error: RunError | None = None) -> None:
        """A run's end: its ``outcome`` (None: the brain is not terminal) and final ``digest``;
        ``error``: the exception that escaped the run instead (``RunError.of``)."""
        record = EndRecord(seq=self.seq, outcome=outcome, digest=digest, error=error)
        self._write_record(record_json(record))
