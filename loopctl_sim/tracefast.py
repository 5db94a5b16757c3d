"""Machine replay's fast path through a trace: lines parsed by ``orjson``, only what the brain
is handed built.

Validating a line with pydantic (``RECORD.validator.validate_json``) costs about 4-6 µs, most of
it building a dozen small models through the discriminated unions; machine-level replay reads
every line, so that alone would cap it near 200,000 records/s before the brain does any work.
``orjson`` parses a line in about a third of that time, and the lines a writer produces have
one canonical shape: every field present, each value of exactly its JSON type. A decoder
(``make_decoder``, used by ``TraceReader.replay_records``) recognises that shape and gives the
line's replay form without building records: an ``io`` line is checked and answered
``IO_SEEN`` (its data is never used); a feed becomes a ``FeedLine`` holding the machine
method's arguments (the messages built as pydantic builds them: equal, same field order and
``model_fields_set``; no record or argument model, at about 0.6 µs an object even unvalidated);
a step becomes a ``StepLine`` holding the policy and the step's checked JSON data, which
``step_matches`` compares with the brain's answer exactly as pydantic's ``==`` would.

It is a fast path, never a second validator: a decoder answers ``None`` whenever it is not
sure (any other shape, type, key set or record kind, a ``seq`` other than the expected one, a
float that may be an integer ``orjson`` could not read exactly), and the reader then validates
the line with pydantic exactly as before. So every accepted trace replays from the same data
and every rejected one fails with the same ``TraceFormatError``. Headers, end records,
``compact`` and ``done`` steps and ``fail`` feeds (rare: a few a run) always take the pydantic
path, and so does everything read as full records (``TraceReader.numbered``): pydantic builds
full records faster than Python could.

The policy of a step record is almost always the one of the step before: a step whose policy
dict equals the previous one reuses that ``MachinePolicy`` object. Equal dicts may differ in
number types (``1`` and ``1.0`` and ``true``), but pydantic turns each of those into the same
field value, so the reused policy is still the one it would build.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from loopctl.core import CallLLM, CallTools, MachinePolicy, Message, TextPart, ToolCall, ToolResult
from loopctl_sim.feeds import (
    AcceptInputArgs,
    CompactionNoopArgs,
    CompactionResultArgs,
    InjectArgs,
    ModelResponseArgs,
    NoArgs,
    SetContextTokensArgs,
    ToolResultsArgs,
)
from loopctl_sim.trace import _FEED_RECORDS, IO_SEEN, FeedLine, IoRecord, StepLine, StepRecord

__all__ = ["Decoder", "fast_path_problems", "make_decoder", "step_matches"]


#: ``decode(raw_line, expected_seq)``: the line's replay form, or ``None`` (use pydantic).
Decoder = Callable[[bytes, int], Any]

_M = TypeVar("_M", bound=BaseModel)

_new = object.__new__
_new_tuple = tuple.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


#: Every class whose shape the fast path relies on, with its fields in order: the messages and
#: parts it builds; the steps ``step_matches`` compares; the feed arguments (their fields, in
#: order, are the machine method's arguments); the records whose lines it checks.
_SHAPES: Final[dict[type[BaseModel], tuple[str, ...]]] = {
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
    IoRecord: ("seq", "type", "kind", "turn", "data", "duration_s"),
    StepRecord: ("seq", "type", "policy", "step"),
    **{
        cls: ("seq", "type", "digest", "scrubbed", "name", "args") for cls in _FEED_RECORDS.values()
    },
}


#: One fields set per class, shared by its instances: pydantic copies it before any change
#: (``model_copy``), and frozen models never change it in place.
_FIELDS_SET: Final = {cls: set(fields) for cls, fields in _SHAPES.items()}


def _build(cls: type[_M], values: dict[str, Any]) -> _M:
    """An instance of ``cls`` with exactly these (already checked) field values, in field order.

    What pydantic-core builds too, minus validation: the fields set is every field (the fast
    path only accepts lines that give them all), no extra, no private attributes."""
    obj = _new(cls)
    _set_dict(obj, values)
    _set_fields(obj, _FIELDS_SET[cls])
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


#: ``orjson`` reads integers beyond 64 bits as floats (pydantic keeps them exact): a float this
#: large in an ``Any`` value may be one of those, so such a line takes the pydantic path.
_BIG: Final = 2.0**63


def _plain(value: Any) -> bool:
    """True when ``value`` (JSON data) holds no float that could be a misread big integer."""
    kind = type(value)
    if kind is dict:
        return all(_plain(v) for v in value.values())
    if kind is list:
        return all(_plain(v) for v in value)
    if kind is float:
        return bool(-_BIG < value < _BIG)
    return True


def _plain_dict(value: Any) -> bool:
    """``value`` is a JSON object fit for a ``dict[str, Any]`` field (see ``_plain``)."""
    if type(value) is not dict:
        return False
    for v in value.values():
        kind = type(v)
        if (kind is float or kind is dict or kind is list) and not _plain(v):
            return False
    return True


# --- messages ---------------------------------------------------------------------------------

_ROLES: Final = frozenset({"system", "user", "assistant"})


def _tool_call_ok(c: Any) -> bool:
    """``c`` is the JSON data of a ``ToolCall``, every field given (see ``_tool_call``)."""
    return (
        type(c) is dict
        and len(c) == 4
        and c.get("kind") == "tool_call"
        and type(c.get("id")) is str
        and type(c.get("name")) is str
        and _plain_dict(c.get("arguments"))
    )


def _message(m: Any) -> Message | None:
    """The ``Message`` of JSON data with every field given, or None.

    One function for the message and its parts, each built in place: a feed of every turn
    carries a message, and Python calls are much of the cost here."""
    if type(m) is not dict or len(m) != 2:
        return None
    role, parts = m.get("role"), m.get("parts")
    if type(role) is not str or role not in _ROLES or type(parts) is not list:
        return None
    built = []
    for p in parts:
        if type(p) is not dict:
            return None
        kind = p.get("kind")
        if kind == "text":
            text = p.get("text")
            if len(p) != 2 or type(text) is not str:
                return None
            cls: type[BaseModel] = TextPart
            values: dict[str, Any] = {"kind": "text", "text": text}
        elif kind == "tool_call":
            if not _tool_call_ok(p):
                return None
            cls = ToolCall
            values = {
                "kind": "tool_call",
                "id": p["id"],
                "name": p["name"],
                "arguments": p["arguments"],
            }
        elif kind == "tool_result":
            call_id, name, content = p.get("call_id"), p.get("name"), p.get("content")
            is_error = p.get("is_error")
            if not (
                len(p) == 5
                and type(call_id) is str
                and type(name) is str
                and type(content) is str
                and type(is_error) is bool
            ):
                return None
            cls = ToolResult
            values = {
                "kind": "tool_result",
                "call_id": call_id,
                "name": name,
                "content": content,
                "is_error": is_error,
            }
        else:
            return None
        part = _new(cls)  # _build, inlined
        _set_dict(part, values)
        _set_fields(part, _FIELDS_SET[cls])
        _set_extra(part, None)
        _set_private(part, None)
        built.append(part)
    return _build(Message, {"role": role, "parts": tuple(built)})


def _messages(items: Any) -> tuple[Message, ...] | None:
    if type(items) is not list:
        return None
    built = []
    for m in items:
        message = _message(m)
        if message is None:
            return None
        built.append(message)
    return tuple(built)


# --- feed arguments ---------------------------------------------------------------------------
# Per feed: its arguments' values in field order (which is also the order the machine method
# of the same name takes them), or None. ``fail`` (a LoopError) is not here.

_Values = tuple[Any, ...] | None


def _accept_input(a: dict[str, Any]) -> _Values:
    # A plain string input is made a user message by a validator: leave that to pydantic.
    message = _message(a.get("input")) if len(a) == 1 else None
    return None if message is None else (message,)


def _model_response(a: dict[str, Any]) -> _Values:
    tokens = a.get("context_tokens")
    if len(a) != 2 or type(tokens) is not int:
        return None
    message = _message(a.get("response"))
    return None if message is None else (message, tokens)


def _one_message(a: dict[str, Any]) -> _Values:
    message = _message(a.get("message")) if len(a) == 1 else None
    return None if message is None else (message,)


def _compaction_result(a: dict[str, Any]) -> _Values:
    before, after = a.get("before"), a.get("after")
    if len(a) != 3 or type(before) is not int or type(after) is not int:
        return None
    compacted = _messages(a.get("compacted"))
    return None if compacted is None else (compacted, before, after)


def _compaction_noop(a: dict[str, Any]) -> _Values:
    before, after = a.get("before"), a.get("after")
    if len(a) != 2 or type(before) is not int or type(after) is not int:
        return None
    return (before, after)


def _set_context_tokens(a: dict[str, Any]) -> _Values:
    n = a.get("n")
    return (n,) if len(a) == 1 and type(n) is int else None


def _no_args(a: dict[str, Any]) -> _Values:
    return None if a else ()


_ARG_VALUES: Final[dict[str, Callable[[dict[str, Any]], _Values]]] = {
    "accept_input": _accept_input,
    "model_response": _model_response,
    "tool_results": _one_message,
    "compaction_result": _compaction_result,
    "compaction_noop": _compaction_noop,
    "set_context_tokens": _set_context_tokens,
    "inject": _one_message,
    "cancel": _no_args,
    "commit_pending": _no_args,
    "discard_pending": _no_args,
}


# --- records ----------------------------------------------------------------------------------


def _feed(d: dict[str, Any]) -> FeedLine | None:
    if len(d) != 6:
        return None
    digest, scrubbed, name, args = d.get("digest"), d.get("scrubbed"), d.get("name"), d.get("args")
    if type(digest) is not str or type(scrubbed) is not bool or type(args) is not dict:
        return None
    if type(name) is not str or (values_of := _ARG_VALUES.get(name)) is None:
        return None
    values = values_of(args)
    if values is None:
        return None
    feed: FeedLine = _new_tuple(FeedLine, (name, values, args, digest, scrubbed))
    return feed


def _step_data(d: Any) -> dict[str, Any] | None:
    """``d`` if it is the JSON data of a ``call_llm`` or ``call_tools`` step, every field given."""
    if type(d) is not dict or type(d.get("turn")) is not int:
        return None
    kind = d.get("kind")
    if kind == "call_llm":
        return d if len(d) == 2 else None
    if kind == "call_tools":
        calls = d.get("calls")
        if len(d) != 3 or type(calls) is not list:
            return None
        for c in calls:
            if not _tool_call_ok(c):
                return None
        return d
    return None


def step_matches(actual: object, data: dict[str, Any]) -> bool:
    """``actual == step``, where ``step`` is what pydantic builds from ``data`` (checked data of
    a ``call_llm`` or ``call_tools`` step), without building it.

    Pydantic compares two models by type, private attributes, extra fields and ``__dict__``;
    these classes have neither private attributes nor extra fields (``fast_path_problems``),
    and checked data holds exactly the fields, so type and field values decide."""
    cls = type(actual)
    if cls is CallLLM:
        return actual.__dict__ == data
    if cls is not CallTools or data["kind"] != "call_tools":
        return False
    fields = actual.__dict__
    if fields["turn"] != data["turn"]:
        return False
    calls = fields["calls"]
    for call in calls:
        if type(call) is not ToolCall:
            return False
    same: bool = [call.__dict__ for call in calls] == data["calls"]
    return same


@functools.cache
def _problems() -> tuple[str, ...]:
    return tuple(fast_path_problems())


def fast_path_problems() -> list[str]:
    """Why the fast path would not give what pydantic gives (empty: it does). Checked once a
    process: if the models change (a new field, a validator, a private attribute), the fast
    path turns itself off rather than give something else."""
    problems = []
    for cls, fields in _SHAPES.items():
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
    return problems


def _never(raw: bytes, expected_seq: int) -> None:
    return None


def make_decoder() -> Decoder:
    """A fresh fast-path decoder (it remembers the last step's policy); see the module doc.

    It answers what ``TraceReader.replay_records`` yields for a line: a ``StepLine``, a
    ``FeedLine``, ``IO_SEEN`` for an io record (checked, never built), or ``None``."""
    if _problems():  # checked once a process
        return _never
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    validate_policy = MachinePolicy.__pydantic_validator__.validate_json
    last_policy_data: Any = None
    last_policy: MachinePolicy | None = None

    def policy_of(data: Any) -> MachinePolicy | None:
        nonlocal last_policy_data, last_policy
        if type(data) is not dict:
            return None
        if data == last_policy_data:
            return last_policy
        if not _plain(data):
            return None
        try:  # as JSON, so that pydantic's JSON-mode rules apply exactly
            policy: MachinePolicy = validate_policy(orjson.dumps(data))
        except ValidationError:
            return None
        last_policy_data, last_policy = data, policy
        return policy

    def decode(raw: bytes, expected_seq: int) -> Any:
        try:
            d = loads(raw)
        except decode_error:
            return None
        if type(d) is not dict:
            return None
        seq = d.get("seq")
        if seq != expected_seq or type(seq) is not int:
            return None
        kind = d.get("type")
        if kind == "io":
            # The shape of an IoRecord, every field given, checked exactly; its data is any
            # JSON object, never used by machine replay.
            turn, duration = d.get("turn"), d.get("duration_s")
            if (
                len(d) == 6
                and type(d.get("kind")) is str
                and type(d.get("data")) is dict
                and (turn is None or type(turn) is int)
                # a float beyond 2**53 may be a big integer orjson rounded another way
                and (duration is None or (type(duration) is float and -1e15 < duration < 1e15))
            ):
                return IO_SEEN
            return None
        if kind == "feed":
            return _feed(d)
        if kind == "step":
            if len(d) != 4:
                return None
            policy = policy_of(d.get("policy"))
            step = None if policy is None else _step_data(d.get("step"))
            if step is None:
                return None
            # the step as data: step_matches() compares the brain's answer with it
            return _new_tuple(StepLine, (policy, step))
        return None

    return decode
