"""Scenario files that name the user's agent, ``loopctl-sim run`` on them, and what the fuzz
command shows (the progress bar's time left, the summary tables, the reproducer lines)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from rich.console import Console
from shop_project import AGENT, make_project

from loopctl_sim import fuzz as fz
from loopctl_sim import replay_agent
from loopctl_sim.cli import main
from loopctl_sim.cli.fuzz_report import CampaignProgress, failure_lines, summary_tables
from loopctl_sim.fuzz.agent_case import case_for
from loopctl_sim.fuzz.case import scenario_yaml
from loopctl_sim.fuzz.checks import CREATED, Failure
from loopctl_sim.sim import ScenarioError, load_scenario

SCENARIO = f"""
name: refund-under-faults
description: the refund goes out although the first lookup fails and the model is rate limited
agent: {AGENT}
input: Please refund order A-1001.
tools:
  shipping_quote: simulated
  refund: {{faults: false}}
model:
  - calls: [{{name: lookup_order, arguments: {{order_id: A-1001}}}}]
  - calls: [{{name: lookup_order, arguments: {{order_id: A-1001}}}}]
  - calls: [{{name: refund, arguments: {{order_id: A-1001, amount: 800}}}}]
  - text: Refunded 800 EUR.
faults:
  - {{kind: tool_exception, tool: lookup_order}}
  - {{kind: tool_exception, tool: refund}}
  - {{kind: rate_limited, model_call: 2, retry_after: 2}}
expect: completed
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from make_project(tmp_path, monkeypatch)


def write(project: Path, text: str, name: str = "s.yaml") -> Path:
    path = project / name
    path.write_text(text)
    return path


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_an_agent_scenario_runs_the_agents_own_loop(project: Path) -> None:
    path = write(project, SCENARIO)
    sc = load_scenario(path)
    assert sc.agent == AGENT and sc.tools["shipping_quote"].mode == "simulated"
    world = sc.agent_world()
    assert world.exempt == frozenset({"refund"}) and world.tools == {"shipping_quote": "simulated"}
    trace = project / "t.jsonl"
    code, out = cli("run", str(path), "--agent", AGENT, "--trace", str(trace), "--created", CREATED)
    assert code == 0, out
    assert "refund-under-faults: completed" in out and "1 retries" in out
    import shop.agent as shop

    assert shop.REFUNDS == [("A-1001", 800)]  # exempt from faults, the refund really ran
    assert replay_agent(trace, AGENT, tools="recorded").ok
    code, out = cli("run", str(path), "--trust-agent", "--checks")
    assert code == 0 and "every check passed (agent level" in out, out


def test_an_unexpected_outcome_and_an_escape_exit_1(project: Path) -> None:
    path = write(project, SCENARIO.replace("expect: completed", "expect: cancelled"))
    code, out = cli("run", str(path), "--trust-agent")
    assert code == 1 and "unexpected outcome: completed" in out
    (project / "shop" / "broken.py").write_text(
        "from shop.agent import build as real\n\n\n"
        "def build(**kwargs):\n"
        "    loop = real(**kwargs)\n\n"
        "    async def boom(request, call_next):\n"
        "        raise LookupError('no budget')\n\n"
        "    return loop.replace(model_middleware=[boom])\n"
    )
    escaping = write(project, SCENARIO.replace(AGENT, "shop.broken:build"), "e.yaml")
    code, out = cli("run", str(escaping), "--trust-agent")
    assert code == 1 and "the run raised LookupError: no budget" in out
    code, out = cli("run", str(escaping), "--trust-agent", "--checks")
    assert code == 1 and "exception (LookupError)" in out and "escaped the run" in out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("policy: {max_turns: 3}\n", "the agent's factory sets these"),
        ("max_retries: 1\n", "the agent's factory sets these"),
        ("explore: {seed: 3}\n", "not both"),
    ],
)
def test_an_agent_scenario_leaves_the_agents_settings_alone(
    project: Path, change: str, message: str
) -> None:
    path = write(project, SCENARIO + change)
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)


def test_agent_fields_need_an_agent_and_a_model(project: Path) -> None:
    no_agent = SCENARIO.replace(f"agent: {AGENT}\n", "")
    with pytest.raises(ScenarioError, match="apply to an agent's tools"):
        load_scenario(write(project, no_agent))
    exploring = "name: x\ninput: go\nexplore: {seed: 1}\n"
    with pytest.raises(ScenarioError, match="explore and recorded go with an agent"):
        load_scenario(write(project, exploring))
    neither = f"name: x\nagent: {AGENT}\ninput: go\n"
    with pytest.raises(ScenarioError, match="gives model"):
        load_scenario(write(project, neither))
    code, out = cli(
        "run", str(write(project, SCENARIO.replace(AGENT, "shop.nope:build"))), "--trust-agent"
    )
    assert code == 2 and "cannot import" in out
    code, out = cli("run", str(write(project, SCENARIO)), "--agent", AGENT, "--driver")
    assert code == 2 and "own loop" in out


def test_an_exploring_scenario_runs_and_its_case_round_trips(project: Path) -> None:
    path = write(project, f"name: x\nagent: {AGENT}\ninput: go\nexplore: {{seed: 4, turns: 6}}\n")
    code, out = cli("run", str(path), "--agent", AGENT)
    assert code == 0 and out.startswith("x: "), out
    config = fz.FuzzConfig(agent=AGENT, tools="simulated:refund", exempt=("lookup_order",))
    case = case_for(7, config)
    saved = write(project, scenario_yaml(case.scenario), "case.yaml")
    assert load_scenario(saved) == case.scenario
    written_out = fz.scripted(case.scenario, [])  # no replies left: still a scripted model
    again = write(project, scenario_yaml(written_out), "min.yaml")
    assert yaml.safe_load(again.read_text())["model"] == []
    assert load_scenario(again).explore is None


# --- what the fuzz command shows ----------------------------------------------------------------


def test_the_time_left_is_the_rate_so_far_even_when_results_come_in_bursts() -> None:
    now = [0.0]
    quiet = Console(file=io.StringIO())
    bar = CampaignProgress(100, console=quiet, show=False, get_time=lambda: now[0])
    result = fz.CaseResult(seed=0)
    for t in range(1, 4):  # a worker hands back 10 seeds every 3 seconds
        now[0] = 3.0 * t
        for _ in range(10):
            bar.seed_done(result)
    left = bar.columns[-1]
    assert str(left.render(bar.tasks[0])) == "0:00:21"  # 70 seeds left at 10 per 3 s
    fresh = CampaignProgress(5, console=quiet, show=False, get_time=lambda: now[0])
    assert str(left.render(fresh.tasks[0])) == "-:--:--"


def test_the_summary_is_tables_and_a_failure_names_its_reproducers() -> None:
    summary = fz.CampaignSummary()
    ok = fz.CaseResult(seed=1, runs=5, steps=40, outcome="completed")
    ok.moves.update({"call": 3, "final": 1})
    ok.faults.update({"network": 2})
    ok.scheduled.update({"network": 1})
    bad = fz.CaseResult(
        seed=2,
        outcome="aborted",
        failure=Failure("exception", "ProtocolError", "the engine refused it"),
        files=[
            "out/seed-2.jsonl",
            "out/seed-2.yaml",
            "out/seed-2.min.jsonl",
            "out/seed-2.min.yaml",
        ],
        shrunk="shrunk from 6 replies, 4 faults and 0 tools to 2 replies, 1 faults and 0 tools",
        replay_tools="live:refund",
    )
    bad.enabled = ("network",)
    summary.add(ok)
    summary.add(bad)
    console = Console(record=True, width=100, file=io.StringIO())
    for table in summary_tables(summary, "agent shop.agent:build"):
        console.print(table)
    text = console.export_text()
    assert "failing seeds" in text and "network" in text and "call" in text
    lines = failure_lines(bad, "loopctl-sim fuzz --seeds 2:3 --agent shop.agent:build", AGENT)
    assert lines[0] == "FAIL seed 2: exception (ProtocolError): the engine refused it"
    assert (
        f"  replay: loopctl-sim replay out/seed-2.min.jsonl --agent {AGENT} --tools live:refund"
        in lines
    )
    # the commands name the agent: a scenario file does not run one on its own (issue 31)
    assert f"  run:    loopctl-sim run out/seed-2.min.yaml --agent {AGENT} --checks" in lines
    assert f"  test:   loopctl-sim export-test out/seed-2.min.jsonl --agent {AGENT}" in lines


def test_recorded_tools_in_a_scenario_and_a_campaign(project: Path) -> None:
    recorded = SCENARIO.replace("  shipping_quote: simulated\n", "  lookup_order: recorded\n")
    with pytest.raises(ScenarioError, match="needs the traces"):
        load_scenario(write(project, recorded))
    path = write(project, recorded.replace("tools:\n", "recorded: [shop/traces]\ntools:\n"))
    code, out = cli("run", str(path), "--agent", AGENT)
    assert code == 0, out
    import shop.agent as shop

    shop.REFUNDS.clear()  # the scenario's refund ran live
    code, out = cli("fuzz", "--agent", AGENT, "--seeds", "0:2", "--tools", "recorded")
    assert code == 2 and "--recorded" in out
    code, out = cli(
        "fuzz",
        "--agent",
        AGENT,
        "--seeds",
        "0:8",
        "--tools",
        "recorded",
        "--recorded",
        "shop/traces",
        "--no-progress",
        "--out",
        str(project / "out"),
    )
    assert code == 0, out
    assert shop.REFUNDS == []  # every tool was answered from the recordings
