"""Whole ``BareLoop`` runs with reasoning parts, per provider, recorded and replayed from the trace
(machine level: the brain's digests; driver level: a fresh ``BareLoop`` answered from the trace),
and one conversation across providers that sends each only what it accepts.

Only the top-level ``loopctl_sim`` names are used (``TraceRecorder``, ``replay_trace``,
``replay_driver``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from make_cassettes_thinking import NO_DATA, SIGNATURE, THINKING, THOUGHT, TOKYO
from provider_helpers import KEY, make_client
from vcr_support import cassette

from loopctl import Completed, ProviderPart, ThinkingPart, tool
from loopctl.api import ApiClient
from loopctl.driver import BareLoop, RunConfig, SessionConfig
from loopctl.providers import OpenAIResponsesClient
from loopctl_sim import TraceRecorder, read_trace, replay_driver, replay_trace


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return "18 C and sunny" if city == "Paris" else "24 C and raining"


def responses() -> ApiClient:
    return OpenAIResponsesClient("gpt-5-mini", api_key=KEY)


def deepseek() -> ApiClient:
    return make_client("openai", model="deepseek-reasoner", base_url="https://api.deepseek.com")


LOOPS: dict[str, tuple[str, str, Any, dict[str, Any]]] = {
    # name: (cassette directory, cassette, client, session options)
    "anthropic": (
        "anthropic",
        "loop_thinking_tool_use",
        lambda: make_client("anthropic"),
        {"thinking": THINKING},
    ),
    "ollama": ("ollama", "loop_thinking_tool_use", lambda: make_client("ollama"), {"think": True}),
    "deepseek": ("openai", "loop_deepseek_reasoning", deepseek, {}),
    "responses": ("openai_responses", "loop_reasoning_tool_use", responses, {}),
}


def assert_replays(path: Path) -> None:
    machine = replay_trace(path)
    assert machine.ok, machine.summary()
    driver = replay_driver(path)
    assert driver.ok, driver.summary()


@pytest.mark.parametrize("name", LOOPS)
def test_a_reasoning_tool_loop_runs_and_replays_from_its_trace(name: str, tmp_path: Path) -> None:
    directory, tape_name, client, options = LOOPS[name]
    path = tmp_path / f"{name}.jsonl"
    recorder = TraceRecorder(path)
    loop = BareLoop(
        client(),
        tools=[get_weather],
        config=RunConfig(),
        session=SessionConfig(options=options),
        observers=[recorder],
    )
    with cassette(directory, tape_name) as tape:
        result = loop.run_sync("What is the weather in Paris?")
    recorder.close()
    assert tape.all_played  # the second request carried the reasoning back
    assert isinstance(result.outcome, Completed), result.error
    assert "18 C and sunny in Paris" in (result.final_text or "")
    kept = [p for m in loop.machine.history for p in m.parts if isinstance(p, ThinkingPart)]
    assert kept and all(p.provider == loop.client.provider for p in kept)  # type: ignore[attr-defined]
    # the trace holds the parts as data: a feed record carries them and reads back equal
    text = path.read_text()
    assert '"kind":"thinking"' in text
    assert any(getattr(r, "name", None) == "model_response" for r in read_trace(path))
    assert_replays(path)


def test_a_conversation_across_providers_sends_each_only_what_it_accepts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cross.jsonl"
    recorder = TraceRecorder(path)
    thinking = SessionConfig(options={"thinking": THINKING})
    claude = BareLoop(
        make_client("anthropic"), tools=[get_weather], session=thinking, observers=[recorder]
    )
    with cassette("anthropic", "loop_thinking_tool_use") as tape:
        first = claude.run_sync("What is the weather in Paris?")
    assert tape.all_played and isinstance(first.outcome, Completed)
    gpt = BareLoop.from_machine(
        claude.into_machine(), make_client("openai"), [get_weather], observers=[recorder]
    )
    with cassette("openai", "cross_after_anthropic") as tape:  # no thinking in the request
        second = gpt.run_sync(TOKYO)
    assert tape.all_played and second.final_text == NO_DATA
    back = BareLoop.from_machine(
        gpt.into_machine(),
        make_client("anthropic"),
        [get_weather],
        session=thinking,
        observers=[recorder],
    )
    with cassette("anthropic", "cross_back_from_openai") as tape:  # its signed thinking again
        third = back.run_sync("Thanks!")
    recorder.close()
    assert tape.all_played and third.final_text == "You're welcome!"
    signed = ThinkingPart(provider="anthropic", text=THOUGHT, signature=SIGNATURE)
    assert signed in back.machine.history[1].parts
    assert_replays(path)


def test_server_tool_parts_ride_a_loop_and_are_never_dispatched(tmp_path: Path) -> None:
    """A reply holding a server tool call and its result completes the run: the registry is
    never asked (the brain sees no ToolCall), and the parts replay from the trace."""
    path = tmp_path / "search.jsonl"
    recorder = TraceRecorder(path)
    calls: list[str] = []

    @tool(name="get_weather")
    def watched(city: str) -> str:
        """Current weather for a city."""
        calls.append(city)
        return "?"

    client = make_client(
        "anthropic",
        stream=False,
        server_tools=[{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
    )
    loop = BareLoop(client, tools=[watched], observers=[recorder])
    with cassette("anthropic", "loop_server_tools") as tape:
        result = loop.run_sync("What is the weather in Paris?")
    recorder.close()
    assert tape.all_played and isinstance(result.outcome, Completed)
    assert calls == [] and result.turns == 1
    kinds = [
        p.data["type"] for m in result.messages for p in m.parts if isinstance(p, ProviderPart)
    ]
    assert kinds == ["server_tool_use", "web_search_tool_result", "citations"]
    assert json.loads(path.read_text().splitlines()[-1])["type"] == "end"
    assert_replays(path)
