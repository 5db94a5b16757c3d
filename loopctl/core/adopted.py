"""The JSON a restored brain already holds: a sealed snapshot's own bytes, as its JSON cache.

A brain keeps each message's JSON (``encoding.JsonCache``) so that a save or a digest costs
O(the feed). A restored brain starts without that cache, so its first save (or digest) encoded
every message again: 140 to 170 million instructions for 10,000 messages, more than a third of
save + restore (cachegrind, ``benchmarks/bench_snapshot.py``). Yet the text it was restored from
holds exactly those bytes, when it is what the writer wrote: ``model_dump_json()`` joins the
messages' JSON in a fixed layout and seals it with the sha256 of the content.

So after a restore the text is cut at its messages (msgspec reads the spans, as raw bytes) and
the cache adopts them, on three conditions: the text is sealed (version 3), its validation
checked the checksum against these very bytes (``MachineSnapshot`` refuses it otherwise), and
the bytes are the writer's layout exactly (the spans, joined again with the brain's own small
fields and checksum, give back the text byte for byte). Anything else (an unsealed text, another
layout, a file re-indented) is restored as before and its cache built on first use.

The trust this takes: a span is adopted as the message's canonical JSON because the sealed text
says so. Accidental damage cannot pass (the checksum); a deliberate edit that rewrote a message
in another JSON layout and sealed the result again would be kept as written, and the digest
would hash those bytes. Restoring never trusts a state the brain could not reach (the snapshot
checks run as before); this concerns only how a valid message's JSON is spelled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from loopctl.core.encoding import MODERN_PARTS, JsonCache, Modern
from loopctl.core.messages import Message

__all__ = ["adopted_json"]


class _Spans(msgspec.Struct, gc=False):
    """A sealed snapshot's messages as raw JSON, and its checksum (the other fields skipped)."""

    history: list[msgspec.Raw]
    pending: list[msgspec.Raw]
    checksum: str


_SPANS: Final = msgspec.json.Decoder(_Spans)


def adopted_json(
    raw: bytes,
    history: Sequence[Message],
    pending: Sequence[Message],
    rebuilt: Callable[[list[bytes], list[bytes], str], bytes],
    modern: bool,
) -> tuple[JsonCache, JsonCache] | None:
    """Caches for ``history`` and ``pending`` holding their JSON as ``raw`` spells it, when
    ``raw`` is the sealed text they were just restored from in the writer's layout; else None.

    ``rebuilt(history_json, pending_json, checksum)`` gives the sealed text the brain would
    write for them (``snapshot_json`` with the brain's own small fields): it must be ``raw``.
    ``modern``: the content is version 2 (some message may hold a part version 1 lacks).
    """
    try:
        spans = _SPANS.decode(raw)
    except (msgspec.MsgspecError, RecursionError):
        return None
    if len(spans.history) != len(history) or len(spans.pending) != len(pending):
        return None
    history_json = _spelled(spans.history, history, modern)
    pending_json = _spelled(spans.pending, pending, modern)
    if rebuilt(history_json, pending_json, spans.checksum) != raw.rstrip(b" \t\r\n"):
        return None
    return _cache(history, history_json, modern), _cache(pending, pending_json, modern)


def _spelled(spans: list[msgspec.Raw], messages: Sequence[Message], modern: bool) -> list[bytes]:
    """Each message's span as bytes, ``Modern`` where the message holds a part version 1 lacks
    (as ``encoding.message_json`` marks it; none can in a version-1 content)."""
    out: list[bytes] = list(map(bytes, spans))
    if modern:
        for i, message in enumerate(messages):
            for part in message.parts:
                if type(part) in MODERN_PARTS:
                    out[i] = Modern(out[i])
                    break
    return out


def _cache(messages: Sequence[Message], spelled: list[bytes], modern: bool) -> JsonCache:
    """A cache holding ``spelled``; a version-1 content holds no ``Modern`` message, so only a
    version-2 one is looked through (3 ms for 10,000 messages)."""
    cache = JsonCache(messages)
    parts = cache.parts
    parts.extend(spelled)
    parts.modern = modern and Modern in map(type, spelled)
    parts.scanned = len(spelled)
    return cache
