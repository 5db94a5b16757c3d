"""Recording: what a re-recording writes holds no secrets and replays (loopctl's exported
cassette machinery, record modes all and none)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml
from provider_helpers import events_of, make_client
from test_provider_cassettes import secrets_in
from vcr_support import SECRET_REQUEST_HEADERS

from loopctl.api import ModelRequest, fold_events
from loopctl.core import Message
from loopctl_sim.plugin.cassettes import CassetteMiss, use_cassette

SSE = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2


def offline_client() -> object:
    def offline(request: httpx.Request) -> httpx.Response:
        raise AssertionError("replay must not reach the server")

    return make_client(
        "openai", http_client=httpx.AsyncClient(transport=httpx.MockTransport(offline))
    )


async def test_a_recorded_cassette_has_no_secrets_and_replays(tmp_path: Path) -> None:
    def server(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {KEY}"
        headers = {"content-type": "text/event-stream", "set-cookie": f"session={KEY}"}
        return httpx.Response(200, headers=headers, content=SSE + b"data: [DONE]\n\n")

    request = ModelRequest(messages=(Message.user("hi"),))
    http = httpx.AsyncClient(transport=httpx.MockTransport(server))
    client = make_client("openai", http_client=http)
    client.api_key = KEY
    with use_cassette(tmp_path / "rec.yaml", record_mode="all"):
        recorded = await events_of(client, request)
    text = (tmp_path / "rec.yaml").read_text()
    assert KEY not in text
    assert secrets_in(text) == []
    saved = yaml.safe_load(text)["interactions"][0]
    assert {k.lower() for k in saved["request"]["headers"]}.isdisjoint(SECRET_REQUEST_HEADERS)
    assert "set-cookie" not in {k.lower() for k in saved["response"]["headers"]}

    replay_client = offline_client()
    with use_cassette(tmp_path / "rec.yaml", record_mode="none"):
        replayed = await events_of(replay_client, request)  # type: ignore[arg-type]
    assert replayed == recorded
    assert fold_events(replayed).message.text == "hi"


async def test_a_request_recorded_once_is_not_replayed_twice(tmp_path: Path) -> None:
    def server(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, content=SSE + b"data: [DONE]\n\n")

    request = ModelRequest(messages=(Message.user("hi"),))
    client = make_client(
        "openai", http_client=httpx.AsyncClient(transport=httpx.MockTransport(server))
    )
    with use_cassette(tmp_path / "rec.yaml", record_mode="once"):
        await events_of(client, request)
    replay_client = offline_client()
    with pytest.raises(CassetteMiss, match="already played"):  # noqa: SIM117
        with use_cassette(tmp_path / "rec.yaml", record_mode="once"):
            await events_of(replay_client, request)  # type: ignore[arg-type]
            await events_of(replay_client, request)  # type: ignore[arg-type]
