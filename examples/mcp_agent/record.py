"""Record the MCP agent's shipped trace the way a user records a run: the agent's own
``OpenAIClient`` over HTTP against the local model server (``examples.model_server``, on a free
port of 127.0.0.1), a ``TraceRecorder`` on the loop, and the real ``mcp-server-time`` over stdio.

    python examples/mcp_agent/record.py   # (re)write examples/mcp_agent/traces/clock.jsonl

The trace holds the MCP session (``mcp`` IO records: the tools the server advertised, the call's
result) and no key: the recording's key is scrubbed wherever it would appear.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from examples.mcp_agent.agent import TIME, build, own_client  # noqa: E402
from examples.model_server import ModelServer  # noqa: E402
from loopctl_sim import TraceRecorder  # noqa: E402

AGENT = "examples.mcp_agent.agent:build"
CREATED = "2026-12-01T00:00:00+00:00"
KEY = "sk-skyway-recording-key-0123456789"
QUESTION = "when it is 09:30 in Europe/Oslo, what time is it in Asia/Tokyo?"


def record(out: Path) -> None:
    """Record the question to ``out`` against a fresh local model server."""
    with ModelServer(api_key=KEY) as server:
        os.environ["SKYWAY_BASE_URL"] = server.url
        os.environ["SKYWAY_API_KEY"] = KEY
        client = own_client()
        with out.open("w", encoding="utf-8") as f:
            recorder = TraceRecorder(f, metadata={"agent": AGENT}, created=CREATED)
            result = build(client=client, observers=[recorder]).run_sync(QUESTION)
    TIME.close()
    print(result.final_text)


if __name__ == "__main__":
    path = HERE / "traces" / "clock.jsonl"
    record(path)
    print(f"wrote {path}")
