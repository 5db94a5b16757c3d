"""The world as the trace recorded it: the model's answers, and the tools and compactions that are
not run live. All three read the trace through the one ``Cursor``, never past the next brain
record.

``ReplayClient`` answers every model attempt with the trace's reply (streamed as a provider
streams it, or whole when nobody watches the stream) or its error; whether an error is retried
is the agent's own retry policy (a changed one is a divergence) or, replaying the built-in
driver, the trace's. ``RecordedTools`` is the innermost tool middleware, so the user's hooks and
middleware still run above it. An attempt or a call the trace never answered was cut off by the
recorded run's cancel: the replayed run is cancelled at the same point.
"""

from __future__ import annotations

import asyncio
import functools
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
from loopctl_sim.trace.records import IoRecord

_ATTEMPT = frozenset({"model_reply", "model_error"})

#: The model the agent's own client names, asked when first needed (``own_model``).
OwnModel = Callable[[], str | None]

# Usage's validator itself: ``model_validate`` is a Python wrapper around it (about 5,000
# instructions a call), and every recorded reply's usage is read through it.
_validate_usage = Usage.__pydantic_validator__.validate_python


class ReplayClient:
    """An ``ApiClient`` answering from the trace (see the module docstring).

    It names the model as the agent's own client would (``model``, when the trace names one
    too), so an agent that now asks for another model diverges at its first request; the
    provider is the trace's unless given: where the model was reached is the recording's
    endpoint, not a decision of the agent's code."""

    def __init__(
        self,
        cursor: Cursor,
        checker: Checker,
        *,
        trace_retries: bool,
        model: str | OwnModel | None = None,
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
        """``field`` of the recorded context the next request is checked against (read by the
        driver right before it reports the request)."""
        item = self.cursor.peek()
        record = None if item is None else item[1]
        if type(record) is IoRecord and record.kind == "model_request":
            return self.checker.contexts.named(field, record.data)
        return self.checker.contexts.named(field, None)

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
            retry = record.data.get("should_retry")
            if self.trace_retries:  # the recorded run retried it: a retry record comes next
                after = self.cursor.peek()
                retry = after is not None and after[1].type == "io" and after[1].kind == "retry"
            raise ApiError(error, should_retry=retry if isinstance(retry, bool) else None)
        data = record.data
        message = Message.model_validate(data["message"])
        recorded_usage = data.get("usage") or {}
        if recorded_usage != self._usage[0]:  # mostly the same as the reply before: kept
            self._usage = (recorded_usage, _validate_usage(recorded_usage))
        stop = data.get("stop_reason")
        return message, self._usage[1], stop if isinstance(stop, str) else None


def own_model(
    factory: Callable[..., object], metadata: Mapping[str, object] | None = None
) -> OwnModel | None:
    """The model the agent's own client names, asked once when first needed: the factory called
    as the user's code calls it (no harness client; nothing is sent), None when it cannot build
    its loop so (no API key: the trace's model is then assumed). None instead of asking when the
    model was named on the command line (``"model_from": "--model"`` in the header): the
    recorded model is then the one an unchanged agent asks for."""
    if metadata is not None and metadata.get("model_from") == "--model":
        return None

    @functools.cache
    def asked() -> str | None:
        try:
            loop = factory()
        except Exception:  # the user's factory, without what it needs outside the harness
            return None
        model = getattr(getattr(loop, "client", None), "model", None)
        return model if isinstance(model, str) else None

    return asked


def header_metadata(cursor: Cursor) -> Mapping[str, object]:
    """The metadata of the trace's first header (``cursor`` not yet moved), else empty."""
    item = cursor.peek()
    metadata = getattr(item[1], "metadata", None) if item is not None else None
    return metadata if isinstance(metadata, Mapping) else {}


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
        item = self.cursor.next_brain()
        cancelled = item is not None and item[1].type == "feed" and item[1].name == "cancel"
        if not cancelled and self.live(call.name):
            return await next_tool(call)
        results = None if cancelled else self._recorded()
        found = None if results is None else results.get(call.id)
        if found is None:  # the recorded run was cancelled while this call ran
            await _cancelled(self.cancel)
        return found


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
