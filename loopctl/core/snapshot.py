"""The brain's saved form: ``MachineSnapshot``, its consistency check, and its exact JSON.

A snapshot is everything the brain is, as data (see ``LoopMachine.snapshot``). Validating one
checks that it describes a state the brain could have reached, so a damaged or hand-edited
snapshot is a ``ValidationError`` at restore, never a machine that misbehaves later.
``snapshot_json`` writes the same bytes as pydantic from cached per-message JSON, which keeps the
digest that traces take after every feed from re-serializing the whole conversation.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator
from typing_extensions import TypedDict  # pydantic needs it for TypedDict on Python < 3.12

from loopctl.core.loopdetect import LoopWindow
from loopctl.core.messages import Message, ToolCall, ToolResult
from loopctl.core.salvage import coherence_problem
from loopctl.core.steps import AwaitingModel, AwaitingTools, MachineState

__all__ = [
    "HISTORY_HEAD",
    "PENDING_HEAD",
    "SNAPSHOT_FORMAT",
    "SNAPSHOT_VERSION",
    "Exchange",
    "MachineSnapshot",
    "SnapshotTail",
    "gc_paused",
    "snapshot_end",
    "snapshot_json",
    "snapshot_problem",
]

SNAPSHOT_FORMAT: Final = "loopctl-machine"
SNAPSHOT_VERSION: Final = 1


class Exchange(BaseModel):
    """The tool calls of the latest model reply, waiting for their results."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    turn: int
    calls: tuple[ToolCall, ...]
    preanswered: tuple[ToolResult, ...] = ()

    @property
    def dispatch(self) -> tuple[ToolCall, ...]:
        """The calls the driver must run: all but the pre-answered unknown ones."""
        if not self.preanswered:
            return self.calls
        answered = {r.call_id for r in self.preanswered}
        return tuple(c for c in self.calls if c.id not in answered)


class MachineSnapshot(BaseModel):
    """Everything the brain is, as data. ``LoopMachine`` round-trips through it exactly.

    Validating a snapshot (from JSON, a dict, or the constructor) checks more than the types: the
    fields must describe a machine the brain could have reached (see ``_consistent``), so a damaged
    or hand-edited snapshot fails here with a ``ValidationError`` instead of misbehaving later.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal["loopctl-machine"] = SNAPSHOT_FORMAT
    version: int = SNAPSHOT_VERSION
    # The conversation comes before the small fields, so that the JSON of a machine is a prefix
    # that only grows between commits (history, then pending) followed by a few bytes that
    # change at every feed: the digest keeps a running hash of the prefix (see ``digest()``).
    history: tuple[Message, ...] = ()
    pending: tuple[Message, ...] = ()
    state: MachineState
    turns_taken: int = Field(default=0, ge=0)
    context_tokens: int = Field(default=0, ge=0)
    exchange: Exchange | None = None
    advertised: tuple[str, ...] = ()
    started: bool = False
    finalized: bool = False
    noop_floor: int | None = Field(default=None, ge=0)
    loop: LoopWindow = LoopWindow()

    # Field validators, not a model "before" validator: a model-level one makes pydantic parse the
    # whole JSON into Python objects first, which doubled the cost of restoring a long history.
    @field_validator("format", mode="before")
    @classmethod
    def _known_format(cls, fmt: Any) -> Any:
        if fmt != SNAPSHOT_FORMAT:
            raise ValueError(f"not a loopctl machine snapshot (format {fmt!r})")
        return fmt

    @field_validator("version", mode="before")
    @classmethod
    def _known_version(cls, version: Any) -> Any:
        if version != SNAPSHOT_VERSION:
            raise ValueError(
                f"snapshot format version {version!r} is not supported by this loopctl "
                f"(it reads version {SNAPSHOT_VERSION}); upgrade loopctl to restore it"
            )
        return version

    @model_validator(mode="after")
    def _consistent(self) -> MachineSnapshot:
        problem = snapshot_problem(self)
        if problem is not None:
            raise ValueError(f"inconsistent machine snapshot: {problem}")
        return self


def snapshot_problem(snap: MachineSnapshot) -> str | None:
    """Why ``snap`` is not a state the brain can be in, or None. Linear in the conversation.

    A terminal machine that was not finalized may end with calls still open: the run failed or
    was cancelled while its tools ran, and ``discard_pending`` will drop that tail.
    """
    state = snap.state
    kind = state.kind
    if isinstance(state, AwaitingTools) != (snap.exchange is not None):
        return f"state {kind} with exchange {'set' if snap.exchange else 'missing'}"
    if snap.finalized and (kind != "terminal" or snap.pending):
        return "finalized, but not terminal with an empty pending"
    if not snap.started and kind != "terminal" and (kind != "start" or snap.pending):
        return f"state {kind} with pending messages before any input was accepted"
    if isinstance(state, AwaitingModel) and state.turn != snap.turns_taken + 1:
        return f"awaiting the model for turn {state.turn} after {snap.turns_taken} turns"
    if snap.loop.unjudged > len(snap.loop.calls):
        return "the loop window has more unjudged calls than recorded calls"
    if snap.exchange is not None:
        exchange = snap.exchange
        last = snap.pending[-1] if snap.pending else None
        if exchange.turn != snap.turns_taken:
            return f"exchange of turn {exchange.turn} after {snap.turns_taken} turns"
        if isinstance(state, AwaitingTools) and exchange.turn != state.turn:
            return f"exchange of turn {exchange.turn} in state {kind} of turn {state.turn}"
        if last is None or tuple(last.tool_calls) != exchange.calls:
            return "the exchange's calls are not those of the last pending message"
        ids = {c.id for c in exchange.calls}
        pre = [r.call_id for r in exchange.preanswered]
        if not set(pre) <= ids or len(set(pre)) != len(pre) or not exchange.dispatch:
            return "the exchange's pre-answered results do not fit its calls"
    open_tail = kind == "awaiting_tools" or (kind == "terminal" and not snap.finalized)
    problem = coherence_problem(snap.history, open_tail=False)
    if problem is None:
        problem = coherence_problem(snap.pending, open_tail=open_tail)
    return None if problem is None else f"conversation: {problem}"


class _LoopDict(TypedDict):
    calls: tuple[str, ...]
    unjudged: int
    warned: bool


class SnapshotTail(TypedDict):
    """The snapshot's fields after ``state``, in its order (for ``snapshot_json``)."""

    turns_taken: int
    context_tokens: int
    exchange: Exchange | None
    advertised: tuple[str, ...]
    started: bool
    finalized: bool
    noop_floor: int | None
    loop: _LoopDict


_TAIL: Final = TypeAdapter(SnapshotTail)
_STATE: Final[TypeAdapter[MachineState]] = TypeAdapter(MachineState)
#: The snapshot's JSON up to its first message.
HISTORY_HEAD: Final = (
    f'{{"format":"{SNAPSHOT_FORMAT}","version":{SNAPSHOT_VERSION},"history":['.encode()
)
#: Between the last message of history and the first of pending.
PENDING_HEAD: Final = b'],"pending":['


def snapshot_end(state: MachineState, tail: SnapshotTail) -> bytes:
    """The snapshot's JSON after the last pending message: the state and the small fields."""
    return b"".join((b'],"state":', _STATE.dump_json(state), b",", _TAIL.dump_json(tail)[1:]))


def snapshot_json(
    state: MachineState,
    history: Sequence[bytes],
    pending: Sequence[bytes],
    tail: SnapshotTail,
) -> bytes:
    """The snapshot's JSON from its parts, byte for byte what ``MachineSnapshot`` would write.

    ``history`` and ``pending`` are the JSON of each message (cached by the machine), so a
    long conversation is joined, not serialized again.
    """
    return b"".join(
        (
            HISTORY_HEAD,
            b",".join(history),
            PENDING_HEAD,
            b",".join(pending),
            snapshot_end(state, tail),
        )
    )


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a snapshot is parsed.

    Parsing a long history allocates tens of thousands of acyclic objects; the collector's passes
    over them find nothing to free but cost more than the parse itself (measured: restoring 10,000
    messages took 96 ms with the collector running and 40 ms without). Reference counting still
    frees memory; the collector's previous state is restored on the way out.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
