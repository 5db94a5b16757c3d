"""``json.loads`` and ``json.dumps`` for the small values of a turn, doing less.

``loads`` parses with msgspec (a dependency already, for the trace reader) wherever msgspec
takes the text, and hands everything it refuses to ``json.loads``: the values and the errors
are ``json.loads``'s. Where the two differ msgspec refuses (NaN and infinities, numbers beyond a
float, lone surrogates, trailing data, malformed text), and deep nesting is a ``RecursionError``
from both; tests compare them over generated texts. A call's arguments ``{"a": 1, "b": 1}``:
12,000 instructions with ``json.loads``, 2,200 this way (cachegrind).

``dumps_like`` is ``json.dumps`` with its C encoder built once: ``json.dumps`` (and
``JSONEncoder.encode``) build a new encoder object on every call, which for a small value is
more than half the cost (``{"a": 1, "b": 1}``: 18,400 instructions, 8,100 this way). The text is
``json.dumps``'s with the same options, byte for byte (tests compare the two over generated
values). One difference: no circular-reference check. The values come from JSON, or from
``pydantic_core.to_jsonable_python``, neither of which can be circular; a circular value built
by hand hits the recursion limit (``RecursionError``) instead of a ``ValueError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import (  # type: ignore[attr-defined]
    c_make_encoder,
    encode_basestring,
    encode_basestring_ascii,
)
from typing import Any, Final

import msgspec

__all__ = ["DUMPS", "SORTED_DUMPS", "dumps_like", "loads"]

_DECODE: Final = msgspec.json.decode


def loads(text: str) -> Any:
    """``json.loads(text)``: msgspec's parse where it takes the text, else json's own."""
    try:
        return _DECODE(text)
    except msgspec.MsgspecError:
        return json.loads(text)


def _not_serializable(value: object) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def dumps_like(*, ensure_ascii: bool = True, sort_keys: bool = False) -> Callable[[Any], str]:
    """``lambda value: json.dumps(value, ensure_ascii=ensure_ascii, sort_keys=sort_keys)`` (the
    other options at their defaults), with the encoder built here, once."""
    encoder = c_make_encoder(
        None,  # no circular-reference markers: see the module docstring
        _not_serializable,
        encode_basestring_ascii if ensure_ascii else encode_basestring,
        None,  # indent
        ": ",
        ", ",
        sort_keys,
        False,  # skipkeys
        True,  # allow_nan
    )

    def dumps(value: Any) -> str:
        return "".join(encoder(value, 0))

    return dumps


#: ``json.dumps`` with its defaults.
DUMPS: Final = dumps_like()
#: ``json.dumps(value, sort_keys=True)``.
SORTED_DUMPS: Final = dumps_like(sort_keys=True)
