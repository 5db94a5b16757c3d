"""An agent for the kill -9 tests: deterministic from the request alone (so a resumed process,
which consumed none of the original's answers, gets the same ones), four exchanges (one of two
parallel calls), no usage reported (so the driver's own token counts are in the brain), and a
tool that logs every execution (``LOOPCTL_TEST_TOOL_LOG``), to count runs per call id."""

from __future__ import annotations

import os
from typing import Any

from loopctl import BareLoop, Message, ToolCall, tool
from loopctl.api import ModelRequest
from loopctl.testing import FunctionClient


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    log = os.environ.get("LOOPCTL_TEST_TOOL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"add:{a}:{b}\n")
    return a + b


def answer(request: ModelRequest) -> Message:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn == 0:
        return Message.assistant(
            "first", tool_calls=[ToolCall(id="c1", name="add", arguments={"a": 1, "b": 1})]
        )
    if turn == 1:
        return Message.assistant(
            "two at once",
            tool_calls=[
                ToolCall(id="c2", name="add", arguments={"a": 2, "b": 2}),
                ToolCall(id="c3", name="add", arguments={"a": 3, "b": 3}),
            ],
        )
    if turn in (2, 3):
        n = turn + 2
        return Message.assistant(
            f"more {n}", tool_calls=[ToolCall(id=f"c{n}", name="add", arguments={"a": n, "b": n})]
        )
    return Message.assistant("the sums are 2, 4, 6, 8 and 10")


def build(**kwargs: Any) -> BareLoop:
    return BareLoop(FunctionClient(answer), tools=[add], **kwargs)
