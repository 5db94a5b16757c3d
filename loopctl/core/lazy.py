"""``LazyMessages``: a restored brain's messages, held as their JSON until something reads them.

Why. Restoring a 10,000-message brain spent most of its time in pydantic building the 25,000
models of its messages (about 50 ms with the collector paused, and 11 ms more to free them;
``benchmarks/bench_snapshot.py``'s ``restore_pieces``). Much of what is done with a restored
brain never looks at a message: saving it again, its digest and checksum, its decisions
(``next_step`` reads counts, the state and the loop window), feeding it a reply in a replay,
handing the next run its history (``next_run``). A sealed snapshot whose checksum verifies
already holds each message's JSON (the brain's JSON cache adopts it: ``adopted.py``), so the
restored brain keeps those bytes and builds a message the first time it is read.

What it buys, measured (``bench_snapshot``, 10,000 messages): save + restore 383M -> 78M
instructions (cachegrind) and 82-103 ms -> 8-10 ms in both shapes (load about 2), before the
restore also checked the conversation at the door (``message_shapes.py``), which brings it to
158M instructions, 34-44 ms at load 1. What it moves: the first full read builds the models
then, 252-259M instructions, about 90 ms (``first_read_ms``): no less than an eager restore's
model building, and paid only by what reads the messages.

What is built, and when:

- one index (``seq[i]``): that message alone (the exit door and the restore's exchange check
  read the last one or two messages);
- a slice: the messages in it; a walk (iteration, ``tuple()``, ``==`` with a list): every
  message not yet built; either in one pydantic call with the collector paused (what an eager
  restore paid: the cost is moved to the first read, not saved);
- ``append``/``extend`` of built messages, ``copy()``, ``head(n)`` and ``extend`` with another
  ``LazyMessages``: nothing (a commit moves pending's unread JSON onto history as it is).

The rule the brain's caches keep holds here too: the sequence only grows by appending
(``append``, ``extend``) or is replaced; nothing edits it in place. Building a message does not
change what the sequence holds (a message is the model its JSON validates to), so the JSON
caches, the digest and equality never notice it. From outside the brain the sequence is
read-only: the brain hands out tuples (``history``, ``pending``), list copies (``messages()``)
or its read-only ``Conversation`` view, never this object to append to.

The trust this takes is ``adopted.py``'s and ``machine_data.py``'s: only a sealed text whose
checksum verifies (damage cannot pass) is restored lazily, and its messages are checked at the
door all the same (a text edited on purpose and sealed again verifies too): msgspec decodes them
into typed mirrors of the models and the coherence rules run over those
(``message_shapes.py``), so a message that is not valid, or a conversation that is not
coherent, is refused at restore with the eager restore's error. The mirror is never laxer than
the models (tests pin it), so reading a message never meets one that does not validate;
``LazyMessageError`` (a ``ValueError`` naming the message) remains the guard should it ever, and
the brain then loses nothing (its JSON is still there, and saves as it was).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Final, cast, overload

from pydantic import ValidationError

from loopctl.core.errors import LoopctlError
from loopctl.core.messages import MESSAGES, Message
from loopctl.core.snapshot import gc_paused

__all__ = ["LazyMessageError", "LazyMessages", "MessageList"]

_ONE: Final = Message.__pydantic_validator__.validate_json
_MANY: Final = MESSAGES.validate_json


class LazyMessageError(ValueError, LoopctlError):
    """A message held as JSON did not validate when it was first read (see the module
    docstring: only a snapshot edited and sealed again by hand can hold one)."""


class LazyMessages(Sequence[Message]):
    """Messages, each either built or held as its JSON until first read.

    ``_items[i]`` is the message, or None while only ``_json[i]`` (its JSON) is held; a message
    appended built has no JSON here (the brain's JSON cache encodes it when a save asks).
    """

    __slots__ = ("_items", "_json", "_unbuilt")

    def __init__(self, spans: Iterable[bytes] = ()) -> None:
        self._json: list[bytes | None] = list(spans)
        self._items: list[Message | None] = [None] * len(self._json)
        self._unbuilt = len(self._json)

    @classmethod
    def _of(cls, items: list[Message | None], json: list[bytes | None]) -> LazyMessages:
        out = cls.__new__(cls)
        out._items = items
        out._json = json
        out._unbuilt = sum(1 for m in items if m is None)
        return out

    @property
    def unbuilt(self) -> int:
        """How many messages are still held only as JSON."""
        return self._unbuilt

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            wanted = range(len(self._items))[index]
            if self._unbuilt:
                self._build([i for i in wanted if self._items[i] is None])
            return self._items[index]  # type: ignore[return-value]  # all built now
        item = self._items[index]
        if item is None:
            i = index + len(self._items) if index < 0 else index
            self._build([i])
            item = self._items[i]
            assert item is not None
        return item

    def __iter__(self) -> Iterator[Message]:
        if self._unbuilt:
            self._build([i for i, m in enumerate(self._items) if m is None])
        return iter(self._items)  # type: ignore[arg-type]  # all built now

    def append(self, message: Message) -> None:
        self._items.append(message)
        self._json.append(None)

    def extend(self, messages: Iterable[Message]) -> None:
        """Append ``messages``; another ``LazyMessages`` is taken as it is (nothing built)."""
        if isinstance(messages, LazyMessages):
            self._items.extend(messages._items)
            self._json.extend(messages._json)
            self._unbuilt += messages._unbuilt
            return
        built = list(messages)
        self._items.extend(built)
        self._json.extend([None] * len(built))

    def head(self, n: int) -> LazyMessages:
        """The first ``n`` messages as another ``LazyMessages`` (nothing built)."""
        return LazyMessages._of(self._items[:n], self._json[:n])

    def copy(self) -> LazyMessages:
        """A copy holding the same messages and JSON (nothing built)."""
        return self.head(len(self._items))

    def __eq__(self, other: object) -> bool:
        """Equal to any list, tuple or view holding equal messages. Two messages held as the
        same JSON are equal without being built; anything else is compared built."""
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        if len(other) != len(self._items):
            return False
        if isinstance(other, LazyMessages):
            theirs = other._json
            todo = [i for i, mine in enumerate(self._json) if mine is None or mine != theirs[i]]
            other._build([i for i in todo if other._items[i] is None])
        else:
            todo = list(range(len(self._items)))
        self._build([i for i in todo if self._items[i] is None])  # at once, not one by one
        items = self._items
        return all(items[i] == other[i] for i in todo)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<LazyMessages {len(self._items)} messages, {self._unbuilt} unbuilt>"

    def _build(self, indexes: list[int]) -> None:
        """Build the messages at ``indexes`` (each still held as JSON) from their JSON."""
        if not indexes:
            return
        # An unbuilt message always has its JSON (the class invariant).
        spans = cast("list[bytes]", [self._json[i] for i in indexes])
        try:
            if len(indexes) == 1:
                built = [_ONE(spans[0])]
            else:
                with gc_paused():  # tens of thousands of acyclic objects: see gc_paused
                    built = _MANY(b"[" + b",".join(spans) + b"]")
        except ValidationError as exc:
            raise LazyMessageError(_which(indexes, exc)) from exc
        items = self._items
        for i, message in zip(indexes, built, strict=True):
            items[i] = message
        self._unbuilt -= len(indexes)


def _which(indexes: list[int], exc: ValidationError) -> str:
    """The error for a message that did not validate, naming it by its index here."""
    error = exc.errors()[0]
    loc = error.get("loc", ())
    where = indexes[loc[0]] if len(indexes) > 1 and loc and isinstance(loc[0], int) else indexes[0]
    return (
        f"message {where} of a restored snapshot is not a valid message ({error.get('msg')}): "
        "the sealed text was edited and sealed again"
    )


#: How the brain holds history and pending: a plain list, or a restored brain's lazy one.
MessageList = list[Message] | LazyMessages
