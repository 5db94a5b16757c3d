"""Replaying the user's own agent from a trace (issue 13), as a user does it: the sample support
agent of examples/ copied into a project of its own, changed the way people change agents, and
replayed through the command line and the public API."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl_sim import (
    AgentError,
    load_agent,
    read_trace,
    replay_agent,
    update_trace,
)
from loopctl_sim.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "support_agent"
AGENT = "shop.agent:build"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A user's project: the sample agent as package ``shop``, its traces, cwd set to it."""
    shutil.copytree(EXAMPLE, tmp_path / "shop", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "shop" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in [m for m in sys.modules if m == "shop" or m.startswith("shop.")]:
        del sys.modules[name]  # each test imports its own (edited) copy


def edit(project: Path, old: str, new: str) -> None:
    path = project / "shop" / "agent.py"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def trace(project: Path, name: str = "refund") -> str:
    return str(project / "shop" / "traces" / f"{name}.jsonl")


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


# --- the agent as it is: every shipped trace replays ----------------------------------------


@pytest.mark.parametrize("name", ["refund", "refund_over_limit", "shipping", "session"])
def test_every_shipped_trace_replays_against_the_agent(project: Path, name: str) -> None:
    result = replay_agent(trace(project, name), AGENT)
    assert result.ok, result.summary()
    assert result.complete and result.agent == AGENT
    assert result.steps > 0 and result.feeds > 0


def test_the_command_line_replays_a_directory_of_traces(project: Path) -> None:
    code, out = cli("replay", "shop/traces", "--agent", AGENT)
    assert code == 0, out
    assert out.count("ok: ") == 4 and f"agent {AGENT}" in out


# --- changes in the user's code are divergences, named in the user's terms -------------------


def test_a_changed_tool_output_is_named(project: Path) -> None:
    edit(project, '"amount": 800', '"amount": 900')
    result = replay_agent(trace(project), AGENT)
    d = result.divergence
    assert d is not None and d.what == "feed"
    assert d.message.startswith("turn 1: tool `lookup_order` returned `")
    assert "900" in d.message and "the trace has" in d.message and "800" in d.message
    assert d.line == d.seq + 1 and d.seq > 0
    code, out = cli("replay", trace(project), "--agent", AGENT)
    assert code == 1 and "tool `lookup_order` returned" in out


def test_a_changed_system_prompt_is_named_with_a_diff(project: Path) -> None:
    edit(project, "Look orders up before", "Always look orders up before")
    d = replay_agent(trace(project), AGENT).divergence
    assert d is not None and d.what == "request"
    assert d.message == "turn 1: the request's system prompt differs"
    assert any(line.startswith("-You are") for line in d.details)
    assert any(line.startswith("+You are") and "Always" in line for line in d.details)


def test_a_changed_tool_schema_is_named(project: Path) -> None:
    edit(
        project,
        "def shipping_quote(country: str, weight_kg: float) -> str:",
        "def shipping_quote(country: str, weight_kg: float, express: bool = False) -> str:",
    )
    d = replay_agent(trace(project), AGENT).divergence
    assert d is not None and d.message == "turn 1: tool spec `shipping_quote` changed its schema"
    assert any("express" in line for line in d.details)


def test_a_changed_hook_is_named(project: Path) -> None:
    edit(project, "REFUND_LIMIT = 1000", "REFUND_LIMIT = 500")
    d = replay_agent(trace(project), AGENT).divergence
    assert d is not None and d.message.startswith("turn 2: tool `refund` failed")


def test_changed_settings_are_named(project: Path) -> None:
    edit(project, "RunConfig(max_turns=12)", "RunConfig(max_turns=20)")
    d = replay_agent(trace(project), AGENT).divergence
    assert d is not None and d.what == "policy"
    assert "max_turns 12 -> 20" in d.message
    assert d.policy is not None and d.policy["max_turns"] == 20


def test_recorded_tools_replay_past_a_changed_tool(project: Path) -> None:
    edit(project, '"amount": 800', '"amount": 900')
    assert replay_agent(trace(project), AGENT, tools="recorded").ok
    assert not replay_agent(trace(project), AGENT, tools="live:lookup_order").ok
    assert replay_agent(trace(project), AGENT, tools="live:refund").ok
    code, out = cli("replay", trace(project), "--agent", AGENT, "--tools", "live:nope")
    assert code == 2 and "unknown tool(s) nope" in out


# --- approving a change on purpose --------------------------------------------------------------


def test_update_re_records_what_needs_no_model(project: Path) -> None:
    before = read_trace(trace(project))
    edit(project, "RunConfig(max_turns=12)", "RunConfig(max_turns=20)")
    assert not replay_agent(trace(project), AGENT).ok
    code, out = cli("replay", trace(project), "--agent", AGENT, "--update")
    assert code == 0 and out.startswith("updated "), out
    after = read_trace(trace(project))
    assert len(after) == len(before)
    assert replay_agent(trace(project), AGENT).ok
    modes = after[0].metadata["tool_modes"]  # type: ignore[union-attr]
    assert modes == {"lookup_order": "live", "shipping_quote": "live", "refund": "live"}
    assert update_trace(trace(project), AGENT, tools="live:refund").ok
    modes = read_trace(trace(project))[0].metadata["tool_modes"]  # type: ignore[union-attr]
    assert modes["refund"] == "live" and modes["lookup_order"] == "recorded"


def test_update_stops_where_a_real_model_is_needed_and_keeps_the_trace(project: Path) -> None:
    original = Path(trace(project)).read_text()
    edit(project, '"amount": 800', '"amount": 900')
    result = update_trace(trace(project), AGENT)
    assert not result.ok
    assert "turn 2" in result.message and "needs a real model" in result.message
    assert "line" in result.message  # the trace's request that no longer matches
    assert Path(trace(project)).read_text() == original
    forced = update_trace(trace(project), AGENT, force=True)
    assert forced.ok and forced.forced == 2
    assert replay_agent(trace(project), AGENT).ok


# --- what the trace can be ----------------------------------------------------------------------


def test_an_incomplete_trace_replays_up_to_its_last_record(project: Path) -> None:
    lines = Path(trace(project)).read_text().splitlines()
    for keep in (1, 2, 5, 9, 15, len(lines) - 1):
        cut = project / f"cut{keep}.jsonl"
        cut.write_text("\n".join(lines[:keep]) + "\n")
        result = replay_agent(cut, AGENT)
        assert result.ok and not result.complete, (keep, result.summary())
        assert result.notes, keep
        code, out = cli("replay", str(cut), "--agent", AGENT)
        assert code == 0 and "note: " in out, (keep, out)


def test_the_agent_can_be_named_once_in_pyproject(project: Path) -> None:
    (project / "pyproject.toml").write_text(f'[tool.loopctl]\nagent = "{AGENT}"\n')
    code, out = cli("replay", trace(project))
    assert code == 0 and f"agent {AGENT}" in out
    code, out = cli("replay", trace(project), "--machine")
    assert code == 0 and f"agent {AGENT}" not in out


def test_a_broken_pyproject_is_one_line_from_every_command_that_reads_its_agent(
    project: Path,
) -> None:
    (project / "pyproject.toml").write_text("[tool.loopctl\nagent = \n")
    new = str(project / "forked.jsonl")
    for args in (
        ["replay", trace(project)],
        ["resume", trace(project)],
        ["fork", trace(project), "--at", "3", "--out", new],
        ["fuzz", "--seeds", "0:1", "--out", str(project / "failures")],
    ):
        code, out = cli(*args)
        assert code == 2, (args, out)
        assert out.startswith(f"error: {project / 'pyproject.toml'}: cannot be read: "), out
        assert len(out.strip().splitlines()) == 1 and "Traceback" not in out
    code, out = cli("replay", trace(project), "--agent", AGENT)  # named: pyproject not read
    assert code == 0 and f"agent {AGENT}" in out
    code, out = cli("replay", trace(project), "--machine")  # no agent: pyproject not read
    assert code == 0, out


def test_an_agent_that_cannot_be_imported_is_a_clear_error(project: Path) -> None:
    code, out = cli("replay", trace(project), "--agent", "nope.agent:build")
    assert code == 2 and "cannot import module 'nope.agent'" in out and "Traceback" not in out
    code, out = cli("replay", trace(project), "--agent", "shop.agent:missing")
    assert code == 2 and "has no 'missing'" in out
    code, out = cli("replay", trace(project), "--agent", "shop.agent")
    assert code == 2 and "expected 'module:factory'" in out
    with pytest.raises(AgentError, match="not a BareLoop"):
        from loopctl_sim import build_agent

        build_agent(lambda: 42)
    assert callable(load_agent(AGENT))


def test_json_output(project: Path) -> None:
    edit(project, '"amount": 800', '"amount": 900')
    code, out = cli("replay", trace(project), "--agent", AGENT, "--json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and data["agent"] == AGENT
    assert data["divergence"]["what"] == "feed" and data["divergence"]["details"] == []


def test_an_exported_test_fails_when_the_agent_changes_and_passes_when_reverted(
    project: Path,
) -> None:
    code, out = cli("export-test", trace(project), "--agent", AGENT, "-o", "test_refund.py")
    assert code == 0, out

    def pytest_run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_refund.py"],
            cwd=project,
            capture_output=True,
            text=True,
            check=False,
        )

    assert pytest_run().returncode == 0
    edit(project, '"amount": 800', '"amount": 900')
    failed = pytest_run()
    assert failed.returncode == 1 and "tool `lookup_order` returned" in failed.stdout
    edit(project, '"amount": 900', '"amount": 800')
    assert pytest_run().returncode == 0


def test_agent_code_raising_out_of_the_run_is_a_divergence_not_a_traceback(
    project: Path,
) -> None:
    edit(
        project,
        "        observers=observers,\n    )",
        "        observers=observers,\n        model_middleware=[_explode],\n    )\n\n\n"
        "async def _explode(request, call_next):\n"
        "    if request.turn == 2:\n"
        "        raise KeyError('a bug in the middleware')\n"
        "    return await call_next(request)",
    )
    d = replay_agent(trace(project), AGENT).divergence
    assert d is not None and d.what == "exception"
    assert "the agent raised KeyError" in d.message and d.seq > 0
    code, out = cli("replay", trace(project), "--agent", AGENT)
    assert code == 1 and "Traceback" not in out


def test_a_model_call_the_trace_does_not_hold_is_named_where_the_trace_goes_on(
    tmp_path: Path,
) -> None:
    """The second turn's ``model_request`` record taken out: the replayed driver's request is a
    divergence at the brain record the trace has there instead, not a traceback."""
    records = [json.loads(line) for line in (ROOT / "tests/traces/driver/basic.jsonl").open()]
    requests = [i for i, r in enumerate(records) if r.get("kind") == "model_request"]
    cut = requests[1]
    kept = records[:cut] + [{**r, "seq": r["seq"] - 1} for r in records[cut + 1 :]]
    path = tmp_path / "basic.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in kept))
    result = CliRunner().invoke(main, ["replay", "--driver", str(path)])
    assert result.exit_code == 1, result.output
    at = next(i for i in range(cut, len(kept)) if kept[i]["type"] != "io")  # its model_response
    assert kept[at]["name"] == "model_response"
    assert f"divergence at seq {at} ({path}:{at + 1})" in result.output
    assert "what differs: request" in result.output
    assert "turn 2: the agent called the model where the trace did not" in result.output
