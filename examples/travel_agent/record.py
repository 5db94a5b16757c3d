"""Record the travel agent's shipped traces the way a user records a run: against a model over
HTTP, through loopctl's provider clients.

The model is the local ``examples.model_server`` (a deterministic stand-in for a hosted model,
speaking the providers' real wire formats over SSE), started on a free port of 127.0.0.1; the
agent is ``examples.travel_agent.agent`` as it stands. From the repository root:

    python examples/travel_agent/record.py          # (re)write examples/travel_agent/traces/
    python examples/travel_agent/record.py --check  # exit 1 when a stored trace is stale

- ``trip.jsonl``: through ``OpenAIClient(base_url=...)`` (Chat Completions, streamed) and a
  ``TraceRecorder``: flights, weather, a price conversion, a 10 KB city guide, a compaction;
- ``trip_anthropic.jsonl``: the same trip through ``AnthropicClient`` (Messages, streamed);
- ``bad_currency.jsonl``: ``loopctl run --agent examples.travel_agent.agent:build --trace``
  (the command line), a passport the hook masks and a currency the tool refuses (``ValueError``).

``--check`` records again and compares: records as ``loopctl-sim diff`` compares them (times
and durations aside), and the server's port, which is a free one each time, aside as well (it
names the provider, ``127.0.0.1:PORT``, and so enters each request's digest).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from examples.model_server import ModelServer  # noqa: E402
from examples.travel_agent.agent import build, own_client  # noqa: E402
from loopctl_sim import TraceRecorder  # noqa: E402

AGENT = "examples.travel_agent.agent:build"
#: A fixed creation time for the traces recorded through the API: the same run, the same trace.
CREATED = "2026-12-01T00:00:00+00:00"
#: The key the recordings send (the server wants one; it never reaches a trace).
KEY = "sk-skyway-recording-key-0123456789"
TRIP = (
    "I want to fly from Oslo to Paris on 2027-03-01 with passport P1234567. What is the price "
    "in USD, what will the weather be, and what should I see there?"
)
BAD_CURRENCY = "Fly me from Oslo to Rome with passport P7654321, and give the price in XYZ."
#: Each shipped trace: (the API its client speaks, the traveller's message, through the CLI?).
TRACES: dict[str, tuple[str, str, bool]] = {
    "trip": ("openai", TRIP, False),
    "trip_anthropic": ("anthropic", TRIP, False),
    "bad_currency": ("openai", BAD_CURRENCY, True),
}


def environment(server: ModelServer, api: str) -> dict[str, str]:
    """What the agent's own client reads: where the model is, which API, the key."""
    return {"SKYWAY_BASE_URL": server.url, "SKYWAY_API": api, "SKYWAY_API_KEY": KEY}


def record(name: str, out: Path) -> None:
    """Record conversation ``name`` to ``out`` against a fresh local model server."""
    api, message, by_cli = TRACES[name]
    with ModelServer(api_key=KEY) as server:
        env = environment(server, api)
        if by_cli:
            command = [str(Path(sys.executable).parent / "loopctl"), "run", message]
            command += ["--agent", AGENT, "--trace", str(out)]
            pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
            done = subprocess.run(
                command,
                env={**os.environ, **env, "PYTHONPATH": pythonpath},
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
            )
            if done.returncode != 0:
                raise SystemExit(f"loopctl run failed ({done.returncode}): {done.stderr}")
            return
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            client = own_client()  # the agent's own client, as the agent builds it
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        with out.open("w", encoding="utf-8") as f:
            recorder = TraceRecorder(f, metadata={"agent": AGENT}, created=CREATED)
            build(client=client, observers=[recorder]).run_sync(message)


_PORT = re.compile(r"127\.0\.0\.1:\d+")


def comparable(path: Path) -> Iterator[Any]:
    """The trace's records as ``--check`` compares them (see the module docstring)."""
    with path.open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(_PORT.sub("127.0.0.1:PORT", line))
            rec.pop("created", None)
            rec.pop("duration_s", None)
            data = rec.get("data")
            if rec.get("kind") == "model_request" and isinstance(data, dict):
                data.pop("digest", None)  # hashes the provider, hence the port
            yield rec


def main(argv: list[str]) -> int:
    stale: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in TRACES:
            path = HERE / "traces" / f"{name}.jsonl"
            if "--check" in argv:
                fresh = Path(tmp) / path.name
                record(name, fresh)
                if not path.exists() or list(comparable(fresh)) != list(comparable(path)):
                    stale.append(str(path))
            else:
                record(name, path)
                print(f"wrote {path}")
    for each in stale:
        print(f"stale: {each} (re-record with python examples/travel_agent/record.py)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
