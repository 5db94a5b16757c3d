"""Loop detection: a pure verdict over a bounded window of recorded calls.

The brain records every call of each completed exchange as a key: the tool's name and a 64-bit
hash of the canonical JSON of its arguments, so the window (which every snapshot and digest
carries) stays small whatever the arguments hold. ``tool_results`` only records; the verdict is
taken in ``next_step``, where the policy is at hand, once per exchange (``unjudged`` counts the
calls not judged yet). Within the last ``loop_window`` recorded calls, two patterns are loops:
a call of the latest exchange that occurs ``loop_repeat_limit`` times or more (repeat), and
the last four calls A, B, A, B with A != B (ping-pong). Judging only the latest exchange means
a model that changes course after a warning is not failed for the repeats still in the window.
The brain holds one ``LoopWindow`` and replaces it when it records or judges. On a warning the
brain appends ``loop_note``'s text to pending.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Annotated, Final, Literal

from msgspec import Meta
from pydantic import BaseModel, ConfigDict

from loopctl.core.data import Data
from loopctl.core.messages import ToolCall
from loopctl.core.steps import MAX_LOOP_WINDOW, MachinePolicy

#: NaN and infinity are refused: JSON cannot hold them. No circular check: arguments come from
#: JSON (a circular dict built by hand hits the recursion limit, reported like NaN).
_CANONICAL: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), default=str, allow_nan=False, check_circular=False
)
#: Hex digits of the arguments' hash at the end of a key, after ``#``.
_HASH_HEX: Final = 16
_EMPTY: Final = hashlib.blake2b(b"{}", digest_size=_HASH_HEX // 2).hexdigest()


def loop_note(what: str) -> str:
    """The loop warning's text, for a verdict described as ``what``."""
    return (
        f"[loopctl] Loop warning: {what}. Repeating it will not help: change approach or give "
        "your final answer. A further repeat ends the run."
    )


def call_key(call: ToolCall) -> str:
    """``name#hash``: the tool's name and a 64-bit hash of the canonical JSON of the arguments.

    Equal keys mean the same call (two different argument sets share a key with probability
    2**-64). Raises ``ValueError`` for arguments holding NaN or infinity (the brain refuses
    such a call).
    """
    arguments = call.arguments
    if not arguments:
        return call.name + "#" + _EMPTY
    try:
        text = _CANONICAL.encode(arguments).encode()  # ASCII: the encoder escapes the rest
    except RecursionError:
        raise ValueError("the arguments are nested too deeply (or circular)") from None
    return call.name + "#" + hashlib.blake2b(text, digest_size=_HASH_HEX // 2).hexdigest()


def _tool_of(key: str) -> str:
    return key[: -_HASH_HEX - 1]


class LoopVerdict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    pattern: Literal["repeat", "ping_pong"]
    tool: str
    count: int

    def describe(self) -> str:
        if self.pattern == "repeat":
            return f"tool '{self.tool}' was called {self.count} times with the same arguments"
        return f"tools are alternating in a ping-pong ({self.tool}) without progress"


class LoopWindow(Data, frozen=True, kw_only=True):
    """The detector's part of the brain: the last recorded call keys, how many of the latest
    are not judged yet, and whether a warning was given."""

    calls: Annotated[tuple[str, ...], Meta(max_length=MAX_LOOP_WINDOW)] = ()
    unjudged: Annotated[int, Meta(ge=0)] = 0
    warned: bool = False

    def recorded(self, keys: Sequence[str]) -> LoopWindow:
        """The window with one exchange's call keys recorded (the last MAX_LOOP_WINDOW kept)."""
        calls = (*self.calls, *keys)[-MAX_LOOP_WINDOW:]
        return LoopWindow(calls=calls, unjudged=min(len(keys), len(calls)), warned=self.warned)

    def judge(self, policy: MachinePolicy) -> LoopVerdict | None:
        """The verdict on the latest ``unjudged`` calls, or None. Cost is bounded by the window,
        not the history."""
        calls, unjudged = self.calls, self.unjudged
        if policy.loop_action == "off" or unjudged == 0:
            return None
        recent = calls[-policy.loop_window :]
        for key in dict.fromkeys(calls[-unjudged:]):
            count = recent.count(key)
            if count >= policy.loop_repeat_limit:
                return LoopVerdict(pattern="repeat", tool=_tool_of(key), count=count)
        tail = recent[-4:]
        if len(tail) == 4 and tail[0] == tail[2] and tail[1] == tail[3] and tail[0] != tail[1]:
            return LoopVerdict(
                pattern="ping_pong", tool=f"{_tool_of(tail[0])} <-> {_tool_of(tail[1])}", count=2
            )
        return None
