"""``loopctl-sim mcp-faults``: the fault campaign at an agent's MCP transport, from the command
line; every drawn fault ends the run typed and its trace replays, and a run a fault takes down is
reported with its trace kept."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl_sim.cli import main as sim_main
from tests.mcp.conftest import NOTES_SERVER

AGENT = """
import sys
from loopctl import BareLoop
from loopctl.driver import RunConfig
from loopctl.tools.mcp import McpServer

NOTES = McpServer.stdio("notes", sys.executable, [{server!r}], timeout=1.0)


def fragile(point):
    # a planted bug: the agent's own step hook cannot bear a dead server's error result
    for message in point.machine.messages():
        for part in message.parts:
            if getattr(part, "is_error", False) and "stopped" in part.content:
                raise RuntimeError("the agent cannot bear a dead server")


def build(client=None, observers=()):
    return BareLoop(client, tools=NOTES.tools(), config=RunConfig(max_turns=6),
                    observers=observers{hook})
"""


def _agent(tmp_path: Path, name: str, hook: str) -> str:
    source = textwrap.dedent(AGENT).format(server=NOTES_SERVER, hook=hook)
    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    return f"{name}:build"


def test_every_fault_ends_typed_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    agent = _agent(tmp_path, "steady_agent", "")
    out = tmp_path / "failures"
    args = ["mcp-faults", "--agent", agent, "--seeds", "0,1,3,4", "--out", str(out)]
    result = CliRunner().invoke(sim_main, args)
    assert result.exit_code == 0, result.output
    for kind in ("tools_change", "die", "slow", "malformed"):  # the seeds draw each kind
        assert f"server 'notes' {kind} at call" in result.output
    assert "4 seeds, 0 failing seed(s)" in result.output
    assert not list(out.glob("*.jsonl"))  # only a failing seed's trace is kept


def test_a_run_a_fault_takes_down_is_a_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    agent = _agent(tmp_path, "fragile_agent", ", before_step=fragile")
    out = tmp_path / "failures"
    args = ["mcp-faults", "--agent", agent, "--seeds", "1", "--out", str(out)]  # 1: die
    result = CliRunner().invoke(sim_main, args)
    assert result.exit_code == 1, result.output
    assert "seed 1: FAIL: server 'notes' die at call 2" in result.output
    assert "the run raised RuntimeError: the agent cannot bear a dead server" in result.output
    assert (out / "mcp-seed-1.jsonl").exists()


def test_an_agent_without_mcp_servers_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plain_agent.py").write_text(
        "from loopctl import BareLoop\ndef build(client=None, observers=()):\n"
        "    return BareLoop(client, observers=observers)\n",
        encoding="utf-8",
    )
    args = ["mcp-faults", "--agent", "plain_agent:build", "--seeds", "0"]
    result = CliRunner().invoke(sim_main, args, catch_exceptions=False)
    assert result.exit_code == 2
    assert "has no MCP server among its tools" in result.output
