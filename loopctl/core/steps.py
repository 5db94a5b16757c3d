"""The brain's vocabulary: the policy it is asked with, states it sits in, steps it answers,
outcomes it ends with.

``MachinePolicy`` comes with every ``next_step``: the brain stores no settings, which keeps a
snapshot pure data with nothing to drift out of sync (the one exception: the tool names
advertised with the last ``CallLLM``, which the next ``model_response`` classifies against).

The rest are frozen ``Data`` (msgspec ``Struct``s, ``data.py``) tagged by their ``kind``, a
class attribute written first: the brain builds one or two at every step, and building one
checks nothing. Dispatch on the type (``isinstance`` or ``match``).
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from loopctl.core.data import Data
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


class Completed(Data, frozen=True, kw_only=True, tag_field="kind", tag="completed"):
    kind: ClassVar[Literal["completed"]] = "completed"
    final_text: str


class Cancelled(Data, frozen=True, kw_only=True, tag_field="kind", tag="cancelled"):
    kind: ClassVar[Literal["cancelled"]] = "cancelled"


class MaxTurnsExceeded(Data, frozen=True, kw_only=True, tag_field="kind", tag="max_turns_exceeded"):
    kind: ClassVar[Literal["max_turns_exceeded"]] = "max_turns_exceeded"


class Failed(Data, frozen=True, kw_only=True, tag_field="kind", tag="failed"):
    kind: ClassVar[Literal["failed"]] = "failed"
    error: LoopError


MachineOutcome = Completed | Cancelled | MaxTurnsExceeded | Failed


class Start(Data, frozen=True, kw_only=True, tag_field="kind", tag="start"):
    """Ready to answer the next step."""

    kind: ClassVar[Literal["start"]] = "start"


class AwaitingModel(Data, frozen=True, kw_only=True, tag_field="kind", tag="awaiting_model"):
    kind: ClassVar[Literal["awaiting_model"]] = "awaiting_model"
    turn: int


class AwaitingTools(Data, frozen=True, kw_only=True, tag_field="kind", tag="awaiting_tools"):
    kind: ClassVar[Literal["awaiting_tools"]] = "awaiting_tools"
    turn: int


class AwaitingCompaction(
    Data, frozen=True, kw_only=True, tag_field="kind", tag="awaiting_compaction"
):
    kind: ClassVar[Literal["awaiting_compaction"]] = "awaiting_compaction"
    reason: CompactReason


class Terminal(Data, frozen=True, kw_only=True, tag_field="kind", tag="terminal"):
    """Finished; accepts no further input, ever."""

    kind: ClassVar[Literal["terminal"]] = "terminal"
    outcome: MachineOutcome


MachineState = Start | AwaitingModel | AwaitingTools | AwaitingCompaction | Terminal


class CallLLM(Data, frozen=True, kw_only=True, tag_field="kind", tag="call_llm"):
    """Ask the model now; ``turn`` is the brain's count, the only turn ledger."""

    kind: ClassVar[Literal["call_llm"]] = "call_llm"
    turn: int


class CallTools(Data, frozen=True, kw_only=True, tag_field="kind", tag="call_tools"):
    """Run these calls (never empty) and feed their results back in one message."""

    kind: ClassVar[Literal["call_tools"]] = "call_tools"
    turn: int
    calls: tuple[ToolCall, ...]


class Compact(Data, frozen=True, kw_only=True, tag_field="kind", tag="compact"):
    """Shrink the conversation first."""

    kind: ClassVar[Literal["compact"]] = "compact"
    reason: CompactReason


class Done(Data, frozen=True, kw_only=True, tag_field="kind", tag="done"):
    """Finished; the outcome says how."""

    kind: ClassVar[Literal["done"]] = "done"
    outcome: MachineOutcome


MachineStep = CallLLM | CallTools | Compact | Done
