"""The travel agent with one thing changed each: what a user changes between recording a trace
and replaying it. Each is a factory (``travel_variants:prompt``) the harness calls as it calls
``examples.travel_agent.agent:build``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from examples.travel_agent import agent
from loopctl import ApiClient, BareLoop, LoopObserver, Message, ToolCall, ToolResult, tool
from loopctl.driver import plan_cut
from loopctl.tools import Deny

_BASE = agent.Settings()


def _with(**changes: Any) -> Any:
    settings = replace(_BASE, **changes)

    def build(client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()) -> BareLoop:
        return agent.build(client, observers, settings=settings)

    return build


@tool
def weather_forecast(city: str, days: int = 3) -> dict[str, Any]:
    """The weather in ``city`` for the next ``days`` days (1 to 7)."""
    return {
        "city": city,
        "days": [{"day": d + 1, "sky": "snow", "high_c": -2} for d in range(days)],
    }


@tool(name="weather_forecast")
def weather_in_units(city: str, days: int = 3, units: str = "metric") -> dict[str, Any]:
    """The weather in ``city`` for the next ``days`` days (1 to 7)."""
    return agent.weather_forecast(city, days)


@tool
def seat_map(flight: str) -> str:
    """The free seats of a flight."""
    return f"{flight}: 12A, 14C"


def _swap(new: Any) -> tuple[Any, ...]:
    return tuple(new if t.name == "weather_forecast" else t for t in agent.TOOLS)


def _no_masking(call: ToolCall) -> Deny | None:
    """A pre-tool hook that no longer masks passports (it still refuses Atlantis)."""
    decision = agent.guard_arguments(call)
    return decision if isinstance(decision, Deny) else None


def _louder_redaction(call: ToolCall, result: ToolResult) -> ToolResult | None:
    redacted = agent.redact_contacts(call, result)
    if redacted is None:
        return None
    return redacted.model_copy(update={"content": redacted.content.replace("[redacted]", "***")})


class _KeepThree(agent.TripNotesCompactor):
    """A compactor that keeps more of the conversation."""

    async def compact(self, messages: Any, reason: Any) -> list[Message] | None:
        cut = plan_cut(messages, keep_head=1, keep_tail=3)
        if cut is None:
            return None
        start, end = cut
        return [*messages[:start], Message.user(f"[{end - start} cut]"), *messages[end:]]


model = _with(model="skyway-model-2")
prompt = _with(system_prompt=agent.SYSTEM_PROMPT + " Always answer in French.")
tool_output = _with(tools=_swap(weather_forecast))
tool_schema = _with(tools=_swap(weather_in_units))
new_tool = _with(tools=(*agent.TOOLS, seat_map))
temperature = _with(temperature=0.9)
pre_hook = _with(pre_tool=(_no_masking,))
post_hook = _with(post_tool=(_louder_redaction,))
compactor = _with(compactor=_KeepThree())
max_turns = _with(max_turns=3)
