"""Per-message JSON and a running hash of the snapshot's prefix, cached for a growing conversation.

The brain's digest is the hash of its snapshot JSON, taken after every feed by traces and replay;
its save (``model_dump_json``) after every turn by drivers that checkpoint. The snapshot's JSON
is laid out as ``HEAD history PENDING_HEAD pending END``, where ``END`` (the state and the small
fields) is a few bytes. History and pending only ever grow by appending (or are replaced whole),
so each message is encoded once and each cache is extended with what was appended since it was
last brought up to date:

- ``parts``: each message's JSON (a save joins them);
- ``chain``: a running sha256 of the JSON up to the cache's last message (for pending, that
  includes the whole history before it), brought up to date when a digest asks (a save does
  not hash). A digest copies the chain, adds ``END`` and finishes: O(what the last feed
  added), not O(history).

A replaced list (compaction, commit, restore) starts a new cache; a pending cache whose history
changed under it rehashes its cached parts (pending is empty then, in practice). The values are
a pure function of the messages: a restored machine gets the same digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring
from typing import Any, Final

from loopctl.core.messages import Message, TextPart, ToolCall, ToolResult

__all__ = [
    "JsonCache",
    "encoded",
    "message_json",
    "sha256_of",
]

_TO_JSON: Final = Message.__pydantic_serializer__.to_json
_CALL_JSON: Final = ToolCall.__pydantic_serializer__.to_json
_STR: Final = encode_basestring  # JSON string, non-ASCII as is: pydantic's escaping exactly
_ERROR: Final = (',"is_error":false}', ',"is_error":true}')
_ROLES: Final = ("system", "user", "assistant")
#: A message's JSON up to its first part, and up to the text of a first text part, by role.
_OPEN: Final = {role: '{"role":"' + role + '","parts":[' for role in _ROLES}
_OPEN_TEXT: Final = {role: _OPEN[role] + '{"kind":"text","text":' for role in _ROLES}


def message_json(message: Message) -> bytes:
    """``Message``'s JSON, byte for byte what pydantic writes, in about two thirds of the time.

    Text parts and tool results hold only strings (and a boolean), written here with the
    standard library's JSON string encoder, which escapes exactly as pydantic does (``"``,
    ``\\`` and control characters; everything else as is). Tool calls, whose arguments may
    hold any value, are written by pydantic. Anything unusual (a subclass, a string Python
    cannot encode) is left to pydantic too. Tests pin the bytes to ``Message``'s own JSON.
    """
    try:
        if type(message) is not Message:
            return _TO_JSON(message)
        parts = message.parts
        n = len(parts)
        if n == 1:
            part = parts[0]
            if type(part) is TextPart:  # most messages
                return (_OPEN_TEXT[message.role] + _STR(part.text) + "}]}").encode()
            return (_OPEN[message.role] + _part_json(part) + "]}").encode()
        if n == 2:  # text and a call, mostly
            return (
                _OPEN[message.role] + _part_json(parts[0]) + "," + _part_json(parts[1]) + "]}"
            ).encode()
        return (_OPEN[message.role] + ",".join([_part_json(p) for p in parts]) + "]}").encode()
    except (UnicodeEncodeError, AttributeError, TypeError, KeyError):
        return _TO_JSON(message)


def _part_json(part: object) -> str:
    """One part's JSON; ``TypeError`` for anything but the three part types (pydantic's then)."""
    kind = type(part)
    if kind is TextPart:
        return '{"kind":"text","text":' + _STR(part.text) + "}"  # type: ignore[attr-defined]
    if kind is ToolResult:
        result: ToolResult = part  # type: ignore[assignment]
        return (
            '{"kind":"tool_result","call_id":'
            + _STR(result.call_id)
            + ',"name":'
            + _STR(result.name)
            + ',"content":'
            + _STR(result.content)
            + _ERROR[result.is_error]
        )
    if kind is ToolCall:
        return _CALL_JSON(part).decode()
    raise TypeError(f"not a message part: {kind.__name__}")


Hash = Any  # hashlib's sha256 object (its type is private)


class JsonCache:
    """The JSON of ``source``'s first ``len(parts)`` messages (``source`` is the list itself),
    and ``chain``: the sha256 of ``start()`` followed by the first ``hashed`` of those JSON texts
    joined by ``,`` (brought up to date by ``encoded`` only when a digest asks: a save does
    not pay for hashing).

    ``base`` names what ``start`` was (for pending: the history cache and its length), so that
    a changed start is noticed."""

    __slots__ = ("base", "chain", "hashed", "parts", "source")

    def __init__(self, source: Sequence[Message]) -> None:
        self.source = source
        self.parts: list[bytes] = []
        self.chain: Hash = None
        self.hashed = 0
        self.base: object = None


def encoded(
    cache: JsonCache | None,
    messages: Sequence[Message],
    start: Callable[[], Hash] | None = None,
    base: object = None,
) -> JsonCache:
    """``cache`` brought up to date with ``messages``, or a new one if they are another list;
    given ``start``, its running hash too (a digest's; a save only needs the JSON).

    Identity, not equality, decides: the cache keeps a reference to the list it mirrors, so a
    replaced list (compaction, commit) is never mistaken for the old one. ``start()`` gives a
    fresh hash of the bytes before the first message; it is called when the cache has no hash
    yet or its ``base`` is not ``base`` any more. One function for both, since a digest after
    every feed of a replay calls it twice: Python calls are much of its cost.
    """
    n = len(messages)
    if cache is None or cache.source is not messages or len(cache.parts) > n:
        cache = JsonCache(messages)
    parts = cache.parts
    if len(parts) < n:
        parts.extend([message_json(m) for m in messages[len(parts) :]])
    if start is None:
        return cache
    if cache.chain is None or cache.base != base:
        cache.chain = start()
        cache.base = base
        cache.hashed = 0
    done = cache.hashed
    if done < n:
        joined = b",".join(parts[done:])
        cache.chain.update(b"," + joined if done else joined)
        cache.hashed = n
    return cache


def sha256_of(prefix: bytes) -> Callable[[], Hash]:
    """A ``start`` for ``encoded``: a fresh sha256 that has hashed ``prefix``."""
    seed = hashlib.sha256(prefix)
    return seed.copy
