"""Streams the cassettes cannot show: chunk boundaries, disconnects, cancellation, bad data.

vcrpy replays a body in one piece, so these tests serve the cassettes' bodies (and broken ones)
through ``httpx.MockTransport`` as async byte iterators, split wherever we like.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from provider_helpers import WEATHER, chunked, events_of, make_client, mock_http, reply_of

from loopctl.api import ApiError, ModelRequest, StopEvent, TextDelta, UsageEvent, fold_events
from loopctl.core import Message, ToolCall

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"
PROVIDERS = ["openai", "anthropic", "ollama"]
REQUEST = ModelRequest(messages=(Message.user("What is the weather in Paris?"),), turn=1)


def body_of(provider: str, name: str, index: int = 0) -> bytes:
    data = yaml.safe_load((CASSETTES / provider / f"{name}.yaml").read_text())
    text: str = data["interactions"][index]["response"]["body"]["string"]
    return text.encode()


def pieces(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


async def stream_body(provider: str, body: Any, **client_options: Any) -> list[Any]:
    client = make_client(provider, http_client=mock_http(body), **client_options)
    return await events_of(client, REQUEST)


# --- chunk boundaries ------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("size", [1, 2, 7, 50, 4096])
async def test_any_chunking_gives_the_same_events(provider: str, size: int) -> None:
    body = body_of(provider, "tool_round_trip")
    whole = await stream_body(provider, body)
    split = await stream_body(provider, chunked(pieces(body, size)))
    assert split == whole
    assert fold_events(split).message.tool_calls[0].arguments == {"city": "Paris"}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_multibyte_character_split_across_chunks(provider: str) -> None:
    body = body_of(provider, "plain_answer").replace(b"Paris.", "Paris \u00e9t\u00e9.".encode())
    cut = body.index("\u00e9".encode()) + 1  # between the two bytes of the first e-acute
    events = await stream_body(provider, chunked([body[:cut], body[cut:]]))
    assert fold_events(events).message.text == "The capital of France is Paris \u00e9t\u00e9."


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_crlf_line_endings(provider: str) -> None:
    body = body_of(provider, "plain_answer").replace(b"\n", b"\r\n")
    events = await stream_body(provider, chunked(pieces(body, 5)))
    assert fold_events(events).message.text == "The capital of France is Paris."


# --- disconnects -----------------------------------------------------------------------------

MARKERS = {
    "openai": b'"finish_reason":"stop"',
    "anthropic": b"message_delta",
    "ollama": b'"done":true',
}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("where", ["mid_line", "between_events"])
async def test_a_connection_dropped_mid_stream_is_a_network_error(
    provider: str, where: str
) -> None:
    body = body_of(provider, "plain_answer")
    end = body.index(MARKERS[provider])
    if where == "between_events":
        end = body.rindex(b"\n", 0, end) + 1
    stream = chunked(pieces(body[:end], 40), then=httpx.RemoteProtocolError("peer closed"))
    with pytest.raises(ApiError) as caught:
        await stream_body(provider, stream)
    assert caught.value.error.kind == "network"
    assert caught.value.error.retryable is True


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("cut", ["mid_line", "between_events"])
async def test_a_stream_that_just_stops_is_a_network_error(provider: str, cut: str) -> None:
    body = body_of(provider, "plain_answer")
    end = body.index(MARKERS[provider])
    if cut == "between_events":
        end = body.rindex(b"\n", 0, end) + 1
    with pytest.raises(ApiError) as caught:
        await stream_body(provider, chunked([body[:end]]))
    assert caught.value.error.kind == "network"
    assert "ended before" in caught.value.error.message


@pytest.mark.parametrize(
    "exc, kind",
    [
        (httpx.ConnectError("connection refused"), "network"),
        (httpx.ConnectTimeout("connect timed out"), "timeout"),
        (httpx.ReadTimeout("read timed out"), "timeout"),
        (httpx.RemoteProtocolError("server disconnected"), "network"),
    ],
)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_transport_errors_are_classified(
    provider: str, exc: httpx.TransportError, kind: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    client = make_client(provider, http_client=http)
    with pytest.raises(ApiError) as caught:
        await events_of(client, REQUEST)
    assert caught.value.error.kind == kind
    assert caught.value.error.retryable is True


# --- cancellation ----------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_cancellation_mid_stream_propagates_and_closes_the_body(provider: str) -> None:
    body = body_of(provider, "plain_answer")
    # everything up to and including the event that carries "The capital", then silence
    end_of_event = b"\n" if provider == "ollama" else b"\n\n"
    first = body[: body.index(end_of_event, body.index(b"capital")) + len(end_of_event)]
    never = asyncio.Event()
    closed: list[bool] = []
    got_event = asyncio.Event()

    async def gen() -> Any:
        try:
            yield first
            await never.wait()  # the server goes quiet
            yield b""
        finally:
            closed.append(True)

    client = make_client(provider, http_client=mock_http(gen()))
    seen: list[Any] = []

    async def consume() -> None:
        async for event in client.stream(REQUEST):
            seen.append(event)
            got_event.set()

    task = asyncio.create_task(consume())
    await got_event.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen
    assert closed == [True]


# --- malformed data --------------------------------------------------------------------------

BAD = {
    "openai": b'data: {"id": "x", "choices": [\n\n',
    "anthropic": b'event: message_start\ndata: {"type": "message_start", "message": \n\n',
    "ollama": b'{"model": "llama3.2", "message": \n{"done": true}\n',
}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_malformed_json_in_the_stream_is_an_api_error(provider: str) -> None:
    with pytest.raises(ApiError) as caught:
        await stream_body(provider, BAD[provider])
    assert caught.value.error.kind == "provider"
    assert "malformed" in caught.value.error.message


@pytest.mark.parametrize(
    "provider, body",
    [
        (
            "openai",
            b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a",'
            b'"type":"function","function":{"name":"get_weather","arguments":"{\\"city\\": "}}]},'
            b'"finish_reason":null}]}\n\n'
            b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
            b"data: [DONE]\n\n",
        ),
        (
            "anthropic",
            b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
            b'"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}'
            b"\n\n"
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            b'"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": Par"}}\n\n'
            b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
            b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
        ),
        (
            "ollama",
            b'{"message":{"role":"assistant","content":"","tool_calls":[{"function":'
            b'{"name":"get_weather","arguments":"{\\"city\\": "}}]},"done":false}\n'
            b'{"message":{"role":"assistant","content":""},"done":true,"eval_count":1}\n',
        ),
    ],
)
async def test_invalid_tool_argument_json_is_a_clear_api_error(provider: str, body: bytes) -> None:
    events = await stream_body(provider, body)
    with pytest.raises(ApiError) as caught:
        fold_events(events)
    assert caught.value.error.kind == "provider"
    assert "get_weather" in caught.value.error.message


async def test_openai_tolerates_comments_null_usage_and_a_missing_done() -> None:
    body = (
        b": keep-alive\n\n"
        b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},'
        b'"finish_reason":null}],"usage":null}\n\n'
        b": OPENROUTER PROCESSING\n\n"
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}\n\n'
    )
    events = await stream_body("openai", body)
    reply = fold_events(events)
    assert reply.message.text == "Hi"
    assert reply.usage.context_tokens == 6
    assert reply.stop_reason == "end_turn"


def oai_frag(**fields: Any) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [fields]}, "finish_reason": None}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


FINISH = (
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
)


def fn(name: str | None = None, arguments: str = "") -> dict[str, Any]:
    return {"name": name, "arguments": arguments} if name else {"arguments": arguments}


@pytest.mark.parametrize(
    "fragments, expected",
    [
        # the reference shape: first fragment with id and name, then argument pieces
        (
            [
                oai_frag(index=0, id="call_a", function=fn("f", "")),
                oai_frag(index=0, function=fn(arguments='{"x":1}')),
            ],
            [("call_a", "f", {"x": 1})],
        ),
        # index 0 reused for a second call with a new id
        (
            [
                oai_frag(index=0, id="call_a", function=fn("f", '{"x":1}')),
                oai_frag(index=0, id="call_b", function=fn("g", '{"y":2}')),
            ],
            [("call_a", "f", {"x": 1}), ("call_b", "g", {"y": 2})],
        ),
        # the same id repeated on every fragment is one call
        (
            [
                oai_frag(index=0, id="call_a", function=fn("f", '{"x":')),
                oai_frag(index=0, id="call_a", function=fn(arguments="1}")),
            ],
            [("call_a", "f", {"x": 1})],
        ),
        # no ids at all, index reused: a fresh name after arguments starts a new call
        (
            [oai_frag(index=0, function=fn("f", "{}")), oai_frag(index=0, function=fn("g", "{}"))],
            [("call_7_0", "f", {}), ("call_7_1", "g", {})],
        ),
        # two calls with the same wire id get distinct ids
        (
            [
                oai_frag(index=0, id="dup", function=fn("f", "{}")),
                oai_frag(index=1, id="dup", function=fn("g", "{}")),
            ],
            [("dup", "f", {}), ("call_7_1", "g", {})],
        ),
        # empty-string id is a missing id
        ([oai_frag(index=0, id="", function=fn("f", "{}"))], [("call_7_0", "f", {})]),
    ],
)
async def test_openai_tool_call_assembly(
    fragments: list[bytes], expected: list[tuple[str, str, dict[str, Any]]]
) -> None:
    client = make_client("openai", http_client=mock_http(b"".join(fragments) + FINISH))
    reply = await reply_of(client, ModelRequest(messages=REQUEST.messages, turn=7))
    assert reply.message.tool_calls == [ToolCall(id=i, name=n, arguments=a) for i, n, a in expected]


async def test_openai_fragment_without_a_name_for_a_new_call_is_malformed() -> None:
    client = make_client("openai", http_client=mock_http(oai_frag(index=0, id="x") + FINISH))
    with pytest.raises(ApiError, match="no function name"):
        await events_of(client, REQUEST)


async def test_anthropic_ignores_unknown_events_and_thinking() -> None:
    body = body_of("anthropic", "plain_answer")
    extra = (
        b'event: brand_new_event\ndata: {"type":"brand_new_event","x":1}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":5,'
        b'"content_block":{"type":"thinking","thinking":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":5,'
        b'"delta":{"type":"thinking_delta","thinking":"hmm"}}\n\n'
    )
    cut = body.index(b"event: content_block_start")
    events = await stream_body("anthropic", body[:cut] + extra + body[cut:])
    assert fold_events(events).message.text == "The capital of France is Paris."


async def test_anthropic_usage_is_cumulative_and_counts_cache() -> None:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 10,
                "cache_creation_input_tokens": 100,
                "cache_read_input_tokens": 1000,
                "output_tokens": 1,
            },
        },
    }
    body = (
        f"event: message_start\ndata: {json.dumps(start)}\n\n"
        'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
        '"stop_sequence":null},"usage":{"output_tokens":20}}\n\n'
        'event: message_delta\ndata: {"type":"message_delta","delta":{},'
        '"usage":{"output_tokens":30}}\n\n'
        'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    ).encode()
    events = await stream_body("anthropic", body)
    usage = fold_events(events).usage
    assert (usage.input_tokens, usage.output_tokens) == (1110, 30)
    assert (usage.cache_write_tokens, usage.cache_read_tokens) == (100, 1000)
    assert usage.context_tokens == 1140
    assert [type(e) for e in events][-1] is UsageEvent


async def test_ollama_text_then_done_reports_stop_and_usage() -> None:
    events = await stream_body("ollama", body_of("ollama", "plain_answer"))
    assert next(e for e in events if isinstance(e, TextDelta)).text == "The capital"
    assert StopEvent(reason="end_turn") in events


async def test_ollama_requests_carry_tools_and_num_ctx() -> None:
    seen: list[httpx.Request] = []
    http = mock_http(body_of("ollama", "plain_answer"), seen=seen)
    client = make_client("ollama", http_client=http, num_ctx=8192, options={"temperature": 0})
    request = ModelRequest(
        messages=REQUEST.messages, tools=(WEATHER,), options={"think": False, "seed": 1}
    )
    await events_of(client, request)
    body = json.loads(seen[0].content)
    assert body["options"] == {"temperature": 0, "num_ctx": 8192, "seed": 1}
    assert body["think"] is False
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert seen[0].url == "http://127.0.0.1:11434/api/chat"


@pytest.mark.parametrize(
    "provider, body",
    [
        ("openai", b'data: {"choices": ["not an object"]}\n\ndata: [DONE]\n\n'),
        ("openai", b'data: {"choices": [{"delta": {"content": 5}, "finish_reason": 7}]}\n\n'),
        (
            "anthropic",
            b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
            b'"content_block":"text"}\n\n',
        ),
        ("anthropic", b'event: message_start\ndata: {"type":"message_start","message":["x"]}\n\n'),
        ("ollama", b'{"message": ["x"], "done": false}\n'),
        ("ollama", b'{"message": {"content": "x"}, "done": true, "eval_count": "many"}\n'),
    ],
)
async def test_data_of_an_unexpected_shape_is_a_malformed_stream(
    provider: str, body: bytes
) -> None:
    with pytest.raises(ApiError) as caught:
        await stream_body(provider, body)
    assert caught.value.error.kind == "provider"
    assert "malformed" in caught.value.error.message
