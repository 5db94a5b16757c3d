"""The JSON a restored brain already holds: a sealed snapshot's own bytes, as its JSON cache.

A brain keeps each message's JSON (``encoding.JsonCache``) so that a save or a digest costs
O(the feed). A restored brain starts without that cache, so its first save (or digest) encoded
every message again: 140 to 170 million instructions for 10,000 messages, more than a third of
save + restore (cachegrind, ``benchmarks/bench_snapshot.py``). Yet the text it was restored from
holds exactly those bytes, when it is what the writer wrote: ``model_dump_json()`` joins the
messages' JSON in a fixed layout and seals it with the sha256 of the content.

So a sealed text is cut at its messages (msgspec reads the spans, as raw bytes:
``sealed_parts``) when it is sealed (version 3) and its bytes up to the small fields are the
writer's layout exactly (the spans joined again between the heads give back the text byte for
byte). The brain then holds the spans as its messages (``lazy.py``: built when first read), its
cache adopts them (``adopted_caches``), and it keeps them only if its own encoding of the small
fields is the text's and its own ``checksum()`` is the text's checksum: the content it holds is
then the text's, byte for byte, and undamaged. (Checked that way, the restore hashes the text
once, and the hash is the running hash the brain's next save or digest continues from.)
Anything else (an unsealed text, a checksum that does not match, another layout, a file
re-indented) is restored by validating the whole snapshot, and its cache is built on
first use.

The trust this takes: a span is adopted as the message's JSON as the text spells it. Accidental
damage cannot pass (the checksum); a deliberate edit sealed again verifies, so the restore checks
the messages themselves too: each is decoded by msgspec into a typed mirror of the models and the
conversation's coherence is walked over the mirrors (``message_shapes.py``, from ``arrays``: the
text's history and pending, not copied), and a text that fails is validated whole, whose error
is the eager restore's. A valid message spelled otherwise than the writer spells it (keys in
another order) is kept as spelled: the digest hashes those bytes. Restoring never trusts a state
the brain could not reach in the small fields either (the snapshot's checks run on them, and on
the exchange's calls against the last pending message).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, NamedTuple

import msgspec

from loopctl.core.encoding import MODERN_PARTS, JsonCache, Modern
from loopctl.core.messages import Message
from loopctl.core.seal import HISTORY_HEAD, PENDING_HEAD, SEALED_HEAD, checksum_tail

__all__ = ["SealedParts", "adopted_caches", "sealed_parts"]


class _Spans(msgspec.Struct, gc=False):
    """A sealed snapshot's messages as raw JSON, and its checksum (the other fields skipped)."""

    history: list[msgspec.Raw]
    pending: list[msgspec.Raw]
    checksum: str


_SPANS: Final = msgspec.json.Decoder(_Spans)
#: A message that may hold a part version 1 lacks (a tool call's arguments may spell it too:
#: such a message is built and its parts looked at).
_MAYBE_MODERN: Final = re.compile(rb'"kind":"(?:thinking|provider)"')


class SealedParts(NamedTuple):
    """A verified sealed text cut at its messages."""

    history: list[bytes]  # each message's JSON, as the text spells it
    pending: list[bytes]
    end: bytes  # the content's JSON after pending: the state and the small fields
    checksum: str  # as the text says: not checked here (the brain checks its own against it)
    maybe_modern: bool  # a message may hold a part version 1 lacks (its kind is in the text)
    #: The text's JSON arrays of history and pending (``[...]``), views of the text, not copies:
    #: what ``message_shapes.checked_conversation`` decodes.
    arrays: tuple[memoryview, memoryview]

    @property
    def shell(self) -> bytes:
        """The content's JSON with history and pending empty: the small fields to validate."""
        return bytes(HISTORY_HEAD) + PENDING_HEAD + self.end


def sealed_parts(raw: bytes) -> SealedParts | None:
    """``raw`` cut at its messages, when it is a sealed text whose bytes up to the small fields
    are the writer's layout; else None (restore it whole). Its checksum is not checked here."""
    try:
        spans = _SPANS.decode(raw)
    except (msgspec.MsgspecError, RecursionError):
        return None
    text = raw.rstrip(b" \t\r\n")  # a file's last newline
    tail = checksum_tail(spans.checksum)
    if not (text.startswith(SEALED_HEAD) and text.endswith(tail)):
        return None
    history = list(map(bytes, spans.history))
    pending = list(map(bytes, spans.pending))
    at = len(SEALED_HEAD)
    starts = []
    for piece in (b",".join(history), PENDING_HEAD, b",".join(pending)):
        if not text.startswith(piece, at):  # compared in place (no copy of the text)
            return None
        starts.append(at)
        at += len(piece)
    end = text[at : len(text) - len(tail)] + b"}"
    maybe_modern = b'"kind":"thinking"' in raw or b'"kind":"provider"' in raw
    view = memoryview(text)  # each array from its "[" to its "]"
    arrays = view[starts[0] - 1 : starts[1] + 1], view[starts[2] - 1 : at + 1]
    return SealedParts(history, pending, end, spans.checksum, maybe_modern, arrays)


def adopted_caches(
    history: Sequence[Message], pending: Sequence[Message], parts: SealedParts
) -> tuple[JsonCache, JsonCache]:
    """Caches for ``history`` and ``pending`` (the brain's lists of these very messages) holding
    their JSON as ``parts`` spells it. When the text spells a part kind version 1 lacks, each
    message that may hold one is read (``history[i]``: built, if the list is lazy) to mark its
    JSON ``Modern``."""
    modern = parts.maybe_modern
    return (
        _cache(history, _spelled(parts.history, history, modern), modern),
        _cache(pending, _spelled(parts.pending, pending, modern), modern),
    )


def _spelled(spans: list[bytes], messages: Sequence[Message], modern: bool) -> list[bytes]:
    """Each message's span, ``Modern`` where the message holds a part version 1 lacks (as
    ``encoding.message_json`` marks it); ``modern``: some message may."""
    if not modern:
        return spans
    out = list(spans)
    for i, span in enumerate(spans):
        if _MAYBE_MODERN.search(span) is not None:
            for part in messages[i].parts:
                if type(part) in MODERN_PARTS:
                    out[i] = Modern(span)
                    break
    return out


def _cache(messages: Sequence[Message], spelled: list[bytes], modern: bool) -> JsonCache:
    """A cache holding ``spelled``, looked through for a ``Modern`` message only when some
    message may be one."""
    cache = JsonCache(messages)
    parts = cache.parts
    parts.extend(spelled)
    parts.modern = modern and Modern in map(type, spelled)
    parts.scanned = len(spelled)
    return cache
