"""``MachineData``: what the brain holds, its read-only views, and its saved form's entry points.

``LoopMachine`` (``machine.py``) is this class plus what the brain does: the transition tables,
the one question and the feeds. Here are the fields (``STATE_SLOTS``, which equality, snapshots
and the digest cover exactly), the constructor, the read-only views, equality and ``repr``, and
the pydantic-like entry points of the saved form (``snapshot()``, ``model_dump_json()``,
``digest()``, ...), each a call into ``_saved.py``, which holds everything about that form.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Self

from loopctl.core import _saved
from loopctl.core.conversation import Conversation
from loopctl.core.loopdetect import LoopWindow
from loopctl.core.messages import Message
from loopctl.core.salvage import coherence_problem
from loopctl.core.snapshot import SNAPSHOT_FORMAT, Exchange, MachineSnapshot
from loopctl.core.steps import (
    AwaitingCompaction,
    AwaitingModel,
    AwaitingTools,
    CallTools,
    MachineState,
    Start,
    Terminal,
)
from loopctl.core.values import parts_problem

__all__ = ["MachineData", "is_count"]


def is_count(n: object) -> bool:
    """A token count: a non-negative int (``True`` is an int to Python, not a count)."""
    if type(n) is int:  # nearly always: skip the two isinstance calls
        return n >= 0
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


class MachineData:
    """The brain's fields and their saved forms; ``LoopMachine`` is the class to use."""

    #: What the brain is: equality, snapshots and the digest cover exactly these.
    STATE_SLOTS: Final = (
        "_advertised",
        "_context_tokens",
        "_exchange",
        "_finalized",
        "_history",
        "_loop_calls",
        "_loop_unjudged",
        "_loop_warned",
        "_noop_floor",
        "_pending",
        "_started",
        "_state",
        "_turns_taken",
    )
    # ... plus the saved form's cache (``_saved.SavedForm``), never compared, and two slots
    # ``machine.py`` no longer uses (go when its new version is committed).
    __slots__ = (*STATE_SLOTS, "_call_tools", "_exchange_keys", "_saved")

    def __init__(self, history: Iterable[Message] = (), context_tokens: int = 0) -> None:
        history = list(history)
        problem = coherence_problem(history)
        if problem is not None:
            raise ValueError(f"history is not provider-valid: {problem}")
        for i, message in enumerate(history):
            if (problem := parts_problem(message.parts)) is not None:
                raise ValueError(f"history[{i}] cannot be held: {problem}")
        if not is_count(context_tokens):
            raise ValueError(f"not a token count: {context_tokens!r}")
        self._state: Start | AwaitingModel | AwaitingTools | AwaitingCompaction | Terminal = Start()
        self._history: tuple[Message, ...] = tuple(history)
        self._pending: list[Message] = []
        self._turns_taken = 0
        self._context_tokens = context_tokens
        self._exchange: Exchange | None = None
        self._advertised: tuple[str, ...] = ()
        self._started = False
        self._finalized = False
        self._noop_floor: int | None = None
        # The loop detector's window, kept as plain fields: the hot path builds no model.
        # A list, trimmed in place to MAX_LOOP_WINDOW: appending stays O(exchange size).
        self._loop_calls: list[str] = []
        self._loop_unjudged = 0
        self._loop_warned = False
        self._saved = _saved.SavedForm()
        self._call_tools: tuple[Exchange, CallTools] | None = None
        self._exchange_keys: list[str] | None = None

    # --- read-only views -----------------------------------------------------------------

    @property
    def state(self) -> MachineState:
        return self._state

    @property
    def history(self) -> tuple[Message, ...]:
        return self._history

    @property
    def pending(self) -> tuple[Message, ...]:
        return tuple(self._pending)

    @property
    def turns_taken(self) -> int:
        return self._turns_taken

    @property
    def context_tokens(self) -> int:
        return self._context_tokens

    @property
    def exchange(self) -> Exchange | None:
        return self._exchange

    @property
    def is_terminal(self) -> bool:
        return isinstance(self._state, Terminal)

    @property
    def finalized(self) -> bool:
        return self._finalized

    @property
    def started(self) -> bool:
        """True once this run accepted its input (a run is under way or over)."""
        return self._started

    @property
    def loop_window(self) -> LoopWindow:
        """The loop detector's window (a fresh model built from the brain's fields)."""
        return LoopWindow(
            calls=tuple(self._loop_calls), unjudged=self._loop_unjudged, warned=self._loop_warned
        )

    def messages(self) -> list[Message]:
        """History plus pending: what the model is shown next (a copy)."""
        return [*self._history, *self._pending]

    def conversation(self) -> Conversation:
        """History plus pending as they are now, as a read-only view: O(1), not a copy.

        Safe because history is a tuple and pending only grows by appending or is replaced (the
        rule ``machine.py`` keeps for this view): what the brain does later never shows through
        it."""
        history, pending = self._history, self._pending
        return Conversation(history, pending, len(history), len(pending))

    def summary_values(self) -> tuple[str, int | None, int, int, int, int, int, str | None, bool]:
        """The brain's small fields, read without a copy: the state's kind and turn, turns
        taken, the context count, history and pending lengths, the loop window's length, last
        key and warning. A trace's feed record carries them (``loopctl_sim``'s
        ``BrainSummary``, in this order) and a replay compares them after every feed."""
        state = self._state
        calls = self._loop_calls
        return (
            state.kind,
            getattr(state, "turn", None),
            self._turns_taken,
            self._context_tokens,
            len(self._history),
            len(self._pending),
            len(calls),
            calls[-1] if calls else None,
            self._loop_warned,
        )

    def history_len(self) -> int:
        return len(self._history)

    def pending_len(self) -> int:
        return len(self._pending)

    # --- saving and restoring: the entry points of ``_saved.py`` ----------------------------

    def snapshot(self) -> MachineSnapshot:
        return MachineSnapshot.model_construct(  # its post-init sets the version the messages need
            format=SNAPSHOT_FORMAT,
            history=self._history,
            pending=tuple(self._pending),
            **{**self._small(), "loop": self.loop_window},
        )

    def _small(self) -> dict[str, Any]:
        """The snapshot's fields after the conversation, in its order, as plain values (what
        ``_saved`` writes after the messages)."""
        return {
            "state": self._state,
            "turns_taken": self._turns_taken,
            "context_tokens": self._context_tokens,
            "exchange": self._exchange,
            "advertised": self._advertised,
            "started": self._started,
            "finalized": self._finalized,
            "noop_floor": self._noop_floor,
            "loop": {
                "calls": self._loop_calls,
                "unjudged": self._loop_unjudged,
                "warned": self._loop_warned,
            },
        }

    @classmethod
    def from_snapshot(cls, snap: MachineSnapshot) -> Self:
        """The machine a snapshot describes.

        The snapshot was checked when it was validated (parsed or constructed), so this does not
        walk the conversation again. A snapshot built with ``model_construct`` skips that check:
        validate it first (``MachineSnapshot.model_validate(snap.model_dump())``).
        """
        machine = cls.__new__(cls)
        machine._state = snap.state
        machine._history = snap.history
        machine._pending = list(snap.pending)
        machine._turns_taken = snap.turns_taken
        machine._context_tokens = snap.context_tokens
        machine._exchange = snap.exchange
        machine._advertised = snap.advertised
        machine._started = snap.started
        machine._finalized = snap.finalized
        machine._noop_floor = snap.noop_floor
        machine._loop_calls = list(snap.loop.calls)
        machine._loop_unjudged = snap.loop.unjudged
        machine._loop_warned = snap.loop.warned
        machine._saved = _saved.SavedForm()
        machine._call_tools = None
        machine._exchange_keys = None
        return machine

    def model_dump_json(self) -> str:
        """The whole brain as JSON, sealed with its checksum (``snapshot.py``: version 3, so a
        damaged save is refused at restore): save a run at any decision boundary."""
        return self._saved.sealed(self._history, self._pending, self._small())

    @classmethod
    def model_validate_json(cls, text: str | bytes) -> Self:
        """Restore a brain; a damaged or future-version snapshot raises a ``ValidationError``."""
        return cls.from_snapshot(_saved.restored_json(text))

    def model_dump(self) -> dict[str, Any]:
        """The brain as JSON data: its content, not sealed. This is the in-process form (edit
        it, restore it with ``model_validate``); the saved form, which carries the checksum
        that catches damage at rest, is ``model_dump_json()``."""
        return self.snapshot().model_dump(mode="json")

    @classmethod
    def model_validate(cls, data: Any) -> Self:
        """Restore a brain from ``model_dump()`` data (or a ``MachineSnapshot``)."""
        return cls.from_snapshot(_saved.restored(data))

    def digest(self) -> str:
        """A short stable hash of the canonical JSON; traces compare it after every feed: the
        first 16 hex digits of ``checksum()``."""
        return self.checksum()[:16]

    def checksum(self) -> str:
        """The sha256 (hex) of the canonical JSON: what a saved snapshot is sealed with."""
        return self._saved.checksum(self._history, self._pending, self._small())

    def canonical_json(self) -> bytes:
        """The bytes of ``snapshot().model_dump_json()``."""
        return self._saved.content(self._history, self._pending, self._small())

    def _fold_pending(self, keep: int) -> None:
        """The exit door: pending's first ``keep`` messages are glued onto history."""
        self._history = (*self._history, *self._pending[:keep])
        self._pending = []
        self._finalized = True

    def _history_copy_for(self, fresh: MachineData) -> None:
        """Give ``fresh`` (the next run's brain) this history (a tuple: shared), and a copy of
        the saved form's cache (so its first digest does not encode that history again)."""
        fresh._history = self._history
        fresh._saved = self._saved.copy()

    # --- equality ------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MachineData):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.STATE_SLOTS)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"<LoopMachine {self._state.kind} turns={self._turns_taken} "
            f"history={len(self._history)} pending={len(self._pending)}>"
        )
