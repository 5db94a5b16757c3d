"""Run-level events at a step boundary: the seam through which something outside the world acts
on a run (a harness that replays or simulates one, a UI with a stop button).

``BareLoop(before_step=hook)`` calls ``hook(point)`` before it asks the brain each next step
(after it honoured a fired cancel signal, before it builds the policy); the ``StepPoint`` may
cancel, inject a message or ask for a compaction there (docs/driver.md). An exception from the
hook leaves ``run()`` at once without the exit door, the brain as it is: an ``Exception`` is
told to the observers (``run_raised``), a ``BaseException`` that is not one is a simulated kill,
told to nobody. Every feed given through the point reaches the observers like any other, so a
trace holds it where it happened and a replay gives it at the same step. The point is valid only
during the hook's call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from loopctl.core import Cancel, Feed, Inject, LoopMachine, Message
from loopctl.observe import IoEvent


class _Driver(Protocol):
    """What a ``StepPoint`` uses of ``BareLoop`` (named here so that this module does not import
    the loop, which imports it)."""

    @property
    def machine(self) -> LoopMachine: ...

    def request_compaction(self) -> None: ...

    def _feed(self, feed: Feed) -> None: ...

    def _emit(self, event: IoEvent) -> None: ...


class StepPoint:
    """The run right before the driver asks its next step; see the module docstring."""

    __slots__ = ("_loop",)

    def __init__(self, loop: _Driver) -> None:
        self._loop = loop

    @property
    def machine(self) -> LoopMachine:
        """The brain as it is now (read it; change it only through this point's methods)."""
        return self._loop.machine

    def cancel(self, data: Mapping[str, Any] | None = None) -> None:
        """Cancel the run here: a ``cancel`` IO event carrying ``data``, then the cancel feed."""
        self._loop._emit(IoEvent(kind="cancel", data=dict(data or {})))
        self._loop._feed(Cancel())

    def inject(self, message: Message) -> None:
        """Add ``message`` to the run (the ``inject`` feed)."""
        self._loop._feed(Inject(message))

    def request_compaction(self) -> None:
        """Ask for a manual compaction before the next model call."""
        self._loop.request_compaction()


#: ``BareLoop(before_step=...)``: called with the run's ``StepPoint`` before every step.
BeforeStep = Callable[[StepPoint], None]
