"""Machine replay's fast path through a trace: lines decoded by ``msgspec``, only what the brain
is handed built.

Validating a line with pydantic (``RECORD.validator.validate_json``) costs about 4-6 µs, most of
it building a dozen small models through the discriminated unions; machine-level replay reads
every line, so that alone would cap it near 200,000 records/s before the brain does any work.
The lines a writer produces have one canonical shape: every field present, each value of exactly
its JSON type. A decoder (``make_batch_decoder``, used by ``TraceReader.replay_batches``)
recognises that shape and gives the lines' replay forms without building records. ``msgspec``
decodes each line into a typed struct of its kind (in C: the field names, types and key set are
checked there), and skips what replay never reads without building it: an ``io`` line's ``data``
(any JSON object) and a step's ``policy`` (see below). An ``io`` line is then answered ``None``
(checked, never built); a feed's arguments are decoded by the struct of that feed's (typed: its
messages' parts picked by their ``kind``) and it becomes a ``FeedLine`` holding the machine
method's arguments (the messages built as pydantic builds them: equal, same field order and
``model_fields_set``; no record or argument model, at about 0.6 µs an object even unvalidated)
and the arguments' JSON text, read only for a report; a step becomes a ``StepLine`` holding the
policy and the step as decoded, which ``step_matches`` compares with the brain's answer exactly
as pydantic's ``==`` would.

It is a fast path, never a second validator: a decoder leaves a line to pydantic whenever it is
not sure (any other shape, type, key set or record kind, a ``seq`` other than the expected one),
and the reader then validates the line with pydantic as any other. So every accepted trace
replays from the same data and every rejected one fails with the same ``TraceFormatError``.
Where ``msgspec`` and pydantic read JSON differently, the line goes to pydantic: a number beyond
a float's range (pydantic reads infinity), ``NaN`` (pydantic reads it), a line nested deeper
than pydantic's parser goes (``_nesting_ok``). ``msgspec`` checks UTF-8 in what it decodes but
not in what it skips, so an ``io`` line that is not ASCII is checked whole. Both read big
integers exactly and let the last of duplicate keys win. Headers, end records, ``compact`` and
``done`` steps and ``fail`` feeds (rare: a few a run) always take the pydantic path, and so does
everything read as full records (``TraceReader.numbered``): pydantic builds full records faster
than Python could.

The policy of a step record is almost always the one of the step before, byte for byte: such a
policy is not even parsed, the step reuses the previous ``MachinePolicy`` object. Any other
policy is validated by pydantic from its own JSON text (the same validator the record's field
uses); one equal to the previous policy (written another way: ``1.0`` for ``1``) still reuses
that object.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

import msgspec
from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaValidator, core_schema

from loopctl.core import CallLLM, CallTools, MachinePolicy, ToolCall
from loopctl_sim.trace.fast_structs import (
    ARG_READERS,
    LINE,
    SHAPES,
    STRUCTS,
    CallLLMStruct,
    CallToolsStruct,
    FeedStruct,
    IoDataStruct,
    IoStruct,
    StepStruct,
)
from loopctl_sim.trace.feeds import AcceptInputArgs
from loopctl_sim.trace.records import RECORD, FeedLine, StepLine
from loopctl_sim.trace.views import FeedView, IoView, StepView, View

__all__ = [
    "BatchDecoder",
    "ViewDecoder",
    "fast_path_problems",
    "make_batch_decoder",
    "make_view_decoder",
    "step_matches",
]


#: ``take(lines, start, seq, out)``: see ``make_batch_decoder``.
BatchDecoder = Callable[[list[bytes], int, int, list[Any]], int]


_new_tuple = tuple.__new__


#: An integer that only an exact reader gets right (``fast_path_problems``).
_BIG_INT: Final = 2**64 + 1

#: pydantic's JSON parser reads values nested at most this deep (a line's object is the first
#: level; ``fast_path_problems`` checks it once a process); msgspec's goes deeper. A value that
#: deep has ``_MAX_DEPTH - 1`` opening brackets around it and as many closing ones, so a shorter
#: line, or one with fewer brackets, is surely read.
_MAX_DEPTH: Final = 201
_SHORT: Final = 2 * _MAX_DEPTH - 1
#: Up to this length, counting brackets is the cheaper bound on a longer line's nesting (two
#: passes over it); past it, parsing it with pydantic's own parser, which skips text faster.
_COUNT_UP_TO: Final = 1024
#: pydantic's JSON parser, building nothing: any JSON object, its keys ignored.
_PARSE_ONLY: Final = SchemaValidator(core_schema.typed_dict_schema({}, extra_behavior="ignore"))


def _nesting_ok(raw: bytes) -> bool:
    """Whether pydantic's parser reads ``raw`` (a JSON object msgspec read) within its nesting
    limit; a line with too many brackets to be sure by counting (they may be in text) is
    parsed."""
    if len(raw) <= _COUNT_UP_TO and raw.count(b"{") + raw.count(b"[") < _MAX_DEPTH:
        return True
    try:
        _PARSE_ONLY.validate_json(raw)
    except ValidationError:
        return False
    return True


def _utf8(raw: bytes) -> bool:
    """``raw`` is valid UTF-8 (pydantic's parser checks it all; msgspec not what it skips)."""
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True


def step_matches(actual: object, expected: object) -> bool:
    """``actual == expected`` for the step of a ``StepLine``: a model, or the fast path's decoded
    ``call_llm`` or ``call_tools`` step, compared as pydantic compares the model it would build
    from the same JSON, without building it.

    Pydantic compares two models by type, private attributes, extra fields and ``__dict__``;
    these classes have neither private attributes nor extra fields (``fast_path_problems``), a
    decoded step holds every field, and a model's type fixes its ``kind``: so the type and the
    other fields' values decide."""
    kind = type(expected)
    if kind is CallLLMStruct:
        return type(actual) is CallLLM and actual.turn == expected.turn  # type: ignore[attr-defined]
    if kind is not CallToolsStruct:
        return actual == expected
    if type(actual) is not CallTools:
        return False
    calls, wanted = actual.calls, expected.calls  # type: ignore[attr-defined]
    if actual.turn != expected.turn or len(calls) != len(wanted):  # type: ignore[attr-defined]
        return False
    for call, c in zip(calls, wanted, strict=True):
        if type(call) is not ToolCall or not (
            call.id == c.id and call.name == c.name and call.arguments == c.arguments
        ):
            return False
    return True


def _nested_io(depth: int) -> bytes:
    """An ``io`` line whose data holds a value ``depth`` deep (the line's object is level 1)."""
    brackets = depth - 3  # the line's object, its data, and the value in the innermost list
    return (
        b'{"seq":0,"type":"io","kind":"","turn":null,"duration_s":null,"data":{"a":'
        + b"[" * brackets
        + b"0"
        + b"]" * brackets
        + b"}}"
    )


def _parses(raw: bytes) -> bool:
    try:
        RECORD.validator.validate_json(raw)
    except ValidationError:
        return False
    return True


@functools.cache
def _problems() -> tuple[str, ...]:
    return tuple(fast_path_problems())


def fast_path_problems() -> list[str]:
    """Why the fast path would not give what pydantic gives (empty: it does). Checked once a
    process: if the models change (a new field, a validator, a private attribute), the fast
    path turns itself off rather than give something else."""
    problems = []
    for cls, fields in SHAPES.items():
        name = cls.__name__
        if tuple(cls.model_fields) != fields:
            problems.append(f"{name}: fields {tuple(cls.model_fields)}, expected {fields}")
        if cls.model_config.get("extra") != "forbid":
            problems.append(f"{name}: extra fields are not forbidden")
        if cls.__private_attributes__:
            problems.append(f"{name}: has private attributes")
        if cls.model_post_init is not BaseModel.model_post_init:
            problems.append(f"{name}: has model_post_init")
        decorators = cls.__pydantic_decorators__
        validators = {
            **decorators.validators,
            **decorators.field_validators,
            **decorators.root_validators,
            **decorators.model_validators,
        }
        if cls is AcceptInputArgs:  # its one validator turns a plain string into a message
            validators.pop("_text_is_user_message", None)
        if validators:
            problems.append(f"{name}: has validators {sorted(validators)}")
    if not _parses(_nested_io(_MAX_DEPTH)) or _parses(_nested_io(_MAX_DEPTH + 1)):
        problems.append(f"pydantic's JSON parser does not read values {_MAX_DEPTH} deep at most")
    if msgspec.json.decode(str(_BIG_INT).encode()) != _BIG_INT:
        problems.append("msgspec reads integers beyond 64 bits inexactly (pydantic does not)")
    for struct, model in STRUCTS:
        config = struct.__struct_config__
        read = {*struct.__struct_fields__, *([config.tag_field] if config.tag else [])}
        if read != set(SHAPES[model]) or not config.forbid_unknown_fields:
            problems.append(f"{struct.__name__}: does not read {model.__name__}'s fields")
    return problems


def _policy_reader() -> Callable[[msgspec.Raw], MachinePolicy | None]:
    """``policy_of(text)``: the policy a step line's ``policy`` text holds (None: pydantic does
    not accept it); the previous step's object when the text is the same, or when the policy is
    equal (written another way)."""
    validate_policy = MachinePolicy.__pydantic_validator__.validate_json
    last_json: msgspec.Raw | None = None
    last: MachinePolicy | None = None

    def policy_of(policy_json: msgspec.Raw) -> MachinePolicy | None:
        nonlocal last_json, last
        if policy_json != last_json:
            try:  # pydantic's own JSON validation: the record field's validator
                policy = validate_policy(bytes(policy_json))
            except ValidationError:
                return None
            if policy != last:  # else the same, written another way
                last = policy
            last_json = policy_json
        return last

    return policy_of


def make_batch_decoder() -> BatchDecoder | None:
    """A fresh fast-path decoder (it remembers the last step's policy), or None when the fast
    path is off (``fast_path_problems``); see the module doc.

    ``take(lines, start, seq, out)`` reads ``lines[start:]``, the line at ``start`` having
    ``seq``: while it is sure of a line, it appends the line's replay form to ``out`` (what
    ``TraceReader.replay_batches`` gives: ``None`` for an ``io`` line, a ``StepLine``, a
    ``FeedLine``). It returns the index of the first line it leaves to pydantic (``len(lines)``
    when it took them all). One call takes a run of lines: Python calls are much of the cost."""
    if _problems():  # checked once a process
        return None
    decode = LINE.decode
    not_read = (msgspec.DecodeError, RecursionError)  # msgspec's depth limit: RecursionError
    policy_of = _policy_reader()
    arg_reader = ARG_READERS.get

    def take(lines: list[bytes], start: int, seq: int, out: list[Any]) -> int:
        append = out.append
        seq -= start  # line i has seq + i
        for i in range(start, len(lines)):
            raw = lines[i]
            try:
                line = decode(raw)
            except not_read:
                return i
            if line.seq != seq + i or (len(raw) > _SHORT and not _nesting_ok(raw)):
                return i
            kind = type(line)
            if kind is IoStruct:
                if not (raw.isascii() or _utf8(raw)):  # its data was skipped, not checked
                    return i
                append(None)
            elif kind is FeedStruct:
                name = line.name
                reader = arg_reader(name)
                if reader is None:
                    return i
                decode_args, values = reader
                try:
                    args = decode_args(line.args)
                except not_read:
                    return i
                append(
                    _new_tuple(
                        FeedLine,
                        (name, values(args), line.args, line.digest, line.scrubbed, line.brain),
                    )
                )
            else:
                policy = policy_of(line.policy)
                if policy is None:
                    return i
                append(_new_tuple(StepLine, (policy, line.step)))
        return len(lines)

    return take


#: ``view(raw, seq)``: see ``make_view_decoder``.
ViewDecoder = Callable[[bytes, int], View | None]

_VIEW_LINE: Final = msgspec.json.Decoder(IoDataStruct | StepStruct | FeedStruct)


def make_view_decoder() -> ViewDecoder | None:
    """A fresh decoder of lines into driver-level replay's views (``loopctl_sim.trace.views``;
    it remembers the last step's policy), or None when the fast path is off.

    ``view(raw, seq)`` is the view of the line ``raw`` that should have ``seq``, or None when
    the decoder is not sure of it (any other shape, kind or seq, a nesting pydantic may not
    read): the reader then validates the line with pydantic. Unlike machine replay's path it
    decodes an ``io`` line's data (the replay reads the model's answers from it), which checks
    its text too."""
    if _problems():  # checked once a process
        return None
    decode = _VIEW_LINE.decode
    not_read = (msgspec.DecodeError, RecursionError)
    policy_of = _policy_reader()
    arg_reader = ARG_READERS.get

    def view(raw: bytes, seq: int) -> View | None:
        try:
            line = decode(raw)
        except not_read:
            return None
        if line.seq != seq or (len(raw) > _SHORT and not _nesting_ok(raw)):
            return None
        kind = type(line)
        if kind is IoDataStruct:
            return _new_tuple(
                IoView, (seq, line.kind, line.turn, line.data, line.scrubbed, raw, "io")
            )
        if kind is FeedStruct:
            name = line.name
            reader = arg_reader(name)
            if reader is None:
                return None
            try:
                args = reader[0](line.args)
            except not_read:
                return None
            return _new_tuple(
                FeedView,
                (seq, name, line.digest, line.scrubbed, args, line.args, raw, "feed", line.brain),
            )
        policy = policy_of(line.policy)
        if policy is None:
            return None
        return _new_tuple(StepView, (seq, policy, line.step, line.scrubbed, raw, "step"))

    return view
