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

The snapshot is written in the lowest format version that holds it (see ``snapshot.py``): a
conversation with a part version 1 lacks (thinking, provider blocks) makes ``HEAD`` name
version 2. Such a message's JSON is a ``Modern`` (a ``bytes`` subclass, so it joins and hashes
as any), each cache's list of JSON (``PartsJson``) remembers whether it holds one, and the
digest's running hashes start from the head the whole snapshot needs: the first modern message
of a run restarts them once (O(history), once), nothing else changes for the rest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring
from typing import Any, Final

from loopctl.core.messages import (
    Message,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
)

__all__ = [
    "MODERN_PARTS",
    "Head",
    "JsonCache",
    "Modern",
    "PartsJson",
    "Seed",
    "carried",
    "encoded",
    "is_modern",
    "message_json",
    "sha256_of",
]

#: The part types snapshot format version 1 lacks.
MODERN_PARTS: Final = frozenset({ThinkingPart, ProviderPart})


class Modern(bytes):
    """The JSON of a message that holds a part of ``MODERN_PARTS``."""

    __slots__ = ()


class Head(bytes):
    """The bytes before a snapshot's first message (version 1), and ``modern``: the same bytes
    naming the version that holds every part kind."""

    modern: bytes

    def __new__(cls, base: bytes, modern: bytes) -> Head:
        head = super().__new__(cls, base)
        head.modern = modern
        return head


class PartsJson(list[bytes]):
    """A cache's list of message JSON, remembering whether it holds a ``Modern`` one.

    Lists only grow (a replaced list gets a new cache), so the flag never goes back; ``scanned``
    is how far it was checked (the exit door extends history's list directly)."""

    __slots__ = ("modern", "scanned")

    def __init__(self) -> None:
        super().__init__()
        self.modern = False
        self.scanned = 0


def is_modern(parts: Sequence[bytes]) -> bool:
    """Whether any of these messages' JSON is ``Modern`` (a ``PartsJson`` checks only what was
    added since it was last asked)."""
    if not isinstance(parts, PartsJson):
        return any(type(b) is Modern for b in parts)
    if parts.modern:
        return True
    n = len(parts)
    start = parts.scanned
    if start == n:
        return False
    parts.scanned = n
    for i in range(start, n):
        if type(parts[i]) is Modern:
            parts.modern = True
            return True
    return False


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
        text = _TO_JSON(message)
        for part in message.parts:
            if type(part) in MODERN_PARTS:
                return Modern(text)
        return text


def _part_json(part: object) -> str:
    """One part's JSON; ``TypeError`` for anything but the three common part types (the message
    is then pydantic's to write, and marked ``Modern`` if it holds a part version 1 lacks)."""
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
    a changed start is noticed; ``head`` whether the chain starts from the modern head, and
    ``seed`` the ``Seed`` it started from (a history cache's), to start it again from the other."""

    __slots__ = ("base", "chain", "hashed", "head", "parts", "seed", "source")

    def __init__(self, source: Sequence[Message]) -> None:
        self.source = source
        self.parts = PartsJson()
        self.chain: Hash = None
        self.hashed = 0
        self.base: object = None
        self.head = False
        self.seed: Seed | None = None


def carried(
    cache: JsonCache | None, old: Sequence[Message], new: Sequence[Message]
) -> JsonCache | None:
    """A cache for ``new``, a copy of the list ``old``, holding the JSON ``cache`` already has
    of ``old``'s messages and its running hash of them (None when ``cache`` does not mirror
    ``old``). The next run's brain starts from a copy of this one's history: without the JSON
    it encodes every message again, once per run, and without the hash its first digest hashes
    the whole history again (1.2 ms at 10,000 messages), once per run: either made a trace of
    many runs cost the square of its length. The hash is a copy (sha256 objects change in
    place), of what ``old``'s cache had hashed: the next digest hashes what came after."""
    if cache is None or cache.source is not old or len(cache.parts) > len(new):
        return None
    out = JsonCache(new)
    parts = out.parts
    parts.extend(cache.parts)
    parts.modern = cache.parts.modern
    parts.scanned = cache.parts.scanned
    if cache.chain is not None:
        out.chain = cache.chain.copy()
        out.hashed = cache.hashed
        out.head = cache.head
        out.seed = cache.seed
        out.base = cache.base
    return out


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

    The head: a cache without ``base`` (history's) starts from the head its own messages need;
    a pending cache (``base`` is the history cache and its length, nothing else) needs
    the modern head if either list holds a modern message, and starts history's chain again
    from the other head when history's does not fit (once, when the first modern message of a
    run arrives, or when the exit door drops the only ones).
    """
    n = len(messages)
    if cache is None or cache.source is not messages or len(cache.parts) > n:
        cache = JsonCache(messages)
    parts = cache.parts
    k = len(parts)
    if k < n:
        parts.extend([message_json(m) for m in messages[k:]])
        if parts.scanned == k:  # check what was added, here, once
            if n - k == 1:
                if type(parts[k]) is Modern:
                    parts.modern = True
            elif Modern in map(type, parts[k:]):
                parts.modern = True
            parts.scanned = n
    if start is None:
        return cache
    modern = parts.modern if parts.scanned == n else is_modern(parts)
    if base is None:  # history: its own messages decide
        restart = cache.chain is None or cache.head is not modern
    else:  # pending: (the history cache, its length); an unchanged base kept history's head
        restart = cache.chain is None or cache.base != base or (modern and not cache.head)
        if restart:
            history: JsonCache = base[0]  # type: ignore[index]
            hparts = history.parts
            if not modern:
                modern = hparts.modern if hparts.scanned == len(hparts) else is_modern(hparts)
            if history.head is not modern and history.seed is not None:
                _rehead(history, modern)
    if restart:
        if isinstance(start, Seed):
            cache.chain = start(modern)
            cache.seed = start
        else:
            cache.chain = start()
        cache.base = base
        cache.hashed = 0
        cache.head = modern
    done = cache.hashed
    if done < n:
        joined = b",".join(parts[done:])
        cache.chain.update(b"," + joined if done else joined)
        cache.hashed = n
    return cache


def _rehead(cache: JsonCache, modern: bool) -> None:
    """Start ``cache``'s chain again from the other head, over what it had hashed."""
    assert cache.seed is not None
    chain = cache.seed(modern)
    if cache.hashed:
        chain.update(b",".join(cache.parts[: cache.hashed]))
    cache.chain = chain
    cache.head = modern


class Seed:
    """A ``start`` for ``encoded``: a fresh sha256 that has hashed a prefix, or (asked for the
    modern head) its ``Head.modern`` twin."""

    __slots__ = ("base", "modern")

    def __init__(self, prefix: bytes) -> None:
        self.base = hashlib.sha256(prefix)
        twin = prefix.modern if isinstance(prefix, Head) else None
        self.modern = hashlib.sha256(twin) if twin is not None else self.base

    def __call__(self, modern: bool = False) -> Hash:
        return (self.modern if modern else self.base).copy()


def sha256_of(prefix: bytes) -> Seed:
    """A ``start`` for ``encoded``: a fresh sha256 that has hashed ``prefix``."""
    return Seed(prefix)
