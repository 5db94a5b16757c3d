"""Offline model clients for tests: ``ScriptedClient`` plays a list of replies;
``FunctionClient`` asks a function.

Both stream their replies as real event sequences (text in small deltas, arguments as JSON
fragments), so the driver's fold, middleware and cancel paths run as with a provider, and both
answer ``whole_reply`` (``loopctl.api.WholeReplyClient``). A reply may be a ``LoopError`` (or an
``ApiError``), which fails that call as a provider would: retries can be scripted.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Final, TypeAlias

from loopctl.api import (
    ApiError,
    ModelReply,
    ModelRequest,
    StreamEvent,
    Usage,
    fold_events,
    folded_reply,
)
from loopctl.api import reply_events as api_reply_events
from loopctl.core import LoopError, Message

Reply: TypeAlias = Message | ModelReply | LoopError | ApiError
_NO_USAGE: Final = Usage()


def reply_events(reply: Message | ModelReply, chunk: int | None = 16) -> Iterator[StreamEvent]:
    """The event stream a provider would send for ``reply``, in pieces of ``chunk``
    characters (``loopctl.api.reply_events``; no usage event for a reply without usage)."""
    if isinstance(reply, Message):
        return iter(api_reply_events(reply, None, None, chunk))
    if isinstance(reply, ModelReply):
        usage = None if reply.usage == _NO_USAGE else reply.usage
        return iter(api_reply_events(reply.message, usage, reply.stop_reason, chunk))
    raise TypeError(
        f"a reply is a Message, a ModelReply, a LoopError or an ApiError, not {reply!r}"
    )


def _raise_for(reply: LoopError | ApiError) -> ApiError:
    return reply if isinstance(reply, ApiError) else ApiError(reply)


class _Replies:
    """What the offline clients share: each reply (``_take``) streamed as events in pieces of
    ``chunk`` characters (None: two halves), or answered whole (``WholeReplyClient``)."""

    chunk: int | None = 16

    async def _take(self, request: ModelRequest) -> Message | ModelReply:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        for event in reply_events(await self._take(request), self.chunk):
            yield event

    async def whole_reply(self, request: ModelRequest) -> ModelReply:
        """The folded ``stream(request)``, without the events where the reply is in the fold's
        form (``loopctl.api.folded``)."""
        reply = await self._take(request)
        if type(reply) is Message:
            return folded_reply(reply)
        if isinstance(reply, ModelReply):
            return folded_reply(reply.message, reply.usage, reply.stop_reason)
        return fold_events(reply_events(reply))  # a subclass of Message, or its TypeError


class ScriptedClient(_Replies):
    """Plays ``replies`` in order, one per model call; records every request it receives."""

    def __init__(self, replies: Sequence[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[ModelRequest] = []
        self._next = 0

    @property
    def remaining(self) -> int:
        return len(self.replies) - self._next

    async def _take(self, request: ModelRequest) -> Message | ModelReply:
        """The next reply, used up; a scripted error raised."""
        self.requests.append(request)
        if self._next >= len(self.replies):
            raise ApiError(
                LoopError(
                    kind="internal",
                    message=f"ScriptedClient ran out of replies after {len(self.replies)} calls",
                )
            )
        reply = self.replies[self._next]
        self._next += 1
        if isinstance(reply, LoopError | ApiError):
            raise _raise_for(reply)
        return reply


ReplyFn = Callable[[ModelRequest], Reply | Awaitable[Reply]]


class FunctionClient(_Replies):
    """Asks ``fn(request)`` for each reply (sync or async); records every request."""

    def __init__(self, fn: ReplyFn) -> None:
        self.fn = fn
        self.requests: list[ModelRequest] = []

    async def _take(self, request: ModelRequest) -> Message | ModelReply:
        """``fn``'s reply; an error it returns raised."""
        self.requests.append(request)
        reply = self.fn(request)
        if type(reply) is Message:  # the usual answer: neither awaited nor raised
            return reply
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, LoopError | ApiError):
            raise _raise_for(reply)
        return reply
