"""Errors in two directions (after h11's local/remote split), and the root of loopctl's tree.

    LoopctlError            the root of every exception loopctl raises (the whole tree is drawn
     |                      in ``loopctl.errors``); here because the brain may import only core
     +-- ProtocolError      the driver used the brain wrongly; raised, never stored, state unchanged
    LoopError (a record)    the world did something bad; stored inside Terminal(Failed(error))

``LoopError`` is data, not an exception, because it must survive a snapshot: a saved failed
machine restores as a failed machine with the same error.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ErrorKind = Literal[
    "network",
    "timeout",
    "rate_limited",
    "overloaded",
    "provider",
    "auth",
    "context_overflow",
    "loop_detected",
    "tool",
    "compaction",
    "cancelled_io",
    "internal",
]


class LoopError(BaseModel):
    """A serializable record of what went wrong in the world."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: ErrorKind
    message: str
    retryable: bool = False
    status: int | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.kind}{status}: {self.message}"


class LoopctlError(Exception):
    """The root of every exception loopctl raises: ``except LoopctlError`` catches them all and
    nothing else. A subclass may have a second, built-in base where callers catch that too
    (``ToolArgumentsError`` is a ``ValueError``)."""


class ProtocolError(LoopctlError):
    """The driver fed the brain something it cannot accept in its current state.

    The machine is left exactly as it was. ``feed`` and ``state`` name where it happened.
    """

    def __init__(self, message: str, *, feed: str = "", state: str = "") -> None:
        super().__init__(message)
        self.feed = feed
        self.state = state
