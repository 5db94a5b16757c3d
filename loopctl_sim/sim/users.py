"""Simulated users: who writes the user's side of a session (``loopctl_sim.sim.session``).

A user is asked for its next turn with the conversation so far and the turn's index, and
answers a ``UserTurn`` (which may cancel the run or interject while its tools run) or None
(done): ``ScriptedUser``, ``ExploringUser`` (seeded), ``ModelUser`` (a model plays the user; its
calls travel with the turn into the trace) and ``RecordedUser`` (a trace's turns, offline).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from loopctl.api import ApiClient, ModelRequest, fold_events
from loopctl.core import Message

#: What an exploring user's turn may be.
USER_MOVES = (
    "follow_up",
    "correction",
    "contradiction",
    "topic_switch",
    "empty",
    "long",
    "non_ascii",
    "cancel",
    "interject",
)


@dataclass(frozen=True)
class UserTurn:
    """One turn of the user: the message, and what the user does while the run works."""

    text: str
    kind: str = "message"
    #: cancel the run before its ``cancel_at``-th step (1-based), as a user who gives up
    cancel_at: int | None = None
    #: a message the user sends while the run's tools run
    interject: str | None = None
    #: a model user's calls: ``{"request": [...], "reply": ...}`` each, kept in the trace
    calls: tuple[Mapping[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The turn as its trace holds it: what is not set is left out."""
        data = {"cancel_at": self.cancel_at, "interject": self.interject}
        given = {k: v for k, v in data.items() if v is not None}
        calls = {"calls": [dict(c) for c in self.calls]} if self.calls else {}
        return {"text": self.text, "kind": self.kind, **given, **calls}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UserTurn:
        text = data.get("text")
        if not isinstance(text, str):
            raise ValueError(f"a user turn needs its text (a string), got {text!r}")
        cancel_at = data.get("cancel_at")
        if cancel_at is not None and (not isinstance(cancel_at, int) or cancel_at < 1):
            raise ValueError(f"a user turn's cancel_at is a step (1 or more), got {cancel_at!r}")
        interject = data.get("interject")
        if interject is not None and not isinstance(interject, str):
            raise ValueError(f"a user turn's interject is a text, got {interject!r}")
        return cls(
            text=text,
            kind=str(data.get("kind", "message")),
            cancel_at=cancel_at,
            interject=interject,
            calls=tuple(data.get("calls") or ()),
        )


def user_turn_of(value: str | UserTurn) -> UserTurn:
    """A plain text is a message turn."""
    if isinstance(value, UserTurn):
        return value
    if isinstance(value, str):
        return UserTurn(value)
    raise TypeError(f"a user turn is a str or a UserTurn, got {type(value).__name__}")


@runtime_checkable
class SimUser(Protocol):
    """A simulated user: its next turn for the conversation so far (None: the user is done)."""

    async def next_turn(self, conversation: Sequence[Message], index: int) -> UserTurn | None: ...


TurnFn = Callable[[Sequence[Message], int], "str | UserTurn | None"]


class ScriptedUser:
    """A list of turns (texts or ``UserTurn``), or a function of (conversation, index)."""

    def __init__(self, turns: Sequence[str | UserTurn] | TurnFn) -> None:
        self.fn: TurnFn | None = turns if callable(turns) else None
        self.turns = [] if callable(turns) else [user_turn_of(t) for t in turns]

    async def next_turn(self, conversation: Sequence[Message], index: int) -> UserTurn | None:
        if self.fn is not None:
            value = self.fn(tuple(conversation), index)
            return None if value is None else user_turn_of(value)
        return self.turns[index] if index < len(self.turns) else None


_TOPICS = (
    "My order A-1001 arrived broken. Can I get my money back?",
    "What does it cost to ship 2 kg to France?",
    "Where is my order A-1002?",
    "Please refund my barista course, order A-1003.",
    "Do you sell descaling tablets?",
)
_FOLLOW_UPS = ("And how long will that take?", "Thanks. Anything else I should know?", "Why?")
_CORRECTIONS = (
    "Sorry, I meant order A-1002, not the one I said.",
    "No, the weight is 5 kg, not 2.",
)
_CONTRADICTIONS = (
    "Actually I never asked for a refund, cancel that.",
    "That is wrong, the order was never delivered.",
)
_NON_ASCII = (
    "Bonjour, ma commande A-1001 est arrivée cassée, remboursement s'il vous plaît ✓",
    "注文 A-1002 はどこですか 🚚",
    "Привет! Сколько стоит доставка в Германию?",
)
_INTERJECTIONS = ("Oh, and please hurry.", "Wait, also check A-1002.")
#: The moves whose text is one of a few fixed ones.
_FIXED = {
    "follow_up": _FOLLOW_UPS,
    "correction": _CORRECTIONS,
    "contradiction": _CONTRADICTIONS,
    "non_ascii": _NON_ASCII,
}


@dataclass
class ExploringUser:
    """A seeded user who explores: see the module docstring. ``turns``: how many turns it
    writes; ``topics``: its opening messages and topic switches (the sample agent's by
    default); ``weights``: each move's relative weight (a move at 0 is never drawn)."""

    seed: int = 0
    turns: int = 3
    topics: Sequence[str] = _TOPICS
    weights: Mapping[str, float] = field(default_factory=dict)
    long_text: int = 4000

    def __post_init__(self) -> None:
        unknown = sorted(set(self.weights) - set(USER_MOVES))
        if unknown:
            raise ValueError(f"unknown user moves {unknown}; known: {', '.join(USER_MOVES)}")
        if self.turns < 1:
            raise ValueError(f"an exploring user writes at least one turn, got {self.turns}")
        if not self.topics:
            raise ValueError("an exploring user needs at least one topic")

    def turn(self, index: int) -> UserTurn:
        """Turn ``index``: a function of the seed and the index only."""
        rng = random.Random(self.seed * 1_000_003 + index * 7_919 + 17)
        if index == 0:
            return UserTurn(rng.choice(list(self.topics)), "opening")
        moves = [m for m in USER_MOVES if self.weights.get(m, 1.0) > 0]
        if not moves:
            return UserTurn(rng.choice(list(self.topics)), "topic_switch")
        move = rng.choices(moves, [self.weights.get(m, 1.0) for m in moves])[0]
        if move in _FIXED:
            return UserTurn(rng.choice(_FIXED[move]), move)
        if move == "empty":
            return UserTurn("", move)
        if move == "long":
            words = ["please", "check", "order", "A-1001", "again", "thanks"]
            text = " ".join(rng.choice(words) for _ in range(self.long_text // 6))
            return UserTurn(text[: self.long_text], move)
        text = rng.choice(list(self.topics))
        if move == "cancel":
            return UserTurn(text, move, cancel_at=rng.randint(1, 3))
        if move == "interject":
            return UserTurn(text, move, interject=rng.choice(_INTERJECTIONS))
        return UserTurn(text, "topic_switch")

    async def next_turn(self, conversation: Sequence[Message], index: int) -> UserTurn | None:
        return self.turn(index) if index < self.turns else None


_PERSONA = (
    "You play a customer writing to a shop's support agent. Answer the agent's last message "
    "as the customer would, in one or two sentences. Write only the customer's message."
)


@dataclass
class ModelUser:
    """A model (any ``ApiClient``) plays the user: it sees the conversation from the user's side
    (roles swapped, tool traffic left out) and answers with the next message; ``opening`` is its
    first turn (None: the model writes it too)."""

    client: ApiClient
    turns: int = 3
    persona: str = _PERSONA
    opening: str | None = None

    async def next_turn(self, conversation: Sequence[Message], index: int) -> UserTurn | None:
        if index >= self.turns:
            return None
        if index == 0 and self.opening is not None:
            return UserTurn(self.opening, "model")
        flipped = _from_the_user_side(conversation)
        request = ModelRequest(messages=flipped, system=self.persona, turn=index + 1)
        text = fold_events([event async for event in self.client.stream(request)]).message.text
        call = {"request": [m.model_dump(mode="json") for m in flipped], "reply": text}
        return UserTurn(text, "model", calls=(call,))


def _from_the_user_side(conversation: Sequence[Message]) -> list[Message]:
    """The conversation as the model playing the user sees it: roles swapped, tools left out.
    A model answers a user message, so the list ends with the agent's (now a user's) text."""
    out: list[Message] = []
    for message in conversation:
        if message.role == "user" and message.text:
            out.append(Message.assistant(message.text))
        elif message.role == "assistant" and message.text:
            out.append(Message.user(message.text))
    if not out or out[-1].role != "user":
        out.append(Message.user("(The agent waits for your message.)"))
    return out


class RecordedUser(ScriptedUser):
    """The user turns a session's trace holds, played back in order (a model user's included,
    so its session replays offline); ``loopctl_sim.sim.session.recorded_turns`` reads them."""
