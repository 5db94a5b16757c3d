"""loopctl's cassette rules (loopctl_sim.plugin.cassette_rules): matching and scrubbing."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from vcr.request import Request

from loopctl_sim.plugin.cassette_rules import (
    MATCH_ON,
    body_matcher,
    body_text,
    parsed_body,
    register_matchers,
    scrub_body,
    scrub_request,
    scrub_response,
    vcr_config,
)
from loopctl_sim.trace import Scrubber

KEY = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0" * 2
GOOGLE = "AIza" + "SyA1234567890abcdefghijklmnopqrstuv"
SCRUB = Scrubber(key=b"test-key")


def request(
    body: Any, uri: str = "https://api.openai.com/v1/chat/completions", **headers: str
) -> Request:
    data = json.dumps(body).encode() if not isinstance(body, bytes | str | None) else body
    return Request("POST", uri, data, {"content-type": "application/json", **headers})


def matches(a: Any, b: Any) -> bool:
    try:
        body_matcher(request(a), request(b))
    except AssertionError:
        return False
    return True


PROMPT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("recorded", "sent", "same"),
    [
        (PROMPT, PROMPT, True),
        (PROMPT, json.dumps(PROMPT, indent=4, sort_keys=True), True),  # layout and key order
        (PROMPT, {**PROMPT, "messages": [{"role": "user", "content": "hello"}]}, False),
        (PROMPT, {**PROMPT, "temperature": 0.2}, False),  # a setting is part of the request
        (PROMPT, {**PROMPT, "model": "gpt-4o"}, False),
        ({"key": "[REDACTED:0123456789ab]"}, {"key": "[REDACTED]"}, True),  # secrets by shape
        ({"key": "[REDACTED]"}, {"key": "real"}, False),
        (b"plain text", b"plain text", True),
        (b"plain text", b"other text", False),
        (None, b"", True),
        (None, PROMPT, False),
    ],
)
def test_bodies_match_as_parsed_json(recorded: Any, sent: Any, same: bool) -> None:
    assert matches(recorded, sent) is same


def test_the_rules_match_on_method_path_and_body() -> None:
    assert MATCH_ON == ("method", "path", "loopctl_body")
    config = vcr_config(SCRUB)
    assert config["match_on"] == list(MATCH_ON)
    assert config["decode_compressed_response"] is True

    class Recorder:
        matchers: dict[str, Any] = {}

        def register_matcher(self, name: str, fn: Any) -> None:
            self.matchers[name] = fn

    assert register_matchers(Recorder()).matchers == {"loopctl_body": body_matcher}


def test_body_text_is_canonical_json_for_people() -> None:
    assert (
        body_text(json.dumps({"b": 1, "a": [1]}).encode())
        == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}'
    )
    assert body_text(b"not json") == "not json"
    assert body_text(None) == ""
    assert parsed_body(b"") is None


# --- requests ----------------------------------------------------------------------------------


def test_a_request_loses_its_credentials_and_keeps_the_rest() -> None:
    sent = request(
        {**PROMPT, "api_key": "abc12345", "messages": [{"role": "user", "content": f"use {KEY}"}]},
        uri=f"https://example.com/v1/models?key={GOOGLE}&api_key=plain&page=2",
        authorization=f"Bearer {KEY}",
        **{"x-api-key": KEY, "cookie": "session=1", "x-trace": f"token {KEY}", "accept": "*/*"},
    )
    clean = scrub_request(sent, SCRUB)
    assert set(clean.headers) == {"content-type", "x-trace", "accept"}
    assert KEY not in clean.headers["x-trace"]
    assert "[REDACTED:" in clean.headers["x-trace"]
    assert GOOGLE not in clean.uri and "plain" not in clean.uri and "page=2" in clean.uri
    body = json.loads(clean.body)
    assert body["api_key"].startswith("[REDACTED:")
    assert KEY not in body["messages"][0]["content"]
    assert sent.headers["authorization"] == f"Bearer {KEY}"  # the live request is not changed
    assert KEY in sent.body.decode()


def test_a_clean_request_keeps_its_body_bytes() -> None:
    sent = request(b'{"model":"m","messages":[]}')
    assert scrub_request(sent, SCRUB).body == b'{"model":"m","messages":[]}'


def test_scrubbing_twice_changes_nothing_more() -> None:
    sent = request({"messages": [{"role": "user", "content": KEY}]}, authorization=KEY)
    once = scrub_request(sent, SCRUB)
    twice = scrub_request(once, SCRUB)
    assert (twice.body, dict(twice.headers), twice.uri) == (once.body, dict(once.headers), once.uri)


# --- responses ---------------------------------------------------------------------------------

SSE = (
    'data: {"choices":[{"delta":{"content":"your key is ' + KEY + '"}}]}\n\n'
    "event: ping\n"
    "data: [DONE]\n\n"
)


def response(body: Any, content_type: str = "text/event-stream") -> dict[str, Any]:
    return {
        "status": {"code": 200, "message": "OK"},
        "headers": {
            "Content-Type": [content_type],
            "Set-Cookie": ["a=b"],
            "openai-organization": ["org-123"],
            "x-request-id": ["req_1"],
            "content-length": [str(len(body))],
        },
        "body": {"string": body},
    }


@pytest.mark.parametrize("kind", [bytes, str])
def test_a_response_loses_cookies_and_organization_and_secrets_in_its_stream(kind: type) -> None:
    body = SSE.encode() if kind is bytes else SSE
    clean = scrub_response(response(body), SCRUB)
    assert set(clean["headers"]) == {"Content-Type", "x-request-id"}  # length no longer true
    out: bytes | str = clean["body"]["string"]
    assert isinstance(out, kind)
    text = out.decode() if isinstance(out, bytes) else out
    assert KEY not in text
    assert text.endswith("event: ping\ndata: [DONE]\n\n")
    first = json.loads(text.split("\n", 1)[0].removeprefix("data: "))
    assert first["choices"][0]["delta"]["content"].startswith("your key is [REDACTED:")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"token": "abc", "usage": {"total_tokens": 3}}', {"token", "usage"}),
        ('{"a": 1}\n{"password": "p"}\n', None),  # JSON lines, each scrubbed as data
    ],
)
def test_json_bodies_are_scrubbed_as_data(body: str, expected: set[str] | None) -> None:
    out = scrub_body(body, SCRUB)
    if expected is not None:
        data = json.loads(out)
        assert set(data) == expected and data["token"].startswith("[REDACTED:")
        assert data["usage"] == {"total_tokens": 3}  # token counts are not secrets
    else:
        lines = [json.loads(line) for line in out.splitlines()]
        assert lines[0] == {"a": 1} and lines[1]["password"].startswith("[REDACTED:")


def test_a_clean_body_is_returned_as_it_is() -> None:
    body = b'data: {"choices":[]}\n\n'
    assert scrub_body(body, SCRUB) is body
    kept = response(body)
    assert scrub_response(kept, SCRUB)["headers"]["content-length"] == [str(len(body))]
    assert scrub_body(b"", SCRUB) == b""
    assert scrub_body(None, SCRUB) is None


def test_gateway_headers_url_credentials_and_query_keys_are_dropped_and_still_match() -> None:
    """Any request header naming a credential goes (a gateway's key header too); the URL's user
    and password and a credential-named query parameter's value become placeholders; the
    request matches one sent with other credentials."""
    headers = {
        "x-portkey-api-key": "pk-1",
        "X-Gateway-Token": "gw-1",
        "x-custom-secret": "s-1",
        "cf-access-client-auth": "a-1",
        "x-db-password": "p-1",
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "x-request-tag": "nightly",
    }
    uri = "https://bob:hunter2@gw.example.com/v1/chat/completions?api-key=K1&sig=S1&api-version=3"
    clean = scrub_request(request({"a": 1}, uri, **headers), SCRUB)
    assert set(clean.headers) == {"content-type", "anthropic-version", "x-request-tag"}
    assert clean.uri == (
        "https://%5BREDACTED%5D@gw.example.com/v1/chat/completions"
        f"?api-key={quote(SCRUB.placeholder('K1'))}&sig={quote(SCRUB.placeholder('S1'))}"
        "&api-version=3"
    )
    assert "hunter2" not in clean.uri and clean.path == "/v1/chat/completions"
    other = "https://eve:pw@gw.example.com/v1/chat/completions?api-key=K2&sig=S2&api-version=3"
    again = scrub_request(request({"a": 1}, other), SCRUB)
    assert (again.method, again.path) == (clean.method, clean.path)  # MATCH_ON's method, path
    body_matcher(clean, again)  # and body: no AssertionError


def test_a_body_that_is_not_utf8_is_recorded_byte_for_byte_around_a_secret() -> None:
    binary = b"\xff\xfe\x00audio\x80 " + KEY.encode() + b" \xc3"
    clean = scrub_body(binary, SCRUB)
    assert isinstance(clean, bytes) and KEY.encode() not in clean
    assert clean.startswith(b"\xff\xfe\x00audio\x80 [REDACTED:") and clean.endswith(b"] \xc3")
    assert scrub_body(b"\xff\xfe\x00 no secret \x80", SCRUB) == b"\xff\xfe\x00 no secret \x80"
