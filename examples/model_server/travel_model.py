"""The small deterministic "model" the local server plays: a travel assistant's moves.

It reads the conversation in a neutral form (``Turn``: who spoke, the text, the calls made, the
results given) that every wire format is converted to, and decides like a model would from what
it sees, so that the same conversation always gets the same answer:

1. a question naming a route (``from Oslo to Paris``) and no call yet: search flights (with the
   passport the traveller gave, which the agent's hook masks), and the weather when asked;
2. a price asked ``in XXX`` and not converted yet: convert the cheapest fare;
3. a city guide asked (``guide``, ``see``) and not fetched yet: fetch it;
4. otherwise: a final text built from what the tools answered (and the agent's ``[trip notes]``,
   which its compactor leaves where it cut the tools' answers away).

A question without a route and without a weather request is answered with a question back.
One more move serves ``loopctl run``'s built-in agent: ``read the file NAME`` calls its
``read_file`` tool, then says how many characters came back and how they start.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Call", "Move", "Result", "Turn", "decide"]

_CITY = r"([A-Za-z]+(?: [A-Z][a-z]+)*)"
_ROUTE = re.compile(rf"from {_CITY} to {_CITY}(?: on (\d{{4}}-\d{{2}}-\d{{2}}))?")
_CURRENCY = re.compile(r"\bin ([A-Z]{3})\b")
_PASSPORT = re.compile(r"\bpassport (\w+)")
_READ = re.compile(r"\bread the file ([\w./-]+)")
_NOTES = "[trip notes]"
_CLOCK = re.compile(r"\bwhen it is (\d\d:\d\d) in ([\w/]+), what time is it in ([\w/]+)")


@dataclass(frozen=True)
class Call:
    """A tool call as the model made it."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Result:
    """A tool's answer as the agent sent it back."""

    call_id: str
    content: str
    is_error: bool = False


@dataclass
class Turn:
    """One message of the conversation, whatever the wire format."""

    role: str  # "user", "assistant" or "tool"
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)


@dataclass(frozen=True)
class Move:
    """What the model answers: a text, or tool calls (``id``, ``name``, ``arguments``)."""

    text: str = ""
    calls: tuple[Call, ...] = ()


def _question(turns: list[Turn]) -> int:
    """The index of the user's last question (notes and tool results are not questions)."""
    for i in range(len(turns) - 1, -1, -1):
        turn = turns[i]
        if turn.role == "user" and turn.text and not turn.text.startswith(_NOTES):
            return i
    return -1


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _cheapest(content: str) -> dict[str, Any] | None:
    found = _loads(content)
    flights = found.get("flights") if isinstance(found, dict) else None
    if not isinstance(flights, list) or not flights:
        return None
    best: dict[str, Any] = min(flights, key=lambda f: (f["price_eur"], f["flight"]))
    return best


def decide(turns: list[Turn]) -> Move:
    """The model's next move for the conversation ``turns``."""
    q = _question(turns)
    asked = turns[q].text if q >= 0 else ""
    after = turns[q + 1 :]
    n_calls = sum(len(t.calls) for t in turns)
    notes = " ".join(t.text for t in after if t.text.startswith(_NOTES))
    results: dict[str, Result] = {r.call_id: r for t in after for r in t.results}
    done: dict[str, list[tuple[Call, Result | None]]] = {}
    for turn in after:
        for made in turn.calls:
            done.setdefault(made.name, []).append((made, results.get(made.id)))
    for name in re.findall(r"done: ([\w, ]+)", notes):
        for each in name.split(","):
            done.setdefault(each.strip(), [])
    route = _ROUTE.search(asked)
    currency = _CURRENCY.search(asked)
    wants_weather = "weather" in asked.lower()
    wants_guide = re.search(r"\b(guide|see|visit)\b", asked.lower()) is not None

    # ids unique in the conversation, and the same for the same conversation
    seen = hashlib.sha256(repr([(t.role, t.text, len(t.results)) for t in turns]).encode())
    stem = seen.hexdigest()[:10]

    def call(name: str, **arguments: Any) -> Call:
        return Call(f"{stem}{n_calls + len(pending)}", name, arguments)

    pending: list[Call] = []
    reading = _READ.search(asked)
    if reading is not None:
        return _read(reading.group(1), done, call)
    clock = _CLOCK.search(asked)
    if clock is not None:  # the MCP example (examples/mcp_agent): a time server's tool
        return _clock(clock, done, call)
    if not done:
        if route is not None:
            args: dict[str, Any] = {"origin": route.group(1), "destination": route.group(2)}
            if route.group(3):
                args["date"] = route.group(3)
            passport = _PASSPORT.search(asked)
            if passport:
                args["passenger"] = passport.group(1)
            pending.append(call("search_flights", **args))
        if wants_weather and route is not None:
            pending.append(call("weather_forecast", city=route.group(2), days=3))
        if pending:
            return Move(calls=tuple(pending))
        return Move(text="Where would you like to fly from, and to where?")
    if currency is not None and "convert_price" not in done:
        fares = [r for _, r in done.get("search_flights", []) if r is not None and not r.is_error]
        cheapest = _cheapest(fares[0].content) if fares else None
        noted = re.search(r"cheapest (\w+) at ([\d.]+) EUR", notes)
        amount = cheapest["price_eur"] if cheapest else float(noted.group(2)) if noted else None
        if amount is not None:
            return Move(calls=(call("convert_price", amount=amount, currency=currency.group(1)),))
    if wants_guide and route is not None and "city_guide" not in done:
        return Move(calls=(call("city_guide", city=route.group(2)),))
    return Move(text=_answer(route, done, notes))


def _read(path: str, done: dict[str, list[tuple[Call, Result | None]]], call: Any) -> Move:
    """Read the file with ``read_file``, then say what came back."""
    answers = [r for _, r in done.get("read_file", []) if r is not None]
    if not answers:
        return Move(calls=(call("read_file", path=path),))
    content = answers[-1].content
    return Move(text=f"{path}: {len(content)} characters, starting {content[:20]!r}.")


def _clock(
    asked: re.Match[str], done: dict[str, list[tuple[Call, Result | None]]], call: Any
) -> Move:
    """Convert the time with ``convert_time``, then say what came back."""
    answers = [r for _, r in done.get("convert_time", []) if r is not None]
    if not answers:
        at, source, target = asked.groups()
        arguments = {"source_timezone": source, "time": at, "target_timezone": target}
        return Move(calls=(call("convert_time", **arguments),))
    found = _loads(answers[-1].content)
    when = found.get("target", {}).get("datetime", "") if isinstance(found, dict) else ""
    if answers[-1].is_error or not when:
        return Move(text=f"The time server could not say ({answers[-1].content[:120]}).")
    return Move(text=f"It is then {when[11:16]} in {asked.group(3)} ({found['time_difference']}).")


def _answer(
    route: re.Match[str] | None, done: dict[str, list[tuple[Call, Result | None]]], notes: str
) -> str:
    """The final text, from what the tools answered."""
    where = f"{route.group(1)} to {route.group(2)}" if route else "your trip"
    said = [f"Your trip from {where}:"] if route else ["About your trip:"]
    if notes:
        said.append(notes.removeprefix(_NOTES).strip().rstrip(".") + ".")
    for name, calls in done.items():
        for _, result in calls:
            if result is None:
                continue
            # (Chat Completions and Responses do not mark an error: its text does)
            if result.is_error or result.content.startswith("tool '"):
                said.append(f"{name} failed ({result.content[:120]}).")
            elif name == "search_flights":
                best = _cheapest(result.content)
                said.append(
                    "no flights found."
                    if best is None
                    else f"the cheapest flight is {best['flight']} at {best['price_eur']} EUR."
                )
            elif name == "weather_forecast":
                days = _loads(result.content)
                said.append(
                    f"the weather: {result.content[:80]}."
                    if days is None
                    else f"the weather: {', '.join(d['sky'] for d in days['days'])}."
                )
            elif name == "convert_price":
                said.append(f"that is {result.content}.")
            elif name == "city_guide":
                guide = _loads(result.content)
                sights = len(guide.get("sights", [])) if isinstance(guide, dict) else 0
                said.append(f"the city guide lists {sights} sights.")
    return " ".join(said)
