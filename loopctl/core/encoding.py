"""Per-message JSON and a running hash of the snapshot's prefix, cached for a growing conversation.

The brain's digest is the hash of its snapshot JSON, taken after every feed by traces and replay;
its save (``model_dump_json``) after every turn by drivers that checkpoint. The snapshot's JSON
is laid out as ``HEAD history PENDING_HEAD pending END``, where ``END`` (the state and the small
fields) is a few bytes. History and pending only ever grow by appending (or are replaced whole),
so each message is encoded once and each cache is extended with what was appended since it was
last brought up to date:

- ``parts``: each message's JSON (a save joins them);
- ``chain``: a running sha256 of the JSON up to the cache's last message (for pending, that
  includes the whole history before it). A digest copies the chain, adds ``END`` and finishes:
  O(what the last feed added), not O(history).

A replaced list (compaction, commit, restore) starts a new cache; a pending cache whose history
changed under it rehashes its cached parts (pending is empty then, in practice). The values are
a pure function of the messages: a restored machine gets the same digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, Final

from loopctl.core.messages import Message

__all__ = ["JsonCache", "encoded"]

_TO_JSON: Final = Message.__pydantic_serializer__.to_json

Hash = Any  # hashlib's sha256 object (its type is private)


class JsonCache:
    """The JSON of ``source``'s first ``len(parts)`` messages (``source`` is the list itself),
    and ``chain``: the sha256 of ``start()`` followed by those JSON texts joined by ``,``.

    ``base`` names what ``start`` was (for pending: the history cache and its length), so that
    a changed start is noticed."""

    __slots__ = ("base", "chain", "parts", "source")

    def __init__(self, source: Sequence[Message], chain: Hash, base: object) -> None:
        self.source = source
        self.parts: list[bytes] = []
        self.chain = chain
        self.base = base


def encoded(
    cache: JsonCache | None,
    messages: Sequence[Message],
    start: Callable[[], Hash],
    base: object = None,
) -> JsonCache:
    """``cache`` brought up to date with ``messages``, or a new one if they are another list.

    Identity, not equality, decides: the cache keeps a reference to the list it mirrors, so a
    replaced list (compaction, commit) is never mistaken for the old one. ``start()`` gives a
    fresh hash of the bytes before the first message; it is called when the cache is new or its
    ``base`` is not ``base`` any more.
    """
    if cache is None or cache.source is not messages or len(cache.parts) > len(messages):
        cache = JsonCache(messages, start(), base)
    elif cache.base is not base and cache.base != base:
        cache.chain = start()
        cache.base = base
        if cache.parts:
            cache.chain.update(b",".join(cache.parts))
    parts = cache.parts
    done = len(parts)
    if done < len(messages):
        new = [_TO_JSON(m) for m in messages[done:]]
        parts.extend(new)
        joined = b",".join(new)
        cache.chain.update(b"," + joined if done else joined)
    return cache


def sha256_of(prefix: bytes) -> Callable[[], Hash]:
    """A ``start`` for ``encoded``: a fresh sha256 that has hashed ``prefix``."""
    seed = hashlib.sha256(prefix)
    return seed.copy
