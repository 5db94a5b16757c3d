"""Hypothesis strategies for the exploring model: arguments from a tool's JSON schema, tool
calls and whole replies, for state machines of your own.

The draws are the exploring client's own, made by hypothesis instead of a seeded
``random.Random``, so a failing example shrinks towards the simplest reply (a final answer, the
first tool, the low end of every range). Only this module of ``loopctl.testing`` imports
hypothesis (the ``sim`` extra).

.. code-block:: python

    from hypothesis import given
    from loopctl.api import ModelRequest
    from loopctl.testing.strategies import replies

    @given(replies(my_loop.registry.specs()))
    def test_my_agent_survives_any_reply(reply): ...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st

from loopctl.api import ModelRequest, ToolSpec
from loopctl.core import Message, ToolCall
from loopctl.testing.explore import MOVES, ExploreConfig, Explorer, Move
from loopctl.testing.schema_values import (
    Vocabulary,
    broken_arguments,
    missing_arguments,
    valid_arguments,
)

__all__ = ["HypothesisChooser", "arguments", "moves", "replies", "tool_calls"]

T = TypeVar("T")


class HypothesisChooser:
    """A ``Chooser`` whose every draw is hypothesis's (so it shrinks)."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def chance(self, p: float) -> bool:
        if p <= 0:
            return False
        if p >= 1:
            return True
        # shrinks to 0, that is to False: the simpler answer
        return self.draw(st.integers(0, 999)) >= round(1000 * (1 - p))

    def choice(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(list(options)))

    def weighted(self, options: Sequence[tuple[T, float]]) -> T:
        live = [value for value, weight in options if weight > 0]
        return self.draw(st.sampled_from(live))

    def real(self, lo: float, hi: float) -> float:
        return self.draw(st.floats(lo, hi, allow_nan=False, allow_infinity=False))


@st.composite
def arguments(
    draw: st.DrawFn,
    spec: ToolSpec | Mapping[str, Any],
    kind: str = "valid",
    words: Sequence[str] = (),
) -> dict[str, Any]:
    """Arguments for a tool (its ``ToolSpec`` or its ``parameters`` schema): ``valid``,
    ``invalid`` (one argument of the wrong type) or ``missing`` (a required one left out; the
    arguments are invalid instead when nothing is required). ``words`` are values to copy."""
    parameters = spec.parameters if isinstance(spec, ToolSpec) else spec
    choose = HypothesisChooser(draw)
    vocabulary = Vocabulary(list(words))
    if kind == "valid":
        return valid_arguments(parameters, choose, vocabulary)
    if kind == "missing":
        found = missing_arguments(parameters, choose, vocabulary)
        if found is not None:
            return found
    elif kind != "invalid":
        raise ValueError(f"kind {kind!r}: expected valid, invalid or missing")
    return broken_arguments(parameters, choose, vocabulary)


@st.composite
def tool_calls(
    draw: st.DrawFn, specs: Sequence[ToolSpec], kind: str = "valid", index: int = 0
) -> ToolCall:
    """One call of one of ``specs`` with ``kind`` arguments (see ``arguments``)."""
    spec = draw(st.sampled_from(list(specs)))
    args = draw(arguments(spec, kind))
    return ToolCall(id=f"call_{index + 1}_1", name=spec.name, arguments=args)


def moves(allowed: Sequence[Move] = MOVES) -> st.SearchStrategy[Move]:
    """A move of the explorer (simplest first: ``final`` is what a failure shrinks to)."""
    return st.sampled_from([m for m in MOVES if m in allowed])


@st.composite
def replies(
    draw: st.DrawFn,
    specs: Sequence[ToolSpec] | ModelRequest,
    config: ExploreConfig | None = None,
    index: int = 0,
    allowed: Sequence[Move] = MOVES,
) -> Message:
    """One reply of the exploring model: a move (from ``allowed``) made for a request
    advertising ``specs`` (or for the request itself, whose conversation a ``repeat`` copies).
    ``index`` numbers the reply's call ids (``call_<index + 1>_<n>``)."""
    request = (
        specs
        if isinstance(specs, ModelRequest)
        else ModelRequest(messages=(Message.user("go"),), tools=tuple(specs), turn=1)
    )
    choose = HypothesisChooser(draw)
    explorer = Explorer(config)
    usable = [m for m in allowed if request.tools or m in ("final", "empty", "long", "unknown")]
    move = draw(moves(usable or ["final"]))
    return explorer.reply(request, index, choose, move)
