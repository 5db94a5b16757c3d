"""The feed codec: a trace's feed record holds the brain's own ``Feed`` (``loopctl.core``), its
arguments written as JSON data under the feed's name, and read back into the same type.

=====================  ==========================================================
feed                   args
=====================  ==========================================================
accept_input           ``{"input": Message}`` (a plain string is taken as a user message)
model_response         ``{"response": Message, "context_tokens": int}``
tool_results           ``{"message": Message, "context_tokens": int}`` (no count: left out)
compaction_result      ``{"compacted": list[Message], "before": int, "after": int}``
compaction_noop        ``{"before": int, "after": int}``
set_context_tokens     ``{"n": int}``
inject                 ``{"message": Message}``
cancel                 ``{}``
fail                   ``{"error": LoopError}``
commit_pending         ``{}``
discard_pending        ``{}``
=====================  ==========================================================

The arguments are the feed type's fields, by name (the names the driver reports to its
observers: ``feed(name, args, machine)``); they are read straight into the feed type (a
``Data``, checked as it is read), so the trace writes no definition of a feed of its own.
Replay hands the decoded feed to ``machine.feed(f)``. A ``tool_results`` without a count (None
keeps the brain's) is written without the key, as trace versions before 4 wrote every one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from loopctl.core import FEED_TYPES, FEEDS, AcceptInput, Feed, Message, ToolResults
from loopctl_sim.errors import SimError


class FeedCodecError(ValueError, SimError):
    """A feed name or its arguments do not fit the codec."""


def _feed_type(name: str) -> type[Feed]:
    try:
        return FEED_TYPES[name]
    except KeyError:
        raise FeedCodecError(f"unknown feed {name!r}; known feeds: {', '.join(FEEDS)}") from None


def user_message_input(feed: Feed) -> Feed:
    """``feed``, with an ``accept_input`` of plain text made the user message it stands for
    (what the brain makes of it, and what a trace holds)."""
    if type(feed) is AcceptInput and isinstance(feed.input, str):
        return AcceptInput(Message.user(feed.input))
    return feed


def written(feed: Feed) -> Feed | dict[str, Any]:
    """What a trace's record holds of ``feed``: the feed (a plain-text input made its user
    message), or, for results without a count, their message alone (the key left out)."""
    if type(feed) is ToolResults and feed.context_tokens is None:
        return {"message": feed.message}
    return user_message_input(feed)


def complaint(exc: ValueError) -> tuple[str, str]:
    """msgspec's complaint split into where and what (``Expected `int`, got `str` - at `$.n```:
    ``n`` and ``Expected `int`, got `str```); where is empty for the whole value, or for a
    complaint not msgspec's."""
    what, _, where = str(exc).partition(" - at `$")
    return where.lstrip(".").rstrip("`"), what


def _bad(name: str, exc: ValueError) -> FeedCodecError:
    """A complaint about a feed's arguments as one that names the feed and the argument."""
    where, what = complaint(exc)
    if what.startswith("Object contains unknown field"):
        field = what.split("`")[1]
        where, what = (f"{where}.{field}" if where else field), "not an argument"
    return FeedCodecError(f"bad arguments for feed {name!r}: {where or 'args'}: {what}")


def read_feed(name: str, text: str | bytes) -> Feed:
    """Feed ``name`` from its arguments' JSON text (a trace's feed record's ``args``)."""
    feed_type = _feed_type(name)
    try:
        return user_message_input(feed_type.read_json(text))
    except ValueError as exc:
        raise _bad(name, exc) from None


def decode_feed(name: str, args: Mapping[str, Any] | Feed) -> Feed:
    """Feed ``name`` from its arguments as JSON data (or the driver's live values, or already a
    feed); ``FeedCodecError`` names what does not fit."""
    feed_type = _feed_type(name)
    if isinstance(args, feed_type):
        return user_message_input(args)
    try:
        return user_message_input(feed_type.read(dict(cast(Mapping[str, Any], args))))
    except ValueError as exc:
        raise _bad(name, exc) from None


def encode_feed(feed: Feed) -> dict[str, Any]:
    """A feed's arguments as JSON data (messages and errors become dicts)."""
    data: dict[str, Any] = feed.model_dump()
    if type(feed) is ToolResults and feed.context_tokens is None:
        del data["context_tokens"]
    return data
