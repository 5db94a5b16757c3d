"""Error classification, retry hints, keys and request headers."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from provider_helpers import events_of, make_client, mock_http

from loopctl.api import ApiError, ModelRequest, fold_events
from loopctl.core import Message
from loopctl.providers import AnthropicClient, MissingApiKeyError, OllamaClient, OpenAIClient
from loopctl.providers._errors import ProviderInfo, classify, parse_retry_hints
from loopctl.providers._ollama import host_from_env

OPENAI = ProviderInfo("OpenAI", "OPENAI_API_KEY")
ANTHROPIC = ProviderInfo("Anthropic", "ANTHROPIC_API_KEY")
OLLAMA = ProviderInfo("Ollama", None)
REQUEST = ModelRequest(messages=(Message.user("hi"),), turn=1)


def oai(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def ant(type_: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


@pytest.mark.parametrize(
    "info, status, body, kind, retryable, needle",
    [
        # context overflow, in each provider's wording
        (
            OPENAI,
            400,
            oai(
                "This model's maximum context length is 4097 tokens.",
                "invalid_request_error",
                "context_length_exceeded",
            ),
            "context_overflow",
            False,
            "4097",
        ),
        (
            ANTHROPIC,
            400,
            ant("invalid_request_error", "prompt is too long: 208656 tokens > 200000 maximum"),
            "context_overflow",
            False,
            "prompt is too long",
        ),
        (
            OPENAI,
            400,
            {
                "error": {
                    "code": 400,
                    "message": "request (5120 tokens) exceeds the available "
                    "context size (4096 tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 5120,
                    "n_ctx": 4096,
                }
            },
            "context_overflow",
            False,
            "5120",
        ),
        # rate limit vs exhausted quota
        (
            OPENAI,
            429,
            oai(
                "Rate limit reached for gpt-4o-mini. Please try again in 3.89s.",
                "requests",
                "rate_limit_exceeded",
            ),
            "rate_limited",
            True,
            "Rate limit",
        ),
        (
            OPENAI,
            429,
            oai(
                "You exceeded your current quota, please check your plan and billing details.",
                "insufficient_quota",
                "insufficient_quota",
            ),
            "provider",
            False,
            "billing",
        ),
        (
            ANTHROPIC,
            429,
            ant("rate_limit_error", "This request would exceed the rate limit"),
            "rate_limited",
            True,
            "rate limit",
        ),
        (
            OPENAI,
            402,
            {"error": {"code": 402, "message": "Insufficient credits"}},
            "provider",
            False,
            "billing",
        ),
        (
            ANTHROPIC,
            429,
            ant(
                "rate_limit_error",
                "You have reached your specified API usage limits. "
                "You will regain access on 2026-12-01.",
            ),
            "provider",
            False,
            "billing",
        ),
        (
            ANTHROPIC,
            400,
            ant(
                "invalid_request_error",
                "Your credit balance is too low to access the Anthropic API.",
            ),
            "provider",
            False,
            "billing",
        ),
        (ANTHROPIC, 402, ant("billing_error", "Payment required"), "provider", False, "billing"),
        # overloaded
        (ANTHROPIC, 529, ant("overloaded_error", "Overloaded"), "overloaded", True, "Overloaded"),
        (
            OPENAI,
            503,
            oai("The engine is currently overloaded, please try again later", "server_error"),
            "overloaded",
            True,
            "overloaded",
        ),
        # auth names the variable
        (
            OPENAI,
            401,
            oai("Incorrect API key provided: sk-test.", "invalid_request_error", "invalid_api_key"),
            "auth",
            False,
            "OPENAI_API_KEY",
        ),
        (
            ANTHROPIC,
            401,
            ant("authentication_error", "invalid x-api-key"),
            "auth",
            False,
            "ANTHROPIC_API_KEY",
        ),
        (
            ANTHROPIC,
            403,
            ant("permission_error", "not allowed"),
            "auth",
            False,
            "ANTHROPIC_API_KEY",
        ),
        # retryable statuses
        (OPENAI, 408, oai("Request timed out.", "timeout"), "timeout", True, "timed out"),
        (OPENAI, 409, oai("Conflict.", "conflict"), "provider", True, "Conflict"),
        (
            OPENAI,
            500,
            oai("The server had an error", "server_error"),
            "provider",
            True,
            "server had",
        ),
        (ANTHROPIC, 504, ant("timeout_error", "Request timeout"), "timeout", True, "timeout"),
        (OLLAMA, 502, "Bad Gateway", "provider", True, "Bad Gateway"),
        # not retryable
        (
            OPENAI,
            400,
            oai("Invalid 'messages[1].role'", "invalid_request_error"),
            "provider",
            False,
            "Invalid",
        ),
        (OLLAMA, 404, {"error": "model 'llama9' not found"}, "provider", False, "not found"),
        (
            OPENAI,
            400,
            {"object": "error", "message": "bad request", "code": 400},
            "provider",
            False,
            "bad request",
        ),
        # in-stream errors (no status)
        (ANTHROPIC, None, ant("overloaded_error", "Overloaded"), "overloaded", True, "Overloaded"),
        (
            OPENAI,
            None,
            {"error": {"message": "The server had an error", "type": "server_error"}},
            "provider",
            True,
            "stream",
        ),
        (
            OLLAMA,
            None,
            {"error": "an error was encountered while running the model"},
            "provider",
            True,
            "encountered",
        ),
    ],
)
def test_classification(
    info: ProviderInfo,
    status: int | None,
    body: Any,
    kind: str,
    retryable: bool,
    needle: str,
) -> None:
    err = classify(info, status, body)
    assert err.error.kind == kind
    assert err.error.retryable is retryable
    assert err.error.status == status
    assert needle in err.error.message


@pytest.mark.parametrize(
    "headers, retry_after, should_retry",
    [
        ({}, None, None),
        ({"retry-after": "3"}, 3.0, None),
        ({"Retry-After": "1.5"}, 1.5, None),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25, None),
        ({"retry-after": "Mon, 30 Nov 2026 09:00:30 GMT"}, 30.0, None),
        ({"retry-after": "Mon, 30 Nov 2026 08:59:00 GMT"}, 0.0, None),
        ({"retry-after": "soon"}, None, None),
        ({"retry-after-ms": "x", "retry-after": "2"}, 2.0, None),
        ({"x-should-retry": "true"}, None, True),
        ({"x-should-retry": "false", "retry-after": "1"}, 1.0, False),
        ({"x-should-retry": "maybe"}, None, None),
    ],
)
def test_retry_hints(
    headers: dict[str, str], retry_after: float | None, should_retry: bool | None
) -> None:
    now = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)
    assert parse_retry_hints(headers, now=now) == (retry_after, should_retry)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "ollama"])
async def test_http_error_through_the_client_carries_hints_and_request_id(provider: str) -> None:
    body = {"error": {"message": "slow down", "type": "rate_limit_error"}}
    headers = {"retry-after": "7", "x-should-retry": "true", "x-request-id": "req_42"}
    http = mock_http(json.dumps(body).encode(), status=429, headers=headers)
    with pytest.raises(ApiError) as caught:
        await events_of(make_client(provider, http_client=http), REQUEST)
    err = caught.value
    assert (err.error.kind, err.retry_after, err.should_retry) == ("rate_limited", 7.0, True)
    assert err.error.details["request_id"] == "req_42"


async def test_an_error_body_that_is_not_json() -> None:
    http = mock_http(b"<html>502 Bad Gateway</html>", status=502)
    with pytest.raises(ApiError) as caught:
        await events_of(make_client("openai", http_client=http), REQUEST)
    assert caught.value.error.kind == "provider"
    assert caught.value.error.retryable is True
    assert "502 Bad Gateway" in caught.value.error.message


# --- keys and hosts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "factory, env_var",
    [
        (lambda: OpenAIClient("gpt-4o-mini"), "OPENAI_API_KEY"),
        (lambda: AnthropicClient("claude-sonnet-4-20250514"), "ANTHROPIC_API_KEY"),
    ],
)
def test_a_missing_key_names_the_variable(factory: Any, env_var: str) -> None:
    with pytest.raises(MissingApiKeyError) as caught:
        factory()
    assert env_var in str(caught.value)
    assert caught.value.error.kind == "auth"
    assert caught.value.env_var == env_var


def test_keys_come_from_the_environment_and_explicit_arguments_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env-too")
    assert OpenAIClient("m").api_key == "from-env"
    assert OpenAIClient("m", api_key="explicit").api_key == "explicit"
    assert AnthropicClient("m").api_key == "from-env-too"
    assert AnthropicClient("m", api_key="explicit").api_key == "explicit"


def test_local_openai_compatible_servers_need_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert OpenAIClient("m", base_url="http://127.0.0.1:8000/v1").api_key is None
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:1234/v1")
    client = OpenAIClient("m")
    assert client.url() == "http://localhost:1234/v1/chat/completions"
    assert "authorization" not in client.headers()


@pytest.mark.parametrize(
    "value, url",
    [
        (None, "http://127.0.0.1:11434"),
        ("", "http://127.0.0.1:11434"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("0.0.0.0:11435", "http://127.0.0.1:11435"),
        ("gpu-box:8080", "http://gpu-box:8080"),
        ("http://gpu-box", "http://gpu-box:11434"),
        ("https://ollama.example.com/", "https://ollama.example.com:443"),
        ("[::1]:11434", "http://[::1]:11434"),
    ],
)
def test_ollama_host(value: str | None, url: str) -> None:
    assert host_from_env(value) == url


def test_ollama_host_from_env_and_explicit_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:9000")
    assert OllamaClient("m").url() == "http://gpu-box:9000/api/chat"
    assert OllamaClient("m", base_url="http://x:1").url() == "http://x:1/api/chat"


async def test_request_headers_and_bodies() -> None:
    seen: list[httpx.Request] = []
    sse = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    openai = OpenAIClient(
        "gpt-4o-mini",
        api_key="k1",
        http_client=mock_http(sse, seen=seen),
        options={"temperature": 0.2, "max_tokens": 100},
    )
    await events_of(openai, ModelRequest(messages=REQUEST.messages, options={"max_tokens": 5}))
    assert seen[0].headers["authorization"] == "Bearer k1"
    body = json.loads(seen[0].content)
    assert (body["temperature"], body["max_tokens"], body["stream"]) == (0.2, 5, True)
    assert body["stream_options"] == {"include_usage": True}
    assert str(seen[0].url) == "https://api.openai.com/v1/chat/completions"

    ant_sse = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    anthropic = AnthropicClient(
        "claude-sonnet-4-20250514", api_key="k2", http_client=mock_http(ant_sse, seen=seen)
    )
    await events_of(anthropic, REQUEST)
    assert seen[1].headers["x-api-key"] == "k2"
    assert seen[1].headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in seen[1].headers
    assert json.loads(seen[1].content)["max_tokens"] == 4096
    assert str(seen[1].url) == "https://api.anthropic.com/v1/messages"

    small = AnthropicClient(
        "m", api_key="k2", max_tokens=64, http_client=mock_http(ant_sse, seen=seen)
    )
    await events_of(small, REQUEST)
    assert json.loads(seen[2].content)["max_tokens"] == 64


async def test_a_connect_error_never_shows_credentials_in_the_url() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    client = OpenAIClient("m", base_url="http://user:hunter2@127.0.0.1:8000/v1", http_client=http)
    with pytest.raises(ApiError) as caught:
        await events_of(client, REQUEST)
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in json.dumps(caught.value.error.details)
    assert "127.0.0.1:8000" in caught.value.error.message


async def test_aclose_closes_only_a_client_it_created() -> None:
    injected = httpx.AsyncClient()
    client = OllamaClient("m", http_client=injected)
    await client.aclose()
    assert not injected.is_closed
    await injected.aclose()
    own = OllamaClient("m")
    created = own.http_client
    await own.aclose()
    assert created.is_closed


async def test_an_openai_refusal_is_text() -> None:
    body = (
        b'data: {"choices":[{"index":0,"delta":{"refusal":"I can\'t help with that."},'
        b'"finish_reason":null}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    client = OpenAIClient("m", api_key="k", http_client=mock_http(body))
    events = await events_of(client, REQUEST)
    assert fold_events(events).message.text == "I can't help with that."


def test_the_public_surface() -> None:
    import loopctl.providers as providers

    classes = {n for n in dir(providers) if n[0].isupper()}
    assert set(providers.__all__) == classes  # the clients, their base and the key error
    for name in providers.__all__:
        assert getattr(providers, name) is not None


@pytest.mark.parametrize(
    "client",
    [
        lambda: OpenAIClient("m", api_key="k"),
        lambda: AnthropicClient("m", api_key="k"),
        lambda: OllamaClient("m"),
    ],
)
def test_every_client_is_an_api_client(client: Any) -> None:
    from loopctl.api import ApiClient

    assert isinstance(client(), ApiClient)
