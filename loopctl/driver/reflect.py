"""Reflection: a second look after tool errors and loop warnings.

Deciding that a reflection is due is the driver's (after a results message holding errors, or when
the loop detector is about to warn); producing it may need a model call, so it lives behind this
protocol in the hands, with a no-op default. A returned message is injected before the next model
call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from loopctl.core import Conversation, LoopVerdict, Message, ToolResult


class ReflectionContext(BaseModel):
    """What prompted the reflection."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    turn: int
    errors: tuple[ToolResult, ...] = ()
    loop: LoopVerdict | None = None
    messages: Conversation = Conversation()  # the conversation so far (reads as a tuple)


class Reflector(Protocol):
    async def reflect(self, context: ReflectionContext) -> Message | None: ...


class NoReflector:
    """The default: never adds anything."""

    async def reflect(self, context: ReflectionContext) -> Message | None:
        return None


def reflection_due(results: Sequence[ToolResult], verdict: LoopVerdict | None) -> bool:
    return verdict is not None or any(r.is_error for r in results)
