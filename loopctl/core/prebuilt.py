"""The brain's states and steps that it hands out again and again, built once.

States and steps are frozen pydantic models, so one instance serves every machine that reaches
it. ``START`` is the one ``Start``; ``awaiting_model``, ``call_llm`` and ``awaiting_tools`` give the
instance for a turn number: the first ``EARLY_TURNS`` turns' are built when this module is
imported (fuzzing runs thousands of short machines, each passing through the same early turns);
later turns' are built when reached, with ``built`` (no validation: the turn is the brain's own
count), and not kept (a long run reaches each turn once, so keeping them would only cost a cache
lookup). This is one of the two things that make a turn cheap; the other is ``built`` itself.

The end of a run is built the same way: ``terminal`` and ``done`` wrap an outcome the brain has
just made (a validated ``Completed``, ``Failed``, ...) and ``completed`` makes the outcome of a
final text (a ``str`` the brain read from a validated message). Validated, the three cost a
run 30,000 instructions (cachegrind: a one-turn run with an instant model, 373,000 -> 343,000).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from loopctl.core.built import built
from loopctl.core.steps import (
    AwaitingModel,
    AwaitingTools,
    CallLLM,
    Completed,
    Done,
    MachineOutcome,
    Start,
    Terminal,
)

__all__ = [
    "EARLY_TURNS",
    "START",
    "awaiting_model",
    "awaiting_tools",
    "call_llm",
    "completed",
    "done",
    "terminal",
]

_Turned = TypeVar("_Turned", AwaitingModel, CallLLM, AwaitingTools)

#: How many turns' states and steps are built at import, shared by every machine.
EARLY_TURNS: Final = 256


def _per_turn(cls: type[_Turned]) -> Callable[[int], _Turned]:
    """``turn -> cls(turn=turn)``, the first ``EARLY_TURNS`` built once (``turn`` is the
    brain's own count, an int: later ones are ``built`` without validation)."""
    new = cls.__pydantic_validator__.validate_python
    early: tuple[_Turned, ...] = tuple(new({"turn": t}) for t in range(EARLY_TURNS))
    kind = early[0].kind

    def build(turn: int) -> _Turned:
        if 0 <= turn < EARLY_TURNS:
            return early[turn]
        return built(cls, {"kind": kind, "turn": turn}, {"turn"})

    return build


START: Final = Start()
awaiting_model: Final = _per_turn(AwaitingModel)
call_llm: Final = _per_turn(CallLLM)
awaiting_tools: Final = _per_turn(AwaitingTools)


_OUTCOME: Final = {"outcome"}
_FINAL_TEXT: Final = {"final_text"}


def terminal(outcome: MachineOutcome) -> Terminal:
    """``Terminal(outcome=outcome)`` for an outcome the brain made (already valid)."""
    return built(Terminal, {"kind": "terminal", "outcome": outcome}, _OUTCOME)


def done(outcome: MachineOutcome) -> Done:
    """``Done(outcome=outcome)`` for an outcome the brain made (already valid)."""
    return built(Done, {"kind": "done", "outcome": outcome}, _OUTCOME)


def completed(final_text: str) -> Completed:
    """``Completed(final_text=final_text)`` for a ``str`` (a validated message's text)."""
    return built(Completed, {"kind": "completed", "final_text": final_text}, _FINAL_TEXT)
