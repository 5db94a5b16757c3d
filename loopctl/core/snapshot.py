"""The brain's saved form: ``MachineSnapshot``, its consistency check, its versions and its seal.

A snapshot is everything the brain is, as data. Reading one (``model_validate``,
``model_validate_json``, or a pydantic model that holds one) checks that it describes a state
the brain could have reached (``snapshot_problem``), so a damaged or hand-edited snapshot is a
``ValidationError`` at restore, never a machine that misbehaves later.

Versions: 2 added the reasoning and provider parts, 3 the checksum. A snapshot's *content* (what
``MachineSnapshot`` dumps, what ``digest()`` hashes) is written in the lowest of versions 1 and 2
that holds it, so a conversation without those parts writes version-1 bytes and recorded traces
replay. A saved brain (``model_dump_json()``) is its content *sealed*: version 3 in its head and,
last, ``"checksum"``, the sha256 of the content re-serialized from what was read (a re-indented
text verifies too). Why a seal: the consistency check catches a state the brain could not be in,
not another it could (15 of 400 random bit flips restored as another valid brain: a digit of a
count, a letter of a message). Versions 1 and 2 are read unverified; an older loopctl refuses
version 3 with its "upgrade loopctl" message. ``model_dump()`` data is the content, not sealed.

Numbers: NaN or an infinity (``1e999``) in a call's arguments or a part's data is refused, as the
brain refuses such a call (``values.py``): restored, it would save back as ``null``. A forgery
sealed again verifies all the same, so every snapshot validated here is walked for them.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Final

import msgspec
from msgspec import Meta

from loopctl.core.data import ENCODE, Data, convert, invalid, json_reader
from loopctl.core.loopdetect import LoopWindow
from loopctl.core.messages import Message, ToolCall, ToolResult
from loopctl.core.steps import AwaitingModel, AwaitingTools, MachineState
from loopctl.core.values import coherence_problem, parts_problem

SNAPSHOT_FORMAT: Final = "loopctl-machine"
#: The newest format version: what a saved brain is written in (its content, sealed).
SNAPSHOT_VERSION: Final = 3
#: Every version this loopctl reads.
SNAPSHOT_VERSIONS: Final = (1, 2, 3)
#: The highest version of a snapshot's content (without its checksum).
CONTENT_VERSION: Final = 2
#: The part kinds version 1 lacks.
_MODERN: Final = frozenset({"thinking", "provider"})


def needed_version(*conversations: Sequence[Message]) -> int:
    """The lowest format version that holds these messages: 2 if a part is one version 1 lacks."""
    for messages in conversations:
        for message in messages:
            for part in message.parts:
                if part.kind in _MODERN:
                    return 2
    return 1


class Exchange(Data, frozen=True, kw_only=True):
    """The tool calls of the latest model reply, waiting for their results."""

    turn: int
    calls: tuple[ToolCall, ...]
    preanswered: tuple[ToolResult, ...] = ()

    @property
    def dispatch(self) -> tuple[ToolCall, ...]:
        """The calls the driver must run: all but the pre-answered unknown ones."""
        if not self.preanswered:
            return self.calls
        answered = {r.call_id for r in self.preanswered}
        return tuple(c for c in self.calls if c.id not in answered)


Count = Annotated[int, Meta(ge=0)]


class MachineSnapshot(Data, frozen=True, kw_only=True):
    """Everything the brain is, as data. ``LoopMachine`` round-trips through it exactly;
    reading one checks more than the types (the module docstring). Built by hand, it is not
    checked (``LoopMachine.from_snapshot`` says so): validate the data instead."""

    # Checked with a message of their own (``_head_problem``): a newer loopctl's snapshot is
    # told to upgrade, whatever else it holds.
    format: Any = SNAPSHOT_FORMAT
    version: Any = CONTENT_VERSION
    # The conversation comes before the small fields, so that the JSON of a machine is a prefix
    # that only grows between commits (history, then pending) followed by a few bytes that
    # change at every feed: the digest keeps a running hash of the prefix (``_saved.py``).
    history: tuple[Message, ...] = ()
    pending: tuple[Message, ...] = ()
    state: MachineState
    turns_taken: Count = 0
    context_tokens: Count = 0
    exchange: Exchange | None = None
    advertised: tuple[str, ...] = ()
    started: bool = False
    finalized: bool = False
    noop_floor: Count | None = None
    loop: LoopWindow = LoopWindow()

    @classmethod
    def read(
        cls, data: Any, checksum_of: Callable[[MachineSnapshot], str] | None = None
    ) -> MachineSnapshot:
        """``data`` (``model_dump()``'s, a sealed text's, or a snapshot) checked as a snapshot;
        ``checksum_of`` computes a sealed one's content checksum (``_saved`` gives its cache's).
        ``ValueError`` if it is not one."""
        if isinstance(data, MachineSnapshot):
            return data.checked()
        try:
            sealed: _Sealed = convert(data, _Sealed)
        except ValueError as e:
            raise ValueError(_upgrade_or(e, lambda: msgspec.convert(data, _Head))) from None
        return sealed.unseal(checksum_of)

    @classmethod
    def model_validate(
        cls, data: Any, checksum_of: Callable[[MachineSnapshot], str] | None = None
    ) -> MachineSnapshot:
        """``read``, its complaint a ``ValidationError``."""
        try:
            return cls.read(data, checksum_of)
        except ValueError as e:
            raise invalid(cls, data, e) from None

    @classmethod
    def model_validate_json(
        cls, text: str | bytes, checksum_of: Callable[[MachineSnapshot], str] | None = None
    ) -> MachineSnapshot:
        """A snapshot read from JSON (content or sealed), checked."""
        try:
            sealed: _Sealed = json_reader(_Sealed)(text)
            return sealed.unseal(checksum_of)
        except ValueError as e:
            raise invalid(cls, text, _upgrade_or(e, lambda: json_reader(_Head)(text))) from None

    def checked(self, needed: int | None = None) -> MachineSnapshot:
        """This snapshot if it is one the brain could be in, with the version its conversation
        needs (``needed``, when the caller has it); else ``ValueError``."""
        if needed is None:
            needed = needed_version(self.history, self.pending)
        problem = _head_problem(self)
        if problem is None and self.version == 1 and needed > 1:
            problem = (
                "the conversation holds reasoning or provider parts, which format version 1 "
                "cannot hold (damaged, or edited by hand)"
            )
        if problem is None:
            problem = snapshot_problem(self)  # numbers too: a forgery sealed again may hold NaN
            problem = problem and f"inconsistent machine snapshot: {problem}"
        if problem is not None:
            raise ValueError(problem)
        version = 1 if self.version == 1 else needed
        if version != self.version:  # the lowest version that holds it, whatever it said
            return msgspec.structs.replace(self, version=version)
        return self


class _Head(msgspec.Struct):
    format: Any = None
    version: Any = None


class _Sealed(MachineSnapshot, frozen=True, kw_only=True):
    """A saved brain as read: the content and, in version 3, its checksum."""

    checksum: Annotated[str, Meta(pattern="^[0-9a-f]{64}$")] | None = None

    def unseal(self, checksum_of: Callable[[MachineSnapshot], str] | None) -> MachineSnapshot:
        """The snapshot, its checksum verified against the content re-serialized from what was
        read (a re-indented text verifies too), then checked."""
        if (problem := _head_problem(self)) is not None:
            raise ValueError(problem)
        needed = needed_version(self.history, self.pending)
        fields = {f: getattr(self, f) for f in _CONTENT_FIELDS}
        if self.version == SNAPSHOT_VERSION:  # the content's: the lowest that holds it
            fields["version"] = needed
        snap = MachineSnapshot(**fields)
        checksum, sealed = self.checksum, self.version == SNAPSHOT_VERSION
        if sealed and checksum is None:
            raise ValueError(
                f"a version-{SNAPSHOT_VERSION} snapshot carries a checksum and this one has none "
                "(damaged, or edited by hand)"
            )
        if checksum is not None and not sealed:
            raise ValueError(
                f"a version-{self.version} snapshot has no checksum, and this one has one "
                "(damaged: its version was changed)"
            )
        if checksum is not None and (checksum_of or _checksum_of)(snap) != checksum:
            raise ValueError(
                "damaged machine snapshot: its checksum does not match its content (the "
                "text changed after it was saved)"
            )
        return snap.checked(needed)


_CONTENT_FIELDS: Final = MachineSnapshot.__struct_fields__


def _upgrade_or(error: ValueError, head: Callable[[], _Head]) -> str:
    """Why data that is no snapshot here is not: its head's problem when it has one (a newer
    loopctl's snapshot is told to upgrade, whatever else it holds), else ``error``."""
    with contextlib.suppress(ValueError):
        return _head_problem(head()) or str(error)
    return str(error)


def _head_problem(snap: _Head | MachineSnapshot) -> str | None:
    """Why a snapshot's format or version is not one this loopctl reads, or None."""
    fmt, version = snap.format, snap.version
    if fmt != SNAPSHOT_FORMAT:
        return f"not a loopctl machine snapshot (format {fmt!r})"
    if type(version) is not int or version not in SNAPSHOT_VERSIONS:
        return (
            f"snapshot format version {version!r} is not supported by this loopctl "
            f"(it reads versions {', '.join(map(str, SNAPSHOT_VERSIONS))}); "
            "upgrade loopctl to restore it"
        )
    return None


def _checksum_of(snap: MachineSnapshot) -> str:
    """The sha256 (hex) of a snapshot's content, serialized whole."""
    return hashlib.sha256(ENCODE(snap)).hexdigest()


def snapshot_problem(snap: MachineSnapshot) -> str | None:
    """Why ``snap`` is not a state the brain can be in, or None. Linear in the conversation.

    A terminal machine that was not finalized may end with calls still open: the run failed or
    was cancelled while its tools ran, and ``discard_pending`` will drop that tail.
    """
    history, pending = snap.history, snap.pending
    state = snap.state
    kind = state.kind
    if isinstance(state, AwaitingTools) != (snap.exchange is not None):
        return f"state {kind} with exchange {'set' if snap.exchange else 'missing'}"
    if snap.finalized and (kind != "terminal" or pending):
        return "finalized, but not terminal with an empty pending"
    if not snap.started and kind != "terminal" and (kind != "start" or pending):
        return f"state {kind} with pending messages before any input was accepted"
    if isinstance(state, AwaitingModel) and state.turn != snap.turns_taken + 1:
        return f"awaiting the model for turn {state.turn} after {snap.turns_taken} turns"
    if snap.loop.unjudged > len(snap.loop.calls):
        return "the loop window has more unjudged calls than recorded calls"
    if snap.exchange is not None:
        exchange = snap.exchange
        last = pending[-1] if pending else None
        if exchange.turn != snap.turns_taken:
            return f"exchange of turn {exchange.turn} after {snap.turns_taken} turns"
        if isinstance(state, AwaitingTools) and exchange.turn != state.turn:
            return f"exchange of turn {exchange.turn} in state {kind} of turn {state.turn}"
        if last is None or tuple(last.tool_calls) != exchange.calls:
            return "the exchange's calls are not those of the last pending message"
        ids = {c.id for c in exchange.calls}
        pre = [r.call_id for r in exchange.preanswered]
        if not set(pre) <= ids or len(set(pre)) != len(pre) or not exchange.dispatch:
            return "the exchange's pre-answered results do not fit its calls"
    open_tail = kind == "awaiting_tools" or (kind == "terminal" and not snap.finalized)
    problem = coherence_problem(history) or coherence_problem(pending, open_tail=open_tail)
    if problem is not None:
        return f"conversation: {problem}"
    # Numbers (see the module docstring); nesting is not held to the brain's limit here.
    for name, messages in (("history", history), ("pending", pending)):
        for i, message in enumerate(messages):
            if (problem := parts_problem(message.parts, limit=1 << 30)) is not None:
                return f"{name}[{i}]: {problem}"
    return None
