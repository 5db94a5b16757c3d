"""Small helpers shared by the provider tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import httpx
from vcr_support import record_mode

from loopctl.api import ApiClient, ModelReply, ModelRequest, StreamEvent, ToolSpec, fold_events
from loopctl.providers import AnthropicClient, OllamaClient, OpenAIClient

# real keys come from the environment only while recording
KEY: str | None = None if record_mode() != "none" else "test-key"

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)

MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-20250514", "ollama": "llama3.2"}


def make_client(
    provider: str,
    *,
    stream: bool = True,
    model: str | None = None,
    base_url: str | None = None,
    http_client: httpx.AsyncClient | None = None,
    **options: Any,
) -> OpenAIClient | AnthropicClient | OllamaClient:
    model = model or MODELS[provider]
    if provider == "openai":
        return OpenAIClient(
            model, api_key=KEY, base_url=base_url, http_client=http_client, stream=stream, **options
        )
    if provider == "anthropic":
        return AnthropicClient(
            model, api_key=KEY, base_url=base_url, http_client=http_client, stream=stream, **options
        )
    return OllamaClient(model, base_url=base_url, http_client=http_client, stream=stream, **options)


async def events_of(client: ApiClient, request: ModelRequest) -> list[StreamEvent]:
    return [event async for event in client.stream(request)]


async def reply_of(client: ApiClient, request: ModelRequest) -> ModelReply:
    return fold_events(await events_of(client, request))


def chunked(
    pieces: Iterable[bytes],
    *,
    then: BaseException | None = None,
    before: Callable[[], Any] | None = None,
) -> AsyncIterator[bytes]:
    """An async byte iterator: the pieces, then optionally an exception (a dropped connection)."""

    async def gen() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece
        if before is not None:
            await before()
        if then is not None:
            raise then

    return gen()


def mock_http(
    body: AsyncIterator[bytes] | bytes,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    seen: list[httpx.Request] | None = None,
) -> httpx.AsyncClient:
    """An AsyncClient whose every request is answered by ``body`` (no network)."""

    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(status, headers=headers or {}, content=body)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))
