"""The brain's vocabulary: states it sits in, steps it answers, outcomes it ends with.

Frozen slotted dataclasses with their ``kind`` first, like the feeds: the brain builds one or
two at every step, and a dataclass checks nothing where a pydantic model validated every field
again (a driver turn: 382k instructions against 403k under cachegrind; ``CallLLM(turn=3)``
600-870 ns against 1,510-1,930). pydantic validates them by their annotations where a snapshot
or a trace embeds them (discriminated on ``kind``, unknown keys refused) and writes them field
by field, the same JSON bytes. ``pydantic_core.to_jsonable_python`` writes one as JSON data;
dispatch on the type (``isinstance`` or ``match``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field

from loopctl.core.errors import LoopError
from loopctl.core.messages import ToolCall

#: The states the brain sits in (a state's ``kind``); ``loopctl.core.machine``'s tables are keyed
#: by them.
StateKind = Literal["start", "awaiting_model", "awaiting_tools", "awaiting_compaction", "terminal"]


class CompactReason(StrEnum):
    """Why the brain asks for a compaction (in the order it checks them)."""

    MANUAL = "manual"
    EMERGENCY = "emergency"
    THRESHOLD_EXCEEDED = "threshold_exceeded"


class _Kinded:
    """What pydantic is told when it validates one: a key that is no field is an error."""

    __slots__ = ()
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")


# --- outcomes ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Completed(_Kinded):
    kind: Literal["completed"] = "completed"
    final_text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancelled(_Kinded):
    kind: Literal["cancelled"] = "cancelled"


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxTurnsExceeded(_Kinded):
    kind: Literal["max_turns_exceeded"] = "max_turns_exceeded"


@dataclass(frozen=True, slots=True, kw_only=True)
class Failed(_Kinded):
    kind: Literal["failed"] = "failed"
    error: LoopError


MachineOutcome = Annotated[
    Completed | Cancelled | MaxTurnsExceeded | Failed, Field(discriminator="kind")
]

# --- states -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Start(_Kinded):
    """Ready to answer the next step."""

    kind: Literal["start"] = "start"


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitingModel(_Kinded):
    kind: Literal["awaiting_model"] = "awaiting_model"
    turn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitingTools(_Kinded):
    kind: Literal["awaiting_tools"] = "awaiting_tools"
    turn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitingCompaction(_Kinded):
    kind: Literal["awaiting_compaction"] = "awaiting_compaction"
    reason: CompactReason


@dataclass(frozen=True, slots=True, kw_only=True)
class Terminal(_Kinded):
    """Finished; accepts no further input, ever."""

    kind: Literal["terminal"] = "terminal"
    outcome: MachineOutcome


MachineState = Annotated[
    Start | AwaitingModel | AwaitingTools | AwaitingCompaction | Terminal,
    Field(discriminator="kind"),
]

# --- steps ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CallLLM(_Kinded):
    """Ask the model now; ``turn`` is the brain's count, the only turn ledger."""

    kind: Literal["call_llm"] = "call_llm"
    turn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CallTools(_Kinded):
    """Run these calls (never empty) and feed their results back in one message."""

    kind: Literal["call_tools"] = "call_tools"
    turn: int
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Compact(_Kinded):
    """Shrink the conversation first."""

    kind: Literal["compact"] = "compact"
    reason: CompactReason


@dataclass(frozen=True, slots=True, kw_only=True)
class Done(_Kinded):
    """Finished; the outcome says how."""

    kind: Literal["done"] = "done"
    outcome: MachineOutcome


MachineStep = Annotated[CallLLM | CallTools | Compact | Done, Field(discriminator="kind")]
