"""``ToolRegistry``: the tools one loop can run, by name.

The registry is what the driver advertises (``names()`` goes into ``MachinePolicy.tools``,
``specs()`` into the model request) and what ``dispatch`` resolves calls against, so one
object keeps the two in step. Names are unique: two tools with one name would make the model's
choice ambiguous, so a duplicate is rejected when the registry is built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from loopctl.api import ToolSpec
from loopctl.tools.decorator import Tool

__all__ = ["ToolRegistry"]

AnyTool = Tool[..., Any]


class ToolRegistry:
    """An ordered, immutable set of tools keyed by name.

    Plain functions are accepted too and wrapped with ``@tool`` defaults, so
    ``ToolRegistry([add, search])`` works whether or not they were decorated.
    """

    __slots__ = ("_names", "_specs", "_tools")

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
