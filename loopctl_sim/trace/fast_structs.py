"""The shapes the trace reader's fast path reads (``loopctl_sim.trace.fast``): msgspec structs
that mirror the record models field for field, and the builders that turn what msgspec decoded
into exactly what pydantic builds from the same JSON.

``SHAPES`` names every model the fast path relies on with its fields in order; the fast path
checks once a process that the models still have those fields and no validators
(``fast_path_problems``), and turns itself off otherwise. Kept apart from the decoder so that
each reads in one sitting: this module is the mirror, ``fast`` the reading.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec
from pydantic import BaseModel

from loopctl.core import CallLLM, CallTools, Message, Role, TextPart, ToolCall, ToolResult
from loopctl.core.built import built
from loopctl_sim.trace.feeds import (
    AcceptInputArgs,
    CompactionNoopArgs,
    CompactionResultArgs,
    InjectArgs,
    ModelResponseArgs,
    NoArgs,
    SetContextTokensArgs,
    ToolResultsArgs,
)
from loopctl_sim.trace.records import FEED_RECORDS, BrainSummary, IoRecord, StepRecord

__all__ = [
    "ARG_READERS",
    "LINE",
    "SHAPES",
    "STRUCTS",
    "CallLLMStruct",
    "CallToolsStruct",
    "FeedStruct",
    "IoDataStruct",
    "IoStruct",
    "StepStruct",
    "args_match",
    "message_matches",
]


#: Every class whose shape the fast path relies on, with its fields in order: the messages and
#: parts it builds; the steps ``step_matches`` compares; the feed arguments (their fields, in
#: order, are the machine method's arguments); the records whose lines it checks.
SHAPES: Final[dict[type[BaseModel], tuple[str, ...]]] = {
    TextPart: ("kind", "text"),
    ToolCall: ("kind", "id", "name", "arguments"),
    ToolResult: ("kind", "call_id", "name", "content", "is_error"),
    Message: ("role", "parts"),
    CallLLM: ("kind", "turn"),
    CallTools: ("kind", "turn", "calls"),
    AcceptInputArgs: ("input",),
    ModelResponseArgs: ("response", "context_tokens"),
    ToolResultsArgs: ("message",),
    CompactionResultArgs: ("compacted", "before", "after"),
    CompactionNoopArgs: ("before", "after"),
    SetContextTokensArgs: ("n",),
    InjectArgs: ("message",),
    NoArgs: (),
    BrainSummary: (
        "state",
        "turn",
        "turns",
        "context_tokens",
        "history",
        "pending",
        "window",
        "last_call",
        "warned",
    ),
    IoRecord: ("seq", "type", "kind", "turn", "data", "duration_s", "scrubbed"),
    StepRecord: ("seq", "type", "policy", "step", "scrubbed"),
    **{
        cls: ("seq", "type", "digest", "scrubbed", "brain", "name", "args")
        for cls in FEED_RECORDS.values()
    },
}


#: One fields set per class, shared by its instances: pydantic copies it before any change
#: (``model_copy``), and frozen models never change it in place.
_FIELDS_SET: Final = {cls: set(fields) for cls, fields in SHAPES.items()}


# --- messages and feed arguments ---------------------------------------------------------------
# As msgspec decodes them (every field given, no other key; a part's "kind" tag picks its
# struct), then built into what pydantic builds. ``gc=False``: decoded JSON holds no cycles, and
# untracked structs do not bring on collections.

_STRUCT: Final[dict[str, Any]] = {"forbid_unknown_fields": True, "gc": False}


class _TextPart(msgspec.Struct, tag_field="kind", tag="text", **_STRUCT):
    text: str


class _ToolCall(msgspec.Struct, tag_field="kind", tag="tool_call", **_STRUCT):
    id: str
    name: str
    arguments: dict[str, Any]


class _ToolResult(msgspec.Struct, tag_field="kind", tag="tool_result", **_STRUCT):
    call_id: str
    name: str
    content: str
    is_error: bool


class _Message(msgspec.Struct, **_STRUCT):
    role: Role
    parts: list[_TextPart | _ToolCall | _ToolResult]


def _message(m: _Message) -> Message:
    """The ``Message`` pydantic builds from the JSON that ``m`` was decoded from.

    One function for the message and its parts: a feed of every turn carries a message, and
    Python calls are much of the cost here."""
    made = []
    parts: list[Any] = m.parts
    for p in parts:
        kind = type(p)
        if kind is _TextPart:
            cls: type[BaseModel] = TextPart
            values: dict[str, Any] = {"kind": "text", "text": p.text}
        elif kind is _ToolCall:
            cls = ToolCall
            values = {"kind": "tool_call", "id": p.id, "name": p.name, "arguments": p.arguments}
        else:
            cls = ToolResult
            values = {
                "kind": "tool_result",
                "call_id": p.call_id,
                "name": p.name,
                "content": p.content,
                "is_error": p.is_error,
            }
        made.append(built(cls, values, _FIELDS_SET[cls]))
    return built(Message, {"role": m.role, "parts": tuple(made)}, _FIELDS_SET[Message])


def message_matches(live: object, m: _Message) -> bool:
    """``live == _message(m)``, without building it: pydantic compares two models by type and
    ``__dict__`` (these classes have no private attributes or extra fields: ``SHAPES``, checked
    by ``fast.fast_path_problems``), and a part's type fixes its ``kind``, so the types and the
    other fields' values decide. Driver-level replay compares every feed's message this way
    (``loopctl_sim.trace.views``)."""
    if type(live) is not Message or live.role != m.role:
        return False
    parts = live.parts
    wanted: list[Any] = m.parts
    if len(parts) != len(wanted):
        return False
    for p, w in zip(parts, wanted, strict=True):
        kind = type(w)
        if kind is _TextPart:
            if type(p) is not TextPart or p.text != w.text:
                return False
        elif kind is _ToolCall:
            if type(p) is not ToolCall or not (
                p.id == w.id and p.name == w.name and p.arguments == w.arguments
            ):
                return False
        elif type(p) is not ToolResult or not (
            p.call_id == w.call_id
            and p.name == w.name
            and p.content == w.content
            and p.is_error == w.is_error
        ):
            return False
    return True


# Per feed: its arguments, and their values in field order (which is also the order the machine
# method of the same name takes them). ``fail`` (a LoopError) is not here; nor is a plain string
# ``input`` for ``accept_input`` (a validator makes it a user message): pydantic reads those.


class _AcceptInputArgs(msgspec.Struct, **_STRUCT):
    input: _Message


class _ModelResponseArgs(msgspec.Struct, **_STRUCT):
    response: _Message
    context_tokens: int


class _MessageArgs(msgspec.Struct, **_STRUCT):
    message: _Message


class _CompactionResultArgs(msgspec.Struct, **_STRUCT):
    compacted: list[_Message]
    before: int
    after: int


class _CompactionNoopArgs(msgspec.Struct, **_STRUCT):
    before: int
    after: int


class _SetContextTokensArgs(msgspec.Struct, **_STRUCT):
    n: int


class _NoArgs(msgspec.Struct, **_STRUCT):
    pass


def _accept_input(a: _AcceptInputArgs) -> tuple[Any, ...]:
    return (_message(a.input),)


def _model_response(a: _ModelResponseArgs) -> tuple[Any, ...]:
    return (_message(a.response), a.context_tokens)


def _one_message(a: _MessageArgs) -> tuple[Any, ...]:
    return (_message(a.message),)


def _compaction_result(a: _CompactionResultArgs) -> tuple[Any, ...]:
    return (tuple([_message(m) for m in a.compacted]), a.before, a.after)


def _compaction_noop(a: _CompactionNoopArgs) -> tuple[Any, ...]:
    return (a.before, a.after)


def _set_context_tokens(a: _SetContextTokensArgs) -> tuple[Any, ...]:
    return (a.n,)


def _no_args(a: _NoArgs) -> tuple[Any, ...]:
    return ()


#: Per feed name: the arguments' struct, the model pydantic builds from the same JSON, and
#: their values.
_FEED_ARGS: Final[dict[str, tuple[type[msgspec.Struct], type[BaseModel], Callable[[Any], Any]]]] = {
    "accept_input": (_AcceptInputArgs, AcceptInputArgs, _accept_input),
    "model_response": (_ModelResponseArgs, ModelResponseArgs, _model_response),
    "tool_results": (_MessageArgs, ToolResultsArgs, _one_message),
    "compaction_result": (_CompactionResultArgs, CompactionResultArgs, _compaction_result),
    "compaction_noop": (_CompactionNoopArgs, CompactionNoopArgs, _compaction_noop),
    "set_context_tokens": (_SetContextTokensArgs, SetContextTokensArgs, _set_context_tokens),
    "inject": (_MessageArgs, InjectArgs, _one_message),
    "cancel": (_NoArgs, NoArgs, _no_args),
    "commit_pending": (_NoArgs, NoArgs, _no_args),
    "discard_pending": (_NoArgs, NoArgs, _no_args),
}


def args_match(decoded: msgspec.Struct, live: Mapping[str, Any]) -> bool:
    """Whether a feed's live arguments (the driver's values by their canonical names) equal the
    ones ``decoded`` (its ``ARG_READERS`` struct) stands for, as the arguments' models compare
    them, without building them: the same names, a message by ``message_matches``, a list of
    messages one by one, any other value by ``==`` (as the record's ``__dict__`` compares).
    False is not a difference, only "not sure": the caller then compares the models."""
    fields = decoded.__struct_fields__
    if len(live) != len(fields):
        return False
    for name in fields:
        if name not in live:
            return False
        want, have = getattr(decoded, name), live[name]
        kind = type(want)
        if kind is _Message:
            if not message_matches(have, want):
                return False
        elif kind is list:
            if not (
                isinstance(have, list | tuple)
                and len(have) == len(want)
                and all(map(message_matches, have, want))
            ):
                return False
        elif have != want:
            return False
    return True


#: Per feed name: decode its arguments' JSON text, and give their values.
ARG_READERS: Final = {
    name: (msgspec.json.Decoder(struct).decode, values)
    for name, (struct, _, values) in _FEED_ARGS.items()
}


# --- records ----------------------------------------------------------------------------------
# The lines the fast path takes, as msgspec decodes them (the record's "type" tag picks the
# struct).


class _AnyObject(msgspec.Struct, gc=False):
    """Any JSON object, skipped (its keys are all unknown fields): an ``io`` record's data."""


class IoStruct(msgspec.Struct, tag_field="type", tag="io", **_STRUCT):
    seq: int
    kind: str
    turn: int | None
    data: _AnyObject
    duration_s: float | None  # any JSON number or null, as for pydantic's float | None
    scrubbed: bool = False  # (v2; absent from version 1 lines, as pydantic's default)


class IoDataStruct(msgspec.Struct, tag_field="type", tag="io", **_STRUCT):
    """An ``io`` line with its data decoded, for driver-level replay, which reads the model's
    recorded answers and requests from it (``loopctl_sim.trace.views``)."""

    seq: int
    kind: str
    turn: int | None
    data: dict[str, Any]
    duration_s: float | None
    scrubbed: bool = False


class CallLLMStruct(msgspec.Struct, tag_field="kind", tag="call_llm", **_STRUCT):
    turn: int


class CallToolsStruct(msgspec.Struct, tag_field="kind", tag="call_tools", **_STRUCT):
    turn: int
    calls: list[_ToolCall]


class StepStruct(msgspec.Struct, tag_field="type", tag="step", **_STRUCT):
    seq: int
    policy: msgspec.Raw  # its JSON text: compared with the previous step's
    step: CallLLMStruct | CallToolsStruct  # compared with the brain's by step_matches
    scrubbed: bool = False  # (v2)


class _Brain(msgspec.Struct, **_STRUCT):
    """A feed's brain summary (v2), compared with the replayed brain's after the feed."""

    state: str
    turn: int | None
    turns: int
    context_tokens: int
    history: int
    pending: int
    window: int
    last_call: str | None
    warned: bool


class FeedStruct(msgspec.Struct, tag_field="type", tag="feed", **_STRUCT):
    seq: int
    digest: str
    scrubbed: bool
    name: str
    args: msgspec.Raw  # its JSON text: decoded by the struct of the feed's arguments
    brain: _Brain | None = None  # (v2; absent from version 1 lines, as pydantic's default)


#: Each struct with the models pydantic builds from the same JSON (``fast_path_problems``).
STRUCTS: Final[list[tuple[type[msgspec.Struct], type[BaseModel]]]] = [
    (_TextPart, TextPart),
    (_ToolCall, ToolCall),
    (_ToolResult, ToolResult),
    (_Message, Message),
    (CallLLMStruct, CallLLM),
    (CallToolsStruct, CallTools),
    (_Brain, BrainSummary),
    *((struct, model) for struct, model, _ in _FEED_ARGS.values()),
    (IoStruct, IoRecord),
    (IoDataStruct, IoRecord),
    (StepStruct, StepRecord),
    *((FeedStruct, record) for record in FEED_RECORDS.values()),
]

LINE: Final = msgspec.json.Decoder(IoStruct | StepStruct | FeedStruct)
