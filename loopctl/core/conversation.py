"""``Conversation``: a read-only view of the conversation at one moment, history then pending.

A model request shows the model the whole conversation; copying it into a tuple on every call
cost O(history) per turn (58 us at 10,000 messages). The brain's history is a tuple and its
pending a ``Pending`` (append-only), so either one with its length at one moment is a frozen
prefix: the view holds the two and their lengths, costs O(1), and reads as a tuple would. In a
pydantic model a ``Conversation`` field takes a view as it is (the brain's messages are already
validated) or any sequence of messages (validated and wrapped); it serializes as that tuple.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain, islice
from typing import Any, NoReturn, overload

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from loopctl.core.messages import Message


def _refuse_edit(*args: object, **kwargs: object) -> NoReturn:
    raise TypeError("pending only grows by appending; replace it with a new Pending instead")


#: Stands in for list methods of every signature (hence ``Any``).
_append_only: Any = _refuse_edit


class Pending(list[Message]):
    """The brain's pending messages: a list that only grows by appending (every other edit
    raises ``TypeError``; a handler gives the brain a new one instead). A ``Conversation`` view
    keeps a length into it, and the saved form's cache (``_saved``) knows the same ``Pending``
    still begins with what it encoded without looking (checking cost a replay of one long run
    the square of its length: 1.9 of 5.7 s at 40,000 records, cProfile)."""

    __slots__ = ()

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _append_only
    insert = extend = pop = remove = clear = sort = reverse = _append_only


class Conversation(Sequence[Message]):
    """The first ``len`` messages of ``head`` followed by the first ``len`` of ``tail``.

    Build one with ``Conversation.of(messages)`` (a copy of any sequence) or let the brain hand
    out its own (``LoopMachine.conversation()``); the lists given to the constructor must never
    be edited in place (appending is fine: the view keeps its lengths).
    """

    __slots__ = ("_head", "_head_len", "_tail", "_tail_len")

    def __init__(
        self,
        head: Sequence[Message] = (),
        tail: Sequence[Message] = (),
        head_len: int | None = None,
        tail_len: int | None = None,
    ) -> None:
        self._head = head
        self._head_len = len(head) if head_len is None else head_len
        self._tail = tail
        self._tail_len = len(tail) if tail_len is None else tail_len

    @classmethod
    def of(cls, messages: Sequence[Message] | Conversation) -> Conversation:
        """A view of ``messages`` as they are now (a view is returned as it is)."""
        if isinstance(messages, Conversation):
            return messages
        return cls(tuple(messages))

    def __len__(self) -> int:
        return self._head_len + self._tail_len

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if isinstance(index, slice):
            return self.as_tuple()[index]
        n = self._head_len + self._tail_len
        i = index.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("conversation index out of range")
        head = self._head_len
        return self._head[i] if i < head else self._tail[i - head]

    def __iter__(self) -> Iterator[Message]:
        head = islice(self._head, self._head_len)
        return chain(head, islice(self._tail, self._tail_len)) if self._tail_len else head

    def as_tuple(self) -> tuple[Message, ...]:
        """The messages as a tuple (a copy: O(length))."""
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Conversation):
            if (
                other._head is self._head
                and other._tail is self._tail
                and other._head_len == self._head_len
                and other._tail_len == self._tail_len
            ):
                return True
        elif not isinstance(other, tuple):
            return NotImplemented
        return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(self.as_tuple())

    def __repr__(self) -> str:
        return f"Conversation({self.as_tuple()!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Conversation, (self.as_tuple(),))

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        messages = handler.generate_schema(tuple[Message, ...])

        def validate(value: Any, inner: core_schema.ValidatorFunctionWrapHandler) -> Conversation:
            if isinstance(value, Conversation):
                return value
            return cls(inner(value))

        return core_schema.no_info_wrap_validator_function(
            validate,
            messages,
            serialization=core_schema.plain_serializer_function_ser_schema(
                Conversation.as_tuple, return_schema=messages
            ),
        )
