"""Sealed snapshots at the byte level: the snapshot format's heads and versions, the checksum's
place in the text, and checking a text's checksum by hashing it as given.

A saved brain carries the sha256 of its content's bytes (see ``snapshot.py`` for why). Checked
here when the text is laid out as loopctl writes it (the sealed head, the content, the checksum
last): the bytes are hashed with the content's head put back, about 1 ms per MB, no copy.
``snapshot.py`` checks any other layout (a re-indented file, a dict) by serializing the content
again. Bytes only: nothing here knows the snapshot model, so the model's validators can use it.
"""

from __future__ import annotations

import hashlib
from typing import Final

from loopctl.core.encoding import Head

__all__ = [
    "CONTENT_VERSION",
    "HISTORY_HEAD",
    "PENDING_HEAD",
    "SEALED_HEAD",
    "SNAPSHOT_FORMAT",
    "SNAPSHOT_VERSION",
    "SNAPSHOT_VERSIONS",
    "checksum_tail",
    "raw_version",
    "sealed_text",
]

SNAPSHOT_FORMAT: Final = "loopctl-machine"
#: The newest format version: what a saved brain is written in (its content, sealed).
SNAPSHOT_VERSION: Final = 3
#: Every version this loopctl reads.
SNAPSHOT_VERSIONS: Final = (1, 2, 3)
#: The highest version of a snapshot's content (without its checksum): one holding reasoning
#: or provider parts; a content is written in the lowest version that holds it.
CONTENT_VERSION: Final = 2
#: The snapshot's JSON up to its first message (version 1; ``.modern`` names version 2).
HISTORY_HEAD: Final = Head(
    f'{{"format":"{SNAPSHOT_FORMAT}","version":1,"history":['.encode(),
    f'{{"format":"{SNAPSHOT_FORMAT}","version":{CONTENT_VERSION},"history":['.encode(),
)
#: A sealed snapshot's JSON up to its first message (version 3: the content, with a checksum).
SEALED_HEAD: Final = (
    f'{{"format":"{SNAPSHOT_FORMAT}","version":{SNAPSHOT_VERSION},"history":['.encode()
)
#: Between the last message of history and the first of pending.
PENDING_HEAD: Final = b'],"pending":['


def checksum_tail(checksum: str) -> bytes:
    """The end of a sealed snapshot's JSON: its checksum, last."""
    return b',"checksum":"' + checksum.encode() + b'"}'


def raw_version(raw: bytes, checksum: str) -> int | None:
    """The content version (1 or 2) of the sealed text ``raw`` when its bytes, laid out as
    loopctl writes them, hash to ``checksum``; None otherwise (damaged, or laid out otherwise)."""
    raw = raw.rstrip(b" \t\r\n")  # a file's last newline (the same object when none)
    tail = checksum_tail(checksum)
    if not (raw.startswith(SEALED_HEAD) and raw.endswith(tail)):
        return None
    body = memoryview(raw)[len(SEALED_HEAD) : len(raw) - len(tail)]
    for version, head in ((1, bytes(HISTORY_HEAD)), (2, HISTORY_HEAD.modern)):
        h = hashlib.sha256(head)
        h.update(body)
        h.update(b"}")
        if h.hexdigest() == checksum:
            return version
    return None


def sealed_text(content: bytes) -> bytes:
    """The sealed form of a snapshot's content bytes (``MachineSnapshot.model_dump_json()``, or
    ``LoopMachine.canonical_json()``): the sealed head in place of the content's, the sha256 of
    the content last. What ``LoopMachine.model_dump_json()`` writes, by definition."""
    for head in (bytes(HISTORY_HEAD), HISTORY_HEAD.modern):
        if content.startswith(head) and content.endswith(b"}"):
            body = content[len(head) : -1]
            return SEALED_HEAD + body + checksum_tail(hashlib.sha256(content).hexdigest())
    raise ValueError("not the content of a machine snapshot (its head or end is not the writer's)")
