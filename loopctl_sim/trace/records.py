"""Trace format v4: JSON Lines, one record a line, each with a consecutive ``seq`` and a ``type``.

========  =====================================================================================
type      fields
========  =====================================================================================
header    ``format`` ("loopctl-trace"), ``version``, ``engine_version``, ``created``, the
          starting machine ``snapshot`` (or null: a fresh ``LoopMachine()``), free ``metadata``;
          (v3) or, instead of a snapshot, ``continues``: the digest of the brain it starts
          from, and that brain's small fields (``brain``, as a feed record's)
step      the ``policy`` handed in and the ``step`` the brain answered
feed      the feed's ``name``, its ``args`` as data (see ``loopctl_sim.trace.feeds``) and the
          machine's ``digest`` right after it; (v4) a ``tool_results`` feed's args hold the
          driver's ``context_tokens`` after the results, where older versions hold a
          ``set_context_tokens`` feed right after it
io        what the driver did in the world: ``kind``, ``turn``, ``data``, ``duration_s``
end       the ``outcome`` (null when the machine is not terminal) and the final ``digest``;
          ``error`` (``type``, ``message``) when an exception escaped the run instead of it
          going through the exit door (absent otherwise)
========  =====================================================================================

A trace may hold several runs: a new ``header`` after an ``end`` starts the next run; a
``header`` in the middle of a run marks a resume after a crash (its snapshot is the brain as it
was saved). ``seq`` runs on across them. Times and durations live only in ``header`` and ``io``
records: replay never depends on them.

A header that continues the previous run (v3) holds no snapshot, so a session writes its
conversation once: ``continues`` is the digest of the previous brain's ``next_run()``, which a
reader rebuilds and checks (unless ``scrubbed``: the rebuilt brain holds placeholders).

Every header is written as version 4, so a reader of versions 1 to 3 refuses it rather than drop
a ``tool_results`` count. Older versions are still read; driver-level replay reads their pair of
feeds as the one the driver now gives (``loopctl_sim.replay.cursor``).

One ``Data`` (a msgspec ``Struct``, as the brain's own vocabulary) per record type, tagged by
``type``: the JSON Schema, the writer and the reader share one definition, and a feed record's
arguments are the brain's own ``Feed``. Why msgspec: reading the records was a seventh of an
agent replay with pydantic models (cProfile), and the brain's data they hold is msgspec's.
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal

import msgspec
from msgspec.structs import force_setattr

from loopctl.core import (
    FEED_TYPES,
    Data,
    Feed,
    FeedName,
    LoopMachine,
    MachineOutcome,
    MachinePolicy,
    MachineSnapshot,
    MachineStep,
    json_reader,
    to_json,
)
from loopctl_sim.errors import SimError
from loopctl_sim.trace.feeds import read_feed

TRACE_FORMAT: Final = "loopctl-trace"
#: The version every header this loopctl_sim writes holds.
TRACE_VERSION: Final = 4
#: The versions it reads: version 1 traces (no request contexts, no brain summaries, steps and
#: ends never marked scrubbed) replay as recorded; version 2 headers always hold their snapshot;
#: before version 4 the driver's count after an exchange's results is a feed of its own.
READABLE_VERSIONS: Final = (1, 2, 3, 4)


class _Record(Data, frozen=True, kw_only=True, tag_field="type"):
    """What every record has: its ``seq`` (and its ``type``, the tag)."""

    type: ClassVar[str]
    seq: Annotated[int, msgspec.Meta(ge=0)]
    #: The fields written only when they are not None.
    _omitted: ClassVar[tuple[str, ...]] = ()
    #: The fields of free data: the user's, written whatever they hold (``record_json``).
    _free: ClassVar[tuple[str, ...]] = ()

    def model_dump(self, *, mode: str = "python", exclude: Collection[str] = ()) -> dict[str, Any]:
        """The record as its line's JSON data (``exclude``: keys left out)."""
        data: dict[str, Any] = msgspec.json.decode(self.model_dump_json())
        for key in exclude:
            data.pop(key, None)
        return data

    def model_dump_json(self, *, indent: int | None = None) -> str:
        """The record's line (``record_json``), or that indented by ``indent`` spaces."""
        text = record_json(self)  # type: ignore[arg-type]  # every _Record is a Record
        return text if indent is None else msgspec.json.format(text, indent=indent)


class BrainSummary(Data, frozen=True, kw_only=True):
    """(v2) The brain's small fields after a feed, beside its digest: a divergence names the
    fields that differ instead of two hashes. Replay checks it after every feed (up to a run's
    first scrubbed record): a summary that does not describe the brain is a divergence."""

    state: str
    turn: int | None = None
    turns: int
    context_tokens: int
    history: int
    pending: int
    #: the loop detector's window: how many calls it holds, the last one's key, and its warning
    window: int
    last_call: str | None = None
    warned: bool = False

    @classmethod
    def of(cls, machine: LoopMachine) -> BrainSummary:
        """The summary of ``machine`` (``summary_values`` is in this type's field order)."""
        fields: dict[str, Any] = dict(
            zip(cls.__struct_fields__, machine.summary_values(), strict=True)
        )
        return cls(**fields)


class HeaderRecord(_Record, frozen=True, kw_only=True, tag="header"):
    """A run's start. ``metadata`` is free, with two conventions: ``tool_modes`` maps a tool's
    name to ``live`` (it ran), ``recorded`` (it was answered from an earlier trace) or
    ``simulated`` (a scripted world answered it); without it, every tool ran live, or was
    simulated when ``simulated`` is true. ``fork`` marks a fork's branch point: the ``parent``
    trace (``path``, ``sha256``, the branch seq ``at``), the ``ancestors`` (oldest first), the
    ``edits`` made there and the ``settings`` changed from there on."""

    type: ClassVar[Literal["header"]] = "header"
    _omitted: ClassVar[tuple[str, ...]] = ("continues", "brain")
    _free: ClassVar[tuple[str, ...]] = ("metadata",)
    format: Literal["loopctl-trace"] = TRACE_FORMAT
    version: Literal[1, 2, 3, 4] = TRACE_VERSION
    engine_version: str
    created: str
    snapshot: MachineSnapshot | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    scrubbed: bool = False
    #: (v2) The id of the key the scrubbed records' fingerprints were made with (a fingerprint
    #: of the key, never the key; ``loopctl_sim.trace.scrub``), or None: no key, no fingerprints.
    scrub_key: str | None = None
    #: (v3) The digest of the previous run's ``next_run()``, in place of a snapshot (see the
    #: module docstring). None: the brain is the snapshot's, and the field is not written.
    continues: str | None = None
    #: (v3) With ``continues``: that brain's small fields (as a feed record's ``brain``).
    brain: BrainSummary | None = None

    def checked(self) -> HeaderRecord:
        if self.continues is not None:
            if self.snapshot is not None:
                raise ValueError("a header holds a snapshot or continues a run, not both")
            if self.version < 3:
                raise ValueError("continues is a version 3 field")
        elif self.brain is not None:
            raise ValueError("a header holds a brain summary only with continues")
        if self.snapshot is not None:  # read as a struct: its own checks, as it is restored
            force_setattr(self, "snapshot", self.snapshot.checked())
        return self

    def machine(self, previous: LoopMachine | None = None) -> LoopMachine:
        """The run's starting brain: the snapshot's (a fresh one when there is none), or, when
        the header ``continues``, ``previous.next_run()`` (``previous``: the brain the trace's
        previous run ended with; ``ContinuationError`` without one). The caller checks its
        digest."""
        if self.continues is not None:
            if previous is None or not (previous.is_terminal and previous.finalized):
                raise ContinuationError(
                    "the header continues the previous run, but no run ended before it"
                )
            return previous.next_run()
        if self.snapshot is None:
            return LoopMachine()
        return LoopMachine.from_snapshot(self.snapshot)


class ContinuationError(ValueError, SimError):
    """A header that continues the previous run where no run ended before it."""


class StepRecord(_Record, frozen=True, kw_only=True, tag="step"):
    type: ClassVar[Literal["step"]] = "step"
    policy: MachinePolicy
    step: MachineStep
    #: (v2) True when secrets were scrubbed from the step (a tool call's arguments).
    scrubbed: bool = False


class FeedRecord(_Record, frozen=True, kw_only=True, tag="feed"):
    """A feed (``name``, and ``args``: the brain's own ``Feed``) and the brain's digest after it.
    The arguments are read as their JSON text, then as the feed ``name`` names (``checked``)."""

    type: ClassVar[Literal["feed"]] = "feed"
    digest: str
    #: True when secrets were scrubbed from the args: the brain the replay builds from them holds
    #: placeholders, so its digests can no longer be the recorded ones (see replay).
    scrubbed: bool = False
    #: (v2) The brain's small fields after the feed.
    brain: BrainSummary | None = None
    name: FeedName
    if TYPE_CHECKING:
        args: Feed
    else:
        # a feed without fields may leave them out
        args: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))

    @classmethod
    def read(cls, data: Any) -> FeedRecord:
        """As every ``Data`` reads (``model_validate``); JSON data by its text, which the
        arguments are read from."""
        if isinstance(data, FeedRecord):
            return data.checked()
        return cls.read_json(to_json(data))

    def checked(self) -> FeedRecord:
        args: Any = self.args
        if type(args) is msgspec.Raw:  # as read: freshly made, so it is set in place
            force_setattr(self, "args", read_feed(self.name, args))
        return self


class IoRecord(_Record, frozen=True, kw_only=True, tag="io"):
    """One IO event (``loopctl.observe.IoEvent``); kinds are open-ended here.

    (v2) A ``model_request`` record's data holds the request's ``digest`` (see
    ``loopctl_sim.trace.requests``), its ``n_messages``, the advertised ``tools`` by name and the
    ``last`` message, and, whenever the model, provider, system prompt, tool specs or options
    changed since the trace's previous request, the whole ``context``."""

    type: ClassVar[Literal["io"]] = "io"
    _free: ClassVar[tuple[str, ...]] = ("data",)
    kind: str
    turn: int | None = None
    data: dict[str, Any] = msgspec.field(default_factory=dict)
    duration_s: float | None = None
    #: (v2) True when secrets were scrubbed from the data.
    scrubbed: bool = False


#: How many characters of an escaped exception's message an end record keeps.
RUN_ERROR_MESSAGE_LIMIT: Final = 2000


class RunError(Data, frozen=True, kw_only=True):
    """An exception that escaped a run (``EndRecord.error``): its type's name and its message
    (scrubbed like every record, cut to ``RUN_ERROR_MESSAGE_LIMIT`` characters)."""

    type: str
    message: str

    @classmethod
    def of(cls, error: BaseException) -> RunError:
        text = str(error)
        if len(text) > RUN_ERROR_MESSAGE_LIMIT:
            text = text[: RUN_ERROR_MESSAGE_LIMIT - 1] + "…"
        return cls(type=type(error).__name__, message=text)

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


class EndRecord(_Record, frozen=True, kw_only=True, tag="end"):
    type: ClassVar[Literal["end"]] = "end"
    _omitted: ClassVar[tuple[str, ...]] = ("error",)
    outcome: MachineOutcome | None = None
    digest: str
    #: (v2) True when secrets were scrubbed from the outcome (a final text, an error message).
    scrubbed: bool = False
    #: The exception that escaped the run (the exit door was not taken; ``outcome`` null
    #: unless the brain was terminal). None: the field is not written.
    error: RunError | None = None


Record = HeaderRecord | StepRecord | FeedRecord | IoRecord | EndRecord
_READ: Final = json_reader(Record)


def read_record(line: str | bytes) -> Record:
    """One trace line as its record, checked; ``ValueError`` if it is not one (msgspec's
    ``DecodeError`` when it is not JSON, its ``ValidationError`` when a field does not fit)."""
    record: Record = _READ(line).checked()
    return record


def record_json(record: Record) -> str:
    """The record's line (without its newline): compact JSON, ``seq`` first, as every version
    of the format wrote it (``loopctl-sim resume`` finds its checkpoints by that start), then
    ``type`` and the fields in order; the optional fields of ``_omitted`` left out when None.
    The user's free data (``_free``) is written as pydantic writes it, what it does not know
    as its ``repr``."""
    update: dict[str, Any] = {
        f: msgspec.UNSET for f in record._omitted if getattr(record, f) is None
    }
    for field in record._free:
        update[field] = msgspec.Raw(to_json(getattr(record, field), fallback=repr))
    text = to_json(msgspec.structs.replace(record, **update) if update else record)
    tag, seq, rest = text[1:].split(b",", 2)  # msgspec writes the tag first, then seq
    return (b"{%s,%s,%s" % (seq, tag, rest)).decode()


def _feed_schemas(feed: dict[str, Any]) -> dict[str, Any]:
    """The feed record's schema once per feed, its ``args`` the feed type's own."""
    out: dict[str, Any] = {}
    for name, feed_type in FEED_TYPES.items():
        schema = copy.deepcopy(feed)
        schema["title"] = f"{feed_type.__name__}Feed"
        schema["properties"]["name"] = {"enum": [name]}
        schema["properties"]["args"] = feed_type.model_json_schema()
        required = [r for r in schema["required"] if r != "args"]
        schema["required"] = [*required, "args"] if feed_type.__struct_fields__ else required
        out[f"{feed_type.__name__}Feed"] = schema
    return out


def _one_of(key: str, refs: dict[str, str]) -> dict[str, Any]:
    """A union discriminated by ``key``, whose value ``v`` picks ``refs[v]`` (OpenAPI's form)."""
    return {
        "oneOf": [{"$ref": ref} for ref in refs.values()],
        "discriminator": {"propertyName": key, "mapping": refs},
    }


def trace_json_schema() -> dict[str, Any]:
    """The JSON Schema of one trace line: a union discriminated by ``type``, a feed record's
    by its ``name``."""
    records = (HeaderRecord, StepRecord, FeedRecord, IoRecord, EndRecord)
    defs = {cls.__name__: cls.model_json_schema() for cls in records}
    feeds = _feed_schemas(defs["FeedRecord"])
    defs.update(feeds, RunError=RunError.model_json_schema())
    defs["FeedRecord"] = _one_of(
        "name", {n: f"#/$defs/{t.__name__}Feed" for n, t in FEED_TYPES.items()}
    )
    return {
        "title": f"loopctl trace record (format {TRACE_FORMAT!r}, version {TRACE_VERSION})",
        **_one_of("type", {cls.type: f"#/$defs/{cls.__name__}" for cls in records}),
        "$defs": defs,
    }


class TraceFormatError(SimError):
    """A trace line that cannot be read; ``str()`` is ``file:line: reason``."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason
