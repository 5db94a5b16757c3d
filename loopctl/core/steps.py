"""The brain's vocabulary: states it sits in, steps it answers, outcomes it ends with.

All are small frozen models, discriminated on ``kind`` so that a snapshot or a trace
round-trips them exactly. Dispatch on their type (``isinstance`` or ``match``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from loopctl.core.errors import LoopError
from loopctl.core.messages import ToolCall

__all__ = [
    "STATES",
    "AwaitingCompaction",
    "AwaitingModel",
    "AwaitingTools",
    "CallLLM",
    "CallTools",
    "Cancelled",
    "Compact",
    "CompactReason",
    "Completed",
    "Done",
    "Failed",
    "MachineOutcome",
    "MachineState",
    "MachineStep",
    "MaxTurnsExceeded",
    "Start",
    "StateKind",
    "Terminal",
]

#: The states the brain sits in (a state's ``kind``); ``loopctl.core.machine``'s tables are keyed
#: by them.
StateKind = Literal["start", "awaiting_model", "awaiting_tools", "awaiting_compaction", "terminal"]
STATES: Final[tuple[StateKind, ...]] = (
    "start",
    "awaiting_model",
    "awaiting_tools",
    "awaiting_compaction",
    "terminal",
)

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class CompactReason(StrEnum):
    """Why the brain asks for a compaction (in the order it checks them)."""

    MANUAL = "manual"
    EMERGENCY = "emergency"
    THRESHOLD_EXCEEDED = "threshold_exceeded"


# --- outcomes ---------------------------------------------------------------------------


class Completed(BaseModel):
    model_config = _FROZEN
    kind: Literal["completed"] = "completed"
    final_text: str


class Cancelled(BaseModel):
    model_config = _FROZEN
    kind: Literal["cancelled"] = "cancelled"


class MaxTurnsExceeded(BaseModel):
    model_config = _FROZEN
    kind: Literal["max_turns_exceeded"] = "max_turns_exceeded"


class Failed(BaseModel):
    model_config = _FROZEN
    kind: Literal["failed"] = "failed"
    error: LoopError


MachineOutcome = Annotated[
    Completed | Cancelled | MaxTurnsExceeded | Failed, Field(discriminator="kind")
]

# --- states -----------------------------------------------------------------------------


class Start(BaseModel):
    """Ready to answer the next step."""

    model_config = _FROZEN
    kind: Literal["start"] = "start"


class AwaitingModel(BaseModel):
    model_config = _FROZEN
    kind: Literal["awaiting_model"] = "awaiting_model"
    turn: int


class AwaitingTools(BaseModel):
    model_config = _FROZEN
    kind: Literal["awaiting_tools"] = "awaiting_tools"
    turn: int


class AwaitingCompaction(BaseModel):
    model_config = _FROZEN
    kind: Literal["awaiting_compaction"] = "awaiting_compaction"
    reason: CompactReason


class Terminal(BaseModel):
    """Finished; accepts no further input, ever."""

    model_config = _FROZEN
    kind: Literal["terminal"] = "terminal"
    outcome: MachineOutcome


MachineState = Annotated[
    Start | AwaitingModel | AwaitingTools | AwaitingCompaction | Terminal,
    Field(discriminator="kind"),
]

# --- steps ------------------------------------------------------------------------------


class CallLLM(BaseModel):
    """Ask the model now; ``turn`` is the brain's count, the only turn ledger."""

    model_config = _FROZEN
    kind: Literal["call_llm"] = "call_llm"
    turn: int


class CallTools(BaseModel):
    """Run these calls (never empty) and feed their results back in one message."""

    model_config = _FROZEN
    kind: Literal["call_tools"] = "call_tools"
    turn: int
    calls: tuple[ToolCall, ...]


class Compact(BaseModel):
    """Shrink the conversation first."""

    model_config = _FROZEN
    kind: Literal["compact"] = "compact"
    reason: CompactReason


class Done(BaseModel):
    """Finished; the outcome says how."""

    model_config = _FROZEN
    kind: Literal["done"] = "done"
    outcome: MachineOutcome


MachineStep = Annotated[CallLLM | CallTools | Compact | Done, Field(discriminator="kind")]
