"""``OpenAIResponsesClient`` against its cassettes (``make_cassettes_responses``), and by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from make_cassettes_responses import (
    CALL_ID,
    CITATION,
    ENCRYPTED,
    FC_ID,
    SEARCH_ID,
    SUMMARY,
    reasoning_item,
)
from provider_helpers import KEY, WEATHER, chunked, events_of, mock_http, reply_of
from vcr_support import cassette

from loopctl.api import ApiError, ModelRequest, Usage, fold_events
from loopctl.core import Message, ProviderPart, TextPart, ThinkingPart, ToolCall, ToolResult
from loopctl.providers import OpenAIResponsesClient
from loopctl.providers._openai_responses import input_items, response_events

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes" / "openai_responses"
PARIS = Message.user("What is the weather in Paris?")
CAPITAL = Message.user("What is the capital of France?")
PROVIDER = "openai-responses"
REASONING = ThinkingPart(
    provider=PROVIDER, text=SUMMARY, signature=ENCRYPTED, data=reasoning_item()
)
CALL = ToolCall(id=CALL_ID, name="get_weather", arguments={"city": "Paris"})
CALL_EXTRA = ProviderPart(
    provider=PROVIDER, data={"type": "call_extra", "call_id": CALL_ID, "fields": {"id": FC_ID}}
)
RESULTS = Message.from_results(
    [ToolResult(call_id=CALL_ID, name="get_weather", content="18 C and sunny")]
)


def client(**options: Any) -> OpenAIResponsesClient:
    return OpenAIResponsesClient("gpt-5-mini", api_key=KEY, **options)


async def test_a_plain_answer_streams_its_text() -> None:
    with cassette("openai_responses", "plain_answer") as tape:
        reply = await reply_of(
            client(), ModelRequest(messages=(CAPITAL,), system="You are terse.", turn=1)
        )
    assert tape.all_played
    assert reply.message == Message.assistant("The capital of France is Paris.")
    assert reply.stop_reason == "end_turn"
    assert reply.usage == Usage(input_tokens=20, output_tokens=8, context_tokens=28)


async def test_reasoning_items_go_back_encrypted_with_the_calls_they_preceded() -> None:
    responses = client()
    with cassette("openai_responses", "reasoning_tool_use") as tape:
        first = await reply_of(responses, ModelRequest(messages=(PARIS,), tools=(WEATHER,), turn=1))
        assert first.message.parts == (REASONING, CALL, CALL_EXTRA)
        assert first.stop_reason == "tool_use"
        assert first.usage.reasoning_tokens == 128
        again = ModelRequest(messages=(PARIS, first.message, RESULTS), tools=(WEATHER,), turn=2)
        answer = await reply_of(responses, again)  # matches only with the reasoning item back
    assert tape.all_played
    assert answer.message == Message.assistant("It is 18 C and sunny in Paris.")
    assert answer.usage.cache_read_tokens == 128


async def test_a_whole_response_gives_the_parts_the_stream_gave() -> None:
    with cassette("openai_responses", "tool_call_nonstream"):
        reply = await reply_of(
            client(stream=False), ModelRequest(messages=(PARIS,), tools=(WEATHER,), turn=1)
        )
    assert reply.message.parts == (REASONING, CALL, CALL_EXTRA)
    assert reply.usage.reasoning_tokens == 128


async def test_built_in_tools_are_advertised_and_come_back_as_parts() -> None:
    responses = client(server_tools=[{"type": "web_search"}])
    with cassette("openai_responses", "web_search") as tape:
        reply = await reply_of(responses, ModelRequest(messages=(PARIS,), tools=(WEATHER,), turn=1))
    assert tape.all_played
    search, text, cited = reply.message.parts
    assert isinstance(search, ProviderPart) and search.data["id"] == SEARCH_ID
    assert search.data["type"] == "web_search_call"
    assert text == TextPart(text="It is 18 C and sunny in Paris.")
    assert cited == ProviderPart(
        provider=PROVIDER, data={"type": "annotations", "annotations": [CITATION]}
    )
    assert reply.message.tool_calls == []  # OpenAI searched: nothing for the registry


async def test_an_incomplete_response_stops_for_max_tokens() -> None:
    request = ModelRequest(messages=(CAPITAL,), system="You are terse.", turn=1)
    with cassette("openai_responses", "incomplete"):
        reply = await reply_of(client(options={"max_output_tokens": 16}), request)
    assert reply.stop_reason == "max_tokens"
    assert reply.message.text == "The capital"


async def test_a_failed_response_is_an_error_in_the_stream() -> None:
    request = ModelRequest(messages=(CAPITAL,), system="You are terse.", turn=1)
    with cassette("openai_responses", "stream_error"), pytest.raises(ApiError) as caught:
        await reply_of(client(), request)
    error = caught.value.error
    assert (error.kind, error.retryable, error.status) == ("provider", True, None)
    assert "OpenAI" in error.message and "failed to generate" in error.message


async def test_context_overflow_is_classified() -> None:
    request = ModelRequest(messages=(CAPITAL,), system="You are terse.", turn=1)
    with cassette("openai_responses", "context_overflow"), pytest.raises(ApiError) as caught:
        await reply_of(client(), request)
    assert caught.value.error.kind == "context_overflow"
    assert caught.value.error.details["request_id"] == "req_resp_overflow"


async def test_an_error_event_is_classified() -> None:
    body = (
        b"event: error\n"
        b'data: {"type":"error","code":"rate_limit_exceeded","message":"Slow down",'
        b'"param":null,"sequence_number":0}\n\n'
    )
    with pytest.raises(ApiError) as caught:
        await events_of(client(http_client=mock_http(body)), ModelRequest(messages=(CAPITAL,)))
    assert caught.value.error.kind == "rate_limited"
    assert "Slow down" in caught.value.error.message


def _interaction(name: str, index: int = 0) -> dict[str, Any]:
    data = yaml.safe_load((CASSETTES / f"{name}.yaml").read_text())
    item: dict[str, Any] = data["interactions"][index]
    return item


STREAMS = ["plain_answer", "reasoning_tool_use", "web_search", "incomplete"]


@pytest.mark.parametrize("name", STREAMS)
async def test_a_stream_folds_as_its_final_response_does(name: str) -> None:
    body = _interaction(name)["response"]["body"]["string"]
    final = json.loads(body.strip().split("\n\n")[-1].split("data: ", 1)[1])["response"]
    request = ModelRequest(messages=(PARIS,), turn=1)
    streamed = fold_events(await events_of(client(http_client=mock_http(body.encode())), request))
    whole = fold_events(response_events(client().info, final, 1, PROVIDER))
    assert streamed.message == whole.message
    assert (streamed.usage, streamed.stop_reason) == (whole.usage, whole.stop_reason)


@pytest.mark.parametrize("size", [1, 9, 100])
async def test_any_chunking_gives_the_same_events(size: int) -> None:
    body = _interaction("reasoning_tool_use")["response"]["body"]["string"].encode()
    request = ModelRequest(messages=(PARIS,), turn=1)
    whole = await events_of(client(http_client=mock_http(body)), request)
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    assert await events_of(client(http_client=mock_http(chunked(pieces))), request) == whole


def test_other_providers_parts_stay_out_of_the_input() -> None:
    signed = ThinkingPart(provider="anthropic", text="t", signature="s")
    chat = ThinkingPart(provider="openai", text="r", data={"reasoning": "r"})
    foreign = ProviderPart(provider="anthropic", data={"type": "server_tool_use", "id": "x"})
    reply = Message(role="assistant", parts=(signed, chat, REASONING, foreign, CALL, CALL_EXTRA))
    items = input_items([PARIS, reply, RESULTS])
    assert items[1:] == [
        reasoning_item(),
        {
            "type": "function_call",
            "call_id": CALL_ID,
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
            "id": FC_ID,
        },
        {"type": "function_call_output", "call_id": CALL_ID, "output": "18 C and sunny"},
    ]


def test_the_request_is_stateless_unless_told_to_store() -> None:
    request = ModelRequest(messages=(CAPITAL,), tools=(WEATHER,))
    body = client().body(request)
    assert (body["store"], body["include"]) == (False, ["reasoning.encrypted_content"])
    assert body["tools"][0] == {
        "type": "function",
        "name": "get_weather",
        "description": WEATHER.description,
        "parameters": WEATHER.parameters,
    }
    stored = client(store=True).body(request)
    assert stored["store"] is True and "include" not in stored
    assert client().provider == PROVIDER
    assert OpenAIResponsesClient("m", base_url="https://api.x.ai/v1").provider == "xai/responses"
