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

One pydantic model per record type: the JSON Schema, the writer and the reader share one
definition, and a feed record's arguments are the brain's own ``Feed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, Self, Union, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    create_model,
    model_validator,
)

from loopctl.core import (
    FEED_TYPES,
    AcceptInput,
    Feed,
    FeedName,
    LoopMachine,
    MachineOutcome,
    MachinePolicy,
    MachineSnapshot,
    MachineStep,
)
from loopctl_sim.errors import SimError
from loopctl_sim.trace.feeds import user_message_input

TRACE_FORMAT: Final = "loopctl-trace"
#: The version every header this loopctl_sim writes holds.
TRACE_VERSION: Final = 4
#: The versions it reads: version 1 traces (no request contexts, no brain summaries, steps and
#: ends never marked scrubbed) replay as recorded; version 2 headers always hold their snapshot;
#: before version 4 the driver's count after an exchange's results is a feed of its own.
READABLE_VERSIONS: Final = (1, 2, 3, 4)

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class _Record(BaseModel):
    model_config = _FROZEN
    seq: int = Field(ge=0)


class BrainSummary(BaseModel):
    """(v2) The brain's small fields after a feed, beside its digest: a divergence names the
    fields that differ instead of two hashes. Replay checks it after every feed (up to a run's
    first scrubbed record): a summary that does not describe the brain is a divergence."""

    model_config = _FROZEN
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
        """The summary of ``machine`` (``summary_values`` is in this model's field order)."""
        return cls(**dict(zip(cls.model_fields, machine.summary_values(), strict=True)))


def _is_none(value: object) -> bool:
    return value is None


class HeaderRecord(_Record):
    """A run's start. ``metadata`` is free, with two conventions: ``tool_modes`` maps a tool's
    name to ``live`` (it ran), ``recorded`` (it was answered from an earlier trace) or
    ``simulated`` (a scripted world answered it); without it, every tool ran live, or was
    simulated when ``simulated`` is true. ``fork`` marks a fork's branch point: the ``parent``
    trace (``path``, ``sha256``, the branch seq ``at``), the ``ancestors`` (oldest first), the
    ``edits`` made there and the ``settings`` changed from there on."""

    type: Literal["header"] = "header"
    format: Literal["loopctl-trace"] = TRACE_FORMAT
    version: Literal[1, 2, 3, 4] = TRACE_VERSION
    engine_version: str
    created: str
    snapshot: MachineSnapshot | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    scrubbed: bool = False
    #: (v2) The id of the key the scrubbed records' fingerprints were made with (a fingerprint
    #: of the key, never the key; ``loopctl_sim.trace.scrub``), or None: no key, no fingerprints.
    scrub_key: str | None = None
    #: (v3) The digest of the previous run's ``next_run()``, in place of a snapshot (see the
    #: module docstring). None: the brain is the snapshot's, and the field is not written.
    continues: str | None = Field(default=None, exclude_if=_is_none)
    #: (v3) With ``continues``: that brain's small fields (as a feed record's ``brain``).
    brain: BrainSummary | None = Field(default=None, exclude_if=_is_none)

    @model_validator(mode="after")
    def _one_brain(self) -> Self:
        if self.continues is not None:
            if self.snapshot is not None:
                raise ValueError("a header holds a snapshot or continues a run, not both")
            if self.version < 3:
                raise ValueError("continues is a version 3 field")
        elif self.brain is not None:
            raise ValueError("a header holds a brain summary only with continues")
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


class StepRecord(_Record):
    type: Literal["step"] = "step"
    policy: MachinePolicy
    step: MachineStep
    #: (v2) True when secrets were scrubbed from the step (a tool call's arguments).
    scrubbed: bool = False


class FeedRecord(_Record):
    """A feed (``name``, and ``args``: the brain's own ``Feed``) and the brain's digest after it.
    Read through one subclass per feed (``FEED_RECORDS``), picked by ``name``."""

    type: Literal["feed"] = "feed"
    digest: str
    #: True when secrets were scrubbed from the args: the brain the replay builds from them holds
    #: placeholders, so its digests can no longer be the recorded ones (see replay).
    scrubbed: bool = False
    #: (v2) The brain's small fields after the feed.
    brain: BrainSummary | None = None
    name: FeedName
    args: Feed


def _record_of(feed_type: type[Feed]) -> type[FeedRecord]:
    """The record of one feed type: its ``name`` a literal (the discriminator), its ``args`` that
    type (a feed without fields may leave them out)."""
    args: Any = feed_type
    if feed_type is AcceptInput:  # a plain string is taken as a user message
        args = Annotated[feed_type, AfterValidator(user_message_input)]
    default: Any = ... if feed_type.__struct_fields__ else cast(Any, feed_type)()
    name: Any = Literal[feed_type.name]
    record: type[FeedRecord] = create_model(
        f"{feed_type.__name__}Feed",
        __base__=FeedRecord,
        __module__=__name__,
        name=(name, feed_type.name),
        args=(args, default),
    )
    return record


#: The record class of each feed, by name.
FEED_RECORDS: Final[dict[str, type[FeedRecord]]] = {
    name: _record_of(feed_type) for name, feed_type in FEED_TYPES.items()
}


class IoRecord(_Record):
    """One IO event (``loopctl.observe.IoEvent``); kinds are open-ended here.

    (v2) A ``model_request`` record's data holds the request's ``digest`` (see
    ``loopctl_sim.trace.requests``), its ``n_messages``, the advertised ``tools`` by name and the
    ``last`` message, and, whenever the model, provider, system prompt, tool specs or options
    changed since the trace's previous request, the whole ``context``."""

    type: Literal["io"] = "io"
    kind: str
    turn: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    duration_s: float | None = None
    #: (v2) True when secrets were scrubbed from the data.
    scrubbed: bool = False


#: How many characters of an escaped exception's message an end record keeps.
RUN_ERROR_MESSAGE_LIMIT: Final = 2000


class RunError(BaseModel):
    """An exception that escaped a run (``EndRecord.error``): its type's name and its message
    (scrubbed like every record, cut to ``RUN_ERROR_MESSAGE_LIMIT`` characters)."""

    model_config = _FROZEN
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


class EndRecord(_Record):
    type: Literal["end"] = "end"
    outcome: MachineOutcome | None = None
    digest: str
    #: (v2) True when secrets were scrubbed from the outcome (a final text, an error message).
    scrubbed: bool = False
    #: The exception that escaped the run (the exit door was not taken; ``outcome`` null
    #: unless the brain was terminal). None: the field is not written.
    error: RunError | None = Field(default=None, exclude_if=_is_none)


if TYPE_CHECKING:
    Record = HeaderRecord | StepRecord | FeedRecord | IoRecord | EndRecord
else:
    _FEED = Annotated[Union[tuple(FEED_RECORDS.values())], Field(discriminator="name")]  # noqa: UP007
    Record = Annotated[
        HeaderRecord | StepRecord | _FEED | IoRecord | EndRecord, Field(discriminator="type")
    ]
RECORD: TypeAdapter[Record] = TypeAdapter(Record)


def trace_json_schema() -> dict[str, Any]:
    """The JSON Schema of one trace line (the union of the record types)."""
    schema = RECORD.json_schema()
    schema["title"] = f"loopctl trace record (format {TRACE_FORMAT!r}, version {TRACE_VERSION})"
    return schema


class TraceFormatError(SimError):
    """A trace line that cannot be read; ``str()`` is ``file:line: reason``."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason
