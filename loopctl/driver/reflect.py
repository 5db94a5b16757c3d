"""Reflection: a second look after tool errors and loop warnings (the driver decides it is due).
Producing it may need a model call, so it lives behind this protocol in the hands; a returned
message is injected before the next model call.
"""

from __future__ import annotations

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
