"""``ToolRegistry``: the tools one loop can run, by name: what the driver advertises (``names()``
to the brain, ``specs()`` to the model) and what ``dispatch`` resolves calls against, so one
object keeps the two in step. A duplicate name (an ambiguous choice for the model) is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from loopctl.api import ToolSpec
from loopctl.observe import IoEvent
from loopctl.tools.decorator import Tool

__all__ = ["ToolRegistry"]

AnyTool = Tool[..., Any]


class ToolRegistry:
    """An ordered, immutable set of tools keyed by name (plain functions get ``@tool``'s
    defaults)."""

    __slots__ = ("_names", "_sources", "_specs", "_tools")

    def __init__(self, tools: Iterable[AnyTool | Callable[..., Any]] = ()) -> None:
        by_name: dict[str, AnyTool] = {}
        for item in tools:
            entry = item if isinstance(item, Tool) else Tool(item)
            if entry.name in by_name:
                raise ValueError(f"duplicate tool name {entry.name!r}: tool names must be unique")
            by_name[entry.name] = entry
        self._tools = by_name
        # The registry never changes: what is advertised every turn is worked out once.
        self._names = tuple(by_name)
        self._specs = tuple(t.spec for t in by_name.values())
        # Where tools come from a source with a session of its own (an MCP server), the source
        # tells each run what it advertised: found once, each source once.
        sources: list[Any] = []
        for entry in by_name.values():
            source = getattr(entry, "source", None)
            if callable(getattr(source, "announce", None)) and all(
                s is not source for s in sources
            ):
                sources.append(source)
        self._sources = tuple(sources)

    def announcements(self) -> list[IoEvent]:
        """What the tools' sources report at the start of every run (an MCP server's tool
        list), so the run's trace holds it."""
        events: list[IoEvent] = []
        for source in self._sources:
            events.extend(source.announce())
        return events

    def names(self) -> tuple[str, ...]:
        """Tool names in registration order (what the brain classifies calls against)."""
        return self._names

    def specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told, in registration order."""
        return self._specs

    def get(self, name: str) -> AnyTool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[AnyTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._tools)!r})"
