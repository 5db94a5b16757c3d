"""Reasoning, extras and errors of OpenAI-compatible hosts, and Ollama's native thinking.

Each host's reasoning is kept under the host's key and echoed back only to it, in the fields it
sent (the second request of each cassette matches only then); another host's is left out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from make_cassettes_compat import (
    DS_CALL,
    DS_REASONING,
    GEMINI_CALL,
    OR_CALL,
    OR_DETAIL,
    THOUGHT_SIGNATURE,
)
from provider_helpers import WEATHER, chunked, events_of, make_client, mock_http, reply_of
from vcr_support import cassette
from wire_inverse import ollama_from_wire, openai_from_wire

from loopctl.api import ApiError, ModelRequest, fold_events
from loopctl.core import Message, ProviderPart, TextPart, ThinkingPart, ToolCall, ToolResult
from loopctl.providers import OllamaClient, OpenAIClient
from loopctl.providers._ollama import messages_to_wire as ollama_to_wire
from loopctl.providers._openai_wire import messages_to_wire

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"
PARIS = Message.user("What is the weather in Paris?")
HOSTS = {
    "deepseek": ("deepseek-reasoner", "https://api.deepseek.com"),
    "openrouter": ("anthropic/claude-sonnet-4", "https://openrouter.ai/api/v1"),
    "gemini": ("gemini-3-pro-preview", "https://generativelanguage.googleapis.com/v1beta/openai"),
    "groq": ("llama-3.3-70b-versatile", "https://api.groq.com/openai/v1"),
    "ollama/v1": ("qwen3:8b", "http://127.0.0.1:11434/v1"),
    "127.0.0.1:8000": ("Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1"),
}


def host_client(key: str, **options: Any) -> Any:
    model, base_url = HOSTS[key]
    client = make_client("openai", model=model, base_url=base_url, **options)
    assert client.provider == key
    return client


def results(call_id: str) -> Message:
    return Message.from_results(
        [ToolResult(call_id=call_id, name="get_weather", content="18 C and sunny")]
    )


async def two_turns(key: str, name: str) -> tuple[Any, Any]:
    client = host_client(key)
    with cassette("openai", name) as tape:
        first = await reply_of(client, ModelRequest(messages=(PARIS,), tools=(WEATHER,), turn=1))
        (call,) = first.message.tool_calls
        again = (PARIS, first.message, results(call.id))
        second = await reply_of(client, ModelRequest(messages=again, tools=(WEATHER,), turn=2))
    assert tape.all_played  # the second request carried the host's reasoning back
    return first, second


async def test_deepseek_reasoning_content_goes_back_on_the_tool_call_turn() -> None:
    first, second = await two_turns("deepseek", "compat_deepseek_reasoning")
    call = ToolCall(id=DS_CALL, name="get_weather", arguments={"city": "Paris"})
    thinking = ThinkingPart(
        provider="deepseek", text=DS_REASONING, data={"reasoning_content": DS_REASONING}
    )
    assert first.message.parts == (thinking, call)
    assert first.usage.reasoning_tokens == 22
    assert second.message.text == "It is 18 C and sunny in Paris."
    assert second.message.thinking[0].text == "The tool says 18 C."


async def test_openrouter_reasoning_details_are_folded_and_go_back_unchanged() -> None:
    first, second = await two_turns("openrouter", "compat_openrouter_reasoning")
    thinking, call = first.message.parts
    assert call == ToolCall(id=OR_CALL, name="get_weather", arguments={"city": "Paris"})
    assert isinstance(thinking, ThinkingPart) and thinking.provider == "openrouter"
    assert thinking.text == "Paris weather: call the tool."
    assert thinking.data == {"reasoning": thinking.text, "reasoning_details": [OR_DETAIL]}
    assert second.message.text == "It is 18 C and sunny in Paris."


async def test_gemini_thought_signature_rides_its_tool_call_back() -> None:
    first, _ = await two_turns("gemini", "compat_gemini_thought_signature")
    call, extra = first.message.parts
    assert call == ToolCall(id=GEMINI_CALL, name="get_weather", arguments={"city": "Paris"})
    assert extra == ProviderPart(
        provider="gemini",
        data={
            "type": "call_extra",
            "call_id": GEMINI_CALL,
            "fields": {"extra_content": {"google": {"thought_signature": THOUGHT_SIGNATURE}}},
        },
    )
    assert first.message.tool_calls == [call]


async def test_ollama_v1_reasoning_is_a_thinking_part() -> None:
    client = host_client("ollama/v1")
    request = ModelRequest(messages=(Message.user("What is the capital of France?"),), turn=1)
    with cassette("openai", "compat_ollama_v1_reasoning"):
        reply = await reply_of(client, request)
    assert reply.message.parts == (
        ThinkingPart(
            provider="ollama/v1",
            text="Paris is the capital.",
            data={"reasoning": "Paris is the capital."},
        ),
        TextPart(text="The capital of France is Paris."),
    )


async def test_a_json_body_to_a_streaming_request_is_read_whole() -> None:
    client = host_client("127.0.0.1:8000")
    assert client.streaming
    with cassette("openai", "compat_json_to_stream"):
        reply = await reply_of(client, ModelRequest(messages=(PARIS,), turn=1))
    assert reply.message.text == "It is 18 C and sunny in Paris."
    assert reply.message.thinking[0].data == {"reasoning_content": "Easy: say it."}
    assert reply.usage.reasoning_tokens == 5
    assert reply.stop_reason == "end_turn"


async def test_openrouter_error_names_the_gateway_and_keeps_the_upstream_reason() -> None:
    client = host_client("openrouter")
    with cassette("openai", "compat_openrouter_error"), pytest.raises(ApiError) as caught:
        await reply_of(client, ModelRequest(messages=(PARIS,), turn=1))
    error = caught.value.error
    assert error.message.startswith("OpenRouter: Provider returned error (upstream Anthropic:")
    assert "overloaded_error" in error.message
    assert error.details["upstream"]["provider_name"] == "Anthropic"
    assert error.details["host"] == "openrouter.ai"
    assert (error.kind, error.status, error.retryable) == ("overloaded", 502, True)


async def test_a_compatible_hosts_auth_error_names_the_host() -> None:
    client = host_client("groq")
    with cassette("openai", "compat_groq_error"), pytest.raises(ApiError) as caught:
        await reply_of(client, ModelRequest(messages=(PARIS,), turn=1))
    error = caught.value.error
    assert error.kind == "auth"
    assert error.message.startswith("Groq refused the credentials, saying: Invalid API Key")
    assert "OpenAI" not in error.message
    assert error.details["provider"] == "Groq"


STREAMS = [
    "compat_deepseek_reasoning",
    "compat_openrouter_reasoning",
    "compat_gemini_thought_signature",
    "compat_ollama_v1_reasoning",
]


def _body(name: str) -> bytes:
    data = yaml.safe_load((CASSETTES / "openai" / f"{name}.yaml").read_text())
    text: str = data["interactions"][0]["response"]["body"]["string"]
    return text.encode()


@pytest.mark.parametrize("name", STREAMS)
@pytest.mark.parametrize("size", [1, 5, 64])
async def test_any_chunking_of_a_reasoning_stream_gives_the_same_events(
    name: str, size: int
) -> None:
    body = _body(name)
    request = ModelRequest(messages=(PARIS,), turn=1)
    whole = await events_of(make_client("openai", http_client=mock_http(body)), request)
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    split = await events_of(make_client("openai", http_client=mock_http(chunked(pieces))), request)
    assert split == whole


async def test_a_reasoning_stream_folds_as_its_whole_completion() -> None:
    """The message DeepSeek streamed, sent as one completion body, folds to the same parts."""
    wire = yaml.safe_load((CASSETTES / "openai" / "compat_deepseek_reasoning.yaml").read_text())
    echoed = json.loads(wire["interactions"][1]["request"]["body"])["messages"][1]
    completion = {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "deepseek-reasoner",
        "choices": [{"index": 0, "message": echoed, "finish_reason": "tool_calls"}],
    }
    request = ModelRequest(messages=(PARIS,), turn=1)
    client = host_client(
        "deepseek",
        stream=False,
        http_client=mock_http(
            json.dumps(completion).encode(), headers={"content-type": "application/json"}
        ),
    )
    whole = fold_events(await events_of(client, request))
    streamed = fold_events(
        await events_of(
            host_client("deepseek", http_client=mock_http(_body("compat_deepseek_reasoning"))),
            request,
        )
    )
    assert whole.message == streamed.message


# --- what goes back, and to whom -------------------------------------------------------------

DEEPSEEK = ThinkingPart(provider="deepseek", text="r", data={"reasoning_content": "r"})
SIGNED = ThinkingPart(provider="anthropic", text="t", signature="sig")
CALL = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})
EXTRA = ProviderPart(
    provider="gemini",
    data={"type": "call_extra", "call_id": "c1", "fields": {"extra_content": {"google": {}}}},
)
MESSAGE_EXTRA = ProviderPart(
    provider="gemini", data={"type": "message_extra", "fields": {"extra_content": {"g": 1}}}
)


@pytest.mark.parametrize(
    "provider, expected",
    [
        ("deepseek", {"reasoning_content": "r"}),
        ("gemini", {"extra_content": {"g": 1}}),
        ("openai", {}),
        ("openrouter", {}),
    ],
)
def test_each_host_gets_only_its_own_reasoning_and_extras(
    provider: str, expected: dict[str, Any]
) -> None:
    reply = Message(role="assistant", parts=(SIGNED, DEEPSEEK, CALL, EXTRA, MESSAGE_EXTRA))
    wire = messages_to_wire([PARIS, reply, results("c1")], provider=provider)[1]
    (call,) = wire["tool_calls"]
    assert ("extra_content" in call) is (provider == "gemini")
    extra = {k: v for k, v in wire.items() if k not in ("role", "content", "tool_calls")}
    assert extra == expected


def test_chat_history_with_reasoning_and_extras_round_trips() -> None:
    history = [
        PARIS,
        Message(role="assistant", parts=(DEEPSEEK, CALL)),
        results("c1"),
        Message(role="assistant", parts=(DEEPSEEK, TextPart(text="18 C."))),
    ]
    assert openai_from_wire(messages_to_wire(history, provider="deepseek"), "deepseek") == (
        None,
        history,
    )
    gemini = [PARIS, Message(role="assistant", parts=(CALL, EXTRA, MESSAGE_EXTRA)), results("c1")]
    assert openai_from_wire(messages_to_wire(gemini, provider="gemini"), "gemini") == (
        None,
        gemini,
    )


def test_errors_and_keys_follow_the_host() -> None:
    assert OpenAIClient("m", api_key="k").provider == "openai"
    local = OpenAIClient("m", base_url="http://10.0.0.5:8080/v1")
    assert (local.provider, local.info.name) == ("10.0.0.5:8080", "the server at 10.0.0.5:8080")
    proxied = OpenAIClient("m", base_url="http://10.0.0.5:8080/v1", provider="deepseek")
    assert (proxied.provider, proxied.info.name) == ("deepseek", "DeepSeek")


# --- Ollama native ---------------------------------------------------------------------------


async def test_ollama_thinking_is_kept_and_sent_back_as_its_thinking_field() -> None:
    client = make_client("ollama")
    think = {"think": True}
    with cassette("ollama", "thinking_tool_use") as tape:
        request = ModelRequest(messages=(PARIS,), tools=(WEATHER,), options=think, turn=1)
        reply = await reply_of(client, request)
        thinking, call = reply.message.parts
        assert thinking == ThinkingPart(
            provider="ollama", text="The user asks for the weather in Paris; get_weather will tell."
        )
        assert call == ToolCall(id="call_th1nk0ll", name="get_weather", arguments={"city": "Paris"})
        again = ModelRequest(
            messages=(PARIS, reply.message, results(call.id)),
            tools=(WEATHER,),
            options=think,
            turn=2,
        )
        answer = await reply_of(client, again)
    assert tape.all_played
    assert answer.message.text == "It is 18 C and sunny in Paris."


def test_ollama_history_with_thinking_round_trips_and_leaves_others_out() -> None:
    own = ThinkingPart(provider="ollama", text="hmm")
    history = [PARIS, Message(role="assistant", parts=(own, CALL)), results("c1")]
    assert ollama_from_wire(ollama_to_wire(history)) == (None, history)
    foreign = [PARIS, Message(role="assistant", parts=(SIGNED, CALL)), results("c1")]
    assert "thinking" not in ollama_to_wire(foreign)[1]
    assert OllamaClient("m").provider == "ollama"
