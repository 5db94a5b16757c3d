"""``MachineData``: what the brain holds, and that data as a snapshot, as JSON and as a digest.

``LoopMachine`` (``machine.py``) is this class plus what the brain does: the transition tables,
the one question and the feeds. Here is everything that is about the brain's data and not about
its decisions, so that ``machine.py`` reads as the table and its handlers, top to bottom:

- the fields (``STATE_SLOTS``, which equality, snapshots and the digest cover exactly, plus the
  derived caches, never compared), the constructor, the read-only views, equality and ``repr``;
- saving and restoring: ``snapshot()``/``from_snapshot()``, ``model_dump_json()`` and the
  other pydantic-like entry points;
- the caches that make ``digest()`` and ``model_dump_json()`` cost O(the feed), not O(history):
  the JSON of each message of history and pending with a running hash of each (``JsonCache``,
  in ``encoding.py``), and the encoder of the small fields after the conversation
  (``EndEncoder``, in ``snapshot_json.py``).

Those caches rely on one rule the handlers keep (see ``machine.py``): ``_history`` and
``_pending`` only grow by appending, or are replaced by a new list, never edited in place. A
cache notices a replaced list by identity and starts again; an appended message is encoded
once, when the next digest or save needs it.

A brain restored from a verified sealed text holds its messages lazily: ``_history`` and
``_pending`` are ``lazy.LazyMessages`` (each message kept as the text's JSON, built when first
read; they grow by appending like lists, and keep the rule above) and its JSON caches adopt the
same bytes (``adopted.py``), so saving it again, its digest, its decisions and the feeds build no
message (``_restored_lazily`` says what that buys and what it moves to the first read). From
outside, the lists are only ever seen as tuples, copies or the read-only ``Conversation``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Self

from loopctl.core.adopted import SealedParts, adopted_caches, sealed_parts
from loopctl.core.built import built
from loopctl.core.conversation import Conversation
from loopctl.core.encoding import Hash, JsonCache, carried, encoded, sha256_of
from loopctl.core.lazy import LazyMessageError, LazyMessages, MessageList
from loopctl.core.loopdetect import LoopWindow
from loopctl.core.message_shapes import checked_conversation, collector_off
from loopctl.core.messages import Message
from loopctl.core.prebuilt import START
from loopctl.core.salvage import coherence_problem
from loopctl.core.seal import SEALED_HEAD
from loopctl.core.snapshot import (
    HISTORY_HEAD,
    PENDING_HEAD,
    SNAPSHOT_FORMAT,
    SNAPSHOT_VERSION,
    Exchange,
    MachineSnapshot,
    gc_paused,
    sealed_shell,
    snapshot_problem,
)
from loopctl.core.snapshot_json import EndEncoder, snapshot_json
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

_HISTORY_START: Final = sha256_of(HISTORY_HEAD)
_WINDOW_GIVEN: Final = {"calls", "unjudged", "warned"}  # as LoopWindow(calls=..., ...) sets


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
    # ... plus derived caches, never compared: each message's JSON and the running hashes for
    # ``digest()``, the small fields' JSON, the loop keys of the exchange in flight (computed
    # when its calls are checked at the door) and its ``CallTools`` step.
    __slots__ = (
        *STATE_SLOTS,
        "_call_tools",
        "_end_json",
        "_exchange_keys",
        "_history_json",
        "_pending_json",
    )

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
        self._state: Start | AwaitingModel | AwaitingTools | AwaitingCompaction | Terminal = START
        self._history: MessageList = history
        self._pending: MessageList = []
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
        self._history_json: JsonCache | None = None
        self._pending_json: JsonCache | None = None
        self._end_json: EndEncoder | None = None
        self._call_tools: tuple[Exchange, CallTools] | None = None
        self._exchange_keys: list[str] | None = None

    # --- read-only views -----------------------------------------------------------------

    @property
    def state(self) -> MachineState:
        return self._state

    @property
    def history(self) -> tuple[Message, ...]:
        return tuple(self._history)

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
        """The loop detector's window (a fresh model built from the brain's fields). The brain
        keeps those valid, so it is ``built``, not validated again: a traced run reads it after
        every feed (``BrainSummary.of``). Tests pin it to the validator's."""
        values = {
            "calls": tuple(self._loop_calls),
            "unjudged": self._loop_unjudged,
            "warned": self._loop_warned,
        }
        return built(LoopWindow, values, _WINDOW_GIVEN)

    def messages(self) -> list[Message]:
        """History plus pending: what the model is shown next (a copy)."""
        return [*self._history, *self._pending]

    def conversation(self) -> Conversation:
        """History plus pending as they are now, as a read-only view: O(1), not a copy.

        Safe because the two lists only ever grow by appending or are replaced (the rule
        ``machine.py`` keeps): what the brain does later never shows through the view."""
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

    # --- saving and restoring ------------------------------------------------------------

    def snapshot(self) -> MachineSnapshot:
        return MachineSnapshot.model_construct(
            format=SNAPSHOT_FORMAT,
            version=SNAPSHOT_VERSION,
            state=self._state,
            history=tuple(self._history),
            pending=tuple(self._pending),
            turns_taken=self._turns_taken,
            context_tokens=self._context_tokens,
            exchange=self._exchange,
            advertised=self._advertised,
            started=self._started,
            finalized=self._finalized,
            noop_floor=self._noop_floor,
            loop=self.loop_window,
        )

    @classmethod
    def from_snapshot(cls, snap: MachineSnapshot) -> Self:
        """The machine a snapshot describes.

        The snapshot was checked when it was validated (parsed or constructed), so this does not
        walk the conversation again. A snapshot built with ``model_construct`` skips that check:
        validate it first (``MachineSnapshot.model_validate(snap.model_dump())``).
        """
        machine = cls.__new__(cls)
        machine._state = snap.state
        machine._history = list(snap.history)
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
        machine._history_json = None
        machine._pending_json = None
        machine._end_json = None
        machine._call_tools = None
        machine._exchange_keys = None
        return machine

    def model_dump_json(self) -> str:
        """The whole brain as JSON: save a run at any decision boundary.

        The text of ``snapshot().model_dump_json()`` sealed with its checksum (``snapshot.py``:
        version 3, the sha256 of those bytes last, so a damaged save is refused at restore),
        assembled from the per-message cache that ``digest()`` keeps (see ``canonical_json``),
        and the checksum from its running hash: saving after every turn serializes and hashes
        only the turn's new messages.
        """
        checksum = self.checksum()
        history, pending = self._encoded()
        return snapshot_json(history.parts, pending.parts, self._end(), checksum).decode()

    @classmethod
    def model_validate_json(cls, text: str | bytes) -> Self:
        """Restore a brain; a damaged or future-version snapshot raises a ``ValidationError``.

        A sealed text in the writer's layout whose checksum verifies is restored lazily
        (``_restored_lazily``); anything else is validated whole, every message built.
        """
        raw = text.encode() if isinstance(text, str) else bytes(text)
        if raw.startswith(SEALED_HEAD):
            machine = cls._restored_lazily(raw)
            if machine is not None:
                return machine
        with gc_paused():
            snap = MachineSnapshot.model_validate_json(raw)
        return cls.from_snapshot(snap)

    @classmethod
    def _restored_lazily(cls, raw: bytes) -> Self | None:
        """The brain a verified sealed text in the writer's layout holds, its messages kept as
        the text's JSON (``lazy.py``: built when first read) and adopted as its JSON cache
        (``adopted.py``); None when the text is not that (it is then validated whole, and its
        error, if any, is the whole validation's).

        What it buys (``benchmarks/bench_snapshot.py``, 10,000 messages): save + restore went
        from 383M to 158M instructions (73-110 ms -> 34-44 ms at load 1), since pydantic no
        longer builds 25,000 models at restore; about half of what is left is the check below.
        The checksum proves the text undamaged, not unedited (a forgery sealed again
        verifies), so everything the eager restore checks is checked here too: the small
        fields (``sealed_shell``, ``snapshot_problem``), each message's validity and the
        conversation's coherence over msgspec mirrors of the messages
        (``message_shapes.checked_conversation``: no model built). Whatever is refused falls
        back to the whole validation, so its error is the eager restore's. What it moves: the
        first read of the messages (``history``, ``conversation()`` iterated, a model request)
        builds them then, at an eager restore's cost; a save, a digest, ``next_step``, the
        feeds and ``next_run()`` never do.
        """
        parts = sealed_parts(raw)
        if parts is None:
            return None
        snap = sealed_shell(parts.shell)
        if snap is None:
            return None
        history, pending = LazyMessages(parts.history), LazyMessages(parts.pending)
        try:
            with collector_off():  # the mirrors are temporaries (see collector_off)
                refused = _conversation_refused(snap, parts, history, pending)
            if refused:
                return None
            caches = adopted_caches(history, pending, parts)
        except LazyMessageError:  # not met (the mirror is never laxer): the whole validation
            return None
        machine = cls.from_snapshot(snap)
        machine._history, machine._pending = history, pending
        machine._history_json, machine._pending_json = caches
        # The brain's content is the text's, byte for byte (the messages' bytes are the text's,
        # and so must the small fields' be), and undamaged: its checksum is the text's. (The
        # text is hashed once, as the running hash the next save or digest goes on from.)
        if machine._end() != parts.end or machine.checksum() != parts.checksum:
            return None
        return machine

    def model_dump(self) -> dict[str, Any]:
        """The brain as JSON data: its content, not sealed. This is the in-process form (edit
        it, restore it with ``model_validate``); the saved form, which carries the checksum
        that catches damage at rest, is ``model_dump_json()``."""
        return self.snapshot().model_dump(mode="json")

    @classmethod
    def model_validate(cls, data: Any) -> Self:
        """Restore a brain from ``model_dump()`` data (or a ``MachineSnapshot``)."""
        with gc_paused():
            snap = MachineSnapshot.model_validate(data)
        return cls.from_snapshot(snap)

    # --- the digest and the canonical JSON, from the caches -------------------------------

    def digest(self) -> str:
        """A short stable hash of the canonical JSON; traces compare it after every feed: the
        first 16 hex digits of ``checksum()``."""
        return self.checksum()[:16]

    def checksum(self) -> str:
        """The sha256 (hex) of the canonical JSON: what a saved snapshot is sealed with.

        The value is ``sha256(canonical_json())``, computed without re-serializing or
        re-hashing the conversation: the snapshot's JSON puts history and pending first, and
        each keeps its messages' JSON and a running hash of the JSON up to its last message
        (both only ever grow by appending, or are replaced whole). A digest after a feed
        encodes and hashes what the feed added plus the small fields after the conversation:
        O(the feed), not O(history). A restored machine's first digest hashes it all once.
        Tests pin the value to the hash of the snapshot model's own JSON.
        """
        history = self._history_json
        if (  # history is mostly unchanged between two digests: skip the call
            history is None
            or history.chain is None
            or history.source is not self._history
            or not history.hashed == len(history.parts) == len(self._history)
        ):
            self._history_json = history = encoded(history, self._history, _HISTORY_START)
        self._pending_json = pending = encoded(
            self._pending_json, self._pending, self._after_history, (history, history.hashed)
        )
        final = pending.chain.copy()
        final.update(self._end())
        hexdigest: str = final.hexdigest()
        return hexdigest

    def _after_history(self) -> Hash:
        """A fresh running hash for pending: the history's, followed by ``PENDING_HEAD``."""
        assert self._history_json is not None
        chain = self._history_json.chain.copy()
        chain.update(PENDING_HEAD)
        return chain

    def _encoded(self) -> tuple[JsonCache, JsonCache]:
        """The history and pending caches, brought up to date (their JSON, not their hashes)."""
        self._history_json = history = encoded(self._history_json, self._history)
        self._pending_json = pending = encoded(self._pending_json, self._pending)
        return history, pending

    def _end(self) -> bytes:
        """The snapshot's JSON after pending: the state and the small fields."""
        encoder = self._end_json
        if encoder is None:
            encoder = self._end_json = EndEncoder()
        return encoder.encode(
            self._state,
            self._turns_taken,
            self._context_tokens,
            self._exchange,
            self._advertised,
            self._started,
            self._finalized,
            self._noop_floor,
            self._loop_calls,
            self._loop_unjudged,
            self._loop_warned,
        )

    def canonical_json(self) -> bytes:
        """The bytes of ``snapshot().model_dump_json()``, from the cached message encodings."""
        history, pending = self._encoded()
        return snapshot_json(history.parts, pending.parts, self._end())

    def _fold_pending(self, keep: int) -> None:
        """The exit door: pending's first ``keep`` messages are glued onto history, and so is
        their cached JSON onto history's (a long run's messages are not encoded again for the
        next digest or save; history's running hash takes them in at the next digest)."""
        history, pending = self._history_json, self._pending_json
        if (
            history is not None
            and history.source is self._history
            and len(history.parts) == len(self._history)
            and pending is not None
            and pending.source is self._pending
        ):
            history.parts.extend(pending.parts[:keep])
        moved = self._pending
        self._history.extend(moved.head(keep) if isinstance(moved, LazyMessages) else moved[:keep])
        self._pending = []
        self._finalized = True

    def _history_copy_for(self, fresh: MachineData) -> None:
        """Give ``fresh`` (the next run's brain) a copy of this history, with the JSON already
        encoded of it (``encoding.carried``)."""
        old = self._history
        fresh._history = old.copy() if isinstance(old, LazyMessages) else list(old)
        fresh._history_json = carried(self._history_json, self._history, fresh._history)

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


def _conversation_refused(
    snap: MachineSnapshot, parts: SealedParts, history: LazyMessages, pending: LazyMessages
) -> bool:
    """Whether a lazy restore must refuse ``parts``' conversation (``snap``: its small fields):
    a message ``Message`` validation refuses, or a check ``snapshot_problem`` makes, run over
    the messages' mirrors (``message_shapes.py``). No number walk: msgspec refuses NaN, the
    infinities and numbers out of a double's range. The mirrors are freed on return."""
    shapes = checked_conversation(*parts.arrays, (parts.history, parts.pending))
    if shapes is None:
        return True
    problem = snapshot_problem(snap, numbers=False, conversation=(history, pending), shapes=shapes)
    return problem is not None
