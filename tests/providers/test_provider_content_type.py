"""The response's content type decides the parser; a body that cannot be parsed says where, and
a failure that repeats the same way is fatal instead of being retried again."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from provider_helpers import events_of, make_client, mock_http

from loopctl import Completed, Failed, Message
from loopctl.api import ApiError, ModelRequest, fold_events
from loopctl.driver import BareLoop, RetryConfig, RunConfig

REQUEST = ModelRequest(messages=(Message.user("hi"),), turn=1)
SSE = {"content-type": "text/event-stream"}
JSON = {"content-type": "application/json"}

WHOLE = {
    "openai": {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
        ],
    },
    "anthropic": {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "Hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
    "ollama": {
        "model": "m",
        "created_at": "2025-12-01T12:00:00Z",
        "message": {"role": "assistant", "content": "Hi"},
        "done": True,
        "prompt_eval_count": 3,
        "eval_count": 1,
    },
}


def sse(*events: dict[str, Any], named: bool = True, done: bool = False) -> bytes:
    """Server-sent events of ``events`` (with ``event:`` lines when ``named``)."""
    lines = [
        (f"event: {e['type']}\n" if named else "") + f"data: {json.dumps(e)}\n\n" for e in events
    ]
    return ("".join(lines) + ("data: [DONE]\n\n" if done else "")).encode()


HI_CHUNK = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]}
STREAM = {
    "openai": (SSE, sse(HI_CHUNK, named=False, done=True)),
    "anthropic": (
        SSE,
        sse(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": "Hi"},
            },
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 1},
            },
            {"type": "message_stop"},
        ),
    ),
    "ollama": (
        {"content-type": "application/x-ndjson"},
        json.dumps({**WHOLE["ollama"], "model": "m"}).encode() + b"\n",
    ),
}
PROVIDERS = list(WHOLE)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_json_body_answering_a_streaming_request_is_read_whole(provider: str) -> None:
    body = json.dumps(WHOLE[provider]).encode()
    client = make_client(
        provider,
        http_client=mock_http(body, headers={"content-type": "application/json; charset=utf-8"}),
    )
    reply = fold_events(await events_of(client, REQUEST))
    assert reply.message.text == "Hi"
    assert reply.stop_reason == "end_turn"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_answering_a_non_streaming_request_is_parsed_as_a_stream(
    provider: str,
) -> None:
    headers, body = STREAM[provider]
    client = make_client(provider, stream=False, http_client=mock_http(body, headers=headers))
    reply = fold_events(await events_of(client, REQUEST))
    assert reply.message.text == "Hi"


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [True, False])
async def test_an_unexpected_content_type_is_a_clear_error_not_retried(
    provider: str, stream: bool
) -> None:
    page = b"<html><body>Sign in to the corporate proxy</body></html>"
    client = make_client(
        provider, stream=stream, http_client=mock_http(page, headers={"content-type": "text/html"})
    )
    with pytest.raises(ApiError) as caught:
        await events_of(client, REQUEST)
    error = caught.value.error
    assert error.retryable is False
    assert "content type 'text/html'" in error.message
    assert "corporate proxy" in error.message
    assert error.details["content_type"] == "text/html"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_error_body_answering_a_streaming_request_is_classified(provider: str) -> None:
    body = json.dumps(
        {"error": {"message": "The server is overloaded", "type": "server_error"}}
    ).encode()
    client = make_client(provider, http_client=mock_http(body, headers=JSON))
    with pytest.raises(ApiError) as caught:
        await events_of(client, REQUEST)
    assert caught.value.error.kind == "overloaded"


@pytest.mark.parametrize(
    "provider, headers, body, where",
    [
        ("openai", JSON, b'{"choices": [', "the JSON body"),
        ("openai", JSON, b'{"choices": "none"}', "the JSON body"),
        ("openai", SSE, b'data: {"choices":[]}\n\ndata: {"choices": [\n\n', "event 2, line 3"),
        (
            "anthropic",
            SSE,
            sse({"type": "ping"}, {"type": "message_start", "message": ["x"]}),
            "event 2 (message_start), line 4",
        ),
        (
            "ollama",
            {"content-type": "application/x-ndjson"},
            b'{"done": false}\n{"message": \n',
            "line 2",
        ),
    ],
)
async def test_a_body_that_cannot_be_parsed_says_where(
    provider: str, headers: dict[str, str], body: bytes, where: str
) -> None:
    with pytest.raises(ApiError) as caught:
        await events_of(
            make_client(provider, http_client=mock_http(body, headers=headers)), REQUEST
        )
    error = caught.value.error
    assert "could not be parsed" in error.message
    assert f"at {where}" in error.message
    assert error.details["where"] == where
    assert error.details["parse"] is True
    assert error.retryable is True  # one bad reply may be followed by a good one


# --- the driver gives up on a failure that repeats --------------------------------------------


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def serving(*bodies: bytes) -> tuple[httpx.AsyncClient, list[int]]:
    """An HTTP client answering with ``bodies`` in turn (the last one again and again)."""
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        body = bodies[min(len(calls), len(bodies)) - 1]
        return httpx.Response(200, headers=JSON, content=body)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler)), calls


async def run(http: httpx.AsyncClient, retries: int) -> Any:
    client = make_client("openai", stream=False, http_client=http)
    config = RunConfig(retry=RetryConfig(max_retries=retries))
    return await BareLoop(client, config=config, sleep=Sleeps(), rng=lambda: 0.0).run("hi")


async def test_a_body_that_fails_the_same_way_twice_is_fatal_whatever_the_retries() -> None:
    http, calls = serving(b'{"choices": "none"}')
    result = await run(http, retries=6)
    assert isinstance(result.outcome, Failed)
    assert len(calls) == 2  # not six more times: it will repeat
    error = result.error
    assert error is not None and error.retryable is False
    assert "could not be parsed at the JSON body" in error.message
    assert error.message.endswith("(after 2 attempts; not retried again)")
    assert error.details["attempts"] == 2


async def test_a_bad_body_followed_by_a_good_one_is_retried() -> None:
    good = json.dumps(WHOLE["openai"]).encode()
    http, calls = serving(b'{"choices": [', good)
    result = await run(http, retries=2)
    assert isinstance(result.outcome, Completed), result.error
    assert result.final_text == "Hi" and len(calls) == 2


async def test_different_parse_failures_use_the_configured_attempts_then_stop() -> None:
    http, calls = serving(b'{"choices": [', b'{"choices": "none"}', b"[1, 2")
    result = await run(http, retries=2)
    assert isinstance(result.outcome, Failed)
    assert len(calls) == 3
    assert result.error is not None
    assert result.error.message.endswith("(after 3 attempts; not retried again)")
