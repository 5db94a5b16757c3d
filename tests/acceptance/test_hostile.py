"""Issue 31 tried again as the hostile user and the unlucky operator did, across modules.

Each test does what the issue's user did (a real server on 127.0.0.1, the commands in a
subprocess, the public API) and checks what the issue said must hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from acceptance_helpers import KEY, agent_env, cli
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from examples.model_server import ModelServer
from examples.model_server.serving import LocalServer, QuietHandler
from loopctl import BareLoop
from loopctl.otel import OtelObserver
from loopctl.providers import OpenAIClient
from loopctl_sim import TraceRecorder

GATEWAY_KEY = "pkGateway" + "Secret0123456789"
GOOGLE_KEY = "gooKey" + "Abc123456XyZ"


class _Echo401(QuietHandler):
    """Refuses every request with a 401 that echoes its path and headers, as some gateways do."""

    def do_POST(self) -> None:
        self.body()
        echo = f"Incorrect API key provided for {self.path} headers={dict(self.headers)}"
        payload = json.dumps({"error": {"message": echo, "type": "invalid_request_error"}})
        self.send(401, "application/json", payload.encode())


@pytest.fixture
def echo_401() -> Iterator[str]:
    """The base URL of a server on 127.0.0.1 that answers every request with an echoing 401."""
    with LocalServer(_Echo401) as server:
        yield f"{server.root}/v1"


@pytest.mark.parametrize("capture", [False, True])
def test_gateway_headers_echoed_by_a_401_reach_no_span_and_no_trace(
    echo_401: str, tmp_path: Path, capture: bool
) -> None:
    # a shared httpx client carrying a gateway's key headers (docs/providers.md shows sharing)
    shared = httpx.AsyncClient(
        headers={"x-portkey-api-key": GATEWAY_KEY, "x-goog-api-key": GOOGLE_KEY}
    )
    client = OpenAIClient(
        "m", api_key="sk-unused-" + "k" * 12, base_url=echo_401, http_client=shared
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace = tmp_path / "run.jsonl"
    recorder = TraceRecorder(trace)
    try:
        result = BareLoop(
            client, observers=[OtelObserver(provider, capture_content=capture), recorder]
        ).run_sync("hi")
    finally:
        recorder.close()
    assert result.error is not None and result.error.kind == "auth"
    assert "x-portkey-api-key" in result.error.message  # the echo is kept, its values are not
    spans = exporter.get_finished_spans()
    assert {s.name for s in spans} >= {"invoke_agent loopctl", "chat m"}
    for span in spans:
        seen = repr(span.status.description) + repr(dict(span.attributes or {}))
        seen += repr([dict(e.attributes or {}) for e in span.events])
        assert GATEWAY_KEY not in seen and GOOGLE_KEY not in seen, span.name
    written = trace.read_text()
    assert GATEWAY_KEY not in written and GOOGLE_KEY not in written
    assert GATEWAY_KEY not in str(result.error) and GOOGLE_KEY not in str(result.error)


def test_a_dot_env_read_by_loopctl_run_leaves_no_password_in_the_trace(
    model_server: ModelServer, tmp_path: Path
) -> None:
    """The built-in agent reads a ``.env`` for the model: a quoted password with spaces and an
    unquoted one holding ``&`` were left whole, or with their tail after ``&``, in the trace."""
    (tmp_path / ".env").write_text(
        "HOST=db.internal.example\n"
        "DB_PASSWORD='correct horse battery staple'\n"
        "PASSWD=Tr0ub4dor&3xyz\n"
    )
    trace = tmp_path / "run.jsonl"
    done = cli(
        "loopctl", "run", "read the file .env", "--model", "skyway-model-1",
        "--base-url", model_server.url, "--trace", str(trace),
        env=agent_env(None, OPENAI_API_KEY=KEY), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(".env: 90 characters")
    written = trace.read_text()
    assert "DB_PASSWORD='[REDACTED]'\\nPASSWD=[REDACTED]\\n" in written
    for piece in ("correct horse", "battery staple", "Tr0ub4dor", "3xyz"):
        assert piece not in written and piece not in done.stderr, piece
    replayed = cli("loopctl-sim", "replay", str(trace), cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_a_401_from_loopctl_run_reads_as_the_server_wrote_it_and_shows_no_key(
    echo_401: str, tmp_path: Path
) -> None:
    """The client's message said "refused the credentials: Incorrect API key...", which reads
    as a value given to a secret name: the trace and stderr showed "[REDACTED] API key"."""
    key = "sk-proj-" + "hostileKEY0123456789abcdef"
    trace = tmp_path / "run.jsonl"
    done = cli(
        "loopctl", "run", "hi", "--model", "m", "--base-url", echo_401, "--trace", str(trace),
        env=agent_env(None, OPENAI_API_KEY=key), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0
    assert "refused the credentials, saying: Incorrect API key provided" in done.stderr
    assert "Bearer [REDACTED]" in done.stderr
    written = trace.read_text()
    assert "saying: Incorrect API key provided" in written
    assert key not in done.stderr + written and key[8:] not in done.stderr + written


AGENT_WITH_ESCAPES = '''
from loopctl import BareLoop, Message, tool
from loopctl.core import ToolCall
from loopctl.testing import ScriptedClient


@tool
def fetch(url: str) -> str:
    """Fetch a page."""
    raise RuntimeError("page said \\x1b]0;PWNED\\x07 and \\u202e")


def build(client=None, observers=()):
    script = ScriptedClient(
        [
            Message.assistant("", [ToolCall(id="c1", name="fetch", arguments={"url": "x"})]),
            Message.assistant("Done \\x1b]8;;http://evil\\x1b\\\\here\\x1b]8;;\\x1b\\\\ \\x1b[2J."),
        ]
    )
    return BareLoop(client or script, tools=[fetch], observers=list(observers))
'''


def test_loopctl_run_prints_no_raw_control_character_on_stderr(tmp_path: Path) -> None:
    """A tool's error (a page it fetched, say) held an OSC title change and a bidi override,
    and its warning line went raw to the terminal's stderr."""
    (tmp_path / "escaping_agent.py").write_text(AGENT_WITH_ESCAPES)
    env = agent_env(None)
    env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
    done = cli("loopctl", "run", "go", "--agent", "escaping_agent:build", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stderr and "\u202e" not in done.stderr and "\x07" not in done.stderr
    assert "page said \\x1b]0;PWNED\\x07 and \\u202e" in done.stderr
    assert done.stdout.startswith("Done ")  # a pipe gets the answer as the model wrote it
