"""``loopctl run --base-url http://user:pass@host/v1?api-key=KEY`` against a real server on
127.0.0.1 that answers 401 echoing everything it was sent: neither the password nor the key
reaches stderr or the trace, and the server did get them (as Basic auth and in the query)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from examples.model_server.serving import LocalServer, QuietHandler
from loopctl.cli import main

PASSWORD = "pw-" + "Lk8Jh7Gf6Ds5"
KEY = "gw-" + "Mn4Bv3Cx2Za1Qw"


class _Echo(QuietHandler):
    def do_POST(self) -> None:
        self.body()
        auth = self.headers.get("authorization") or ""
        decoded = ""
        if auth.startswith("Basic "):
            decoded = base64.b64decode(auth.split()[1]).decode()
        self.owner.seen.append({"path": self.path, "authorization": auth, "decoded": decoded})
        message = f"invalid credentials {decoded!r} ({auth}) for {self.path}"
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}})
        self.send(401, "application/json", body.encode())


class _EchoServer(LocalServer):
    """A gateway that refuses every request with a 401 echoing the credentials it was sent."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        super().__init__(_Echo)


@pytest.fixture
def echo_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with _EchoServer() as server:
        yield f"127.0.0.1:{server.port}", server.seen


def _run(base_url: str, trace: Path, env: dict[str, str | None]) -> Any:
    args = ["run", "hi", "--model", "m", "--base-url", base_url, "--trace", str(trace)]
    return CliRunner().invoke(main, args, env=env)


def test_a_401_echoing_the_url_credentials_shows_none_of_them(
    echo_server: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    where, seen = echo_server
    trace = tmp_path / "run.jsonl"
    url = f"http://proxy:{PASSWORD}@{where}/v1?api-key={KEY}"
    result = _run(url, trace, {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None})
    assert result.exit_code == 2, result.output
    # the server got both, and echoed both
    assert seen[0]["path"] == f"/v1/chat/completions?api-key={KEY}"
    assert seen[0]["decoded"] == f"proxy:{PASSWORD}"
    assert "error:" in result.stderr and "invalid credentials" in result.stderr
    recorded = trace.read_text()
    assert '"kind":"auth"' in recorded.replace(" ", "")
    basic = seen[0]["authorization"].split()[1]
    for secret in (PASSWORD, KEY, basic):
        assert secret not in result.stderr
        assert secret not in result.output
        assert secret not in recorded


def test_url_credentials_beside_a_key_are_refused_and_shown_by_neither(
    echo_server: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    where, seen = echo_server
    trace = tmp_path / "run.jsonl"
    env_key = "sk-" + "Ab1Cd2Ef3Gh4Ij5Kl6"
    url = f"http://proxy:{PASSWORD}@{where}/v1?api-key={KEY}"
    result = _run(url, trace, {"OPENAI_API_KEY": env_key, "OPENAI_BASE_URL": None})
    assert result.exit_code == 2, result.output
    assert seen == []
    assert "carries user:password and an API key is set" in result.stderr
    recorded = trace.read_text()
    for secret in (PASSWORD, KEY, env_key):
        assert secret not in result.stderr and secret not in recorded
