"""Crashes the dispatcher hides: a tool, a tool hook or a tool middleware that raised.

The dispatcher turns any exception out of a tool call into an error result the model reads, so
the run goes on and nothing escapes it. As Hypothesis does for a test, a campaign takes every
such exception for a finding unless it was declared expected (``@tool(raises=ValueError)``;
``ToolError`` always is); a hook or a tool middleware declares none. ``CrashWatch`` reads them
from each call's ``tool_result`` event (``IoEvent.raised``).
"""

from __future__ import annotations

from collections.abc import Mapping

from loopctl.observe import IoEvent, LoopObserver
from loopctl.tools import ToolError


class Crash:
    """One exception the dispatcher turned into an error result: what raised it (``where``:
    ``tool``, ``pre-tool hook``, ``post-tool hook``, ``tool middleware``), its name (the tool's,
    the hook's) and the exception's type and text."""

    def __init__(self, where: str, name: str, error: BaseException) -> None:
        self.where = where
        self.name = name
        self.kind = type(error).__name__
        self.text = str(error)

    @property
    def code(self) -> str:
        """What a failure's signature holds: the same crash shrinks to the same code."""
        return f"{self.name}:{self.kind}"

    def __str__(self) -> str:
        said = f"{self.kind}: {self.text}" if self.text else self.kind
        if self.where == "tool":
            return (
                f"tool '{self.name}' raised {said}, an exception it does not declare (declare "
                "the ones it raises on purpose with @tool(raises=...); ToolError always is)"
            )
        return f"{self.where} {self.name} raised {said}"


class CrashWatch(LoopObserver):
    """Collects the crashes of the runs it observes (``crashes``, in order). ``expected`` gives
    each tool's declared exceptions (``Tool.raises``) by name."""

    def __init__(self, expected: Mapping[str, tuple[type[BaseException], ...]]) -> None:
        self.expected = expected
        self.crashes: list[Crash] = []

    def io(self, event: IoEvent) -> None:
        for where, name, error in event.raised:
            if where == "tool" and isinstance(error, (ToolError, *self.expected.get(name, ()))):
                continue
            self.crashes.append(Crash(where, name, error))
