"""Loop detection: a pure verdict over a bounded window of recorded calls.

The brain records every call of each completed exchange as a key (name plus canonical JSON of the
arguments). ``tool_results`` only records; the verdict is taken in ``next_step``, where the policy
is at hand, and only once per exchange (``unjudged`` counts the calls not judged yet).

Two patterns are loops:
- repeat: a call of the latest exchange occurs ``loop_repeat_limit`` times or more within the last
  ``loop_window`` recorded calls;
- ping-pong: the last four recorded calls are A, B, A, B with A != B.

Judging only the latest exchange means a model that changes course after a warning is not failed
for the repeats still sitting in the window.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from loopctl.core.messages import ToolCall
from loopctl.core.policy import MAX_LOOP_WINDOW, MachinePolicy

__all__ = ["LoopVerdict", "LoopWindow", "call_key", "judge"]


def call_key(call: ToolCall) -> str:
    """Name plus canonical arguments: equal keys mean the same call."""
    return call.name + "\x00" + _canonical(call.arguments)


def _canonical(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)


class LoopWindow(BaseModel):
    """The detector's part of the brain's saved state."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    calls: tuple[str, ...] = ()
    unjudged: int = 0
    warned: bool = False

    def record(self, calls: tuple[ToolCall, ...] | list[ToolCall]) -> LoopWindow:
        keys = self.calls + tuple(call_key(c) for c in calls)
        return LoopWindow(calls=keys[-MAX_LOOP_WINDOW:], unjudged=len(calls), warned=self.warned)


class LoopVerdict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    pattern: Literal["repeat", "ping_pong"]
    tool: str
    count: int

    def describe(self) -> str:
        if self.pattern == "repeat":
            return f"tool '{self.tool}' was called {self.count} times with the same arguments"
        return f"tools are alternating in a ping-pong ({self.tool}) without progress"


def judge(window: LoopWindow, policy: MachinePolicy) -> LoopVerdict | None:
    """The verdict on the latest exchange, or None. Cost is bounded by the window, not history."""
    if policy.loop_action == "off" or window.unjudged == 0:
        return None
    recent = window.calls[-policy.loop_window :]
    latest = window.calls[-window.unjudged :]
    for key in dict.fromkeys(latest):
        count = recent.count(key)
        if count >= policy.loop_repeat_limit:
            return LoopVerdict(pattern="repeat", tool=key.split("\x00", 1)[0], count=count)
    tail = window.calls[-4:]
    if len(tail) == 4 and tail[0] == tail[2] and tail[1] == tail[3] and tail[0] != tail[1]:
        names = f"{tail[0].split(chr(0), 1)[0]} <-> {tail[1].split(chr(0), 1)[0]}"
        return LoopVerdict(pattern="ping_pong", tool=names, count=2)
    return None
