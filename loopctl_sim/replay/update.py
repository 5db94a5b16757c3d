"""Approving a change on purpose: a trace re-recorded with the agent's live results.

``update_trace(trace, agent)`` runs the user's agent again on the trace's inputs, as snapshot
testing re-records a snapshot (syrupy's ``--snapshot-update``). The model is the one thing that
cannot run again, so its answers are kept from the old trace while the agent's requests still
match the recorded ones (the same digest); where one no longer matches, the update stops and
names the record that needs a real model (``force=True`` answers it with the recorded reply).

Runs cancelled, injected into or crashed by the world are not updated: those events came from
outside the agent, and the new run could not place them. A run that ended by an exception is
updated when the agent raises the same one again. The new trace replaces the old one only once
whole (``trace.files.temporary_beside``): an update that fails or is killed leaves it as it was.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections import deque
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopctl.api import ApiError, ModelRequest, StreamEvent, Usage, reply_events
from loopctl.core import (
    AcceptInput,
    Cancel,
    CompactionNoop,
    CompactionResult,
    CompactReason,
    Inject,
    LoopError,
    Message,
    ToolCall,
    ToolResult,
    ToolResults,
)
from loopctl.observe import IoEvent
from loopctl.tools import NextTool
from loopctl_sim.replay.answers import OwnModel, own_model, tools_live
from loopctl_sim.replay.explain import request_explanation
from loopctl_sim.sim import no_sleep
from loopctl_sim.sim.agent import AgentFactory, build_agent, load_agent
from loopctl_sim.trace import (
    EndRecord,
    HeaderRecord,
    IoRecord,
    RunError,
    TraceReader,
    TraceRecorder,
)
from loopctl_sim.trace.files import replace_with, temporary_beside
from loopctl_sim.trace.requests import RecordedContexts


class NeedsModel(BaseException):
    """The agent's request differs from the trace's: only a real model can answer it. A
    ``BaseException``, so that the driver's recovery (a broken stream becomes a provider error;
    a failing tool middleware an error result) does not swallow it."""

    def __init__(self, line: int, message: str, details: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.line = line
        self.message = message
        self.details = list(details)


@dataclass
class UpdateResult:
    """What an update did: ``ok`` when the trace was re-recorded."""

    path: str
    ok: bool
    message: str
    details: list[str] = field(default_factory=list)
    records_before: int = 0
    records_after: int = 0
    forced: int = 0  # requests answered although they differ (force=True)

    def summary(self) -> str:
        return "\n".join([self.message, *(f"  {d}" for d in self.details)])


@dataclass
class _Recorded:
    """What the old trace holds for the update: the runs' inputs, every model request with its
    attempts, the tool results by call id, the compactions in order."""

    inputs: list[Message] = field(default_factory=list)
    requests: deque[tuple[int, IoRecord, list[IoRecord]]] = field(default_factory=deque)
    results: dict[str, ToolResult] = field(default_factory=dict)
    compactions: deque[list[Message] | None] = field(default_factory=deque)
    records: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    unplaceable: str | None = None
    created: str | None = None  # the first header's time, which the new trace keeps
    #: the exception that ended the trace's last run, if one escaped it
    raised: RunError | None = None


def _read(path: str) -> _Recorded:
    recorded = _Recorded()
    started = False
    for line, rec in TraceReader(path).numbered():
        recorded.records += 1
        if isinstance(rec, HeaderRecord):
            if rec.snapshot is not None and rec.snapshot.started:
                recorded.unplaceable = f"line {line}: the recorded run crashed and was resumed"
            if not recorded.metadata:
                recorded.metadata = dict(rec.metadata)
            if recorded.created is None:
                recorded.created = rec.created
            started = False
        elif isinstance(rec, IoRecord):
            if rec.kind == "model_request":
                recorded.requests.append((line, rec, []))
            elif rec.kind in ("model_reply", "model_error") and recorded.requests:
                recorded.requests[-1][2].append(rec)
        elif rec.type == "feed":
            feed = rec.args
            if isinstance(feed, AcceptInput) and not started:
                input = feed.input  # a trace holds a message (a text is read as the user's)
                recorded.inputs.append(input if isinstance(input, Message) else Message.user(input))
                started = True
            elif isinstance(feed, ToolResults):
                for r in feed.message.tool_results:
                    recorded.results[r.call_id] = r
            elif isinstance(feed, CompactionResult):
                recorded.compactions.append(list(feed.compacted))
            elif isinstance(feed, CompactionNoop):
                recorded.compactions.append(None)
            elif isinstance(feed, Cancel | Inject) and recorded.unplaceable is None:
                recorded.unplaceable = f"line {line}: the recorded run was given {feed.name}()"
        elif isinstance(rec, EndRecord):
            recorded.raised = rec.error
    return recorded


class _KeptTimes(TraceRecorder):
    """The new trace's recorder: a model attempt answered from the old trace keeps the old
    trace's duration (the update answers it at once; the model took that long)."""

    kept: float | None = None

    def io(self, event: IoEvent) -> None:
        if event.kind in ("model_reply", "model_error") and self.kept is not None:
            event = dataclasses.replace(event, duration_s=self.kept)
            self.kept = None
        super().io(event)


@dataclass(eq=False)
class _UpdateClient:
    """Answers each request with the recorded one's attempts, while the requests match. It names
    the recorded request's provider, and its model unless the agent's own client names another
    (``own_model``: then the request differs, and needs a real model)."""

    recorded: _Recorded
    recorder: _KeptTimes
    force: bool
    own: OwnModel | None = None
    forced: int = 0
    contexts: RecordedContexts = field(default_factory=RecordedContexts)
    attempts: Iterator[IoRecord] = field(default_factory=lambda: iter(()))
    turn: int | None = None

    def _recorded(self, field: str) -> str | None:
        """``field`` of the recorded context of the next request."""
        requests = self.recorded.requests
        return self.contexts.named(field, requests[0][1].data if requests else None)

    @property
    def model(self) -> str | None:
        recorded = self._recorded("model")
        own = self.own() if self.own is not None and recorded is not None else None
        return recorded if own is None else own

    @property
    def provider(self) -> str | None:
        return self._recorded("provider")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if request.turn != self.turn:
            self.turn = request.turn
            self.attempts = iter(self._match(request))
        attempt = next(self.attempts, None)
        if attempt is None:
            raise NeedsModel(
                0, f"turn {request.turn}: the agent called the model again where the trace did not"
            )
        self.recorder.kept = attempt.duration_s
        if attempt.kind == "model_error":
            raise ApiError(LoopError.model_validate(attempt.data.get("error") or {}))
        message = Message.model_validate(attempt.data["message"])
        usage = Usage.model_validate(attempt.data.get("usage") or {})
        stop = attempt.data.get("stop_reason")
        for event in reply_events(message, usage, stop if isinstance(stop, str) else None):
            yield event

    def _match(self, request: ModelRequest) -> list[IoRecord]:
        requests = self.recorded.requests
        if not requests:
            raise NeedsModel(0, f"turn {request.turn}: the trace has no more model answers")
        line, rec, attempts = requests.popleft()
        context = self.contexts.follow(rec.data)
        live = self.recorder.last_request
        if live is not None and rec.data.get("digest") not in (None, live.digest):
            if not self.force:
                message, details = request_explanation(
                    request.turn, context, live.context, rec.data, live.data
                )
                raise NeedsModel(line, message, details)
            self.forced += 1
        return attempts


def update_trace(
    path: str | os.PathLike[str],
    agent: str | AgentFactory,
    *,
    tools: str = "live",
    compactor: str = "live",
    force: bool = False,
    cwd: str | os.PathLike[str] | None = None,
) -> UpdateResult:
    """Re-record the trace at ``path`` with the agent's live results (see the module doc)."""
    factory = load_agent(agent, cwd=cwd)
    target = Path(path)
    recorded = _read(os.fspath(target))
    result = UpdateResult(os.fspath(target), False, "", records_before=recorded.records)
    if recorded.unplaceable is not None:
        result.message = (
            f"cannot update {target}: {recorded.unplaceable}; re-record the run instead"
        )
        return result
    # written beside the trace, which it replaces once whole; a killed update's file is swept
    # by the next one, and so is a fixed-name ".updating" file left beside the trace
    target.with_name(target.name + ".updating").unlink(missing_ok=True)
    fresh = Path(temporary_beside(target))
    recorder = _KeptTimes(fresh, metadata=dict(recorded.metadata), created=recorded.created)
    client = _UpdateClient(recorded, recorder, force, own_model(factory, recorded.metadata))
    scrub = recorder.writer.scrubber.text
    try:
        raised = asyncio.run(_rerun(factory, recorded, client, recorder, tools, compactor))
    except NeedsModel as needs:
        recorder.close()
        fresh.unlink(missing_ok=True)
        where = f" (the trace's request on line {needs.line})" if needs.line else ""
        result.message = scrub(
            f"cannot update {target}: {needs.message}{where}: this record needs a real model. "
            "Re-record the run against the model, or update with --force to keep the "
            "recorded answer"
        )
        result.details = [scrub(d) for d in needs.details]
        return result
    except BaseException:
        recorder.close()
        fresh.unlink(missing_ok=True)
        raise
    recorder.close()
    if raised is not None:  # out of the agent's run: it stands if the trace's did too
        live = RunError(type=type(raised).__name__, message=scrub(RunError.of(raised).message))
        if live != recorded.raised:
            fresh.unlink(missing_ok=True)
            was = f"raised {recorded.raised}" if recorded.raised is not None else "did not"
            result.message = scrub(
                f"cannot update {target}: the agent raised {live} out of the run (the trace's "
                f"run {was}); the trace is left as it was"
            )
            return result
    replace_with(fresh, target)
    result.ok = True
    result.forced = client.forced
    result.records_after = sum(1 for _ in TraceReader(target))
    forced = f"; {client.forced} request(s) differed and kept the recorded answer" if force else ""
    result.message = (
        f"updated {target}: {result.records_after} records (was {result.records_before}){forced}"
    )
    return result


async def _rerun(
    factory: AgentFactory,
    recorded: _Recorded,
    client: _UpdateClient,
    recorder: TraceRecorder,
    tools: str,
    compactor: str,
) -> Exception | None:
    """Run the agent on the recorded inputs; the exception that escaped a run, if one did
    (rather than the update's setup)."""
    loop = build_agent(factory, client=client, observers=[recorder])
    live = tools_live(tools, loop.registry.names())
    # which tools ran live and which answered from the old trace, for whoever reads the new one
    recorder.metadata["tool_modes"] = {
        name: "live" if live(name) else "recorded" for name in loop.registry.names()
    }

    async def answer(call: ToolCall, next_tool: NextTool) -> ToolResult:
        if live(call.name):
            return await next_tool(call)
        found = recorded.results.get(call.id)
        if found is None:
            raise NeedsModel(0, f"tool call {call.id} ({call.name}) has no recorded result")
        return found

    changes: dict[str, Any] = {"middleware": [*loop.middleware, answer], "sleep": no_sleep}
    if compactor == "recorded":
        changes["compactor"] = _QueuedCompactor(recorded.compactions)
    loop = loop.replace(**changes)
    for text in recorded.inputs:
        try:
            await loop.run(text)
        except Exception as exc:
            return exc
    return None


@dataclass(eq=False)
class _QueuedCompactor:
    compactions: deque[list[Message] | None]

    async def compact(
        self, messages: Sequence[Message], reason: CompactReason
    ) -> list[Message] | None:
        if not self.compactions:
            raise NeedsModel(0, "the agent compacted more often than the trace")
        return self.compactions.popleft()
