"""The cassette workflow for a user's own agent, as docs/ci.md tells it: record the travel agent's
model calls once through the pytest plugin against the model over HTTP, then run the same tests
offline in CI (no server, no key, the network closed) green; a changed prompt then fails with
the request and its diff, and the cassette holds no key.

The user's project is a directory of its own with one test file; pytest runs in a subprocess
with the agent's own client configured from the environment, as the user's CI would run it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from acceptance_helpers import KEY, TRIP, agent_env

from examples.model_server import ModelServer
from loopctl_sim.trace.scrub import Scrubber

#: The user's tests: the agent's own client (``SKYWAY_API`` at ``SKYWAY_BASE_URL``).
USER_TESTS = f"""
import os
from pathlib import Path

import pytest

from examples.travel_agent.agent import build

TRIP = {TRIP!r}


@pytest.mark.loopctl_cassette
def test_trip():
    result = build().run_sync(TRIP)
    assert result.outcome.kind == "completed", result.error
    assert "converted 108.00 USD" in result.final_text
    Path(os.environ["ANSWER_FILE"]).write_text(result.final_text)
"""


def pytest_in(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=project,
        env={k: v for k, v in env.items() if not k.startswith("PYTEST_")},
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_record_once_then_ci_replays_offline(tmp_path: Path, api: str) -> None:
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    test_file = project / "tests" / "test_travel.py"
    test_file.write_text(USER_TESTS)
    cassette = project / "tests" / "cassettes" / "test_travel" / "test_trip.yaml"
    recorded_answer, replayed_answer = tmp_path / "recorded.txt", tmp_path / "replayed.txt"

    # 1. once, locally, with the key and the model up
    with ModelServer(api_key=KEY) as server:
        env = agent_env(server, api, ANSWER_FILE=str(recorded_answer))
        done = pytest_in(project, env, "--loopctl-record-mode=once")
        assert done.returncode == 0, done.stdout[-3000:]
        assert len(server.requests) == 4  # the four model calls of the trip
    text = cassette.read_text()
    assert KEY not in text
    data = yaml.safe_load(text)
    assert Scrubber()(data) is data  # nothing key-shaped is left to scrub
    assert len(data["interactions"]) == 4

    # 2. CI: the server gone, no key, the network closed for every test
    ci = agent_env(api=api, ANSWER_FILE=str(replayed_answer))
    ci.update(SKYWAY_API=api)
    for variable in ("SKYWAY_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        ci.pop(variable, None)
    done = pytest_in(project, ci, "--loopctl-block-network")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed" in done.stdout
    assert replayed_answer.read_text() == recorded_answer.read_text()
    assert cassette.read_text() == text  # replaying writes nothing

    # 3. the agent's prompt changes: CI names the request that no longer matches
    test_file.write_text(USER_TESTS.replace("Paris on", "Paris (window seat) on"))
    done = pytest_in(project, ci, "--loopctl-block-network")
    assert done.returncode == 1
    assert "loopctl cassette miss: POST" in done.stdout
    assert "window seat" in done.stdout and "--loopctl-record-mode=new_episodes" in done.stdout
    assert os.path.getsize(cassette) == len(text.encode())
