"""A travel agent for the airline SkyWay: the sample the acceptance suite uses loopctl on.

It is built like an agent written without loopctl_sim in mind, and talks to its model over HTTP
(``OpenAIClient(base_url=...)``; the local ``examples.model_server`` plays the model):

- a system prompt, ``temperature`` in the request options, a small ``context_window``;
- four tools: ``search_flights`` (async: awaits the in-process ``FlightService``),
  ``weather_forecast`` (sync, in a worker thread), ``convert_price`` (raises ``ValueError`` on an
  unknown currency or an amount that is not positive) and ``city_guide`` (a ~10 KB dict);
- a pre-tool hook that refuses flights to where SkyWay does not fly and masks a passport number
  before any tool sees it; a post-tool hook that redacts e-mail addresses and phone numbers;
- a tool middleware that writes city names the way the services know them;
- a compactor of its own that cuts the older exchanges and leaves ``[trip notes]`` of them;
- ``max_turns`` and ``loop_action="fail"`` (a model repeating itself stops the run).

``build`` is the factory the harness calls (``loopctl-sim replay TRACE --agent
examples.travel_agent.agent:build``, ``loopctl run --agent ...``): it takes the model client and
observers the harness brings and otherwise builds its own client from the environment
(``SKYWAY_BASE_URL``, ``SKYWAY_API``: ``openai``, ``anthropic`` or ``responses``). ``settings``
lets a test build variants of the agent (another prompt, tool, option, hook or compactor).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from loopctl import (
    ApiClient,
    BareLoop,
    CompactReason,
    Hooks,
    LoopObserver,
    Message,
    RunConfig,
    SessionConfig,
    ToolCall,
    ToolResult,
    tool,
)
from loopctl.driver import plan_cut
from loopctl.tools import Deny, NextTool, Replace, Tool

MODEL = "skyway-model-1"
DEFAULT_BASE_URL = "http://127.0.0.1:8765/v1"
SYSTEM_PROMPT = (
    "You are SkyWay's travel agent. Search flights before you quote a fare, convert prices only "
    "through the convert_price tool, and never repeat a traveller's passport number."
)
#: Where SkyWay does not fly (the pre-tool hook refuses these).
NO_FLY = frozenset({"Atlantis", "Pyongyang"})
RATES = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85, "NOK": 11.6, "JPY": 162.0}


class FlightService:
    """SkyWay's fare service, in process: an async API, as a real client library's would be."""

    async def search(self, origin: str, destination: str, date: str) -> list[dict[str, Any]]:
        await asyncio.sleep(0)  # a real one awaits the network here
        seed = int(hashlib.sha256(f"{origin}>{destination}@{date}".encode()).hexdigest(), 16)
        return [
            {
                "flight": f"SK{100 + (seed >> (8 * i)) % 900}",
                "departs": f"{date}T{6 + 4 * i:02d}:{(seed >> i) % 6}0",
                "price_eur": float(90 + (seed >> (5 * i)) % 400),
            }
            for i in range(3)
        ]


FLIGHTS = FlightService()


@tool
async def search_flights(
    origin: str, destination: str, date: str = "2027-03-01", passenger: str | None = None
) -> dict[str, Any]:
    """Search SkyWay's flights from ``origin`` to ``destination`` on ``date`` (YYYY-MM-DD)."""
    flights = await FLIGHTS.search(origin, destination, date)
    found: dict[str, Any] = {"origin": origin, "destination": destination, "flights": flights}
    if passenger is not None:
        found["passenger"] = passenger
    return found


@tool
def weather_forecast(city: str, days: int = 3) -> dict[str, Any]:
    """The weather in ``city`` for the next ``days`` days (1 to 7)."""
    skies = ("sunny", "cloudy", "rain", "windy")
    seed = sum(city.encode())
    return {
        "city": city,
        "days": [
            {"day": d + 1, "sky": skies[(seed + d) % 4], "high_c": 8 + (seed + 3 * d) % 15}
            for d in range(max(1, min(days, 7)))
        ],
    }


@tool
def convert_price(amount: float, currency: str) -> str:
    """Convert ``amount`` euros to ``currency`` (EUR, USD, GBP, NOK, JPY)."""
    if amount <= 0:
        raise ValueError(f"amount must be positive, not {amount}")
    rate = RATES.get(currency.upper())
    if rate is None:
        raise ValueError(f"unknown currency {currency!r}")
    return f"{amount * rate:.2f} {currency.upper()}"


@tool
def city_guide(city: str) -> dict[str, Any]:
    """A city guide: its sights (with a description and opening hours) and whom to contact."""
    kinds = ("museum", "park", "market", "cathedral", "harbour", "old town", "viewpoint")
    sights = [
        {
            "name": f"{city} {kinds[i % len(kinds)]} {i + 1}",
            "description": (
                f"One of {city}'s best-loved places: a {kinds[i % len(kinds)]} that visitors "
                "praise for its calm mornings, its history and the walk that leads there. "
            )
            * 2,
            "hours": f"{8 + i % 3}:00-{17 + i % 4}:00",
        }
        for i in range(32)
    ]
    contact = {
        "concierge": f"concierge.{city.lower()}@skyway.example",
        "phone": "+33 1 23 45 67 89",
    }
    return {"city": city, "sights": sights, "contact": contact}


TOOLS: tuple[Tool[..., Any], ...] = (search_flights, weather_forecast, convert_price, city_guide)

_PASSPORT = re.compile(r"^[A-Z]{1,2}\d{6,8}$")


def guard_arguments(call: ToolCall) -> Deny | Replace | None:
    """Pre-tool: no search to where SkyWay does not fly; a passport number is masked (all but
    its last two characters) before any tool, log or trace sees it."""
    destination = call.arguments.get("destination")
    if isinstance(destination, str) and destination.strip().title() in NO_FLY:
        return Deny(f"SkyWay does not fly to {destination.strip().title()}")
    passenger = call.arguments.get("passenger")
    if isinstance(passenger, str) and _PASSPORT.match(passenger):
        return Replace({**call.arguments, "passenger": "*" * (len(passenger) - 2) + passenger[-2:]})
    return None


_CONTACT = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+|\+\d[\d ]{7,}\d")


def redact_contacts(call: ToolCall, result: ToolResult) -> ToolResult | None:
    """Post-tool: e-mail addresses and phone numbers never reach the model."""
    redacted = _CONTACT.sub("[redacted]", result.content)
    if redacted == result.content:
        return None
    return result.model_copy(update={"content": redacted})


async def normalise_cities(call: ToolCall, call_next: NextTool) -> ToolResult:
    """Tool middleware: city names as the services know them (``paris`` -> ``Paris``)."""
    fixed = {
        k: v.strip().title() if k in ("origin", "destination", "city") and isinstance(v, str) else v
        for k, v in call.arguments.items()
    }
    if fixed != call.arguments:
        call = call.model_copy(update={"arguments": fixed})
    return await call_next(call)


class TripNotesCompactor:
    """Cuts the older exchanges of a long conversation and leaves ``[trip notes]`` of them: which
    tools ran, and the fare and price they found (what the model still needs to answer)."""

    def __init__(self, keep_tail: int = 2) -> None:
        self.keep_tail = keep_tail

    async def compact(
        self, messages: Sequence[Message], reason: CompactReason
    ) -> list[Message] | None:
        cut = plan_cut(messages, keep_head=1, keep_tail=self.keep_tail)
        if cut is None:
            return None
        start, end = cut
        done: list[str] = []
        facts: list[str] = []
        for message in messages[start:end]:
            done += [c.name for c in message.tool_calls if c.name not in done]
            for result in message.tool_results:
                if result.name == "search_flights" and not result.is_error:
                    fares = re.findall(
                        r'"flight": "(\w+)"[^}]*"price_eur": ([\d.]+)', result.content
                    )
                    if fares:
                        flight, price = min(fares, key=lambda f: (float(f[1]), f[0]))
                        facts.append(f"cheapest {flight} at {price} EUR")
                elif result.name == "convert_price" and not result.is_error:
                    facts.append(f"converted {result.content}")
        note = f"[trip notes] done: {', '.join(done)}" + "".join(f"; {f}" for f in facts)
        return [*messages[:start], Message.user(note), *messages[end:]]


@dataclass(frozen=True)
class Settings:
    """What the agent is made of; a variant of the agent is ``build(settings=...)``."""

    model: str = MODEL
    system_prompt: str = SYSTEM_PROMPT
    tools: tuple[Tool[..., Any], ...] = TOOLS
    temperature: float = 0.2
    context_window: int = 4000
    max_turns: int = 8
    pre_tool: tuple[Any, ...] = (guard_arguments,)
    post_tool: tuple[Any, ...] = (redact_contacts,)
    middleware: tuple[Any, ...] = (normalise_cities,)
    compactor: Any = field(default_factory=TripNotesCompactor)


def own_client(model: str = MODEL) -> ApiClient:
    """The client the agent uses when the harness brings none: the API named by ``SKYWAY_API``
    at ``SKYWAY_BASE_URL`` (the key from ``SKYWAY_API_KEY``, else the provider's variable)."""
    from loopctl.providers import AnthropicClient, OpenAIClient, OpenAIResponsesClient

    base_url = os.environ.get("SKYWAY_BASE_URL", DEFAULT_BASE_URL)
    key = os.environ.get("SKYWAY_API_KEY") or None
    api = os.environ.get("SKYWAY_API", "openai")
    if api == "anthropic":
        # Anthropic's base URL is the host (the client adds /v1/messages)
        return AnthropicClient(model, base_url=base_url.removesuffix("/v1"), api_key=key)
    if api == "responses":
        return OpenAIResponsesClient(model, base_url=base_url, api_key=key)
    return OpenAIClient(model, base_url=base_url, api_key=key)


def build(
    client: ApiClient | None = None,
    observers: Sequence[LoopObserver] = (),
    settings: Settings | None = None,
) -> BareLoop:
    """The travel agent as SkyWay runs it."""
    settings = settings or Settings()
    return BareLoop(
        client if client is not None else own_client(settings.model),
        tools=list(settings.tools),
        config=RunConfig(max_turns=settings.max_turns, loop_action="fail"),
        session=SessionConfig(
            system_prompt=settings.system_prompt,
            context_window=settings.context_window,
            options={"temperature": settings.temperature},
        ),
        hooks=Hooks(pre_tool=list(settings.pre_tool), post_tool=list(settings.post_tool)),
        middleware=list(settings.middleware),
        compactor=settings.compactor,
        observers=observers,
    )
