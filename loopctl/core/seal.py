"""Sealed snapshots: checking a snapshot's checksum against its content (see ``snapshot.py``).

A saved brain carries the sha256 of its content's bytes. Checking it is hashing the text as
given, when it is laid out as loopctl writes it (the sealed head, the content, the checksum
last): about 1 ms per MB, no copy. Any other layout (a re-indented file, keys in another order,
a dict) is checked by serializing the content again with the snapshot's own encoder, which
writes exactly the bytes the checksum was taken of.
"""

from __future__ import annotations

import hashlib

from loopctl.core.encoding import message_json
from loopctl.core.snapshot import (
    HISTORY_HEAD,
    SEALED_HEAD,
    EndEncoder,
    MachineSnapshot,
    checksum_tail,
    snapshot_json,
)

__all__ = ["content_json", "sealed_text", "verified_version"]


def content_json(snap: MachineSnapshot) -> bytes:
    """The content's bytes (what the digest hashes), serialized again from ``snap``."""
    end = EndEncoder().encode(
        snap.state,
        snap.turns_taken,
        snap.context_tokens,
        snap.exchange,
        snap.advertised,
        snap.started,
        snap.finalized,
        snap.noop_floor,
        snap.loop.calls,
        snap.loop.unjudged,
        snap.loop.warned,
    )
    history = [message_json(m) for m in snap.history]
    pending = [message_json(m) for m in snap.pending]
    return snapshot_json(history, pending, end)


def verified_version(snap: MachineSnapshot, raw: bytes | None) -> int | None:
    """The content version of a sealed snapshot whose checksum matches its content, else None.

    First the bytes as given (a saved text: the sealed head, the content, the checksum last):
    hashed with either content head put back, no copy made. Otherwise (another layout, or no
    text: a dict) the content serialized again."""
    checksum = snap.checksum
    assert checksum is not None
    tail = checksum_tail(checksum)
    if raw is not None:
        raw = raw.rstrip(b" \t\r\n")  # a file's last newline (the same object when none)
    if raw is not None and raw.startswith(SEALED_HEAD) and raw.endswith(tail):
        body = memoryview(raw)[len(SEALED_HEAD) : len(raw) - len(tail)]
        for version, head in ((1, bytes(HISTORY_HEAD)), (2, HISTORY_HEAD.modern)):
            h = hashlib.sha256(head)
            h.update(body)
            h.update(b"}")
            if h.hexdigest() == checksum:
                return version
    content = content_json(snap)
    if hashlib.sha256(content).hexdigest() != checksum:
        return None
    return 2 if content.startswith(HISTORY_HEAD.modern) else 1


def sealed_text(content: bytes) -> bytes:
    """The sealed form of a snapshot's content bytes (``MachineSnapshot.model_dump_json()``, or
    ``LoopMachine.canonical_json()``): the sealed head in place of the content's, the sha256 of
    the content last. What ``LoopMachine.model_dump_json()`` writes, by definition."""
    for head in (bytes(HISTORY_HEAD), HISTORY_HEAD.modern):
        if content.startswith(head) and content.endswith(b"}"):
            body = content[len(head) : -1]
            return SEALED_HEAD + body + checksum_tail(hashlib.sha256(content).hexdigest())
    raise ValueError("not the content of a machine snapshot (its head or end is not the writer's)")
