"""Hooks and middleware: policy around every tool call, installed by the user.

- A pre-tool hook sees the call before it runs and answers ``Allow()``, ``Deny(reason)`` or
  ``Replace(arguments)`` (returning ``None`` counts as ``Allow()``). Hooks run in list order; a
  ``Replace`` is what the later hooks and the tool see; the first ``Deny`` stops the call and
  the model receives an error result carrying the reason.
- Middleware wraps the execution itself: ``async def mw(call, next) -> ToolResult``. The first
  in the list is outermost. ``next`` validates the arguments and runs the tool under its
  timeout, and always returns a ``ToolResult`` (tool failures arrive as ``is_error=True``
  results, never as exceptions), so middleware can retry, cache, time or rewrite.
- A post-tool hook sees the call and its result (errors and denials included) and may return a
  rewritten ``ToolResult``, or ``None`` to keep it. Post hooks run in list order, each on the
  previous one's output.

Hooks may be sync or async; sync hooks run on the event loop, so keep them quick.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from loopctl.core import ToolCall, ToolResult

__all__ = [
    "Allow",
    "Deny",
    "NextTool",
    "PostToolHook",
    "PreToolDecision",
    "PreToolHook",
    "Replace",
    "ToolMiddleware",
]


@dataclass(frozen=True, slots=True)
class Allow:
    """Let the call go ahead unchanged."""


@dataclass(frozen=True, slots=True)
class Deny:
    """Refuse the call; ``reason`` is told to the model."""

    reason: str


@dataclass(frozen=True, slots=True)
class Replace:
    """Run the call with these arguments instead of the model's."""

    arguments: dict[str, Any] = field(default_factory=dict)


PreToolDecision: TypeAlias = Allow | Deny | Replace | None
PreToolHook: TypeAlias = Callable[[ToolCall], PreToolDecision | Awaitable[PreToolDecision]]
PostToolHook: TypeAlias = Callable[
    [ToolCall, ToolResult], ToolResult | Awaitable[ToolResult | None] | None
]
NextTool: TypeAlias = Callable[[ToolCall], Awaitable[ToolResult]]
ToolMiddleware: TypeAlias = Callable[[ToolCall, NextTool], Awaitable[ToolResult]]
