"""Tool crashes reach the fuzz checker through the observer seam (``IoEvent.raised``), not the
logs: what raised, its name and the exception object, and ``CrashWatch`` keeps the undeclared."""

from __future__ import annotations

import asyncio

from loopctl import BareLoop, Message, ToolCall, tool
from loopctl.core import ToolResult
from loopctl.driver import Hooks
from loopctl.observe import IoEvent, LoopObserver
from loopctl.testing import ScriptedClient
from loopctl_sim.fuzz.agent_checks import CrashWatch


@tool(raises=KeyError)
def lookup(key: str) -> str:
    """Raises a declared KeyError, or an undeclared ZeroDivisionError for ``zero``."""
    if key == "zero":
        return str(1 / 0)
    raise KeyError(key)


def audit(call: ToolCall, result: ToolResult) -> None:
    """A post-tool hook with a bug in it."""
    raise RuntimeError("audit broke")


class Events(LoopObserver):
    def __init__(self) -> None:
        self.events: list[IoEvent] = []

    def io(self, event: IoEvent) -> None:
        self.events.append(event)


def _run(*observers: LoopObserver) -> None:
    calls = [
        ToolCall(id="c1", name="lookup", arguments={"key": "missing"}),
        ToolCall(id="c2", name="lookup", arguments={"key": "zero"}),
    ]
    client = ScriptedClient([Message.assistant(tool_calls=calls), Message.assistant("done")])
    loop = BareLoop(
        client, tools=[lookup], hooks=Hooks(post_tool=[audit]), observers=list(observers)
    )
    asyncio.run(loop.run("go"))


def test_a_tool_result_event_carries_the_exceptions_turned_into_it() -> None:
    seen = Events()
    _run(seen)
    results = [e for e in seen.events if e.kind == "tool_result"]
    assert [e.data["id"] for e in results] == ["c1", "c2"]
    first, second = (
        [(where, name, type(error).__name__) for where, name, error in e.raised] for e in results
    )
    assert first == [("tool", "lookup", "KeyError"), ("post-tool hook", "audit", "RuntimeError")]
    assert second == [
        ("tool", "lookup", "ZeroDivisionError"),
        ("post-tool hook", "audit", "RuntimeError"),
    ]
    assert all(not e.raised for e in seen.events if e.kind != "tool_result")


def test_the_crash_watch_keeps_what_the_tools_do_not_declare() -> None:
    watch = CrashWatch({"lookup": (KeyError,)})
    _run(watch)
    assert [str(c) for c in watch.crashes] == [
        "post-tool hook audit raised RuntimeError: audit broke",
        "tool 'lookup' raised ZeroDivisionError: division by zero, an exception it does not "
        "declare (declare the ones it raises on purpose with @tool(raises=...); ToolError "
        "always is)",
        "post-tool hook audit raised RuntimeError: audit broke",
    ]
    assert [c.code for c in watch.crashes] == [
        "audit:RuntimeError",
        "lookup:ZeroDivisionError",
        "audit:RuntimeError",
    ]
