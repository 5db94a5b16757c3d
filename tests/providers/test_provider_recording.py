"""Record mode: what a re-recording writes holds no secrets and replays."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import vcr
import yaml
from provider_helpers import events_of, make_client
from test_provider_cassettes import secrets_in
from vcr_support import SECRET_REQUEST_HEADERS, json_body, record_mode, scrub_response

from loopctl.api import ModelRequest, fold_events
from loopctl.core import Message

SSE = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2


def recorder(tmp_path: Path, mode: str) -> vcr.VCR:
    rec = vcr.VCR(
        cassette_library_dir=str(tmp_path),
        record_mode=mode,
        match_on=["method", "path", "json_body"],
        filter_headers=SECRET_REQUEST_HEADERS,
        before_record_response=scrub_response,
    )
    rec.register_matcher("json_body", json_body)
    return rec


async def test_a_recorded_cassette_has_no_secrets_and_replays(tmp_path: Path) -> None:
    def server(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {KEY}"
        headers = {"content-type": "text/event-stream", "set-cookie": f"session={KEY}"}
        return httpx.Response(200, headers=headers, content=SSE + b"data: [DONE]\n\n")

    request = ModelRequest(messages=(Message.user("hi"),))
    http = httpx.AsyncClient(transport=httpx.MockTransport(server))
    client = make_client("openai", http_client=http)
    client.api_key = KEY
    with recorder(tmp_path, "all").use_cassette("rec.yaml"):
        recorded = await events_of(client, request)
    text = (tmp_path / "rec.yaml").read_text()
    assert KEY not in text
    assert secrets_in(text) == []
    saved = yaml.safe_load(text)["interactions"][0]
    assert "authorization" not in {k.lower() for k in saved["request"]["headers"]}
    assert "set-cookie" not in {k.lower() for k in saved["response"]["headers"]}

    def offline(request: httpx.Request) -> httpx.Response:
        raise AssertionError("replay must not reach the server")

    replay_client = make_client(
        "openai", http_client=httpx.AsyncClient(transport=httpx.MockTransport(offline))
    )
    with recorder(tmp_path, "none").use_cassette("rec.yaml"):
        replayed = await events_of(replay_client, request)
    assert replayed == recorded
    assert fold_events(replayed).message.text == "hi"


@pytest.mark.parametrize(
    "value, mode",
    [("", "none"), ("0", "none"), ("1", "new_episodes"), ("once", "once"), ("ALL", "all")],
)
def test_record_mode_from_the_environment(
    value: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPCTL_RECORD", value)
    assert record_mode() == mode


def test_an_unknown_record_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPCTL_RECORD", "sometimes")
    with pytest.raises(ValueError, match="LOOPCTL_RECORD"):
        record_mode()
