"""The brain's saved form: ``MachineSnapshot``, its consistency check, its versions and its seal.

A snapshot is everything the brain is, as data. Validating one checks that it describes a state
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

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from loopctl.core.loopdetect import LoopWindow
from loopctl.core.messages import Message, ToolCall, ToolResult
from loopctl.core.steps import AwaitingModel, AwaitingTools, MachineState, Strict
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange(Strict):
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


class MachineSnapshot(BaseModel):
    """Everything the brain is, as data. ``LoopMachine`` round-trips through it exactly;
    validating one checks more than the types (the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal["loopctl-machine"] = SNAPSHOT_FORMAT
    version: int = CONTENT_VERSION
    # The conversation comes before the small fields, so that the JSON of a machine is a prefix
    # that only grows between commits (history, then pending) followed by a few bytes that
    # change at every feed: the digest keeps a running hash of the prefix (``_saved.py``).
    history: tuple[Message, ...] = ()
    pending: tuple[Message, ...] = ()
    state: MachineState
    turns_taken: int = Field(default=0, ge=0)
    context_tokens: int = Field(default=0, ge=0)
    exchange: Exchange | None = None
    advertised: tuple[str, ...] = ()
    started: bool = False
    finalized: bool = False
    noop_floor: int | None = Field(default=None, ge=0)
    loop: LoopWindow = LoopWindow()
    #: (version 3) The sha256 of the content's bytes; checked at validation, then dropped (None):
    #: never dumped by the model (the machine's ``model_dump_json()`` adds it).
    checksum: str | None = Field(
        default=None, exclude=True, pattern="^[0-9a-f]{64}$", validate_default=True
    )

    # Field validators, not a model "before" validator: a model-level one makes pydantic parse the
    # whole JSON into Python objects first, which doubled the cost of restoring a long history.
    @field_validator("format", mode="before")
    @classmethod
    def _known_format(cls, fmt: Any) -> Any:
        if fmt != SNAPSHOT_FORMAT:
            raise ValueError(f"not a loopctl machine snapshot (format {fmt!r})")
        return fmt

    @field_validator("version", mode="before")
    @classmethod
    def _known_version(cls, version: Any) -> Any:
        if type(version) is not int or version not in SNAPSHOT_VERSIONS:
            raise ValueError(
                f"snapshot format version {version!r} is not supported by this loopctl "
                f"(it reads versions {', '.join(map(str, SNAPSHOT_VERSIONS))}); "
                "upgrade loopctl to restore it"
            )
        return version

    @field_validator("checksum", mode="after")
    @classmethod
    def _sealed_in_version_3(cls, checksum: str | None, info: ValidationInfo) -> str | None:
        version = info.data.get("version")
        if version == SNAPSHOT_VERSION and checksum is None:
            raise ValueError(
                f"a version-{SNAPSHOT_VERSION} snapshot carries a checksum and this one has none "
                "(damaged, or edited by hand)"
            )
        if checksum is not None and version is not None and version != SNAPSHOT_VERSION:
            raise ValueError(
                f"a version-{version} snapshot has no checksum, and this one has one (damaged: "
                "its version was changed)"
            )
        return checksum

    @field_validator("history", "pending", mode="after")
    @classmethod
    def _fits_its_version(
        cls, messages: tuple[Message, ...], info: ValidationInfo
    ) -> tuple[Message, ...]:
        if info.data.get("version") == 1 and needed_version(messages) > 1:
            raise ValueError(
                f"{info.field_name} holds reasoning or provider parts, which format version 1 "
                "cannot hold (damaged, or edited by hand)"
            )
        return messages

    def model_post_init(self, context: Any, /) -> None:
        """The version is what the conversation needs (the lowest that holds it), whatever the
        constructor or the text said (a sealed text's 3 too): a plain conversation's is 1."""
        if self.version != 1:
            object.__setattr__(self, "version", needed_version(self.history, self.pending))

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> MachineSnapshot:
        if self.checksum is not None:  # sealed: the checksum is of the content, re-serialized
            checksum = self.checksum
            object.__setattr__(self, "checksum", None)
            # ``_saved`` gives its cache's ``checksum_of`` as the context: it encodes the content
            # once, and the restored brain's first save reuses that JSON.
            content_checksum = info.context if callable(info.context) else _checksum_of
            if content_checksum(self) != checksum:
                raise ValueError(
                    "damaged machine snapshot: its checksum does not match its content (the "
                    "text changed after it was saved)"
                )
        problem = snapshot_problem(self)  # numbers too: a forgery sealed again may hold NaN
        if problem is not None:
            raise ValueError(f"inconsistent machine snapshot: {problem}")
        return self


def _checksum_of(snap: MachineSnapshot) -> str:
    """The sha256 (hex) of a snapshot's content, serialized whole."""
    return hashlib.sha256(MachineSnapshot.__pydantic_serializer__.to_json(snap)).hexdigest()


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
