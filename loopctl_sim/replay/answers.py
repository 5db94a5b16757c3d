"""The world as the trace recorded it: the model's answers, and the tools and compactions that are
not run live.

``ReplayClient`` is an ``ApiClient`` whose every attempt gets the trace's: the recorded reply,
streamed as a provider streams it (``loopctl.api.reply_events``), or whole when nobody watches the
stream (``whole_reply``, what the fold of those events gives), or the recorded error. Whether
an error is retried is the agent's own retry policy (agent replay: a changed retry config is a
divergence) or, replaying the built-in driver, the trace's (``trace_retries``).

An attempt the trace has no answer for, where its next brain record is a ``cancel`` feed, was
cut off by the recorded run's cancel: the replayed run is cancelled at the same point.

``RecordedTools`` is the innermost tool middleware: for a tool that is not run live it answers
the call with the result the trace's next ``tool_results`` feed holds, below the user's hooks and
middleware, which still run; a call the trace never answered (the run was cancelled while its
tools ran) cancels the replayed run at the same point. ``RecordedCompactor`` answers a compaction
with the trace's. All three read the trace through the one ``Cursor`` and never past the next
brain record.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import NoReturn

from loopctl.api import (
    ApiError,
    ModelReply,
    ModelRequest,
    StreamEvent,
    Usage,
    folded_reply,
    reply_events,
)
from loopctl.core import (
    CompactionNoop,
    CompactionResult,
    CompactReason,
    Fail,
    LoopError,
    Message,
    ToolCall,
    ToolResult,
    ToolResults,
)
from loopctl.driver import CancelSignal
from loopctl.tools import NextTool
from loopctl_sim.replay.checker import Checker, Killed, header_next
from loopctl_sim.replay.cursor import Cursor
from loopctl_sim.replay.raised import RaisedAsRecorded

__all__ = [
    "OwnModel",
    "RecordedCompactor",
    "RecordedTools",
    "ReplayClient",
    "header_metadata",
    "own_model",
    "tools_live",
]

_ATTEMPT = frozenset({"model_reply", "model_error"})

# The validators themselves: ``model_validate`` is a Python wrapper around them (about 5,000
# instructions a call), and every recorded reply is read through them.
_validate_message = Message.__pydantic_validator__.validate_python
_validate_usage = Usage.__pydantic_validator__.validate_python


class ReplayClient:
    """An ``ApiClient`` answering from the trace; see the module docstring.

    It names the model and provider each request goes to as the agent's own client would: the
    ``model`` given (what the agent's own client names: ``OwnModel``, asked only once a request
    of the trace names a model) when the trace names one too, else the trace's; the
    ``provider`` given, else the trace's (where the model was reached is the recording's
    endpoint, often a base URL from the environment, not a decision of the agent's code). So
    an unchanged agent replays clean against a trace recorded through a provider client, and
    an agent that now asks for another model diverges at its first request ("the request's
    model differs")."""

    def __init__(
        self,
        cursor: Cursor,
        checker: Checker,
        *,
        trace_retries: bool,
        model: str | Callable[[], str | None] | None = None,
        provider: str | None = None,
    ) -> None:
        self.cursor = cursor
        self.checker = checker
        self.trace_retries = trace_retries
        self.own_model = model
        self.own_provider = provider
        self.attempts = 0  # of the current model call
        self._turn: int | None = None
        self.cancel: CancelSignal | None = None  # the replayed run's, set for each run
        self._usage: tuple[object, Usage] = (None, Usage())  # the last recorded usage, read

    @property
    def model(self) -> str | None:
        recorded = self._recorded("model")
        if recorded is None:
            return None
        own = self.own_model() if callable(self.own_model) else self.own_model
        return recorded if own is None else own

    @property
    def provider(self) -> str | None:
        return self.own_provider if self.own_provider is not None else self._recorded("provider")

    def _recorded(self, field: str) -> str | None:
        """``field`` of the recorded context the next request is checked against: the next
        record's, when it is a ``model_request`` that writes its context, else the one in force
        (read by the driver right before it reports the request)."""
        context = self.checker.contexts.context
        item = self.cursor.peek()
        if item is not None and item[1].type == "io" and item[1].kind == "model_request":
            written = item[1].data.get("context")
            if isinstance(written, dict):
                context = written
        value = None if context is None else context.get(field)
        return value if isinstance(value, str) else None

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        message, usage, stop = await self._attempt(request)
        for event in reply_events(message, usage, stop):
            yield event

    async def whole_reply(self, request: ModelRequest) -> ModelReply:
        """The folded ``stream(request)`` without the events (``loopctl.api.WholeReplyClient``):
        a recorded reply was folded when it was recorded, so it is in the fold's form."""
        return folded_reply(*await self._attempt(request))

    async def _attempt(self, request: ModelRequest) -> tuple[Message, Usage, str | None]:
        """This attempt's recorded reply (message, usage, stop reason), or its recorded error
        raised; an attempt the trace does not hold is a divergence (or a cancel, or a kill)."""
        if request.turn != self._turn:
            self._turn, self.attempts = request.turn, 0
        self.attempts += 1
        found = self.cursor.take_io(_ATTEMPT)
        if found is None:
            if self.cursor.peek() is None:
                self.checker.ended()
            if header_next(self.cursor):
                raise Killed  # the recorded driver died during this call; resumed from here
            item = self.cursor.next_brain()
            if item is not None and item[1].type == "feed" and item[1].name == "cancel":
                # The recorded run was cancelled while this attempt streamed (or while it waited
                # to retry): cancel the replayed run at the same point.
                await _cancelled(self.cancel)
            line = item[0] if item is not None else self.cursor.last_read()
            seq = item[1].seq if item is not None else line - 1
            self.checker.fail(
                line,
                seq,
                "request",
                f"turn {request.turn}: the agent called the model {self.attempts} times, the "
                f"trace {self.attempts - 1} (it retried where the trace gave up)",
                None,
                {"attempt": self.attempts},
            )
        _, record = found
        if record.kind == "model_error":
            error = LoopError.model_validate(record.data.get("error") or {})
            retried = _retried_next(self.cursor)
            recorded_retry = record.data.get("should_retry")
            should_retry = (
                retried
                if self.trace_retries
                else (recorded_retry if isinstance(recorded_retry, bool) else None)
            )
            raise ApiError(error, should_retry=should_retry)
        data = record.data
        message = _validate_message(data["message"])
        recorded_usage = data.get("usage") or {}
        if recorded_usage != self._usage[0]:  # mostly the same as the reply before: kept
            self._usage = (recorded_usage, _validate_usage(recorded_usage))
        stop = data.get("stop_reason")
        return message, self._usage[1], stop if isinstance(stop, str) else None


def own_model(
    factory: Callable[..., object], metadata: Mapping[str, object] | None = None
) -> OwnModel | None:
    """The model the agent's own client names, asked when first needed (``OwnModel``); None
    when the trace's header says the model was named on the command line (``loopctl run
    --agent ... --model M`` writes ``"model_from": "--model"``): the factory was given that
    client, so the recorded model is the one an unchanged agent asks for."""
    if metadata is not None and metadata.get("model_from") == "--model":
        return None
    return OwnModel(factory)


def header_metadata(cursor: Cursor) -> Mapping[str, object]:
    """The metadata of the trace's first header (``cursor`` not yet moved), else empty."""
    item = cursor.peek()
    metadata = getattr(item[1], "metadata", None) if item is not None else None
    return metadata if isinstance(metadata, Mapping) else {}


class OwnModel:
    """The model the agent's own client names, asked once and kept: the factory called as the
    user's code calls it (no harness client, no observers) and its loop's ``client.model`` read.
    None when the factory cannot build its loop so (no API key in the environment, a required
    argument): the trace's model is then assumed. Nothing is sent (building a provider client
    opens no connection), and it is asked only for a trace whose requests name a model: a trace
    recorded through a scripted client never calls the factory without its client."""

    def __init__(self, factory: Callable[..., object]) -> None:
        self.factory = factory
        self._asked = False
        self._model: str | None = None

    def __call__(self) -> str | None:
        if not self._asked:
            self._asked = True
            try:
                loop = self.factory()
            except Exception:  # the user's factory, without what it needs outside the harness
                return None
            model = getattr(getattr(loop, "client", None), "model", None)
            self._model = model if isinstance(model, str) else None
        return self._model


def _retried_next(cursor: Cursor) -> bool:
    item = cursor.peek()
    return item is not None and item[1].type == "io" and item[1].kind == "retry"


def tools_live(mode: str, names: Sequence[str] = ()) -> Callable[[str], bool]:
    """Which tools run live for ``--tools MODE``: ``live`` (all), ``recorded`` (none), or
    ``live:a,b`` (those named; the rest answered from the trace). ``names`` are the agent's
    tools, to check a ``live:`` list against."""
    if mode == "live":
        return lambda name: True
    if mode == "recorded":
        return lambda name: False
    if mode.startswith("live:"):
        chosen = {n.strip() for n in mode[5:].split(",") if n.strip()}
        unknown = sorted(chosen - set(names)) if names else []
        if not chosen or unknown:
            what = f"unknown tool(s) {', '.join(unknown)}" if unknown else "no tool named"
            raise ValueError(f"--tools {mode}: {what} (the agent has: {', '.join(names)})")
        return chosen.__contains__
    raise ValueError(f"--tools {mode!r}: expected live, recorded or live:NAME[,NAME...]")


class RecordedTools:
    """The innermost tool middleware of a replay; see the module docstring."""

    def __init__(self, cursor: Cursor, live: Callable[[str], bool]) -> None:
        self.cursor = cursor
        self.live = live
        self.cancel: CancelSignal | None = None  # the replayed run's, set for each run
        self._results: tuple[int, dict[str, ToolResult]] | None = None

    def _recorded(self) -> dict[str, ToolResult] | None:
        """The results the trace's next brain record holds: a ``tool_results`` feed's, by call
        id; None when it is something else (the run was cancelled while its tools ran)."""
        item = self.cursor.next_brain()
        if item is None:
            return None
        line, rec = item
        cached = self._results
        if cached is not None and cached[0] == line:
            return cached[1]
        if rec.type != "feed" or not isinstance(rec.args, ToolResults):
            return None
        results = {r.call_id: r for r in rec.args.message.tool_results}
        self._results = (line, results)
        return results

    async def answer(self, call: ToolCall, next_tool: NextTool) -> ToolResult:
        if header_next(self.cursor):
            raise Killed  # the recorded driver died while its tools ran; resumed from here
        if self._cancelled_here():
            return await self._hang()
        if self.live(call.name):
            return await next_tool(call)
        results = self._recorded()
        found = None if results is None else results.get(call.id)
        if found is None:
            return await self._hang()
        return found

    def _cancelled_here(self) -> bool:
        item = self.cursor.next_brain()
        return item is not None and item[1].type == "feed" and item[1].name == "cancel"

    async def _hang(self) -> ToolResult:
        """The trace has no result: the recorded run was cancelled while this call ran."""
        await _cancelled(self.cancel)


async def _cancelled(cancel: CancelSignal | None) -> NoReturn:
    """Fire the replayed run's cancel signal and wait for it to cut this task off, as the
    recorded run's cancel cut off what it was waiting on."""
    if cancel is not None:
        cancel.cancel()
    await asyncio.Event().wait()
    raise AssertionError("unreachable")  # pragma: no cover


class RecordedCompactor:
    """Answers a compaction with the trace's (the next brain record)."""

    def __init__(self, cursor: Cursor, checker: Checker) -> None:
        self.cursor = cursor
        self.checker = checker

    async def compact(
        self, messages: Sequence[Message], reason: CompactReason
    ) -> list[Message] | None:
        item = self.cursor.next_brain()
        if item is None:
            self.checker.ended()
        line, record = item
        if record.type == "header":
            raise Killed  # the recorded driver died while it compacted; resumed from here
        feed = record.args if record.type == "feed" else None
        if isinstance(feed, CompactionResult):
            return list(feed.compacted)
        if isinstance(feed, CompactionNoop):
            return None
        if isinstance(feed, Fail):
            raise recorded_failure(feed.error.message)
        if record.type == "end" and record.error is not None:
            raise RaisedAsRecorded(record.error)  # its answer made the recorded run raise
        self.checker.fail(
            line,
            record.seq,
            "compaction",
            f"the agent compacted ({reason.value}) where the trace has {record.type}",
            None,
            {"messages": len(messages)},
        )


_FAILED = "the compactor failed: "


def recorded_failure(message: str) -> Exception:
    """The exception that makes the driver word a compactor failure as ``message`` did
    (``the compactor failed: <type>: <text>``)."""
    name, sep, text = message.removeprefix(_FAILED).partition(": ")
    if not message.startswith(_FAILED) or not sep or not name.isidentifier():
        name, text = "RuntimeError", message
    failure: Exception = type(name, (Exception,), {})(text)
    return failure
