"""What a base URL holds besides a place: a query, ``user:password@``, a key in the query.

Every client joins its endpoint to the base URL's path and keeps the query (Azure-style
``?api-version=X``); sends the URL's userinfo on purpose as HTTP Basic (never as part of the
URL), and refuses it beside a key that goes in the same header; and shows neither the password
nor a secret query value in its errors, even when the server echoes them.
"""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from provider_helpers import events_of

from loopctl.api import ApiError, ModelRequest
from loopctl.core import Message
from loopctl.providers import (
    AnthropicClient,
    OllamaClient,
    OpenAIClient,
    OpenAIResponsesClient,
)
from loopctl.providers._common import HttpProvider

REQUEST = ModelRequest(messages=[Message.user("hi")])
KEY = "gw-key-" + "Q1w2E3r4T5y6"
PASSWORD = "pw-" + "Zx9Cv8Bn7"


def _client(kind: str, base_url: str, seen: list[httpx.Request], **kw: object) -> HttpProvider:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        echo = f"bad credentials: {request.url} {request.headers.get('authorization')}"
        return httpx.Response(401, json={"error": {"message": echo, "type": "auth_error"}})

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    args = {"base_url": base_url, "http_client": http, **kw}
    if kind == "openai":
        return OpenAIClient("m", **args)  # type: ignore[arg-type]
    if kind == "responses":
        return OpenAIResponsesClient("m", **args)  # type: ignore[arg-type]
    if kind == "anthropic":
        return AnthropicClient("m", api_key="ak", **args)  # type: ignore[arg-type]
    return OllamaClient("m", **args)  # type: ignore[arg-type]


ENDPOINTS = {
    "openai": "/chat/completions",
    "responses": "/responses",
    "anthropic": "/v1/messages",
    "ollama": "/api/chat",
}


@pytest.mark.parametrize("kind", list(ENDPOINTS))
@pytest.mark.parametrize("slash", ["", "/"])
async def test_the_endpoint_is_joined_to_the_path_and_the_query_kept(kind: str, slash: str) -> None:
    seen: list[httpx.Request] = []
    client = _client(kind, f"https://gw.example/openai/deploy{slash}?api-version=2024-10-21", seen)
    with pytest.raises(ApiError):
        await events_of(client, REQUEST)
    url = seen[0].url
    assert url.path == "/openai/deploy" + ENDPOINTS[kind]
    assert url.params["api-version"] == "2024-10-21"
    assert client.base_url == "https://gw.example/openai/deploy?api-version=2024-10-21"


async def test_a_plain_base_url_still_gives_the_plain_endpoint() -> None:
    seen: list[httpx.Request] = []
    client = _client("openai", "http://127.0.0.1:8000/v1/", seen)
    with pytest.raises(ApiError):
        await events_of(client, REQUEST)
    assert str(seen[0].url) == "http://127.0.0.1:8000/v1/chat/completions"
    assert client.base_url == "http://127.0.0.1:8000/v1"
    ollama = OllamaClient("m", base_url="http://127.0.0.1:11434")
    assert ollama.url() == "http://127.0.0.1:11434/api/chat"


@pytest.mark.parametrize("kind", ["openai", "responses", "ollama", "anthropic"])
async def test_userinfo_goes_as_basic_auth_and_never_in_the_url(kind: str) -> None:
    seen: list[httpx.Request] = []
    client = _client(kind, f"http://proxy-user:{PASSWORD}@127.0.0.1:9/v1", seen)
    with pytest.raises(ApiError) as caught:
        await events_of(client, REQUEST)
    request = seen[0]
    assert request.url.userinfo == b""
    expected = base64.b64encode(f"proxy-user:{PASSWORD}".encode()).decode()
    assert request.headers["authorization"] == f"Basic {expected}"
    if kind == "anthropic":
        assert request.headers["x-api-key"] == "ak"  # the provider's key rides beside it
    # the server echoed the URL and the header: neither secret is in the error
    text = str(caught.value) + json.dumps(caught.value.error.model_dump())
    assert PASSWORD not in text and expected not in text
    assert "[REDACTED]" in text
    assert PASSWORD not in client.base_url and PASSWORD not in repr(client.info)


async def test_userinfo_beside_a_bearer_key_is_refused_not_swapped() -> None:
    seen: list[httpx.Request] = []
    client = _client("openai", f"http://u:{PASSWORD}@127.0.0.1:9/v1", seen, api_key=KEY)
    with pytest.raises(ApiError) as caught:
        await events_of(client, REQUEST)
    assert seen == []  # nothing was sent
    error = caught.value.error
    assert error.kind == "auth" and not error.retryable
    assert "carries user:password and an API key is set" in error.message
    assert PASSWORD not in str(caught.value) and KEY not in str(caught.value)


async def test_an_empty_key_lets_the_url_credentials_through() -> None:
    seen: list[httpx.Request] = []
    client = _client("openai", f"http://u:{PASSWORD}@127.0.0.1:9/v1", seen, api_key="")
    with pytest.raises(ApiError):
        await events_of(client, REQUEST)
    assert seen[0].headers["authorization"].startswith("Basic ")


async def test_a_key_in_the_query_is_sent_and_never_shown() -> None:
    seen: list[httpx.Request] = []
    client = _client("openai", f"http://127.0.0.1:9/v1?api-key={KEY}&api-version=1", seen)
    with pytest.raises(ApiError) as caught:
        await events_of(client, REQUEST)
    assert seen[0].url.params["api-key"] == KEY  # the gateway gets it
    text = str(caught.value) + json.dumps(caught.value.error.model_dump())
    assert KEY not in text and "[REDACTED]" in text


async def test_an_echoed_api_key_is_redacted_from_the_error() -> None:
    seen: list[httpx.Request] = []
    client = _client("openai", "http://127.0.0.1:9/v1", seen, api_key=KEY)
    with pytest.raises(ApiError) as caught:
        await events_of(client, REQUEST)
    assert seen[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in str(caught.value)
    assert caught.value.error.kind == "auth" and caught.value.error.status == 401


async def test_a_connection_error_names_the_url_without_its_secrets() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach {request.url}")

    http = httpx.AsyncClient(transport=httpx.MockTransport(refuse))
    client = OpenAIClient(
        "m", base_url=f"http://u:{PASSWORD}@127.0.0.1:9/v1?api-key={KEY}", http_client=http
    )
    with pytest.raises(ApiError) as caught:
        await events_of(client, REQUEST)
    error = caught.value.error
    assert error.kind == "network"
    text = str(caught.value) + json.dumps(error.model_dump())
    assert PASSWORD not in text and KEY not in text
    assert error.details["base_url"] == "http://127.0.0.1:9/v1?api-key=[REDACTED]"


async def test_ollama_host_with_credentials_is_read_like_a_base_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", f"proxy:{PASSWORD}@127.0.0.1:9/ollama?tenant=a")
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(401, json={"error": f"bad {request.headers['authorization']}"})

    client = OllamaClient(
        "m", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler))
    )
    with pytest.raises(ApiError) as caught:
        await events_of(client, REQUEST)
    assert str(seen[0].url) == "http://127.0.0.1:9/ollama/api/chat?tenant=a"
    expected = base64.b64encode(f"proxy:{PASSWORD}".encode()).decode()
    assert seen[0].headers["authorization"] == f"Basic {expected}"
    assert expected not in str(caught.value) and PASSWORD not in client.base_url
