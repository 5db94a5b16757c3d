"""A model that explores an agent: replies generated from the advertised tool specs, seeded.

``ExploringClient`` needs no script: it reads the tools the request advertises and answers each
request with one *move*, drawn from a seed:

=============  ===================================================================================
move           the reply
=============  ===================================================================================
``call``       one call of an advertised tool, with arguments its schema accepts
``parallel``   two or more calls in one reply (several tools, or one tool several times)
``repeat``     the calls of the previous reply again, same names and arguments (loop detection)
``ping_pong``  the calls of the reply before the previous one (A, B, A, B: ping-pong detection)
``invalid``    one call with an argument of the wrong type
``missing``    one call without one of its required arguments
``unknown``    a call of a tool that is not advertised (a misspelt or invented name)
``long``       a long text (``ExploreConfig.long_text`` characters), with a call or as the answer
``empty``      an empty answer: no text, no calls
``final``      a final answer (text, no calls)
=============  ===================================================================================

Arguments come from ``loopctl.testing.schema_values``, often copied from the conversation (an
order id the user gave, a number a tool returned), as a real model copies them.

Reply ``i`` (counted over the client's life) is a function of the seed, ``i`` and the request
alone, so a retry can be answered the same way (``reply_for(request, i)``) and a harness can keep
the replies (``replies``) as a script. From ``ExploreConfig.turns`` on every reply is a final
answer, so a run ends. Faults around the model are loopctl_sim's (``loopctl_sim.sim.faults``).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from loopctl.api import ModelRequest, ToolSpec
from loopctl.core import Message, TextPart, ToolCall, ToolResult
from loopctl.testing.schema_values import (
    Chooser,
    RandomChooser,
    Vocabulary,
    broken_arguments,
    missing_arguments,
    valid_arguments,
)
from loopctl.testing.scripted import _Replies

#: A move, simplest first (what hypothesis shrinks towards).
Move = Literal[
    "final",
    "call",
    "empty",
    "parallel",
    "repeat",
    "ping_pong",
    "invalid",
    "missing",
    "unknown",
    "long",
]
#: Every move, simplest first.
MOVES: Final[tuple[Move, ...]] = get_args(Move)

#: How often each move is drawn while the run is young (``final`` grows with the turn).
DEFAULT_WEIGHTS: Final[Mapping[Move, float]] = {
    "call": 10.0,
    "parallel": 3.0,
    "repeat": 2.0,
    "ping_pong": 1.0,
    "invalid": 1.5,
    "missing": 1.0,
    "unknown": 1.0,
    "long": 0.5,
    "empty": 0.3,
    "final": 0.7,
}

_TEXTS: Final = ("", "", "Let me check.", "I will look that up.", "One moment.")
_FINAL_TEXTS: Final = ("Done.", "Here is what I found.", "All set.", "I could not do that.")


@dataclass(frozen=True)
class ExploreConfig:
    """What the explorer draws from. ``turns``: from this turn of a run on, every reply is a
    final answer (so every run ends); ``weights``: the moves' relative weights (a move missing or
    at 0 is never drawn); ``max_parallel``: the most calls in a ``parallel`` reply."""

    turns: int = 12
    weights: Mapping[Move, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    max_parallel: int = 3
    long_text: int = 6000

    def __post_init__(self) -> None:
        unknown = set(self.weights) - set(MOVES)
        if unknown:
            raise ValueError(f"unknown moves {sorted(unknown)}; known: {', '.join(MOVES)}")
        if self.turns < 1 or self.max_parallel < 2:
            raise ValueError("turns must be at least 1 and max_parallel at least 2")


def _previous_calls(messages: Sequence[Message], back: int) -> list[ToolCall]:
    """The calls of the ``back``-th assistant message with calls, counting from the end."""
    seen = 0
    for message in reversed(messages):
        if message.role == "assistant" and message.tool_calls:
            seen += 1
            if seen == back:
                return message.tool_calls
    return []


def _vocabulary(request: ModelRequest, recent: int = 6) -> Vocabulary:
    """What a model would copy values from: the first user message, the recent messages (their
    JSON objects by key too: tool results, its own earlier arguments), the tool descriptions."""
    texts: list[str] = []
    objects: list[Mapping[str, object]] = []
    messages = request.messages
    chosen = [*messages[:1], *messages[-recent:]] if len(messages) > recent else list(messages)
    for message in reversed(chosen):  # the latest first: a model copies what it just read
        for part in message.parts:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, ToolResult):
                texts.append(part.content[:2000])
                found = _json_object(part.content)
                if found is not None:
                    objects.append(found)
            elif isinstance(part, ToolCall):
                objects.append(part.arguments)
    texts += [t.description for t in request.tools]
    return Vocabulary.of(texts, objects)


def _json_object(text: str) -> Mapping[str, object] | None:
    if not text.startswith("{") or len(text) > 20_000:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class Explorer:
    """Draws one reply for a request from a ``Chooser``; keeps no state between replies."""

    def __init__(self, config: ExploreConfig | None = None) -> None:
        self.config = config or ExploreConfig()

    def move(self, request: ModelRequest, choose: Chooser) -> Move:
        """The move for ``request``: always ``final`` from ``config.turns`` on."""
        config = self.config
        if request.turn >= config.turns:
            return "final"
        weights = dict(config.weights)
        if not request.tools:  # nothing to call: answer, or call what does not exist
            weights = {
                m: w for m, w in weights.items() if m in ("final", "empty", "long", "unknown")
            }
        # the answer gets likelier as the run grows
        weights["final"] = weights.get("final", 0.0) * (1 + 4 * request.turn / config.turns)
        options = [(m, weights[m]) for m in MOVES if weights.get(m, 0.0) > 0]
        if not options:
            return "final"
        return choose.weighted(options)

    def reply(
        self, request: ModelRequest, index: int, choose: Chooser, move: Move | None = None
    ) -> Message:
        """The reply for ``request`` (the client's ``index``-th), making ``move`` (default: a
        drawn one)."""
        chosen = move if move is not None else self.move(request, choose)
        config = self.config
        tools = request.tools
        words = _vocabulary(request)
        used = _ids_in(request.messages)

        def call(spec: ToolSpec, arguments: dict[str, object], j: int) -> ToolCall:
            return ToolCall(id=_fresh_id(index, j, used), name=spec.name, arguments=arguments)

        def valid(j: int) -> ToolCall:
            spec = choose.choice(tools)
            return call(spec, valid_arguments(spec.parameters, choose, words), j)

        text = choose.choice(_TEXTS)
        if chosen == "final":
            return Message.assistant(choose.choice(_FINAL_TEXTS))
        if chosen == "empty":
            return Message.assistant("")
        if chosen == "long":
            filler = " ".join(words.words[:50]) or "lorem ipsum"
            long = (filler + " ") * (config.long_text // (len(filler) + 1) + 1)
            long = long[: config.long_text]
            if tools and choose.chance(0.5):
                return Message.assistant(long, [valid(1)])
            return Message.assistant(long)
        if chosen == "unknown":
            names = [t.name for t in tools]
            name = choose.choice([*(n + "s" for n in names), "no_such_tool", "search"])
            name = name if name not in names else "no_such_tool"
            fake = ToolSpec(name=name)
            return Message.assistant(text, [call(fake, {"query": choose.choice(_TEXTS)}, 1)])
        if chosen in ("repeat", "ping_pong"):
            before = _previous_calls(request.messages, 1 if chosen == "repeat" else 2)
            if before:
                again = [
                    ToolCall(id=_fresh_id(index, j, used), name=c.name, arguments=c.arguments)
                    for j, c in enumerate(before, 1)
                ]
                return Message.assistant(text, again)
            chosen = "call"
        if chosen == "parallel":
            n = choose.integer(2, config.max_parallel)
            return Message.assistant(text, [valid(j) for j in range(1, n + 1)])
        if chosen in ("invalid", "missing"):
            spec = choose.choice(tools)
            arguments = None
            if chosen == "missing":
                arguments = missing_arguments(spec.parameters, choose, words)
            if arguments is None:
                arguments = broken_arguments(spec.parameters, choose, words)
            return Message.assistant(text, [call(spec, arguments, 1)])
        return Message.assistant(text, [valid(1)])


def _ids_in(messages: Sequence[Message]) -> set[str]:
    ids: set[str] = set()
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCall):
                ids.add(part.id)
            elif isinstance(part, ToolResult):
                ids.add(part.call_id)
    return ids


def _fresh_id(index: int, j: int, used: set[str]) -> str:
    """``call_<reply>_<n>`` (the scenario files' default ids), made unique in the conversation
    (an earlier run on the same history may have used it)."""
    base = f"call_{index + 1}_{j}"
    candidate, k = base, 1
    while candidate in used:
        k += 1
        candidate = f"{base}_{k}"
    used.add(candidate)
    return candidate


class ExploringClient(_Replies):
    """An ``ApiClient`` whose replies an ``Explorer`` draws from ``seed``. ``replies`` holds
    every reply delivered, ``moves`` counts the moves made, ``requests`` the requests."""

    chunk = None  # the text and arguments of a reply in two pieces each

    def __init__(self, seed: int = 0, config: ExploreConfig | None = None) -> None:
        self.seed = seed
        self.explorer = Explorer(config)
        self.replies: list[Message] = []
        self.moves: Counter[str] = Counter()
        self.requests: list[ModelRequest] = []
        self._last: tuple[int, ModelRequest, Message, Move] | None = None

    def chooser(self, index: int) -> RandomChooser:
        """The draws of reply ``index``: a function of the seed and the index only."""
        return RandomChooser(random.Random(self.seed * 1_000_003 + index))

    def reply_for(self, request: ModelRequest, index: int) -> Message:
        """Reply ``index`` to ``request``, without delivering it (asked again with the same
        request and index, the same reply)."""
        last = self._last
        if last is not None and last[0] == index and last[1] is request:
            return last[2]
        choose = self.chooser(index)
        move = self.explorer.move(request, choose)
        message = self.explorer.reply(request, index, choose, move)
        self._last = (index, request, message, move)
        return message

    def peek(self, request: ModelRequest) -> Message:
        """The next reply to ``request``, not delivered (a harness whose attempt fails first)."""
        return self.reply_for(request, len(self.replies))

    def deliver(self, request: ModelRequest) -> Message:
        """The next reply, counted as delivered (what ``stream`` sends)."""
        index = len(self.replies)
        message = self.reply_for(request, index)
        last = self._last
        self.moves[last[3] if last is not None else "final"] += 1
        self.replies.append(message)
        return message

    async def _take(self, request: ModelRequest) -> Message:
        self.requests.append(request)
        return self.deliver(request)
