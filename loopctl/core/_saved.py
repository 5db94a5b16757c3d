"""The brain's saved form behind one door: its snapshot, canonical JSON (the *content*), digest,
checksum, sealed text and restore, all defined in ``snapshot.py`` with the model they read.
``LoopMachine`` inherits its fields and saved-form methods from ``SavedBrain``; the brain calls
nothing else about its saved form.

One cache, ``SavedForm`` (one per brain). The content's JSON is laid out as ``head, history's
messages, PENDING_HEAD, pending's messages, end`` (``end``: the state and the small fields, a
few bytes). The cache keeps each message's JSON and a running sha256 of the content up to the
last message of history, and of pending; it knows its lists by identity (``_Encoded.follow``).
A restore checks a sealed text's checksum with the restored brain's own cache, so a restore and
the first save encode each message once. What it buys, timed side by side in one process: a
digest without it (the snapshot serialized and hashed whole, which made a traced run cost the
square of its length) took 30-33 times as long at 40 messages (a 20-turn run), 150 times or more
at 10,000.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from operator import is_
from typing import Any, Final, Self

from loopctl.core.conversation import Pending
from loopctl.core.data import ENCODE
from loopctl.core.loopdetect import LoopWindow
from loopctl.core.messages import Message
from loopctl.core.snapshot import (
    SNAPSHOT_FORMAT,
    SNAPSHOT_VERSION,
    Exchange,
    MachineSnapshot,
    needed_version,
)
from loopctl.core.steps import AwaitingCompaction, AwaitingModel, AwaitingTools, Start, Terminal

#: The JSON up to the first message: the content's in version 1 and in version 2, a sealed text's.
_HEADS: Final = tuple(
    f'{{"format":"{SNAPSHOT_FORMAT}","version":{v},"history":['.encode()
    for v in (1, 2, SNAPSHOT_VERSION)
)
CONTENT_HEADS: Final = _HEADS[:2]
SEALED_HEAD: Final = _HEADS[2]
#: Between the last message of history and the first of pending.
PENDING_HEAD: Final = b'],"pending":['
_MESSAGE_JSON: Final = ENCODE
Hash = Any  # hashlib's sha256 object (its type is private)
#: The snapshot's fields after the conversation, in its order (``_small``).
_FIELDS: Final = MachineSnapshot.__struct_fields__
_SMALL: Final = _FIELDS[_FIELDS.index("pending") + 1 :]


class _Encoded:
    """Messages encoded in order (the first ones of a brain's list, checked by identity), each
    one's JSON, whether any holds a part of version 2, and a sha256 of the bytes before the
    first message followed by the first ``hashed`` JSON texts joined by ``,``."""

    __slots__ = ("hashed", "jsons", "messages", "modern", "sha", "source")

    def __init__(self) -> None:
        self.source: Sequence[Message] = ()  # the sequence last followed
        self.messages: list[Message] = []
        self.jsons: list[bytes] = []
        self.modern = False
        self.sha: Hash = None
        self.hashed = 0

    def follow(self, messages: Sequence[Message]) -> None:
        """Encode what ``messages`` holds beyond what was encoded; start again (no hash) if
        what was encoded is not its first messages any more, checked object by object (messages
        are frozen: the same object always writes the same JSON; equality would not do,
        ``{"a": 1}`` equals ``{"a": 1.0}``). The same tuple as last time is known unchanged
        without looking (a check of 10,000 messages after every feed of a traced run was 2M
        instructions a digest, cachegrind), and the same ``Pending`` as last time known to begin
        with what was encoded: Python enforces both types, so no rule binds the brain's handlers."""
        done = len(self.messages)
        if messages is self.source and type(messages) is tuple:
            return
        known = messages is self.source and type(messages) is Pending
        self.source = messages
        if not known and (len(messages) < done or not all(map(is_, self.messages, messages))):
            self.messages, self.jsons, self.modern, self.sha, self.hashed = [], [], False, None, 0
            done = 0
        new = messages[done:]
        if new:
            self.messages.extend(new)
            self.jsons.extend(map(_MESSAGE_JSON, new))
            self.modern = self.modern or needed_version(new) > 1

    def rehash(self, start: Hash) -> None:
        """Hash the JSON again from ``start`` (a sha256 of what comes before the first one)."""
        self.sha = start
        self.hashed = 0
        self.catch_up()

    def catch_up(self) -> bool:
        """Hash the JSON not hashed yet; True when there was any."""
        done, n = self.hashed, len(self.jsons)
        if done == n:
            return False
        joined = b",".join(self.jsons[done:])
        self.sha.update(b"," + joined if done else joined)
        self.hashed = n
        return True


class SavedForm:
    """One brain's saved form, kept up to date from its lists at each use (see the module
    docstring)."""

    __slots__ = ("_head", "_history", "_pending")

    def __init__(self) -> None:
        self._history = _Encoded()
        self._pending = _Encoded()
        self._head = CONTENT_HEADS[0]

    def copy(self) -> SavedForm:
        """A copy for a brain that starts from the same history (``next_run``): its first
        digest does not encode and hash that history again."""
        out = SavedForm()
        mine, theirs = self._history, out._history
        theirs.source, theirs.modern, theirs.hashed = mine.source, mine.modern, mine.hashed
        theirs.messages, theirs.jsons = list(mine.messages), list(mine.jsons)
        theirs.sha = None if mine.sha is None else mine.sha.copy()
        out._head = self._head
        return out

    def checksum(
        self, history: Sequence[Message], pending: Sequence[Message], small: dict[str, Any]
    ) -> str:
        """The sha256 (hex) of the content: O(what changed), see the module docstring."""
        head = self._follow(history, pending)
        h, p = self._history, self._pending
        if h.sha is None or head is not self._head:  # pending's hash goes on from history's
            self._head = head
            h.rehash(hashlib.sha256(head))
            p.sha = None
        elif h.catch_up():
            p.sha = None
        if p.sha is None:
            start = h.sha.copy()
            start.update(PENDING_HEAD)
            p.rehash(start)
        else:
            p.catch_up()
        final = p.sha.copy()
        final.update(_end(small))
        hexdigest: str = final.hexdigest()
        return hexdigest

    def checksum_of(self, snap: MachineSnapshot) -> str:
        """The checksum of a snapshot's content, its messages encoded here: how a restore checks
        a sealed text (``snapshot.py``), so the restored brain's first save encodes nothing."""
        return self.checksum(snap.history, snap.pending, {k: getattr(snap, k) for k in _SMALL})

    def sealed(
        self, history: Sequence[Message], pending: Sequence[Message], small: dict[str, Any]
    ) -> str:
        """The sealed text: the content with version 3 in its head and its checksum last."""
        checksum = self.checksum(history, pending, small)
        end = _end(small)[:-1] + b',"checksum":"' + checksum.encode() + b'"}'
        h, p = b",".join(self._history.jsons), b",".join(self._pending.jsons)
        return b"".join((SEALED_HEAD, h, PENDING_HEAD, p, end)).decode()

    def _follow(self, history: Sequence[Message], pending: Sequence[Message]) -> bytes:
        """Bring both lists' JSON up to date; the content's head they need (their version)."""
        self._history.follow(history)
        self._pending.follow(pending)
        return CONTENT_HEADS[self._history.modern or self._pending.modern]


def _end(small: dict[str, Any]) -> bytes:
    """The content's bytes after the last pending message: the small fields, written from a
    dict in the snapshot's order. Tests pin the bytes to the snapshot's own JSON."""
    return b"]," + ENCODE(small)[1:]


class SavedBrain:
    """The brain as its saved form sees it: its fields, a slot each (``LoopMachine.STATE_SLOTS``
    are all but the cache, ``_saved``), and the saved-form methods. ``LoopMachine`` is the one
    subclass."""

    __slots__ = (
        "_advertised",
        "_context_tokens",
        "_exchange",
        "_finalized",
        "_history",
        "_loop",
        "_noop_floor",
        "_pending",
        "_saved",
        "_started",
        "_state",
        "_turns_taken",
    )
    _state: Start | AwaitingModel | AwaitingTools | AwaitingCompaction | Terminal
    _history: tuple[Message, ...]
    _pending: Pending
    _turns_taken: int
    _context_tokens: int
    _exchange: Exchange | None
    _advertised: tuple[str, ...]
    _started: bool
    _finalized: bool
    _noop_floor: int | None
    _loop: LoopWindow
    _saved: SavedForm

    def _small(self) -> dict[str, Any]:
        """The snapshot's fields after the conversation, in its order, listed by hand: every
        digest builds it (250 ns; built from ``_SMALL``'s names, 850)."""
        return {
            "state": self._state,
            "turns_taken": self._turns_taken,
            "context_tokens": self._context_tokens,
            "exchange": self._exchange,
            "advertised": self._advertised,
            "started": self._started,
            "finalized": self._finalized,
            "noop_floor": self._noop_floor,
            "loop": self._loop,
        }

    @property
    def loop_window(self) -> LoopWindow:
        """The loop detector's window."""
        return self._loop

    def snapshot(self) -> MachineSnapshot:
        """Everything the brain is, as data (not validated again: the brain checked each field)."""
        history, pending = self._history, tuple(self._pending)
        return MachineSnapshot(
            version=needed_version(history, pending),
            history=history,
            pending=pending,
            **self._small(),
        )

    @classmethod
    def from_snapshot(cls, snap: MachineSnapshot, form: SavedForm | None = None) -> Self:
        """The machine a snapshot describes; ``form`` is the saved form a restore from text
        filled while it checked the checksum (the first save's JSON). A snapshot built by hand is
        not checked: validate it first (``MachineSnapshot.model_validate``)."""
        brain = cls.__new__(cls)
        brain._adopt(snap, form)
        return brain

    def _adopt(self, snap: MachineSnapshot, form: SavedForm | None = None) -> None:
        """Take every field from ``snap``, as a fresh brain is the empty snapshot's
        (``LoopMachine.__init__``) and its defaults are the snapshot's: each small field into
        the slot of its name with ``_`` before it."""
        self._history = snap.history
        self._pending = Pending(snap.pending)
        for name in _SMALL:
            setattr(self, "_" + name, getattr(snap, name))
        self._saved = SavedForm() if form is None else form

    @classmethod
    def model_validate_json(cls, text: str | bytes) -> Self:
        """Restore a brain; a ``ValidationError`` when the text is damaged, forged, from a newer
        loopctl or a state the brain could not be in."""
        form = SavedForm()
        return cls.from_snapshot(MachineSnapshot.model_validate_json(text, form.checksum_of), form)

    @classmethod
    def model_validate(cls, data: Any) -> Self:
        """Restore a brain from ``model_dump()`` data (or a ``MachineSnapshot``)."""
        form = SavedForm()
        return cls.from_snapshot(MachineSnapshot.model_validate(data, form.checksum_of), form)

    def model_dump(self) -> dict[str, Any]:
        """The brain as JSON data, not sealed: the in-process form (edit it, restore it with
        ``model_validate``); the saved form is ``model_dump_json()``."""
        return self.snapshot().model_dump(mode="json")

    def model_dump_json(self) -> str:
        """The whole brain as JSON, sealed with its checksum (a damaged save is refused at
        restore): save a run at any decision boundary."""
        return self._saved.sealed(self._history, self._pending, self._small())

    def digest(self) -> str:
        """The first 16 hex digits of ``checksum()``: traces compare it after every feed."""
        return self.checksum()[:16]

    def checksum(self) -> str:
        """The sha256 (hex) of the canonical JSON: what a saved snapshot is sealed with."""
        return self._saved.checksum(self._history, self._pending, self._small())

    def summary_values(self) -> tuple[str, int | None, int, int, int, int, int, str | None, bool]:
        """The brain's small fields, read without a copy, in the order of ``loopctl_sim``'s
        ``BrainSummary`` (a trace's feed record carries them; replay compares them)."""
        state, loop = self._state, self._loop
        calls = loop.calls
        return (
            state.kind,
            getattr(state, "turn", None),
            self._turns_taken,
            self._context_tokens,
            len(self._history),
            len(self._pending),
            len(calls),
            calls[-1] if calls else None,
            loop.warned,
        )
