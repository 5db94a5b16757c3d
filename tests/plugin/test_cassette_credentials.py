"""Credentials a request carries outside its body are not recorded, and replay still matches.

A user's HTTP client reaches its model through a gateway: the password in the URL
(``http://user:pass@host``), a key as a query parameter (``?api-key=``, as Azure takes it) and
the gateway's own key headers (``x-portkey-api-key``, ``x-gateway-auth-token``). The recorded
cassette holds none of them, and replays (server gone, other credentials in CI) as recorded.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import yaml
from fake_streams import FakeStreams, Text

from loopctl.testing import block_network
from loopctl_sim.plugin.cassettes import use_cassette

PASSWORD = "hunter2-correct-horse"
QUERY_KEY = "azq-6f1c0ffee0ddba11"
GATEWAY_KEY = "pk-live-9b8a7c6d5e4f"
GATEWAY_TOKEN = "gw-tok-0a1b2c3d4e5f"
BODY = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}


async def ask(url: str, password: str, query_key: str, gateway_key: str) -> str:
    headers = {
        "x-portkey-api-key": gateway_key,
        "x-gateway-auth-token": GATEWAY_TOKEN,
        "x-request-tag": "nightly",
    }
    async with httpx.AsyncClient(headers=headers) as http:
        target = url.replace("http://", f"http://ada:{password}@") + "/chat/completions"
        params = {"api-key": query_key, "api-version": "2024-10-21"}
        response = await http.post(target, params=params, json=BODY)
        response.raise_for_status()
        return response.text


async def test_url_password_query_key_and_gateway_headers_are_not_recorded(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "gateway.yaml"
    with FakeStreams("openai", [Text(["Hel", "lo!"])]) as server:
        url = server.url
        with use_cassette(cassette, record_mode="once"):
            recorded = await ask(url, PASSWORD, QUERY_KEY, GATEWAY_KEY)
    path, headers = server.seen[0]  # the server did get them
    assert QUERY_KEY in path and headers["x-portkey-api-key"] == GATEWAY_KEY

    text = cassette.read_text()
    for secret in (PASSWORD, QUERY_KEY, GATEWAY_KEY, GATEWAY_TOKEN, "ada:"):
        assert secret not in text, secret
    request = yaml.safe_load(text)["interactions"][0]["request"]
    host = url.removeprefix("http://").removesuffix("/v1")
    assert request["uri"] == (
        f"http://%5BREDACTED%5D@{host}/v1/chat/completions"
        "?api-key=%5BREDACTED%5D&api-version=2024-10-21"
    )
    kept = {name.lower() for name in request["headers"]}
    assert "x-request-tag" in kept
    assert kept.isdisjoint({"x-portkey-api-key", "x-gateway-auth-token", "authorization"})

    # CI: the server gone, other credentials; the request still matches its recording
    with block_network(allow_loopback=False), use_cassette(cassette) as played:
        replayed = await ask(url, "other-password", "other-query-key", "pk-ci-000")
    assert replayed == recorded and played.all_played
