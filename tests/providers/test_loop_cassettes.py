"""Whole ``BareLoop`` runs against each provider's cassettes, offline."""

from __future__ import annotations

import pytest
from provider_helpers import make_client
from vcr_support import cassette

from loopctl import Completed, Failed, ToolResult, tool
from loopctl.driver import BareLoop, RunConfig

PROVIDERS = ["openai", "anthropic", "ollama"]


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    if city == "Paris":
        return "18 C and sunny"
    return "24 C and raining"


@tool(name="get_weather")
def get_weather_tokyo_down(city: str) -> str:
    """Current weather for a city."""
    if city == "Paris":
        return "18 C and sunny"
    raise RuntimeError(f"weather service unavailable for {city}")


class Sleeps:
    """An injected sleep that records the delays and never waits."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tool_round_trip_loop(provider: str) -> None:
    loop = BareLoop(make_client(provider), tools=[get_weather], config=RunConfig())
    with cassette(provider, "loop_tool_round_trip") as tape:
        result = await loop.run("What is the weather in Paris?")
    assert tape.all_played
    assert isinstance(result.outcome, Completed), result.error
    assert result.turns == 2
    assert "18 C and sunny in Paris" in (result.final_text or "")
    results = [r for m in result.messages for r in m.tool_results]
    assert [(r.name, r.content) for r in results] == [("get_weather", "18 C and sunny")]
    assert result.usage.output_tokens > 0


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_parallel_tools_loop(provider: str) -> None:
    fn = get_weather_tokyo_down if provider == "anthropic" else get_weather
    loop = BareLoop(make_client(provider), tools=[fn], config=RunConfig())
    with cassette(provider, "loop_parallel_tools") as tape:
        result = await loop.run("Weather in Paris and in Tokyo?")
    assert tape.all_played
    assert isinstance(result.outcome, Completed), result.error
    results: list[ToolResult] = [r for m in result.messages for r in m.tool_results]
    assert len(results) == 2
    assert [r.is_error for r in results] == [False, provider == "anthropic"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_rate_limit_then_success_loop(provider: str) -> None:
    sleeps = Sleeps()
    loop = BareLoop(make_client(provider), config=RunConfig(), sleep=sleeps, rng=lambda: 0.0)
    with cassette(provider, "rate_limit_then_success") as tape:
        result = await loop.run("Say hello.")
    assert tape.all_played
    assert isinstance(result.outcome, Completed), result.error
    assert result.final_text == "Hello!"
    expected = {"openai": 19.876, "anthropic": 12.0, "ollama": 0.5}[provider]  # hint or backoff
    assert sleeps.delays == [expected]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_context_overflow_fails_the_run_as_context_overflow(provider: str) -> None:
    loop = BareLoop(make_client(provider), config=RunConfig())
    with cassette(provider, "context_overflow"):
        result = await loop.run("Summarize: " + "lorem ipsum " * 8)
    assert isinstance(result.outcome, Failed)
    assert result.error is not None
    assert result.error.kind == "context_overflow"
