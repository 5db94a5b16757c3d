"""Token estimates for the times the provider has not reported usage.

The provider's own count, reported after every model call, always wins. Between calls (after
tool results, after a compaction) the driver adds an estimate so the brain's threshold checks see
the context grow. The default is the usual rule of thumb of about 4 characters a token.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Protocol

from loopctl.core import Message


class TokenEstimator(Protocol):
    def count(self, messages: Iterable[Message]) -> int: ...


class CharEstimator:
    """About ``chars_per_token`` characters a token, plus a small overhead per message."""

    def __init__(self, chars_per_token: float = 4.0, per_message: int = 4) -> None:
        self.chars_per_token = chars_per_token
        self.per_message = per_message

    def count(self, messages: Iterable[Message]) -> int:
        chars = 0
        n = 0
        for message in messages:
            n += 1
            chars += message_chars(message)
        return self.from_chars(chars, n)

    def from_chars(self, chars: int, messages: int) -> int:
        """``count`` of ``messages`` messages holding ``chars`` characters in all (counts add
        up, so a simulator can keep a running total instead of counting a whole conversation)."""
        return int(chars / self.chars_per_token) + messages * self.per_message


def message_chars(message: Message) -> int:
    """The characters ``CharEstimator`` counts in one message."""
    chars = 0
    for part in message.parts:
        if part.kind == "text":
            chars += len(part.text)
        elif part.kind == "tool_call":
            chars += len(part.name) + json_length(part.arguments)
        elif part.kind == "tool_result":
            chars += len(part.content)
    return chars


def json_length(value: Any) -> int:
    """``len(json.dumps(value))``, worked out without writing the text where ``value`` is plain
    data (printable ASCII strings without quotes or backslashes, ints, booleans, None, lists,
    dicts with ``str`` keys; anything else is written): ``json.dumps`` builds its encoder on
    every call, 18,000 instructions for ``{"a": 1, "b": 2}`` against 10,200 here
    (cachegrind), and a reply's tool calls are counted every turn."""
    kind = type(value)
    if kind is str:
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return len(value) + 2
    elif kind is int:
        return len(repr(value))  # exactly an int: its JSON is its repr
    elif kind is bool or value is None:
        return 5 if value is False else 4
    elif kind is dict:
        total = 2 * len(value) or 2  # "{}" and, but for one item, ", "
        for key, item in value.items():
            if type(key) is not str:
                return len(json.dumps(value))
            total += json_length(key) + 2 + json_length(item)  # the key, ": ", the value
        return total
    elif kind is list:
        total = 2 * len(value) or 2  # "[]" and, but for one item, ", "
        for item in value:
            total += json_length(item)
        return total
    return len(json.dumps(value))
