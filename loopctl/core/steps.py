"""The brain's vocabulary: the policy it is asked with, states it sits in, steps it answers,
outcomes it ends with.

``MachinePolicy`` comes with every ``next_step``: the brain stores no settings, which keeps a
snapshot pure data with nothing to drift out of sync (the one exception: the tool names
advertised with the last ``CallLLM``, which the next ``model_response`` classifies against).

The rest are frozen slotted dataclasses with their ``kind`` first, like the feeds: the brain
builds one or two at every step, and a dataclass checks nothing where a pydantic model validated
every field again (a driver turn: 382k instructions against 403k, cachegrind). pydantic
validates them by their annotations where a snapshot or a trace embeds them (discriminated on
``kind``, unknown keys refused) and writes the same JSON bytes. Dispatch on the type
(``isinstance`` or ``match``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from loopctl.core.errors import LoopError
from loopctl.core.messages import ToolCall

#: The brain keeps at most this many recorded calls; ``loop_window`` may not exceed it.
MAX_LOOP_WINDOW = 64

LoopAction = Literal["warn", "fail", "off"]


class MachinePolicy(BaseModel):
    """Frozen settings for one step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_turns: int = Field(200, ge=0)
    context_window: int = Field(128_000, gt=0)
    compact_threshold: float = Field(0.8, gt=0)
    emergency_threshold: float = Field(0.95, gt=0)
    tools: tuple[str, ...] = ()
    compact_now: bool = False
    loop_window: int = Field(12, ge=2, le=MAX_LOOP_WINDOW)
    loop_repeat_limit: int = Field(3, ge=2)
    loop_action: LoopAction = "warn"

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> MachinePolicy:
        if self.compact_threshold > self.emergency_threshold:
            raise ValueError("compact_threshold must not exceed emergency_threshold")
        return self

    # The lines as token counts: the least count at or over each (a count is whole, so it is
    # over the line exactly when it is over its ceiling); the driver reports an overflow with it.
    @property
    def threshold_tokens(self) -> int:
        return math.ceil(self.context_window * self.compact_threshold)

    @property
    def emergency_tokens(self) -> int:
        return math.ceil(self.context_window * self.emergency_threshold)


#: The states the brain sits in (a state's ``kind``); ``loopctl.core.machine``'s tables are keyed
#: by them.
StateKind = Literal["start", "awaiting_model", "awaiting_tools", "awaiting_compaction", "terminal"]


class CompactReason(StrEnum):
    """Why the brain asks for a compaction (in the order it checks them)."""

    MANUAL = "manual"
    EMERGENCY = "emergency"
    THRESHOLD_EXCEEDED = "threshold_exceeded"


class Strict:
    """The brain's plain data (states, steps, the exchange, the loop window): what pydantic is told
    when it validates one, where a snapshot or a trace embeds it: a key that is no field is an
    error."""

    __slots__ = ()
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")


@dataclass(frozen=True, slots=True, kw_only=True)
class Completed(Strict):
    kind: Literal["completed"] = "completed"
    final_text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancelled(Strict):
    kind: Literal["cancelled"] = "cancelled"


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxTurnsExceeded(Strict):
    kind: Literal["max_turns_exceeded"] = "max_turns_exceeded"


@dataclass(frozen=True, slots=True, kw_only=True)
class Failed(Strict):
    kind: Literal["failed"] = "failed"
    error: LoopError


MachineOutcome = Annotated[
    Completed | Cancelled | MaxTurnsExceeded | Failed, Field(discriminator="kind")
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Start(Strict):
    """Ready to answer the next step."""

    kind: Literal["start"] = "start"


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitingModel(Strict):
    kind: Literal["awaiting_model"] = "awaiting_model"
    turn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitingTools(Strict):
    kind: Literal["awaiting_tools"] = "awaiting_tools"
    turn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitingCompaction(Strict):
    kind: Literal["awaiting_compaction"] = "awaiting_compaction"
    reason: CompactReason


@dataclass(frozen=True, slots=True, kw_only=True)
class Terminal(Strict):
    """Finished; accepts no further input, ever."""

    kind: Literal["terminal"] = "terminal"
    outcome: MachineOutcome


MachineState = Annotated[
    Start | AwaitingModel | AwaitingTools | AwaitingCompaction | Terminal,
    Field(discriminator="kind"),
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallLLM(Strict):
    """Ask the model now; ``turn`` is the brain's count, the only turn ledger."""

    kind: Literal["call_llm"] = "call_llm"
    turn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CallTools(Strict):
    """Run these calls (never empty) and feed their results back in one message."""

    kind: Literal["call_tools"] = "call_tools"
    turn: int
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Compact(Strict):
    """Shrink the conversation first."""

    kind: Literal["compact"] = "compact"
    reason: CompactReason


@dataclass(frozen=True, slots=True, kw_only=True)
class Done(Strict):
    """Finished; the outcome says how."""

    kind: Literal["done"] = "done"
    outcome: MachineOutcome


MachineStep = Annotated[CallLLM | CallTools | Compact | Done, Field(discriminator="kind")]
