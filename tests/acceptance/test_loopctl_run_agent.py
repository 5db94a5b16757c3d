"""``loopctl run --agent``: the user's own agent from the command line (issue 30, item 9), its
trace, a kill -9 in the middle and ``loopctl-sim resume``; and the built-in ``read_file``'s
limit (issue 31, item 14)."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from acceptance_helpers import (
    AGENT,
    KEY,
    ROOT,
    TRIP,
    agent_env,
    cli,
    end_digest,
    killed_at_second_call,
    kinds,
)

from examples.model_server import ModelServer
from loopctl.cli import MAX_FILE_BYTES, read_file

ANSWER = (
    "Your trip from Oslo to Paris: done: search_flights, weather_forecast, convert_price; "
    "cheapest SK610 at 100.0 EUR; converted 108.00 USD. the city guide lists 32 sights."
)


def test_run_agent_records_a_trace_that_replays(model_server: ModelServer, tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    done = cli("loopctl", "run", TRIP, "--agent", AGENT, "--trace", str(trace),
               env=agent_env(model_server))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ANSWER
    assert len(model_server.requests) == 4
    header = next(iter(trace.read_text(encoding="utf-8").splitlines()))
    assert f'"agent":"{AGENT}"' in header
    assert KEY not in trace.read_text(encoding="utf-8")
    replayed = cli("loopctl-sim", "replay", str(trace), "--agent", AGENT)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_run_agent_gets_the_client_the_options_name(
    model_server: ModelServer, tmp_path: Path
) -> None:
    """``--provider``/``--model``/``--base-url`` build the client the factory is given."""
    trace = tmp_path / "run.jsonl"
    env = agent_env(None, OPENAI_API_KEY=KEY)  # no SKYWAY_*: the agent's own client is unused
    done = cli(
        "loopctl", "run", "Fly me from Oslo to Rome", "--agent", AGENT,
        "--provider", "openai", "--model", "skyway-model-9", "--base-url", model_server.url,
        "--trace", str(trace), env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "Your trip from Oslo to Rome: the cheapest flight is SK852 at 342.0 EUR."
    )
    assert {r.body["model"] for r in model_server.requests} == {"skyway-model-9"}
    assert kinds(trace, "model_request")[0]["data"]["context"]["model"] == "skyway-model-9"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent", "no_such_module:build"], "cannot import module 'no_such_module'"),
        (["--agent", "examples.travel_agent.agent:nothing"], "has no 'nothing'"),
        (["--agent", AGENT, "--max-turns", "3"], "--max-turns sets the built-in agent"),
        (["--agent", AGENT, "--system", "Be brief."], "--system sets the built-in agent"),
        (["--agent", AGENT, "--base-url", "http://127.0.0.1:9/v1"], "need --model"),
        ([], "--model is required"),
    ],
)
def test_run_agent_mistakes_are_one_line(args: list[str], message: str) -> None:
    done = cli("loopctl", "run", "hello", *args)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_kill_9_then_resume_reaches_the_uninterrupted_digest(
    model_server: ModelServer, tmp_path: Path
) -> None:
    """The user's agent is killed (SIGKILL) while it waits for the model's second answer; the
    resumed run ends with the brain the uninterrupted run ends with."""
    whole = tmp_path / "whole.jsonl"
    done = cli("loopctl", "run", TRIP, "--agent", AGENT, "--trace", str(whole),
               env=agent_env(model_server))  # fmt: skip
    assert done.returncode == 0, done.stderr

    cut = tmp_path / "cut.jsonl"
    env = agent_env(model_server)
    killed_at_second_call(model_server, [TRIP, "--agent", AGENT], cut, ROOT, env)

    resumed = cli("loopctl-sim", "resume", str(cut), "--agent", AGENT, env=agent_env(model_server))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert end_digest(cut) == end_digest(whole) is not None
    replayed = cli("loopctl-sim", "replay", str(cut), "--agent", AGENT)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_read_file_reads_at_most_its_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1.5 GiB file (sparse: it takes no disk) is read up to the 100 kB the tool promises,
    not whole: the memory the read takes stays near the limit."""
    big = tmp_path / "huge.log"
    with big.open("wb") as f:
        f.write(b"first line\n")
        f.truncate(3 * 2**29)  # 1.5 GiB
    monkeypatch.chdir(tmp_path)
    tracemalloc.start()
    try:
        text = read_file("huge.log")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text.startswith("first line\n")
    assert text.endswith(f"\n[truncated at {MAX_FILE_BYTES} bytes]")
    assert len(text) == MAX_FILE_BYTES + len(f"\n[truncated at {MAX_FILE_BYTES} bytes]")
    assert peak < 20 * MAX_FILE_BYTES  # the whole file would be 1.5 GiB


def test_loopctl_run_reads_at_most_the_limit_of_a_huge_file(
    model_server: ModelServer, tmp_path: Path
) -> None:
    """The same through the command: the model asks the built-in ``read_file`` for a sparse
    1.5 GiB file and gets its first 100 kB; the process never holds the file."""
    big = tmp_path / "huge.log"
    with big.open("wb") as f:
        f.write(b"first line\n")
        f.truncate(3 * 2**29)
    env = agent_env(None, OPENAI_API_KEY=KEY)
    done = cli(
        "loopctl", "run", "Please read the file huge.log", "--model", "skyway-model-1",
        "--base-url", model_server.url, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    suffix = len(f"\n[truncated at {MAX_FILE_BYTES} bytes]")
    expected = f"huge.log: {MAX_FILE_BYTES + suffix} characters, starting 'first line\\n\\x00"
    assert done.stdout.startswith(expected)
    # the largest child process so far (any of this session's) never came near the file's size
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 < 2**30


def test_the_model_server_from_the_shell(tmp_path: Path) -> None:
    """``python -m examples.model_server --port 0`` says where it serves; ``loopctl run --agent``
    reaches it there; Ctrl-C (SIGINT) stops it cleanly."""
    server = subprocess.Popen(
        [sys.executable, "-m", "examples.model_server", "--port", "0", "--api-key", KEY],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert first.startswith("serving on http://127.0.0.1:")
        url = first.split()[2]
        env = agent_env(None, SKYWAY_BASE_URL=url, SKYWAY_API_KEY=KEY)
        done = cli("loopctl", "run", "Fly me from Oslo to Rome", "--agent", AGENT, env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Your trip from Oslo to Rome:")
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
