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

from pydantic_core import to_json

import loopctl
from loopctl.core import (
    CallLLM,
    CallTools,
    Feed,
    LoopMachine,
    MachinePolicy,
    MachineSnapshot,
    MachineStep,
    Message,
    ToolCall,
    ToolResult,
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
)
from loopctl_sim.trace.scrub import Scrubber, default_scrubber

#: ``BrainSummary``'s fields, in the order ``LoopMachine.summary_values()`` gives them.
_SUMMARY_FIELDS: Final = tuple(BrainSummary.model_fields)
#: How many messages found clean a writer keeps (a turn carries at most the last two again).
_KEPT: Final = 4
#: How many clean ``tool_result`` records' data a writer keeps.
_KEPT_RESULTS: Final = 16
#: A request's data but its context and last message: a digest, a count, tool names, a literal.
_REQUEST_KEYS: Final = frozenset({"digest", "n_messages", "tools", "messages"})


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
        # Search each message once (messages are frozen: the same object always writes the same
        # JSON): the messages a clean record wrote, by identity, with their JSON; the last model
        # reply's data JSON, the last tool names of a request and the brain's last call when
        # their records were clean. A record carrying one again writes that JSON and does not
        # search it (a traced 20-turn ``bench_fuzz_driver`` run: see ``_known``).
        self._clean: dict[int, tuple[Message, str]] = {}
        self._clean_reply = ""
        self._clean_tools: Any = None
        self._clean_call: str | None = None
        self._clean_calls: dict[str, ToolCall] = {}
        self._clean_results: dict[str, Mapping[str, Any]] = {}

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

    def _known(self, message: Message) -> tuple[str, bool]:
        """``message``'s JSON and whether a clean record already held it: kept by identity, the
        message of the last clean model reply (the driver gives it as data, so the feed of the
        same reply finds it by its JSON), or results each the very objects of a clean
        ``tool_result`` record. Searching each message once cut a traced 20-turn
        ``bench_fuzz_driver`` run from 24.81M to 23.73M instructions (cachegrind: 142 searches
        of 23,700 characters -> 64 of 9,600)."""
        kept = self._clean.get(id(message))
        if kept is not None and kept[0] is message:
            return kept[1], True
        text = to_json(message).decode()
        parts = message.parts
        known = self._clean_reply.startswith(text, 11) or (  # after '{"message":'
            message.role == "user" and bool(parts) and all(map(self._answered, parts))
        )
        if known:
            self._kept(message, text)
        return text, known

    def _answered(self, part: Any) -> bool:
        """Whether ``part`` is a result a clean ``tool_result`` record held, value for value."""
        d = self._clean_results.get(part.call_id) if type(part) is ToolResult else None
        return (
            d is not None
            and part.name is d.get("name")
            and part.content is d.get("content")
            and part.is_error is d.get("is_error")
        )

    def _kept(self, message: Message, text: str) -> None:
        """Keep ``message`` (written in a clean record as ``text``) as known clean, and its
        calls by their ids."""
        clean, calls = self._clean, self._clean_calls
        if len(clean) >= _KEPT:
            del clean[next(iter(clean))]
            calls.clear()  # a turn's calls are those of its newest reply
        clean[id(message)] = (message, text)
        for part in message.parts:
            if type(part) is ToolCall:
                calls[part.id] = part

    def _called(self, calls: tuple[ToolCall, ...]) -> bool:
        """Whether every one of ``calls`` is a call of a message known clean (by identity)."""
        known = self._clean_calls
        return all(known.get(call.id) is call for call in calls)

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
        text = record.model_dump_json(fallback=repr)
        # its own "scrub_key" holds a name's literal (key"): a text without it is searched
        scrubbed = self._write_record(text, text.replace('"scrub_key":', "", 1))
        if continues is None:
            self.brain_scrubbed = scrubbed  # the brain from here on is this snapshot's

    # The records written at every step of a run are written from their fields, in their
    # model's order, straight to JSON (``pydantic_core.to_json``: the brain's objects serialize
    # as their models do), without building a record model only to serialize it: the reader
    # validates every line it reads.

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
        # a call_llm step holds its turn alone, a call_tools one the calls of a clean message:
        # nothing of the user's
        known = type(step) is CallLLM or (type(step) is CallTools and self._called(step.calls))
        user = ("" if known else step_json) if clean else None
        scrubbed = self._write_record(text, user)
        self._policy = (policy, policy_json, not scrubbed)

    def feed(self, feed: Feed, machine: LoopMachine) -> None:
        """A feed record: ``feed``, and ``machine``'s digest and small fields after it. The
        user's data is the feed's arguments and the brain's last call (its tool's name): only
        they are searched, but for a message or a last call a clean record already held, and a
        count (the driver's)."""
        summary = machine.summary_values()
        brain = dict(zip(_SUMMARY_FIELDS, summary, strict=True))
        shown = written(feed)
        values = shown.items() if type(shown) is dict else shown.args().items()  # type: ignore[union-attr]
        pieces: list[str] = []
        user: list[str] = []
        fresh: list[tuple[Message, str]] = []
        for name, value in values:
            if type(value) is Message:
                piece, known = self._known(value)
                if not known:
                    user.append(piece)
                    fresh.append((value, piece))
            else:
                piece = to_json(value).decode()
                if type(value) is not int:
                    user.append(piece)
            pieces.append(f'"{name}":{piece}')  # a field's name is a literal: JSON as it is
        last_call = summary[7]
        if last_call is not None and last_call != self._clean_call:
            user.append(to_json(last_call).decode())
        text = (  # a digest is hex digits, a feed's name a literal: both JSON as they are
            f'{{"seq":{self.seq},"type":"feed","digest":"{machine.digest()}","scrubbed":false,'
            f'"brain":{to_json(brain).decode()},"name":"{feed.name}","args":{{{",".join(pieces)}}}}}'
        )
        scrubbed = self._write_record(text, "".join(user))
        self.brain_scrubbed = self.brain_scrubbed or scrubbed
        if not scrubbed:
            self._clean_call = last_call
            for message, piece in fresh:
                self._kept(message, piece)

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
        user = kind_json + turn_json + data_json  # a turn is the caller's
        if kind == "tool_call" and self._is_call(data):
            user = ""  # one of the calls of a clean message, as the dispatcher gives it
        scrubbed = self._write_record(text, user)
        if kind == "model_reply":
            self._clean_reply = "" if scrubbed else data_json
        elif kind == "tool_result" and not scrubbed and type(data.get("id")) is str:
            results = self._clean_results
            if len(results) >= _KEPT_RESULTS:
                results.clear()
            results[data["id"]] = data

    def _is_call(self, data: Mapping[str, Any]) -> bool:
        """Whether ``data`` is ``{"id", "name", "arguments"}`` of a call of a message known
        clean, its values the call's own objects (equal ones need not scrub alike: 1 == True)."""
        ident = data.get("id")
        call = self._clean_calls.get(ident) if type(ident) is str else None
        args = data.get("arguments")
        return (
            call is not None
            and len(data) == 3
            and call.id is data["id"]
            and call.name is data.get("name")
            and type(args) is dict
            and len(args) == len(call.arguments)
            and all(args.get(k, args) is v for k, v in call.arguments.items())
        )

    def request(self, turn: int | None, data: Mapping[str, Any], last: Message | None) -> None:
        """A ``model_request`` io record: ``data`` as ``RequestLog.see(..., last=False)`` gives
        it, with ``last`` (the request's last message) in its place before ``messages``. The
        message is searched only if no clean record held it yet, the rest only when it holds
        a context or other tool names than the last clean request (the rest is a digest, a
        count and a literal)."""
        data_json = to_json(data, fallback=repr).decode()
        lean = data.keys() <= _REQUEST_KEYS and data.get("tools") == self._clean_tools
        user = "" if lean else data_json
        fresh = False
        if last is None:
            last_json = "null"
        else:
            last_json, known = self._known(last)
            if not known:
                user, fresh = user + last_json, True
        at = data_json.find(',"messages":')  # the first: the others would be inside strings
        if at < 0:
            raise ValueError("a model request's data holds its messages' source")
        turn_json = "null" if turn is None else str(int(turn))
        text = (
            f'{{"seq":{self.seq},"type":"io","kind":"model_request","turn":{turn_json},'
            f'"data":{data_json[:at]},"last":{last_json}{data_json[at:]},'
            '"duration_s":null,"scrubbed":false}'
        )
        if not self._write_record(text, user):
            self._clean_tools = data.get("tools")
            if fresh and last is not None:
                self._kept(last, last_json)

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
        self._write_record(record.model_dump_json())
