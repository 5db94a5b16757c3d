"""A trace of an agent with an MCP server replays with the server absent (recorded tools), and
with live tools names the server and the tool whose result changed; MCP transport faults end the
run typed and their traces replay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl import BareLoop
from loopctl.api import ApiClient
from loopctl.core import Message, ToolResult
from loopctl.observe import LoopObserver
from loopctl.testing import ScriptedClient
from loopctl.tools.mcp import McpServer
from loopctl_sim.cli import main as sim_main
from loopctl_sim.replay import replay_agent
from loopctl_sim.sim.mcp_faults import McpFault, faulting, with_fault
from loopctl_sim.trace import TraceRecorder
from tests.mcp.conftest import NOTES_SERVER, SECRET, call

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "examples" / "mcp_agent" / "traces" / "clock.jsonl"


def _agent(env: dict[str, str]) -> object:
    server = McpServer.stdio("notes", sys.executable, [NOTES_SERVER], env=env, timeout=5.0)

    def build(client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()) -> BareLoop:
        assert client is not None
        return BareLoop(client, tools=server.tools(), observers=observers)

    build.server = server  # type: ignore[attr-defined]
    return build


def _script() -> ScriptedClient:
    return ScriptedClient(
        [
            call(1, "add_note", title="a", text="hello"),
            call(2, "whoami"),
            call(3, "get_note", title="a"),
            Message.assistant("done"),
        ]
    )


def _record(path: Path, build: object) -> None:
    recorder = TraceRecorder(path)
    build(client=_script(), observers=[recorder]).run_sync("take notes")  # type: ignore[operator]
    recorder.close()


def _mcp_data(path: Path) -> list[dict[str, object]]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [r["data"] for r in records if r.get("type") == "io" and r.get("kind") == "mcp"]


def _refuse_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, any attempt to reach a real MCP server fails the test."""

    def refuse(self: McpServer) -> None:
        raise AssertionError(f"MCP server '{self.name}' was started during a recorded replay")

    monkeypatch.setattr(McpServer, "open_live", refuse)


def test_recorded_tools_replay_with_the_server_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "notes.jsonl"
    recording = _agent({"NOTES_SECRET": SECRET})
    _record(trace, recording)
    recording.server.close()  # type: ignore[attr-defined]
    _refuse_servers(monkeypatch)
    result = replay_agent(trace, _agent({}), tools="recorded")
    assert result.ok, result.summary()


def test_live_tools_name_the_server_and_tool_whose_result_changed(tmp_path: Path) -> None:
    trace = tmp_path / "notes.jsonl"
    recording = _agent({"NOTES_SECRET": SECRET})
    _record(trace, recording)
    recording.server.close()  # type: ignore[attr-defined]
    same = replay_agent(trace, _agent({"NOTES_SECRET": SECRET}), tools="live")
    assert same.ok, same.summary()
    changed = replay_agent(trace, _agent({}), tools="live")  # whoami now says no credential
    assert not changed.ok
    assert any("MCP server 'notes', tool 'whoami'" in note for note in changed.notes)


def test_live_tools_name_the_tool_gone_from_the_servers_list(tmp_path: Path) -> None:
    trace = tmp_path / "notes.jsonl"
    recording = _agent({"NOTES_SECRET": SECRET})
    _record(trace, recording)
    recording.server.close()  # type: ignore[attr-defined]
    changed = replay_agent(trace, _agent({"NOTES_HIDE": "crash"}), tools="live")
    assert not changed.ok  # the model is told of other tools: the first request differs
    assert changed.notes.count("MCP server 'notes': tool 'crash' is gone") == 1
    assert "MCP server 'notes'" in changed.summary()


def test_the_shipped_example_replays_with_the_server_absent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _refuse_servers(monkeypatch)
    monkeypatch.chdir(ROOT)
    args = ["replay", str(SHIPPED), "--agent", "examples.mcp_agent.agent:build"]
    outcome = CliRunner().invoke(sim_main, [*args, "--tools", "recorded"])
    assert outcome.exit_code == 0, outcome.output
    assert "ok:" in outcome.output


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (McpFault("die", at_call=2), "MCP server 'notes' stopped during the call to 'whoami'"),
        (McpFault("malformed", at_call=2), "MCP server 'notes' sent a malformed result"),
        (
            McpFault("tools_change", at_call=2, drop="get_note"),
            "MCP server 'notes' no longer offers tool 'get_note'",
        ),
        (McpFault("slow", at_call=2, delay=600.0), "tool 'whoami' timed out after 2.0 s"),
    ],
    ids=["die", "malformed", "tools_change", "slow"],
)
def test_transport_faults_end_typed_and_replay(
    fault: McpFault, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    timeout = 2.0 if fault.kind == "slow" else None  # only the slow server is timed out
    base = McpServer.stdio("notes", sys.executable, [NOTES_SERVER], timeout=timeout)
    faulty = with_fault(base, fault)

    def build(client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()) -> BareLoop:
        assert client is not None
        return BareLoop(client, tools=faulty.tools(), observers=observers)

    trace = tmp_path / f"{fault.kind}.jsonl"
    recorder = TraceRecorder(trace)
    result = build(client=_script(), observers=[recorder]).run_sync("take notes")
    recorder.close()
    faulty.close()
    assert result.outcome.kind == "completed"
    errors = [p.content for m in result.messages for p in m.parts if isinstance(p, ToolResult)]
    assert any(expected in e for e in errors), errors
    if fault.kind == "tools_change":
        changes = [r for r in _mcp_data(trace) if r["op"] == "tools" and "removed" in r]
        assert [c["removed"] for c in changes] == [["get_note"]]
    _refuse_servers(monkeypatch)
    replayed = replay_agent(trace, _agent({}), tools="recorded")
    assert replayed.ok, replayed.summary()


def test_faulting_reaches_the_servers_an_agent_factory_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A harness faults the agent's own server, by its name, without rebuilding the agent."""
    build = _agent({"NOTES_SECRET": SECRET})
    trace = tmp_path / "died.jsonl"
    with faulting({"notes": McpFault("die", at_call=1)}):
        _record(trace, build)
    build.server.close()  # type: ignore[attr-defined]
    text = trace.read_text()
    assert "MCP server 'notes' stopped during the call to 'add_note'" in text
    assert "MCP server 'notes' is not running" in text  # the later calls
    _refuse_servers(monkeypatch)
    replayed = replay_agent(trace, _agent({}), tools="recorded")
    assert replayed.ok, replayed.summary()


def test_recorded_through_loopctl_run_replays_with_the_server_absent(tmp_path: Path) -> None:
    """The example agent recorded as a user records it from the shell (``loopctl run --agent
    --trace``, its own client over HTTP against the local model server), then replayed by the
    command line in a process where the time server cannot start."""
    from examples.model_server import ModelServer

    trace = tmp_path / "clock.jsonl"
    key = "sk-clock-recording-key-0123456789"
    question = "when it is 23:15 in UTC, what time is it in Australia/Sydney?"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with ModelServer(api_key=key) as model:
        env.update(SKYWAY_BASE_URL=model.url, SKYWAY_API_KEY=key)
        loopctl = str(Path(sys.executable).parent / "loopctl")
        command = [loopctl, "run", question, "--agent", "examples.mcp_agent.agent:build"]
        done = subprocess.run(
            [*command, "--trace", str(trace)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    text = trace.read_text()
    assert key not in text
    assert [r["op"] for r in _mcp_data(trace)] == ["tools", "result"]
    # no server: the replaying process refuses to start one
    refuse = (
        "import sys; from loopctl.tools.mcp import McpServer\n"
        "def refuse(self, transport=None): raise SystemExit('a server was started')\n"
        "McpServer.open_live = refuse\n"
        "from loopctl_sim.cli import main; sys.argv[0] = 'loopctl-sim'; main()\n"
    )
    replay = [sys.executable, "-c", refuse, "replay", str(trace)]
    replay += ["--agent", "examples.mcp_agent.agent:build", "--tools", "recorded"]
    done = subprocess.run(replay, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ok:")


def test_show_tells_the_mcp_session() -> None:
    outcome = CliRunner().invoke(sim_main, ["show", str(SHIPPED)])
    assert outcome.exit_code == 0, outcome.output
    assert "mcp time: advertises get_current_time, convert_time" in outcome.output
    assert "mcp time: convert_time answered:" in outcome.output
