"""Observers: what the driver reports while it works (``IoEvent``, ``LoopObserver``).

Below both the driver and the tools (the dispatcher reports tool calls as ``IoEvent``s). An
observer receives every step the brain answered, every feed the driver gave it, and every IO
event; the trace recorder of ``loopctl_sim`` is one. Observers watch; they cannot change the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from loopctl.core import LoopMachine, MachinePolicy, MachineStep

__all__ = ["IO_REPORTER", "IoEvent", "IoKind", "LoopObserver", "io_event", "report_io"]

IoKind = Literal[
    "model_request",
    "model_reply",
    "model_error",
    "retry",
    "tool_call",
    "tool_result",
    "compaction",
    "reflection",
    "cancel",
    "crash",  # written by harnesses (loopctl_sim) that crash and resume a run; the driver never
    "resume",  # emits these two itself
    "mcp",  # an MCP server's session: its tool list, each call's result, its errors
]


@dataclass(frozen=True, slots=True, kw_only=True)
class IoEvent:
    """One thing the driver did in the world. Durations and times live only here. A plain
    dataclass: several are made every turn, from the driver's own data: nothing to validate.

    ``data`` by kind (JSON data, but for the request): ``model_request`` ``request`` (the
    ``ModelRequest`` itself), ``model`` and ``provider`` (the client's, when it names them),
    ``n_messages``, ``tools`` (names); ``model_reply`` ``message``, ``usage``, ``stop_reason``,
    ``attempts``; ``model_error`` ``attempt``, ``error``; ``retry`` ``attempt``, ``delay_s``,
    ``kind``; ``tool_call`` ``id``, ``name``, ``arguments``; ``tool_result`` ``id``, ``name``,
    ``is_error``, ``content``; ``compaction`` ``reason``, ``noop``, ``before`` (and ``after``,
    ``messages_before``, ``messages_after``); ``reflection`` ``text``; ``cancel`` whatever the
    canceller said; ``mcp`` ``op`` (``tools``, ``result``, ``error``), ``server`` and, by op,
    ``tools`` (the advertised list), ``tool``, ``arguments``, ``result`` or ``error``.

    ``raised``, on a ``tool_result``, holds ``(where, name, exception)`` for each exception the
    dispatcher turned into that error result (``where``: ``tool``, ``pre-tool hook``,
    ``post-tool hook``, ``tool middleware``): the objects themselves, for a harness that judges
    them (the fuzzer's tool-exception check). They are not JSON data, so no trace holds them.
    """

    kind: IoKind
    turn: int | None = None
    data: dict[str, Any] = field(default_factory=dict)
    duration_s: float | None = None
    raised: tuple[tuple[str, str, Exception], ...] = ()


# The slots' own setters: a frozen dataclass's ``__init__`` sets each field through
# ``object.__setattr__``; an observed turn builds four events (request, reply, call, result).
_SET_KIND, _SET_TURN, _SET_DATA, _SET_DURATION, _SET_RAISED = (
    IoEvent.__dict__[name].__set__ for name in ("kind", "turn", "data", "duration_s", "raised")
)


def io_event(
    kind: IoKind,
    turn: int | None,
    data: dict[str, Any],
    duration_s: float | None = None,
    raised: tuple[tuple[str, str, Exception], ...] = (),
) -> IoEvent:
    """``IoEvent(kind=kind, turn=turn, data=data, duration_s=duration_s, raised=raised)``, its
    slots filled directly: 12,200 -> 5,900 instructions an event (cachegrind). Tests pin it to
    the constructor's event."""
    event = object.__new__(IoEvent)
    _SET_KIND(event, kind)
    _SET_TURN(event, turn)
    _SET_DATA(event, data)
    _SET_DURATION(event, duration_s)
    _SET_RAISED(event, raised)
    return event


#: While a run is under way its tools may report IO of their own (``report_io``) to the run's
#: observers: an MCP server, built before and living beyond any one run, has no other way to
#: reach the trace. ``BareLoop.run`` binds its ``emit`` here for the run; tool tasks inherit it.
IO_REPORTER: ContextVar[Callable[[IoEvent], None] | None] = ContextVar(
    "loopctl_report_io", default=None
)


def report_io(event: IoEvent) -> None:
    """Tell the observers of the run under way about ``event`` (nothing outside a run)."""
    emit = IO_REPORTER.get()
    if emit is not None:
        emit(event)


class LoopObserver:
    """Base class with no-op hooks (override what you need); the driver calls them in order,
    synchronously."""

    def run_started(self, machine: LoopMachine, input: Any) -> None:
        """A run begins; ``machine`` is the brain before ``accept_input``."""

    def step(self, policy: MachinePolicy, step: MachineStep, machine: LoopMachine) -> None:
        """The brain answered ``step`` to ``next_step(policy)``."""

    def feed(self, name: str, args: Mapping[str, Any], machine: LoopMachine) -> None:
        """The driver gave the brain a feed; ``machine`` is the brain right after it."""

    def io(self, event: IoEvent) -> None:
        """The driver did something in the world."""

    def run_ended(self, machine: LoopMachine) -> None:
        """The run went through the exit door (after commit or discard)."""

    def run_raised(self, machine: LoopMachine, error: Exception) -> None:
        """``error`` escaped the run (a hook's, a middleware's, a compactor's exception, the
        brain refusing a feed): the exit door is not taken, ``machine`` is the brain as the
        exception left it, and ``run()`` raises ``error`` right after. Not called for a
        ``BaseException`` that is not an ``Exception`` (a cancelled task, a harness's simulated
        crash): what ends a process tells nobody."""
