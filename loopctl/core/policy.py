"""``MachinePolicy``: the settings the driver hands the brain on every ``next_step``.

The brain stores no settings; that is what keeps a snapshot pure data with nothing to drift out
of sync. The one exception is the tool names advertised with the last ``CallLLM``, which the next
``model_response`` classifies against.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

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

    @property
    def threshold_tokens(self) -> float:
        return self.context_window * self.compact_threshold

    @property
    def emergency_tokens(self) -> float:
        return self.context_window * self.emergency_threshold
