"""The clients against the cassettes: requests must match as JSON, replies fold as expected."""

from __future__ import annotations

from typing import Any

import pytest
from provider_helpers import WEATHER, make_client, reply_of
from vcr_support import cassette

from loopctl.api import ApiError, ModelRequest, Usage
from loopctl.core import Message, ToolCall, ToolResult

PROVIDERS = ["openai", "anthropic", "ollama"]
CAPITAL = Message.user("What is the capital of France?")
PARIS = Message.user("What is the weather in Paris?")
BOTH = Message.user("Weather in Paris and in Tokyo?")


@pytest.mark.parametrize(
    "provider, stream, name, usage",
    [
        (
            "openai",
            True,
            "plain_answer",
            Usage(input_tokens=24, output_tokens=8, context_tokens=32),
        ),
        (
            "openai",
            False,
            "plain_answer_nonstream",
            Usage(input_tokens=24, output_tokens=8, context_tokens=32),
        ),
        (
            "anthropic",
            True,
            "plain_answer",
            Usage(input_tokens=21, output_tokens=10, context_tokens=31),
        ),
        (
            "anthropic",
            False,
            "plain_answer_nonstream",
            Usage(input_tokens=21, output_tokens=10, context_tokens=31),
        ),
        (
            "ollama",
            True,
            "plain_answer",
            Usage(input_tokens=26, output_tokens=8, context_tokens=34),
        ),
        (
            "ollama",
            False,
            "plain_answer_nonstream",
            Usage(input_tokens=26, output_tokens=8, context_tokens=34),
        ),
    ],
)
async def test_plain_answer(provider: str, stream: bool, name: str, usage: Usage) -> None:
    client = make_client(provider, stream=stream)
    request = ModelRequest(messages=(CAPITAL,), system="You are terse.", turn=1)
    with cassette(provider, name) as tape:
        reply = await reply_of(client, request)
    assert tape.all_played
    assert reply.message == Message.assistant("The capital of France is Paris.")
    assert reply.stop_reason == "end_turn"
    assert reply.usage == usage


FIRST_CALL = {
    "openai": (
        "",
        "call_pX7qW2mV9sTn3LkR8dYb4cEf",
        Usage(input_tokens=61, output_tokens=15, context_tokens=76),
    ),
    "anthropic": (
        "I'll check the weather in Paris.",
        "toolu_01NRLabsLyVHZPKxbKvkfSMn",
        Usage(input_tokens=377, output_tokens=65, context_tokens=442),
    ),
    "ollama": ("", "call_1_0", Usage(input_tokens=169, output_tokens=15, context_tokens=184)),
}
SECOND_USAGE = {
    "openai": Usage(input_tokens=92, output_tokens=11, context_tokens=103),
    "anthropic": Usage(input_tokens=460, output_tokens=14, context_tokens=474),
    # prompt_eval_count missing (a cached prompt): the context size is unknown
    "ollama": Usage(input_tokens=0, output_tokens=12, context_tokens=None),
}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tool_round_trip(provider: str) -> None:
    client = make_client(provider)
    text, call_id, usage = FIRST_CALL[provider]
    first = ModelRequest(messages=(PARIS,), tools=(WEATHER,), turn=1)
    with cassette(provider, "tool_round_trip") as tape:
        reply = await reply_of(client, first)
        call = ToolCall(id=call_id, name="get_weather", arguments={"city": "Paris"})
        assert reply.message == Message.assistant(text, [call])
        assert reply.stop_reason == "tool_use"
        assert reply.usage == usage
        results = Message.from_results(
            [ToolResult(call_id=call_id, name="get_weather", content="18 C and sunny")]
        )
        second = ModelRequest(messages=(PARIS, reply.message, results), tools=(WEATHER,), turn=2)
        answer = await reply_of(client, second)
    assert tape.all_played
    assert "18 C and sunny in Paris" in answer.message.text
    assert answer.message.tool_calls == []
    assert answer.usage == SECOND_USAGE[provider]


NONSTREAM_CALL_ID = {
    "openai": "call_pX7qW2mV9sTn3LkR8dYb4cEf",
    "anthropic": "toolu_01NRLabsLyVHZPKxbKvkfSMn",
    "ollama": "call_k3m9x2qa",
}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tool_call_without_streaming(provider: str) -> None:
    client = make_client(provider, stream=False)
    request = ModelRequest(messages=(PARIS,), tools=(WEATHER,), turn=1)
    with cassette(provider, "tool_call_nonstream"):
        reply = await reply_of(client, request)
    assert reply.message.tool_calls == [
        ToolCall(id=NONSTREAM_CALL_ID[provider], name="get_weather", arguments={"city": "Paris"})
    ]
    assert reply.stop_reason == "tool_use"


PARALLEL_IDS = {
    "openai": ("call_Q1aZ8kLm3NpR5tUv7WxY9bCd", "call_H4sJ6dFg8KlZ2xCv4BnM6qWe"),
    "anthropic": ("toolu_01A09q90qw90lq917835lq9", "toolu_01B4r6Tz8Yx2Wv5Nm3Kp7Lq1"),
    "ollama": ("call_p4r1s0ab", "call_t0ky0cd9"),
}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_parallel_tool_calls(provider: str) -> None:
    client = make_client(provider)
    paris_id, tokyo_id = PARALLEL_IDS[provider]
    with cassette(provider, "parallel_tools") as tape:
        reply = await reply_of(client, ModelRequest(messages=(BOTH,), tools=(WEATHER,), turn=1))
        assert reply.message.tool_calls == [
            ToolCall(id=paris_id, name="get_weather", arguments={"city": "Paris"}),
            ToolCall(id=tokyo_id, name="get_weather", arguments={"city": "Tokyo"}),
        ]
        tokyo = (
            ToolResult(
                call_id=tokyo_id,
                name="get_weather",
                content="weather service unavailable for Tokyo",
                is_error=True,
            )
            if provider == "anthropic"
            else ToolResult(call_id=tokyo_id, name="get_weather", content="24 C and raining")
        )
        results = Message.from_results(
            [ToolResult(call_id=paris_id, name="get_weather", content="18 C and sunny"), tokyo]
        )
        request = ModelRequest(messages=(BOTH, reply.message, results), tools=(WEATHER,), turn=2)
        answer = await reply_of(client, request)
    assert tape.all_played
    assert answer.message.text.startswith("Paris: 18 C")


RATE_HINTS: dict[str, tuple[float | None, bool | None]] = {
    "openai": (19.876, None),  # retry-after-ms wins over retry-after
    "anthropic": (12.0, True),
    "ollama": (None, None),  # Ollama's own 429 carries no Retry-After
}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_rate_limit_then_success(provider: str) -> None:
    client = make_client(provider)
    request = ModelRequest(messages=(Message.user("Say hello."),), turn=1)
    with cassette(provider, "rate_limit_then_success") as tape:
        with pytest.raises(ApiError) as caught:
            await reply_of(client, request)
        reply = await reply_of(client, request)
    assert tape.all_played
    err = caught.value
    assert err.error.kind == "rate_limited"
    assert err.error.retryable is True
    assert err.error.status == 429
    assert (err.retry_after, err.should_retry) == RATE_HINTS[provider]
    assert reply.message.text == "Hello!"


OVERFLOW = Message.user("Summarize: " + "lorem ipsum " * 8)


@pytest.mark.parametrize(
    "provider, name, model, base_url, needle",
    [
        ("openai", "context_overflow", None, None, "maximum context length is 4097"),
        ("openai", "compat_context_overflow", "qwen2.5-7b", "http://127.0.0.1:8080/v1", "5120"),
        ("anthropic", "context_overflow", None, None, "prompt is too long"),
    ],
)
async def test_context_overflow(
    provider: str, name: str, model: str | None, base_url: str | None, needle: str
) -> None:
    client = make_client(provider, model=model, base_url=base_url)
    with cassette(provider, name), pytest.raises(ApiError) as caught:
        await reply_of(client, ModelRequest(messages=(OVERFLOW,), turn=1))
    assert caught.value.error.kind == "context_overflow"
    assert caught.value.error.retryable is False
    assert caught.value.error.status == 400
    assert needle in caught.value.error.message


async def test_ollama_full_context_is_reported_not_raised() -> None:
    client = make_client("ollama", num_ctx=2048)
    with cassette("ollama", "context_overflow"):
        reply = await reply_of(client, ModelRequest(messages=(OVERFLOW,), turn=1))
    assert reply.usage.context_tokens == 2048 + 9


@pytest.mark.parametrize(
    "provider, kind, retryable, needle",
    [
        ("openai", "provider", True, "The server had an error"),
        ("anthropic", "overloaded", True, "Overloaded"),
        ("ollama", "provider", True, "unexpected EOF"),
    ],
)
async def test_in_stream_error(provider: str, kind: str, retryable: bool, needle: str) -> None:
    client = make_client(provider)
    seen: list[Any] = []
    with cassette(provider, "stream_error"), pytest.raises(ApiError) as caught:
        async for event in client.stream(
            ModelRequest(messages=(Message.user("Tell me a story."),), turn=1)
        ):
            seen.append(event)
    assert caught.value.error.kind == kind
    assert caught.value.error.retryable is retryable
    assert caught.value.error.status is None
    assert needle in caught.value.error.message
    assert seen, "the text before the error was streamed"


@pytest.mark.parametrize(
    "provider, name, kind, retryable, status, should_retry, needle",
    [
        ("openai", "quota_exhausted", "provider", False, 429, None, "billing"),
        ("anthropic", "overloaded", "overloaded", True, 529, True, "Overloaded"),
        ("ollama", "model_not_found", "provider", False, 404, None, "not found"),
    ],
)
async def test_http_errors_from_cassettes(
    provider: str,
    name: str,
    kind: str,
    retryable: bool,
    status: int,
    should_retry: bool | None,
    needle: str,
) -> None:
    client = make_client(provider, model="llama9" if name == "model_not_found" else None)
    with cassette(provider, name), pytest.raises(ApiError) as caught:
        await reply_of(client, ModelRequest(messages=(Message.user("Say hello."),), turn=1))
    err = caught.value
    assert (err.error.kind, err.error.retryable, err.error.status) == (kind, retryable, status)
    assert err.should_retry is should_retry
    assert needle in err.error.message


async def test_compat_server_reusing_index_zero() -> None:
    client = make_client(
        "openai", model="Qwen/Qwen2.5-7B-Instruct", base_url="http://127.0.0.1:8000/v1"
    )
    with cassette("openai", "compat_index_reuse"):
        reply = await reply_of(client, ModelRequest(messages=(BOTH,), tools=(WEATHER,), turn=3))
    assert reply.message.tool_calls == [
        ToolCall(id="chatcmpl-tool-5f1c2a9e", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="chatcmpl-tool-9d3b7c41", name="get_weather", arguments={"city": "Tokyo"}),
    ]
    assert reply.usage.context_tokens is None  # no usage chunk at all
    assert reply.stop_reason == "tool_use"


async def test_compat_server_without_call_ids() -> None:
    client = make_client("openai", model="qwen2.5-7b", base_url="http://127.0.0.1:8080/v1")
    with cassette("openai", "compat_missing_id"):
        reply = await reply_of(client, ModelRequest(messages=(PARIS,), tools=(WEATHER,), turn=4))
    assert reply.message.tool_calls == [
        ToolCall(id="call_4_0", name="get_weather", arguments={"city": "Paris"})
    ]
    assert reply.usage.context_tokens == 200


async def test_a_changed_request_does_not_replay_a_stale_answer() -> None:
    from vcr.errors import CannotOverwriteExistingCassetteException

    client = make_client("openai")
    request = ModelRequest(messages=(Message.user("What is the capital of Spain?"),), turn=1)
    with (
        pytest.raises(CannotOverwriteExistingCassetteException) as caught,
        cassette("openai", "plain_answer"),
    ):
        await reply_of(client, request)
    report = str(caught.value)
    assert "POST https://api.openai.com/v1/chat/completions" in report
    assert '-      "content": "What is the capital of France?",' in report
    assert '+      "content": "What is the capital of Spain?",' in report
