"""What the acceptance tests share: the local model server, the travel agent, and loopctl's
commands run as a user runs them (the venv's ``loopctl`` and ``loopctl-sim`` in a subprocess).

Other suites build on these: ``ModelServer`` (``examples.model_server``) is the model over HTTP,
``record`` records a run of the travel agent through a provider client, ``cli`` runs a command,
``agent_env`` is the environment the agent's own client and the variants in
``travel_variants`` need.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from examples.model_server import ModelServer
from examples.travel_agent.agent import MODEL, build
from loopctl import ApiClient
from loopctl.driver import RunResult
from loopctl.providers import AnthropicClient, OpenAIClient, OpenAIResponsesClient
from loopctl_sim import TraceRecorder

__all__ = [
    "AGENT",
    "BIN",
    "KEY",
    "ROOT",
    "TRIP",
    "agent_env",
    "cli",
    "client_for",
    "end_digest",
    "record",
    "records",
]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
AGENT = "examples.travel_agent.agent:build"
#: The API key the tests give the server (shaped like a real one: it must never be written).
KEY = "sk-proj-acceptanceKEY" + "0123456789abcdefABCDEF"
TRIP = (
    "I want to fly from Oslo to Paris on 2027-03-01 with passport P1234567. What is the price "
    "in USD, what will the weather be, and what should I see there?"
)


def client_for(server: ModelServer, api: str = "openai", *, stream: bool = True) -> ApiClient:
    """The provider client a user points at the server (``base_url``, a key)."""
    if api == "anthropic":
        return AnthropicClient(MODEL, base_url=server.root, api_key=KEY, stream=stream)
    if api == "responses":
        return OpenAIResponsesClient(MODEL, base_url=server.url, api_key=KEY, stream=stream)
    return OpenAIClient(MODEL, base_url=server.url, api_key=KEY, stream=stream)


def record(server: ModelServer, path: Path, message: str = TRIP, api: str = "openai") -> RunResult:
    """One run of the travel agent through ``api``'s client over HTTP, traced to ``path`` as a
    user traces it (a ``TraceRecorder`` among the observers)."""
    recorder = TraceRecorder(path, metadata={"agent": AGENT})
    try:
        return build(client=client_for(server, api), observers=[recorder]).run_sync(message)
    finally:
        recorder.close()


def agent_env(
    server: ModelServer | None = None, api: str = "openai", **extra: str
) -> dict[str, str]:
    """The environment of a command: the agent's own client pointed at ``server``, this folder
    (the variants) and the repository (the example) importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKYWAY_")}
    path = [str(HERE), str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    env["PYTHONPATH"] = os.pathsep.join(path)
    if server is not None:
        env.update(SKYWAY_BASE_URL=server.url, SKYWAY_API=api, SKYWAY_API_KEY=KEY)
    env.update(extra)
    return env


def cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``loopctl ...`` or ``loopctl-sim ...`` from the venv, as typed in a shell."""
    command = [str(BIN / args[0]), *args[1:]]
    return subprocess.run(
        command,
        env=env if env is not None else agent_env(),
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def records(path: Path) -> Iterator[dict[str, Any]]:
    """The trace's records as JSON data."""
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def end_digest(path: Path) -> str | None:
    """The brain's digest the trace's last run ended with (None: it never ended)."""
    ends = [r for r in records(path) if r["type"] == "end"]
    return str(ends[-1]["digest"]) if ends else None


def kinds(path: Path, kind: str) -> Sequence[dict[str, Any]]:
    """The trace's ``io`` records of ``kind``."""
    return [r for r in records(path) if r["type"] == "io" and r["kind"] == kind]


def killed_at_second_call(
    server: ModelServer, args: list[str], trace: Path, cwd: Path, env: dict[str, str]
) -> None:
    """``loopctl run ARGS --trace TRACE`` killed (SIGKILL) while its second model call waits."""
    server.requests.clear()
    server.hold(2)
    process = subprocess.Popen(
        [str(BIN / "loopctl"), "run", *args, "--trace", str(trace)],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120  # a guard against a hang, not a measure
        while len(server.requests) < 2 and process.poll() is None:
            assert time.monotonic() < deadline, "the run never reached its second model call"
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
        server.release()
    assert end_digest(trace) is None  # cut in the middle of the run
    assert [r["turn"] for r in kinds(trace, "model_request")] == [1, 2]
    server.requests.clear()
