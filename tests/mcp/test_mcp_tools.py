"""MCP servers as tools, against real servers: the session goes through dispatch, hooks,
middleware and error results like any tool, and lands in the trace without its secrets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from loopctl import BareLoop
from loopctl.core import Message, ToolCall, ToolResult
from loopctl.driver import Hooks
from loopctl.testing import ScriptedClient
from loopctl.tools import Deny, NextTool
from loopctl.tools.mcp import McpServer, McpTool, schema_problems
from loopctl_sim.trace import TraceRecorder
from tests.mcp.conftest import NOTES_SERVER, SECRET, call


def _mcp_records(path: Path) -> list[dict[str, object]]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [r["data"] for r in records if r.get("type") == "io" and r.get("kind") == "mcp"]


def _results(messages: list[Message]) -> list[ToolResult]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolResult)]


def test_stdio_server_tools_run_through_the_pipeline_and_the_trace(tmp_path: Path) -> None:
    seen: list[str] = []

    async def count(call_: ToolCall, next_tool: NextTool) -> ToolResult:
        seen.append(call_.name)
        return await next_tool(call_)

    def no_crash(call_: ToolCall) -> Deny | None:
        return Deny("not allowed") if call_.name == "crash" else None

    trace = tmp_path / "notes.jsonl"
    with McpServer.stdio(
        "notes", sys.executable, [NOTES_SERVER], env={"NOTES_SECRET": SECRET}
    ) as notes:
        tools = notes.tools()
        assert all(isinstance(t, McpTool) for t in tools)
        names = ["add_note", "get_note", "whoami", "leak", "crash", "forget"]
        assert [t.name for t in tools] == names
        client = ScriptedClient(
            [
                call(1, "add_note", title="a", text="hello"),
                call(2, "get_note", title="a"),
                call(3, "whoami"),
                call(4, "get_note", title=3),
                call(5, "crash"),
                call(6, "leak"),
                Message.assistant("done"),
            ]
        )
        recorder = TraceRecorder(trace)
        loop = BareLoop(
            client,
            tools=tools,
            hooks=Hooks(pre_tool=[no_crash]),
            middleware=[count],
            observers=[recorder],
        )
        result = loop.run_sync("take notes")
        recorder.close()
    assert result.outcome.kind == "completed"
    results = _results(result.messages)
    assert [r.content for r in results[:3]] == ["saved a", "hello", "credential present"]
    assert results[3].is_error and "title: 3 is not of type 'string'" in results[3].content
    assert results[4].is_error and "not allowed" in results[4].content  # the hook denied it
    assert results[5].content == f"my token is {SECRET}"  # the model saw what the server said
    assert seen == ["add_note", "get_note", "whoami", "get_note", "leak"]  # not the denied
    # the model was told the server's schemas
    first = client.requests[0]
    specs = {t.name: t.parameters for t in first.tools}
    assert specs["add_note"]["required"] == ["title", "text"]
    records = _mcp_records(trace)
    assert records[0]["op"] == "tools" and records[0]["server"] == "notes"
    assert [r["tool"] for r in records[1:]] == ["add_note", "get_note", "whoami", "leak"]
    assert SECRET not in trace.read_text() and NOTES_SERVER not in trace.read_text()
    assert "NOTES_SECRET" not in repr(notes)


def test_streamable_http_server_with_a_secret_header(http_notes: str, tmp_path: Path) -> None:
    trace = tmp_path / "http.jsonl"
    headers = {"Authorization": f"Bearer {SECRET}"}
    with McpServer.http("notes", http_notes, headers=headers, prefix="notes_") as notes:
        tools = notes.tools()
        assert "notes_get_note" in [t.name for t in tools]
        client = ScriptedClient(
            [
                call(1, "notes_add_note", title="x", text="over http"),
                call(2, "notes_get_note", title="x"),
                Message.assistant("done"),
            ]
        )
        recorder = TraceRecorder(trace)
        result = BareLoop(client, tools=tools, observers=[recorder]).run_sync("go")
        recorder.close()
    assert [r.content for r in _results(result.messages)] == ["saved x", "over http"]
    text = trace.read_text()
    assert SECRET not in text and http_notes not in text
    assert [r["op"] for r in _mcp_records(trace)] == ["tools", "result", "result"]


def test_the_published_time_server_over_stdio() -> None:
    args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
    with McpServer.stdio("time", sys.executable, args) as time_server:
        tools = {t.name: t for t in time_server.tools()}
        assert {"get_current_time", "convert_time"} <= set(tools)
        client = ScriptedClient(
            [
                call(
                    1,
                    "convert_time",
                    source_timezone="Europe/Oslo",
                    time="09:30",
                    target_timezone="Asia/Tokyo",
                ),
                call(
                    2,
                    "convert_time",
                    source_timezone="Mars/Olympus",
                    time="09:30",
                    target_timezone="UTC",
                ),
                Message.assistant("done"),
            ]
        )
        result = BareLoop(client, tools=list(tools.values())).run_sync("what time?")
    ok, bad = _results(result.messages)
    assert json.loads(ok.content)["time_difference"] == "+8.0h"
    assert bad.is_error and "Mars/Olympus" in bad.content


def test_a_server_that_never_answers_is_a_typed_error() -> None:
    """A process that never answers the handshake: ``tools()`` raises ``McpError`` naming it."""
    script = "import time,sys; sys.stdin.read(); time.sleep(60)"  # not an MCP server at all
    server = McpServer.stdio("mute", sys.executable, ["-c", script], connect_timeout=1.0)
    try:
        server.tools()
    except Exception as exc:  # a server that never answers the handshake: a typed error
        assert type(exc).__name__ == "McpError" and "'mute'" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("a mute server listed tools")
    finally:
        server.close()


def test_without_the_extra_import_works_and_use_says_how_to_install() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import loopctl, loopctl.tools.mcp\n"
        "from loopctl.tools.mcp import McpServer\n"
        "try:\n"
        "    McpServer.stdio('x', 'python').tools()\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "pip install 'loopctl[mcp]'" in done.stdout


def test_arguments_are_checked_against_the_servers_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"title": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
        "required": ["title"],
        "additionalProperties": False,
    }
    assert schema_problems(schema, {"title": "a", "n": 2}) == []
    assert schema_problems(schema, {"n": 0, "x": 1}) == [
        "(arguments): 'title' is a required property",
        "(arguments): Additional properties are not allowed ('x' was unexpected)",
        "n: 0 is less than the minimum of 1",
    ]
    # a schema the checker cannot use (an unresolvable $ref): the server judges the arguments
    assert schema_problems({"properties": {"a": {"$ref": "#/missing"}}}, {"a": 1}) == []
