"""Run-level events at a step boundary: the seam through which something outside the world acts
on a run (a harness that replays or simulates one, a UI with a stop button).

``BareLoop(before_step=hook)`` calls ``hook(point)`` right before it asks the brain each next step
(after it honoured a fired cancel signal, before it builds the step's policy). Through the
``StepPoint`` the hook may, at exactly that point:

- ``cancel(data)``: cancel the run now, as the cancel signal would (a ``cancel`` IO event with
  ``data``, then the ``cancel`` feed);
- ``inject(message)``: add a message to the run (the ``inject`` feed; the brain accepts it only in
  ``Start``, and refuses it with ``ProtocolError`` elsewhere);
- ``request_compaction()``: ask for a manual compaction before the next model call;
- raise: an exception from the hook propagates out of ``run()`` at once and the exit door is not
  taken, so the brain is left exactly as it is. An ``Exception`` is how the run ended: the
  observers are told (``LoopObserver.run_raised``; a trace records it). A harness simulates a
  process crash by raising a ``BaseException`` that is not an ``Exception``, which nobody is told
  of, as a killed process tells nobody (it then saves the brain, restores it and resumes it in a
  fresh body with ``BareLoop.from_machine``).

Every feed given through the point reaches the observers like any other, so a recorded trace holds
it where it happened and a replay can give it at the same step. The point is only valid during the
hook's call.
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

    # The driver's own ``_feed`` and ``_emit`` are used here: this module is part of the driver.
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
