"""What a value from the outside may be: JSON nested at most ``MAX_NESTING`` deep with finite
numbers, a token count, a history; and the shape of a conversation (coherence, salvage).

Why: what the engine accepts it must be able to write and read back. A tool call's arguments
and a reasoning or provider part's ``data`` are the provider's free-form JSON, which every form
the engine writes wraps up to 8 levels down (a trace's snapshot record); msgspec (the snapshot's
and the trace's reader) stops at the interpreter's recursion limit, pydantic's JSON parser at
201 levels, Python's ``json`` at about 1,000. JSON has no NaN or infinity, yet
Python's parser reads ``NaN`` and ``1e999``: such a value saves as ``null`` and restores as
another brain. So one limit, well inside every reader's, is checked where a value enters: the
door a model's reply comes through (``loopctl.api.fold_events``) and the brain on every feed
that takes messages (``parts_problem``). ``value_problem`` walks iteratively: a value nested
5,000 deep is measured, never recursed into. Building a message checks nothing (``data.py``), so
the brain checks each fed message's role and field types too (``types_problem``).

A conversation is *provider-valid* when every assistant message with tool calls is followed at
once by a user message whose results answer exactly those calls, and every result answers a call
of the assistant message right before it. Providers reject anything else, and a history that holds
a call without its result is poisoned for good, so the brain keeps this invariant at every feed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from types import UnionType
from typing import Any, Final, Union, get_args, get_origin

import msgspec

from loopctl.core.messages import Message, Part, Role

#: The deepest a value from a model may nest: ``{}`` is 1, ``{"a": [1]}`` is 2.
MAX_NESTING: Final = 128


def value_problem(value: Any, limit: int = MAX_NESTING) -> str | None:
    """Why ``value`` (JSON data: dicts, lists, strings, numbers, booleans, None) cannot be held,
    or None: nested deeper than ``limit``, or a number that is NaN or infinite."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        elif isinstance(item, float) and not math.isfinite(item):
            return f"it holds {item!r}, which JSON cannot represent"
        else:
            continue
        if depth > limit:
            return f"it is nested more than {limit} levels deep"
        for child in children:
            if isinstance(child, dict | list | tuple | float):
                stack.append((child, depth + 1))
    return None


_SCALARS: Final = frozenset({str, int, bool, type(None)})


def _classes(annotation: Any) -> tuple[type, ...]:
    """The classes a value of ``annotation`` is an instance of (``str | None``: str, NoneType)."""
    if get_origin(annotation) in (Union, UnionType):
        return tuple(c for a in get_args(annotation) for c in _classes(a))
    return (get_origin(annotation) or annotation,)


#: Each part type's fields and the classes they may hold, read from the parts' own annotations:
#: building a part checks nothing (``data.py``), so the brain checks what it is fed, or it
#: could not read back what it saved.
_FIELDS: Final = {
    cls: tuple((f.name, _classes(f.type)) for f in msgspec.structs.fields(cls))
    for cls in get_args(Part)
}
_ROLES: Final = frozenset(get_args(Role))


def types_problem(message: Message) -> str | None:
    """Why ``message`` does not hold what its annotations say (a role, parts, each field of its
    type, a dict's keys strings), or None."""
    if message.role not in _ROLES:
        return f"{message.role!r} is not a role"
    for part in message.parts:
        fields = _FIELDS.get(type(part))
        if fields is None:
            return f"a {type(part).__name__} is not a message part"
        for name, types in fields:
            value = getattr(part, name)
            if not isinstance(value, types):
                return f"a {part.kind} part's {name} is a {type(value).__name__}"
            if type(value) is dict and not all(type(k) is str for k in value):
                return f"a {part.kind} part's {name} has a key that is not a string"
    return None


def parts_problem(parts: Iterable[Any], limit: int = MAX_NESTING) -> str | None:
    """Why a message's free-form values (a tool call's ``arguments``, a reasoning or provider
    part's ``data``) could not be saved and read back (``value_problem``), or None. A value of
    scalars only (a call's usual arguments) is answered in one pass over its items."""
    for part in parts:
        kind = part.kind
        if kind == "tool_call":
            value = part.arguments
            what = f"the arguments of tool call {part.id!r} ({part.name!r})"
        elif kind == "thinking" or kind == "provider":
            value = part.data
            what = f"a {kind} part's data"
        else:
            continue
        if not value or (type(value) is dict and _SCALARS.issuperset(map(type, value.values()))):
            continue
        if (problem := value_problem(value, limit)) is not None:
            return f"{what} cannot be saved and read back: {problem}"
    return None


def message_problem(message: Message) -> str | None:
    """Why a fed message could not be held, saved and read back: its types, then its free-form
    values (``types_problem``, ``parts_problem``), or None. O(the message)."""
    return types_problem(message) or parts_problem(message.parts)


def is_count(n: object) -> bool:
    """A token count: a non-negative int (``True`` is an int to Python, not a count)."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def history_problem(messages: Sequence[Any]) -> str | None:
    """Why ``messages`` cannot be a history (the constructor's, or a compaction's), or None:
    each one a ``Message`` that could be saved and read back, the whole provider-valid."""
    for i, message in enumerate(messages):
        if not isinstance(message, Message):
            return f"history[{i}] is a {type(message).__name__}, not a Message"
        if (problem := message_problem(message)) is not None:
            return f"history[{i}]: {problem}"
    return coherence_problem(messages)


def coherent_prefix_length(pending: Sequence[Message]) -> int:
    """Length of the longest prefix of ``pending`` that ends right after a complete exchange.

    Only the brain appends result messages, always answering the assistant message before them,
    so the prefix ends at the last message holding results. No completed exchange: 0.
    """
    for i in range(len(pending) - 1, -1, -1):
        msg = pending[i]
        if msg.role == "user" and msg.tool_results:
            return i + 1
    return 0


def coherence_problem(messages: Sequence[Message], *, open_tail: bool = False) -> str | None:
    """Why ``messages`` is not provider-valid, or None when it is. Linear in the messages.

    ``open_tail`` allows the last message's calls to be still unanswered (tools in flight).
    """
    expected: list[str] | None = None
    for i, msg in enumerate(messages):
        parts = msg.parts
        results = [p.call_id for p in parts if p.kind == "tool_result"]
        calls = [p.id for p in parts if p.kind == "tool_call"]
        if expected is not None:
            if msg.role != "user" or (results != expected and sorted(results) != sorted(expected)):
                return f"message {i} does not answer the tool calls {expected} before it"
            expected = None
        elif results:
            return f"message {i} holds results {results} for no tool call before it"
        if results and msg.role != "user":
            return f"message {i} holds tool results outside a user message"
        if calls:
            if msg.role != "assistant":
                return f"message {i} holds tool calls outside an assistant message"
            if (len(calls) > 1 and len(set(calls)) != len(calls)) or not all(calls):
                return f"message {i} holds duplicate or empty tool call ids {calls}"
            expected = calls
    if expected is not None and not open_tail:
        return f"the last message's tool calls {expected} have no results"
    return None
