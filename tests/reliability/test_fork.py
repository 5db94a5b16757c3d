"""A sync tool runs in a process forked from one that already ran sync tools (the tool thread
pool is not inherited half-alive: the parent's workers do not exist in the child)."""

from __future__ import annotations

import asyncio
import os

from loopctl import BareLoop, Message, ToolCall, tool
from loopctl.testing import ScriptedClient


@tool(timeout=10)
def double(x: int) -> int:
    """Double x."""
    return 2 * x


def run_once() -> str:
    client = ScriptedClient(
        [
            Message.assistant(tool_calls=[ToolCall(id="c1", name="double", arguments={"x": 21})]),
            Message.assistant("done"),
        ]
    )
    loop = BareLoop(client, tools=[double])
    asyncio.run(loop.run("go"))
    return loop.machine.history[2].tool_results[0].content


def test_a_sync_tool_runs_in_a_forked_child() -> None:
    assert run_once() == "42"  # the parent's pool now has an idle worker
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, run_once().encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    answer = os.read(read, 100).decode()
    os.close(read)
    assert os.WIFEXITED(status)
    assert answer == "42"  # not "tool 'double' timed out after 10.0 s"
