"""What a JSON value from the outside may be: nested at most ``MAX_NESTING`` deep, numbers finite.

Why a limit at all: what the engine accepts it must be able to write and read back. A tool
call's arguments (and a reasoning or provider part's ``data``) are the provider's free-form JSON,
and they travel inside every form the engine writes: the brain's snapshot, a trace's records,
a replay's report. Each of those wraps the value a few levels down (the deepest, a trace's
snapshot record, puts it 8 levels down: record, data, snapshot, history, message, parts, part),
and every reader has a limit of its own: pydantic's JSON parser reads values nested 201 deep
at most (the trace reader and the snapshot restore), its serializer refuses a little deeper,
Python's ``json`` raises ``RecursionError`` near 1,000.
A value accepted past those limits was a run that completed and then could not be saved or
read back. So one limit, well inside all of them, is checked where a value enters: at the door
where a model's reply enters (``loopctl.api.fold_events``), where a deeper value is a provider
error, and again by the brain itself on every feed that takes messages (``parts_problem``: a
``ProtocolError``, the brain unchanged), so a reply that reaches it some other way (a feed by
hand, a client of one's own) cannot make it hold what it could not save. Every form written
later is readable; the trace reader's tests pin that the two agree.

Numbers: JSON has no NaN or infinity, but Python's parser reads ``NaN``, ``Infinity`` and
``1e999`` (as ``inf``); a brain holding one cannot be saved as JSON and read back the same
(pydantic writes it as ``null``). The brain refuses such arguments (``loopdetect.call_key``), the
fold refuses them before the brain sees them, and a snapshot holding one is refused at restore.

Pure helpers, no IO: ``value_problem`` walks iteratively (a value nested 5,000 deep is measured,
never recursed into).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final

__all__ = [
    "MAX_NESTING",
    "parts_problem",
    "plain_json",
    "value_problem",
]

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


def parts_problem(parts: Iterable[Any]) -> str | None:
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
        problem = value_problem(value)
        if problem is not None:
            return (
                f"{what} cannot be saved and read back: {problem} "
                f"(the limit is {MAX_NESTING} levels; numbers must be finite)"
            )
    return None


def plain_json(value: Any, sort_keys: bool = False) -> bool:
    """Whether writing ``value`` as JSON and reading it back gives an equal value, in the same
    order, that the door would let in: dicts with ``str`` keys (in sorted order, given
    ``sort_keys``: a text written with ``sort_keys=True`` reads back sorted), lists, strings,
    ints, booleans, None and finite floats, of exactly these types (a tuple reads back as a
    list, a subclass as its base), nested within ``MAX_NESTING``. False says only "not
    surely": the caller goes the long way (write, read, check). Iterative, as ``value_problem``.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            if sort_keys and list(item) != sorted(item):
                return False
            children: Any = item.values()
        elif kind is list:
            children = item
        elif kind is float:
            if not math.isfinite(item):
                return False
            continue
        elif kind in _SCALARS:
            continue
        else:
            return False
        if depth >= MAX_NESTING:
            return False
        for child in children:
            stack.append((child, depth + 1))
    return True
