"""A sealed text's messages checked at restore without building them: typed msgspec mirrors.

Why. A lazy restore (``lazy.py``, ``adopted.py``) keeps a verified sealed text's messages as
their JSON. The checksum proves the bytes are undamaged, not that they are what the writer
wrote: a text edited on purpose and sealed again with a new sha256 verifies too. So the
restore must still refuse, at the door, what the eager restore (every message a pydantic
model) refuses about the conversation: a message ``Message`` validation refuses, and a
conversation ``salvage.coherence_problem`` refuses. Building the 25,000 models of 10,000
messages to find out is what the lazy restore exists to avoid (about 250M instructions).

So the text's history and pending are decoded once more, by msgspec, into the structs below:
one per message and part, each field typed as the model's, unknown fields forbidden as the
models forbid them, the parts a union tagged on ``kind``. msgspec validates structure and types
in C, and the coherence rules run over the structs unchanged (they read only ``role``,
``parts`` and each part's ``kind``, ``id``, ``call_id``). Nothing here is a second copy of a
rule: a struct is a field list, and the tests pin the mirror to the models (a hypothesis
property over generated and mutated message JSON).

The mirror is never laxer than the models, and may be stricter: what msgspec refuses, the
restore hands to the whole validation (``checked_conversation`` answers None), whose verdict
is then the eager restore's, error and all. Where the two differ, by the tests: pydantic's lax
mode takes a bool spelled ``1`` or ``"yes"``, NaN, ``Infinity`` and numbers out of a double's
range (as infinities: refused by the snapshot's number walk), which msgspec refuses; msgspec
reads values nested deeper than pydantic's parser does, so a free-form value (a call's
arguments, a part's ``data``) nested past what the eager parse of the whole text reads is
refused here too (``_too_deep``). A message the mirror accepts validates as a ``Message``, so
a lazily restored brain never meets an invalid message when it first reads one.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Final, Literal

import msgspec

from loopctl.core.values import value_problem

__all__ = [
    "CallShape",
    "MessageShape",
    "ProviderShape",
    "ResultShape",
    "TextShape",
    "ThinkingShape",
    "checked_conversation",
    "collector_off",
    "message_shape",
]

#: The deepest a sealed text's JSON nests that the eager restore's parser reads (pydantic's
#: JSON parser refuses a document nested deeper). Tests pin it to the parser.
PARSER_DEPTH: Final = 200
#: How deep a part's free-form value (a call's ``arguments``, a part's ``data``; ``{}`` is 1)
#: sits in a snapshot: the content, history or pending, the message, its parts, the part.
_VALUE_AT: Final = 5
#: A message whose JSON holds at most this many brackets nests no deeper than the parser reads
#: (the message sits at depth 3 of the text: the content, history or pending).
_SURELY_SHALLOW: Final = PARSER_DEPTH - 2


class TextShape(msgspec.Struct, tag_field="kind", tag="text", forbid_unknown_fields=True, gc=False):
    """``TextPart``."""

    kind: ClassVar[str] = "text"
    text: str


class CallShape(
    msgspec.Struct, tag_field="kind", tag="tool_call", forbid_unknown_fields=True, gc=False
):
    """``ToolCall``."""

    kind: ClassVar[str] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = {}


class ResultShape(
    msgspec.Struct, tag_field="kind", tag="tool_result", forbid_unknown_fields=True, gc=False
):
    """``ToolResult``."""

    kind: ClassVar[str] = "tool_result"
    call_id: str
    name: str
    content: str
    is_error: bool = False


class ThinkingShape(
    msgspec.Struct, tag_field="kind", tag="thinking", forbid_unknown_fields=True, gc=False
):
    """``ThinkingPart``."""

    kind: ClassVar[str] = "thinking"
    provider: str = ""
    text: str = ""
    signature: str | None = None
    redacted: str | None = None
    data: dict[str, Any] | None = None


class ProviderShape(
    msgspec.Struct, tag_field="kind", tag="provider", forbid_unknown_fields=True, gc=False
):
    """``ProviderPart``."""

    kind: ClassVar[str] = "provider"
    provider: str
    data: dict[str, Any]


PartShape = TextShape | CallShape | ResultShape | ThinkingShape | ProviderShape


class MessageShape(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """``Message``: what ``salvage.coherence_problem`` walks (a ``MessageLike``)."""

    role: Literal["system", "user", "assistant"]
    parts: list[PartShape] = []


# gc=False: decoded JSON holds no reference cycles, so the collector need not track the structs.
_ONE: Final = msgspec.json.Decoder(MessageShape)
_MANY: Final = msgspec.json.Decoder(list[MessageShape])


def message_shape(raw: bytes) -> MessageShape | None:
    """The mirror of one message's JSON, or None when msgspec refuses it (the tests' door)."""
    try:
        return _ONE.decode(raw)
    except (msgspec.MsgspecError, RecursionError):
        return None


def checked_conversation(
    history: memoryview | bytes,
    pending: memoryview | bytes,
    spans: tuple[list[bytes], list[bytes]],
) -> tuple[list[MessageShape], list[MessageShape]] | None:
    """History and pending as mirrors, from the text's JSON arrays of them (``history``,
    ``pending``: ``[...]``, and ``spans``: each message's JSON, the same bytes cut apart), when
    every message is one ``Message`` validation accepts within the eager parse's depth; else
    None (the text is then validated whole, and its error is the eager restore's)."""
    try:
        shapes = _MANY.decode(history), _MANY.decode(pending)
    except (msgspec.MsgspecError, RecursionError):
        return None
    for messages, jsons in zip(shapes, spans, strict=True):
        if len(messages) != len(jsons) or _too_deep(messages, jsons):
            return None
    return shapes


def _too_deep(messages: list[MessageShape], jsons: list[bytes]) -> bool:
    """Whether a message's free-form value nests deeper than the eager parse of the whole text
    reads. Only a message holding more brackets than that depth (inside strings too) is looked
    at, and then only its free-form values are walked (a text or result holds strings only)."""
    if max(map(len, jsons), default=0) <= _SURELY_SHALLOW:  # in C: most conversations
        return False
    limit = PARSER_DEPTH - _VALUE_AT
    for i, raw in enumerate(jsons):
        if len(raw) > _SURELY_SHALLOW and raw.count(b"{") + raw.count(b"[") > _SURELY_SHALLOW:
            for part in messages[i].parts:
                value: Any = getattr(part, "arguments", None) or getattr(part, "data", None)
                if value and value_problem(value, limit=limit) is not None:
                    return True
    return False


@contextmanager
def collector_off() -> Iterator[None]:
    """The cyclic garbage collector off while the mirrors are built, walked and freed.

    The structs are untracked (``gc=False``), but their parts' tuples and the calls' argument
    dicts are tracked: 15,000 of them for 10,000 messages, enough to set off young collections
    and, every so often, a full one over every object of the process (a process holding a
    long conversation in models: tens of milliseconds, the first restore in a fresh process
    most often). With the collector off nothing is collected, and what is freed before it is
    back on leaves its counts as they were (a freed object is taken off them), so the restore
    leaves the collector as it found it. Reference counting frees them as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
