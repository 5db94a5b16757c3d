"""Sessions through ``loopctl-sim`` (click's CliRunner, in process): fuzzing the sample agent's
conversations, shrinking a failure into a scenario that fails again, pass^k of a flaky agent,
replay naming the run of a divergence, show naming the turns, and bad input refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import session_agents
import yaml
from click.testing import CliRunner, Result

from loopctl.core import LoopMachine
from loopctl_sim.cli import main
from loopctl_sim.fuzz.sessions import SessionFuzzConfig, run_session_seed
from loopctl_sim.sim.session import SessionWorld, run_session
from loopctl_sim.sim.users import ScriptedUser

AGENT = "examples.support_agent.agent:build"
CHECK = "examples.support_agent.sessions:refunds_within_limit"
USER = "examples.support_agent.sessions:make_user"


@pytest.fixture(autouse=True)
def _in_a_scratch_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A campaign that finds failures writes them to ``fuzz-failures/`` in the working
    folder unless told ``--out``: here that is the test's own folder, not the checkout."""
    monkeypatch.chdir(tmp_path)


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_fuzzing_the_sample_agents_conversations_finds_no_engine_failure() -> None:
    result = cli("fuzz", "--agent", AGENT, "--user-turns", "5", "--seeds", "0:12")
    assert result.exit_code == 0, result.output
    assert "12 sessions (60 user turns" in result.output
    assert "0 failing seed(s)" in result.output


def test_a_whole_session_check_fails_is_shrunk_and_the_scenario_fails_again(
    tmp_path: Path,
) -> None:
    out = tmp_path / "found"
    result = cli(
        "fuzz",
        "--agent",
        AGENT,
        "--user",
        USER,
        "--user-turns",
        "4",
        "--check",
        CHECK,
        "--seeds",
        "20:30",
        "--out",
        str(out),
    )
    assert result.exit_code == 1, result.output
    assert "seed 26 FAILED: " + CHECK + ": the conversation refunded" in result.output
    shrunk = re.search(r"shrunk: 4 -> (\d+) user turns", result.output)
    assert shrunk is not None and int(shrunk.group(1)) < 4, result.output
    scenario = out / "session-26.scenario.yaml"
    data = yaml.safe_load(scenario.read_text())
    assert len(data["turns"]) == int(shrunk.group(1))
    assert all("replies" in turn for turn in data["turns"])  # the model's side fixed
    assert (out / "session-26.jsonl").exists() and (out / "session-26.shrunk.jsonl").exists()
    again = cli("session", str(scenario), "--agent", AGENT, "--check", CHECK)
    assert again.exit_code == 1, again.output
    assert f"FAILED {CHECK}: the conversation refunded" in again.output
    # the failing session's trace replays against the agent
    replayed = cli("replay", str(out / "session-26.jsonl"), "--agent", AGENT)
    assert replayed.exit_code == 0, replayed.output


def test_repeat_measures_a_flaky_agent_as_pass_k(monkeypatch: pytest.MonkeyPatch) -> None:
    session_agents.CALLS[0] = 0
    result = cli(
        "fuzz",
        "--agent",
        "session_agents:flaky",
        "--user",
        "session_agents:make_user",
        "--user-turns",
        "3",
        "--repeat",
        "3",
        "--nondeterministic",
        "--check",
        "session_agents:no_database_timeouts",
        "--seeds",
        "0:4",
        "--no-shrink",
    )
    assert result.exit_code == 1, result.output
    rows = {
        line.split()[0]: line.split()[1:]
        for line in result.output.splitlines()
        if line.startswith(("history_coherent", "session_agents:"))
    }
    held, runs = map(int, rows["session_agents:no_database_timeouts"][0].split("/"))
    assert runs == 12 and 0 < held < runs  # it held in some repeats, not in all
    assert float(rows["session_agents:no_database_timeouts"][1]) < 1.0
    assert rows["history_coherent"] == ["12/12", "1.00"]
    assert "held in" in result.output and "of 3 repeats" in result.output
    assert "deterministic" not in rows


def test_a_planted_carry_over_bug_fails_the_cross_run_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A next run that forgets the conversation: the runs after the first see nothing of the
    runs before, and what they leave does not start with what they were given."""

    def forgetful(self: LoopMachine) -> LoopMachine:
        return LoopMachine()

    monkeypatch.setattr(LoopMachine, "next_run", forgetful)
    config = SessionFuzzConfig(agent=AGENT, user_turns=3, check_determinism=False)
    result = run_session_seed(2, config)
    checks = {f.check for f in result.repeats[0]}
    assert {"sees_previous_runs", "salvage_keeps_runs"} <= checks


def test_replay_names_the_run_and_user_turn_of_a_divergence(tmp_path: Path) -> None:
    trace = tmp_path / "s.jsonl"
    user = ScriptedUser(["Ship 2 kg to France?", "Where is order A-1001?", "Thanks."])
    run_session(SessionWorld(AGENT, user, explore=5), trace)
    ok = cli("replay", str(trace), "--agent", AGENT)
    assert ok.exit_code == 0 and "3 run(s)" in ok.output
    changed = cli("replay", str(trace), "--agent", "session_agents:flaky")
    assert changed.exit_code == 1
    found = re.search(
        r"in run (\d) of 3 \(its header at line \d+\), user turn (\d)", changed.output
    )
    assert found is not None, changed.output
    assert found.group(1) == found.group(2)
    shown = cli("show", str(trace))
    assert shown.exit_code == 0
    assert [
        line.split("session turn ")[1][0]
        for line in shown.output.splitlines()
        if "session turn" in line
    ] == ["1", "2", "3"]


def test_bad_session_arguments_are_refused_with_exit_2(tmp_path: Path) -> None:
    no_agent = cli("fuzz", "--builtin", "--user-turns", "3", "--seeds", "0:1")
    assert no_agent.exit_code == 2 and "give --agent" in no_agent.output
    missing = cli("fuzz", "--agent", AGENT, "--user", "no_such_module:make", "--seeds", "0:1")
    assert missing.exit_code == 2 and "cannot import 'no_such_module'" in missing.output
    not_user = cli(
        "fuzz", "--agent", AGENT, "--user", "session_agents:not_a_user", "--seeds", "0:1"
    )
    assert not_user.exit_code == 2 and "has no next_turn" in not_user.output
    workers = cli("fuzz", "--agent", AGENT, "--user-turns", "2", "--workers", "2", "--seeds", "0:1")
    assert workers.exit_code == 2 and "runs in this process" in workers.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent: x:y\nturns:\n  - text: hi\n    cancel_at: -1\n")
    refused = cli("session", str(bad), "--agent", AGENT)
    assert refused.exit_code == 2 and f"{bad}: turn 1: a user turn's cancel_at" in refused.output
    bad.write_text("turns: [hi]\n")
    refused = cli("session", str(bad), "--agent", AGENT)
    assert refused.exit_code == 2 and "agent: expected 'module:factory'" in refused.output
    assert cli("session", "--agent", AGENT).exit_code == 2


def test_a_user_check_sees_the_whole_session() -> None:
    config = SessionFuzzConfig(
        agent=AGENT, user_turns=4, checks=("session_agents:sees_every_run",), faults=()
    )
    for seed in range(3):
        result = run_session_seed(seed, config)
        assert result.ok, result.repeats
        assert result.session is not None and len(result.session.runs) == 4
