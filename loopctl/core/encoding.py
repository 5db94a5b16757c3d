"""Per-message JSON, cached for the digest of a growing conversation.

The brain's digest is the hash of its snapshot JSON, taken after every feed by traces and replay.
Serializing every message each time made that cost grow with the history; history and pending
only ever grow by appending (or are replaced whole), so each message is encoded once and the
cache is extended with what was appended since the last digest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from loopctl.core.messages import Message

__all__ = ["JsonCache", "encoded"]

_TO_JSON: Final = Message.__pydantic_serializer__.to_json


class JsonCache:
    """The JSON of ``source``'s first ``len(parts)`` messages (``source`` is the list itself)."""

    __slots__ = ("parts", "source")

    def __init__(self, source: Sequence[Message]) -> None:
        self.source = source
        self.parts: list[bytes] = []


def encoded(cache: JsonCache | None, messages: Sequence[Message]) -> JsonCache:
    """``cache`` brought up to date with ``messages``, or a new one if they are another list.

    Identity, not equality, decides: the cache keeps a reference to the list it mirrors, so a
    replaced list (compaction, commit) is never mistaken for the old one.
    """
    if cache is None or cache.source is not messages or len(cache.parts) > len(messages):
        cache = JsonCache(messages)
    parts = cache.parts
    if len(parts) < len(messages):
        parts.extend(_TO_JSON(m) for m in messages[len(parts) :])
    return cache
