"""Settings of the hands, and the one place where they become the brain's policy: neither config
is stored in the brain; ``build_policy`` turns them into the ``MachinePolicy`` of each step, so a
change takes effect on the very next step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from loopctl.core import MAX_LOOP_WINDOW, LoopAction, MachinePolicy


class RetryConfig(BaseModel):
    """How retryable provider errors are retried (the official SDKs' defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    max_retries: int = Field(2, ge=0)
    base_delay: float = Field(0.5, ge=0)
    max_delay: float = Field(8.0, ge=0)
    max_retry_after: float = Field(120.0, ge=0)
    jitter: float = Field(0.25, ge=0, le=1)


class SessionConfig(BaseModel):
    """The model side of a conversation: what every request carries."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    system_prompt: str | None = None
    context_window: int = Field(128_000, gt=0)
    options: dict[str, Any] = Field(default_factory=dict)


class RunConfig(BaseModel):
    """Limits and behaviour of one run."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    max_turns: int = Field(200, ge=0)
    compact_threshold: float = Field(0.8, gt=0)
    emergency_threshold: float = Field(0.95, gt=0)
    loop_window: int = Field(12, ge=2, le=MAX_LOOP_WINDOW)
    loop_repeat_limit: int = Field(3, ge=2)
    loop_action: LoopAction = "warn"
    retry: RetryConfig = RetryConfig()
    tool_timeout: float | None = Field(60.0, gt=0)


def build_policy(
    session: SessionConfig,
    run: RunConfig,
    *,
    tools: Sequence[str],
    compact_now: bool = False,
) -> MachinePolicy:
    """The brain's settings for the next step: configs plus the driver's current extras."""
    return MachinePolicy(
        max_turns=run.max_turns,
        context_window=session.context_window,
        compact_threshold=run.compact_threshold,
        emergency_threshold=run.emergency_threshold,
        tools=tuple(tools),
        compact_now=compact_now,
        loop_window=run.loop_window,
        loop_repeat_limit=run.loop_repeat_limit,
        loop_action=run.loop_action,
    )
