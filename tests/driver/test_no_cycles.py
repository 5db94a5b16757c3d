"""A finished run leaves no reference cycle: the loop, its brain and its whole conversation are
freed as soon as the last reference goes, not when the cyclic garbage collector next runs.

A loop that pointed at itself (a model caller holding the loop's bound method, a tool pipeline
holding its own) kept every finished run alive until a collector pass, and those passes were a
twentieth of a simulated run. The collector is off while each case runs, so only reference
counting can free the objects."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from loopctl.core import ToolCall
from loopctl.driver.loop import BareLoop, Hooks
from loopctl.observe import IoEvent, LoopObserver
from loopctl.testing import ScriptedClient
from loopctl.tools import tool
from tests.driver.helpers import answer, ask, call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def echo(text: str) -> str:
    """Say it back."""
    return text


class _Seen(LoopObserver):
    def __init__(self) -> None:
        self.kinds: list[str] = []

    def io(self, event: IoEvent) -> None:
        self.kinds.append(event.kind)


async def _passthrough(call_, next_tool):  # type: ignore[no-untyped-def]
    return await next_tool(call_)


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"observers": [_Seen()]},
        {"middleware": [_passthrough]},
        {"observers": [_Seen()], "middleware": [_passthrough, _passthrough]},
    ],
    ids=["bare", "observed", "middleware", "both"],
)
def test_a_finished_run_is_freed_by_reference_counting(no_collector: None, options: dict) -> None:
    client = ScriptedClient(
        [ask(call("c1", "add", a=1, b=2), call("c2", "echo", text="hi")), answer("3, hi")]
    )
    seen: list[str] = []

    def hook(c: ToolCall) -> None:  # a pre-tool hook, held by the loop's tool pipeline only
        seen.append(c.name)

    loop = BareLoop(client, [add, echo], hooks=Hooks(pre_tool=[hook]), **options)
    result = loop.run_sync("go")
    assert result.final_text == "3, hi"
    assert seen == ["add", "echo"]
    # what the loop alone holds: the client (held by its model caller) and the hook
    gone = [weakref.ref(x) for x in (loop, client, hook)]
    del loop, client, hook
    assert [ref() for ref in gone] == [None, None, None]


def test_observers_assigned_later_are_told_of_model_replies() -> None:
    # The loop's observers list is shared with the part that reports model calls: assigning a
    # new list (or appending) after construction reaches it too.
    client = ScriptedClient([ask(call("c1", "add", a=1, b=2)), answer("3")])
    loop = BareLoop(client, [add])
    first, second = _Seen(), _Seen()
    loop.observers = [first]
    loop.observers.append(second)
    loop.run_sync("go")
    assert first.kinds.count("model_reply") == 2
    assert second.kinds == first.kinds
    assert loop.observers == [first, second]
