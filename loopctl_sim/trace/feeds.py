"""The feed codec: a feed's arguments as JSON data, and back, and onto a machine.

The driver reports every feed to its observers as ``feed(name, args, machine)`` with these
canonical argument names (the same names the trace's ``feed`` records carry):

=====================  ==========================================================
feed                   args
=====================  ==========================================================
accept_input           ``{"input": Message}`` (a plain string is taken as a user message)
model_response         ``{"response": Message, "context_tokens": int}``
tool_results           ``{"message": Message}``
compaction_result      ``{"compacted": list[Message], "before": int, "after": int}``
compaction_noop        ``{"before": int, "after": int}``
set_context_tokens     ``{"n": int}``
inject                 ``{"message": Message}``
cancel                 ``{}``
fail                   ``{"error": LoopError}``
commit_pending         ``{}``
discard_pending        ``{}``
=====================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from loopctl.core import FEEDS, FeedName, LoopError, LoopMachine, Message
from loopctl_sim.errors import SimError

__all__ = [
    "FEED_ARGS",
    "AcceptInputArgs",
    "CompactionNoopArgs",
    "CompactionResultArgs",
    "FailArgs",
    "FeedArgs",
    "FeedCodecError",
    "FeedName",
    "InjectArgs",
    "ModelResponseArgs",
    "NoArgs",
    "SetContextTokensArgs",
    "ToolResultsArgs",
    "apply_feed",
    "decode_feed_args",
    "encode_feed_args",
    "feed_call",
]


_FROZEN = ConfigDict(frozen=True, extra="forbid")


class FeedCodecError(ValueError, SimError):
    """A feed name or its arguments do not fit the codec."""


class FeedArgs(BaseModel):
    """Base of the per-feed argument models."""

    model_config = _FROZEN


class AcceptInputArgs(FeedArgs):
    input: Message

    @field_validator("input", mode="before")
    @classmethod
    def _text_is_user_message(cls, value: Any) -> Any:
        return Message.user(value) if isinstance(value, str) else value


class ModelResponseArgs(FeedArgs):
    response: Message
    context_tokens: int


class ToolResultsArgs(FeedArgs):
    message: Message


class CompactionResultArgs(FeedArgs):
    compacted: tuple[Message, ...]
    before: int
    after: int


class CompactionNoopArgs(FeedArgs):
    before: int
    after: int


class SetContextTokensArgs(FeedArgs):
    n: int


class InjectArgs(FeedArgs):
    message: Message


class FailArgs(FeedArgs):
    error: LoopError


class NoArgs(FeedArgs):
    """``cancel``, ``commit_pending``, ``discard_pending``."""


FEED_ARGS: Final[dict[str, type[FeedArgs]]] = {
    "accept_input": AcceptInputArgs,
    "model_response": ModelResponseArgs,
    "tool_results": ToolResultsArgs,
    "compaction_result": CompactionResultArgs,
    "compaction_noop": CompactionNoopArgs,
    "set_context_tokens": SetContextTokensArgs,
    "inject": InjectArgs,
    "cancel": NoArgs,
    "fail": FailArgs,
    "commit_pending": NoArgs,
    "discard_pending": NoArgs,
}
assert tuple(FEED_ARGS) == FEEDS, "the codec must cover exactly the brain's feeds"


def _model(name: str) -> type[FeedArgs]:
    try:
        return FEED_ARGS[name]
    except KeyError:
        raise FeedCodecError(f"unknown feed {name!r}; known feeds: {', '.join(FEEDS)}") from None


def decode_feed_args(name: str, data: Mapping[str, Any] | FeedArgs) -> FeedArgs:
    """Typed arguments of feed ``name`` from JSON data (or from the driver's live objects)."""
    model = _model(name)
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "args"
        raise FeedCodecError(f"bad arguments for feed {name!r}: {where}: {first['msg']}") from None


def encode_feed_args(name: str, args: Mapping[str, Any] | FeedArgs) -> dict[str, Any]:
    """The arguments of feed ``name`` as JSON data (messages and errors become dicts)."""
    return decode_feed_args(name, args).model_dump(mode="json")


def feed_call(args: FeedArgs) -> tuple[Any, ...]:
    """The machine method's arguments for a feed's typed arguments: the model's fields, in
    order, are the parameters of the method named like the feed (tests pin it)."""
    return tuple(getattr(args, field) for field in type(args).model_fields)


def apply_feed(machine: LoopMachine, name: str, args: Mapping[str, Any] | FeedArgs) -> None:
    """Give ``machine`` feed ``name`` with ``args`` (data or typed); ``ProtocolError`` passes."""
    getattr(machine, name)(*feed_call(decode_feed_args(name, args)))
