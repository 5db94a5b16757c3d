"""A live session over HTTP: the travel agent's model is the local model server
(examples/model_server), the user a script or a model over the same server. The session's trace
replays offline (the server gone), a model user's turns included; a session killed in its
middle is finished by ``loopctl-sim session --resume``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from examples.model_server import ModelServer
from examples.travel_agent.agent import MODEL, build
from loopctl.providers import OpenAIClient
from loopctl_sim import TraceRecorder
from loopctl_sim.cli import main
from loopctl_sim.replay import replay_agent
from loopctl_sim.sim.session import drive_session, recorded_turns
from loopctl_sim.sim.users import ModelUser, ScriptedUser, SimUser
from loopctl_sim.trace import HeaderRecord, read_trace

AGENT = "examples.travel_agent.agent:build"
KEY = "sk-proj-sessionKEY" + "0123456789abcdefABCDEF"
TURNS = [
    "I want to fly from Oslo to Paris on 2027-03-01. What is the price in USD?",
    "Now from Oslo to Rome on 2027-03-02, and what should I see there?",
    "And from Oslo to Berlin, with the weather?",
]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    """The model server, and the travel agent's own client pointed at it (as a user sets it)."""
    with ModelServer(api_key=KEY) as running:
        monkeypatch.setenv("SKYWAY_BASE_URL", running.url)
        monkeypatch.setenv("SKYWAY_API_KEY", KEY)
        yield running


def _record(path: Path, user: SimUser) -> None:
    recorder = TraceRecorder(path, metadata={"agent": AGENT})
    try:
        asyncio.run(drive_session(build(observers=[recorder]), user, recorder=recorder))
    finally:
        recorder.close()


def test_a_live_session_with_a_model_user_replays_offline(
    server: ModelServer, tmp_path: Path
) -> None:
    trace = tmp_path / "live.jsonl"
    user = ModelUser(OpenAIClient(MODEL, base_url=server.url, api_key=KEY), opening=TURNS[0])
    _record(trace, user)
    turns = recorded_turns(trace)
    assert len(turns) == 3 and turns[0].text == TURNS[0]
    assert turns[1].calls and turns[2].calls  # the model user's calls are in the trace
    asked = len(server.requests)
    assert asked >= 5  # the agent's calls and the user's, over HTTP
    text = trace.read_text()
    assert KEY not in text  # the key never lands in the trace
    server.close()  # offline from here
    assert replay_agent(trace, AGENT).divergence is None
    assert len(server.requests) == asked


def test_a_session_killed_in_its_middle_is_finished_by_resume(
    server: ModelServer, tmp_path: Path
) -> None:
    full = tmp_path / "full.jsonl"
    _record(full, ScriptedUser(TURNS))
    # killed in run 2, right after its first tool result was fed
    lines = full.read_bytes().splitlines(keepends=True)
    headers = [i for i, raw in enumerate(lines) if b'"type":"header"' in raw[:40]]
    cut = next(i for i in range(headers[1], headers[2]) if b'"name":"tool_results"' in lines[i])
    killed = tmp_path / "killed.jsonl"
    killed.write_bytes(b"".join(lines[: cut + 1]))
    # ``loopctl-sim resume`` finishes the run under way only, and says what would go on
    only_run = tmp_path / "only-run.jsonl"
    only_run.write_bytes(killed.read_bytes())
    finished = CliRunner().invoke(main, ["resume", str(only_run), "--agent", AGENT])
    assert finished.exit_code == 0, finished.output
    assert "the trace is a session's (2 user turns in it)" in finished.output
    assert len(recorded_turns(only_run)) == 2
    scenario = tmp_path / "user.yaml"
    scenario.write_text("agent: " + AGENT + "\nturns:\n" + "".join(f"  - {t!r}\n" for t in TURNS))
    result = CliRunner().invoke(
        main, ["session", str(scenario), "--resume", str(killed), "--agent", AGENT]
    )
    assert result.exit_code == 0, result.output
    assert "2 user turn(s) in the trace, 1 more run now: ['completed']" in result.output
    # the finished session holds every turn, and ends as the uninterrupted one did: the same
    # conversation (the agent's compactions included), the same last answer
    assert [t.text for t in recorded_turns(killed)] == TURNS
    assert _final_history(killed) == _final_history(full)
    assert _final_text(killed) == _final_text(full)
    server.close()
    replayed = CliRunner().invoke(main, ["replay", str(killed), "--agent", AGENT])
    assert replayed.exit_code == 0, replayed.output
    assert "1 resume(s)" in replayed.output


def _final_history(path: Path) -> list:  # type: ignore[type-arg]
    result = replay_agent(path, AGENT)
    assert result.divergence is None
    assert result.machine is not None
    return list(result.machine.history)


def _final_text(path: Path) -> str:
    records = read_trace(path)
    assert sum(isinstance(r, HeaderRecord) for r in records) >= 3
    ends = [r for r in records if r.type == "end"]
    return str(getattr(ends[-1], "outcome", None))
