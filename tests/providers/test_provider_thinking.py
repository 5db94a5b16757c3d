"""Anthropic replies with extended thinking, server tools, MCP tools and citations.

The cassettes (``make_cassettes_thinking``) hold the requests as literal JSON: the second
request of a thinking tool-use turn matches only if the signed (or redacted) thinking block went
back unchanged. Streams and whole bodies must fold alike: each stream cassette is also folded by
the official SDK's own accumulator and the result parsed as a whole body.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from anthropic.lib.streaming._beta_messages import accumulate_event as beta_accumulate
from anthropic.lib.streaming._messages import accumulate_event
from make_cassettes_thinking import (
    CITATION,
    MCP_BETA,
    MCP_ID,
    MCP_SERVER,
    REDACTED,
    SEARCH_ID,
    SIGNATURE,
    THINKING,
    THOUGHT,
    TOOL_ID,
    WEB_SEARCH,
)
from provider_helpers import WEATHER, chunked, events_of, make_client, mock_http, reply_of
from vcr_support import cassette
from wire_inverse import anthropic_from_wire

from loopctl.api import ApiError, ModelRequest, fold_events
from loopctl.core import Message, ProviderPart, TextPart, ThinkingPart, ToolCall, ToolResult
from loopctl.providers import AnthropicClient
from loopctl.providers._anthropic import body_events, messages_to_wire

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"
PARIS = Message.user("What is the weather in Paris?")
CALL = ToolCall(id=TOOL_ID, name="get_weather", arguments={"city": "Paris"})
RESULTS = Message.from_results(
    [ToolResult(call_id=TOOL_ID, name="get_weather", content="18 C and sunny")]
)
SIGNED = ThinkingPart(provider="anthropic", text=THOUGHT, signature=SIGNATURE)


def thinking_client(**options: Any) -> Any:
    return make_client("anthropic", options={"thinking": THINKING}, **options)


async def test_signed_thinking_is_kept_and_sent_back_in_the_tool_use_turn() -> None:
    client = thinking_client()
    with cassette("anthropic", "thinking_tool_use") as tape:
        reply = await reply_of(client, ModelRequest(messages=(PARIS,), tools=(WEATHER,), turn=1))
        assert reply.message.parts == (SIGNED, TextPart(text="Let me check the weather."), CALL)
        assert reply.usage.reasoning_tokens == 41
        assert reply.stop_reason == "tool_use"
        again = ModelRequest(messages=(PARIS, reply.message, RESULTS), tools=(WEATHER,), turn=2)
        answer = await reply_of(client, again)  # matches only with the thinking block sent back
    assert tape.all_played
    assert answer.message == Message.assistant("It is 18 C and sunny in Paris.")


async def test_redacted_thinking_is_kept_and_sent_back_unchanged() -> None:
    client = thinking_client()
    with cassette("anthropic", "redacted_thinking") as tape:
        reply = await reply_of(client, ModelRequest(messages=(PARIS,), tools=(WEATHER,), turn=1))
        redacted = ThinkingPart(provider="anthropic", redacted=REDACTED)
        assert reply.message.parts == (redacted, CALL)
        again = ModelRequest(messages=(PARIS, reply.message, RESULTS), tools=(WEATHER,), turn=2)
        answer = await reply_of(client, again)
    assert tape.all_played
    assert answer.message.text == "18 C and sunny in Paris."


SEARCH_CALL = ProviderPart(
    provider="anthropic",
    data={
        "type": "server_tool_use",
        "id": SEARCH_ID,
        "name": "web_search",
        "input": {"query": "weather Paris today"},
    },
)


@pytest.mark.parametrize(
    "name, stream",
    [("server_tools_stream", True), ("server_tools_nonstream", False), ("json_to_stream", True)],
)
async def test_server_tool_blocks_and_citations_are_parts_never_calls(
    name: str, stream: bool
) -> None:
    client = make_client("anthropic", stream=stream, server_tools=[WEB_SEARCH])
    with cassette("anthropic", name) as tape:
        reply = await reply_of(client, ModelRequest(messages=(PARIS,), tools=(WEATHER,), turn=1))
    assert tape.all_played
    parts = reply.message.parts
    assert parts[0] == TextPart(text="I'll search for the current weather.")
    assert parts[1] == SEARCH_CALL
    assert isinstance(parts[2], ProviderPart) and parts[2].data["type"] == "web_search_tool_result"
    assert parts[3] == TextPart(text="It is 18 C and sunny in Paris.")
    assert parts[4] == ProviderPart(
        provider="anthropic", data={"type": "citations", "citations": [CITATION]}
    )
    assert reply.message.tool_calls == []  # Anthropic ran the search: nothing for the registry
    assert reply.stop_reason == "end_turn"
    assert reply.usage.input_tokens == 2104


async def test_mcp_tool_blocks_stream_their_input_and_stay_parts() -> None:
    seen: list[httpx.Request] = []
    body = _body("mcp_tools_stream")
    client = make_client(
        "anthropic",
        http_client=mock_http(body, headers={"content-type": "text/event-stream"}, seen=seen),
        betas=[MCP_BETA],
        options={"mcp_servers": [MCP_SERVER]},
    )
    reply = await reply_of(client, ModelRequest(messages=(PARIS,), turn=1))
    use, result, text = reply.message.parts
    assert use == ProviderPart(
        provider="anthropic",
        data={
            "type": "mcp_tool_use",
            "id": MCP_ID,
            "name": "forecast",
            "server_name": "weather-mcp",
            "input": {"location": "Paris"},
        },
    )
    assert isinstance(result, ProviderPart) and result.data["type"] == "mcp_tool_result"
    assert text == TextPart(text="The forecast says 18 C and sunny in Paris.")
    assert seen[0].headers["anthropic-beta"] == MCP_BETA
    assert json.loads(seen[0].content)["mcp_servers"] == [MCP_SERVER]
    with cassette("anthropic", "mcp_tools_stream") as tape:  # the request as the cassette has it
        await reply_of(
            make_client("anthropic", betas=[MCP_BETA], options={"mcp_servers": [MCP_SERVER]}),
            ModelRequest(messages=(PARIS,), turn=1),
        )
    assert tape.all_played


# --- streamed and whole bodies fold alike, as the SDK folds them ------------------------------

STREAMS = [
    "thinking_tool_use",
    "redacted_thinking",
    "server_tools_stream",
    "mcp_tools_stream",
    "tool_round_trip",
    "parallel_tools",
    "plain_answer",
]


def _body(name: str, index: int = 0) -> bytes:
    data = yaml.safe_load((CASSETTES / "anthropic" / f"{name}.yaml").read_text())
    return data["interactions"][index]["response"]["body"]["string"].encode()


def _sdk_message(body: bytes, beta: bool) -> dict[str, Any]:
    """The official SDK's own fold of an event stream, as a whole message body."""
    snapshot = None
    json_bufs: dict[int, bytes] = {}
    for block in body.decode().split("\n\n"):
        data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
        if not data:
            continue
        event = json.loads(data[0])
        if event["type"] in ("ping", "message_stop"):
            continue
        if beta:
            headers = httpx.Headers({"anthropic-beta": MCP_BETA})
            snapshot = beta_accumulate(
                event=event, current_snapshot=snapshot, json_bufs=json_bufs, request_headers=headers
            )
        else:
            snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)
    assert snapshot is not None
    message: dict[str, Any] = snapshot.to_dict(mode="json", exclude_none=True)
    return message


@pytest.mark.parametrize("name", STREAMS)
async def test_a_stream_folds_as_the_sdks_whole_message_does(name: str) -> None:
    body = _body(name)
    streamed = fold_events(
        await events_of(
            make_client("anthropic", http_client=mock_http(body)),
            ModelRequest(messages=(PARIS,), turn=1),
        )
    )
    client = make_client("anthropic")
    whole = fold_events(
        body_events(client.info, _sdk_message(body, beta=name.startswith("mcp")), 1, "anthropic")
    )
    assert streamed.message == whole.message
    assert streamed.stop_reason == whole.stop_reason
    assert streamed.usage == whole.usage


@pytest.mark.parametrize("name", STREAMS[:4])
@pytest.mark.parametrize("size", [1, 3, 17, 256])
async def test_any_chunking_of_a_reasoning_stream_gives_the_same_events(
    name: str, size: int
) -> None:
    body = _body(name)
    request = ModelRequest(messages=(PARIS,), turn=1)
    whole = await events_of(make_client("anthropic", http_client=mock_http(body)), request)
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    split = await events_of(
        make_client("anthropic", http_client=mock_http(chunked(pieces))), request
    )
    assert split == whole


async def test_a_delta_for_a_block_that_never_started_is_malformed_and_says_where() -> None:
    body = (
        b"event: message_start\n"
        b'data: {"type":"message_start","message":{"usage":{"input_tokens":5}}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":3,'
        b'"delta":{"type":"input_json_delta","partial_json":"{}"}}\n\n'
    )
    with pytest.raises(ApiError) as caught:
        await events_of(
            make_client("anthropic", http_client=mock_http(body)),
            ModelRequest(messages=(PARIS,), turn=1),
        )
    error = caught.value.error
    assert "could not be parsed at event 2 (content_block_delta)" in error.message
    assert "block 3, which never started" in error.message
    assert error.details["parse"] is True


# --- what goes back, and to whom -------------------------------------------------------------

FOREIGN = ThinkingPart(provider="deepseek", text="hmm", data={"reasoning_content": "hmm"})
UNSIGNED = ThinkingPart(provider="anthropic", text="no signature")


def test_only_anthropics_own_parts_go_back_and_citations_rejoin_their_text() -> None:
    cited = ProviderPart(provider="anthropic", data={"type": "citations", "citations": [CITATION]})
    reply = Message(
        role="assistant",
        parts=(FOREIGN, UNSIGNED, SIGNED, SEARCH_CALL, TextPart(text="18 C."), cited, CALL),
    )
    _, wire = messages_to_wire([PARIS, reply, RESULTS])
    assert wire[1]["content"] == [
        {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE},
        SEARCH_CALL.data,
        {"type": "text", "text": "18 C.", "citations": [CITATION]},
        {"type": "tool_use", "id": TOOL_ID, "name": "get_weather", "input": {"city": "Paris"}},
    ]
    # a client of another Anthropic-format host keeps its own key: Anthropic's blocks stay out
    other = AnthropicClient("m", api_key="k", base_url="https://api.deepseek.com/anthropic")
    assert other.provider == "deepseek/anthropic"
    _, elsewhere = messages_to_wire([PARIS, reply, RESULTS], provider=other.provider)
    assert [b["type"] for b in elsewhere[1]["content"]] == ["text", "tool_use"]


def test_history_with_reasoning_and_provider_parts_round_trips() -> None:
    cited = ProviderPart(provider="anthropic", data={"type": "citations", "citations": [CITATION]})
    redacted = ThinkingPart(provider="anthropic", redacted=REDACTED)
    history = [
        PARIS,
        Message(role="assistant", parts=(SIGNED, redacted, TextPart(text="Checking."), CALL)),
        RESULTS,
        Message(role="assistant", parts=(SEARCH_CALL, TextPart(text="18 C."), cited)),
    ]
    assert anthropic_from_wire(*messages_to_wire(history)) == (None, history)
