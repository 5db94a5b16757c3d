"""Resume a run from its trace: the rebuilt brain in the user's agent, the rest of the run live.

``resume_trace(trace, "mypkg.agent:build")`` rebuilds the brain (``resume_point``), builds the
agent as the factory does today with the brain in it (``machine=``), and runs it to the end,
recording the continuation after a header holding the rebuilt brain (which machine replay checks
against the records before it).

No tool call runs twice. When the trace stops inside an exchange, the calls whose results it holds
are answered with them and only the others are dispatched, through the agent's own hooks and
middleware; the results are fed with the driver's count, in one feed. A trace cut between an
exchange's results and their count (versions before 4) gets the count. A call running when the
process died (started, no result) runs again: the engine's contract asks tools to be idempotent.
A reflector's note after the cut exchange is not redone.

A plain trace is continued in place (a torn last line cut off first); ``out=`` writes the trace's
complete records and the continuation to a new file (stdin needs it); a compressed trace is
written whole to a temporary file that replaces it once the run has ended.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopctl.api import ApiClient
from loopctl.core import Message, ToolResult
from loopctl.driver import BareLoop, CancelSignal, RunResult
from loopctl.tools import dispatch
from loopctl_sim.replay.fork_edits import with_settings
from loopctl_sim.replay.resume import ResumeError, ResumePoint, resume_point
from loopctl_sim.sim.agent import AgentFactory, build_agent, load_agent
from loopctl_sim.sim.body import synchronous
from loopctl_sim.trace import (
    STDIN,
    TraceRecorder,
    TraceWriter,
    end_outcome,
    is_gzip_name,
    lines_of,
    open_for_reading,
)
from loopctl_sim.trace.files import replace_with, temporary_beside


@dataclass
class ResumeResult:
    """What a resume did (``result`` None: the trace's run had ended, nothing to resume)."""

    point: ResumePoint
    result: RunResult | None
    trace: str
    reused: list[str] = field(default_factory=list)
    dispatched: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        p = self.point
        where = f"{p.restored_from} on line {p.checkpoint}, then {p.replayed} records replayed"
        if self.result is None:
            return f"nothing to resume: the run in {p.path} had ended ({where})"
        calls = ""
        if self.reused or self.dispatched:
            calls = (
                f"; {len(self.reused)} recorded results reused, {len(self.dispatched)} calls run"
            )
        head = f"resumed {p.path} from line {p.line} ({where}){calls}"
        return f"{head}: {self.result.outcome.kind}; written to {self.trace}"


async def resume_trace_async(
    path: str | os.PathLike[str],
    agent: str | AgentFactory,
    *,
    out: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    cancel: CancelSignal | None = None,
    client: ApiClient | None = None,
) -> ResumeResult:
    """Resume the last run of the trace at ``path`` with the agent ``module:factory`` (or the
    factory); see the module docstring. ``client`` is given to the factory (or swapped in) as
    ``loopctl run --model`` gives one: the continuation's model calls go to it; ``cancel`` stops
    it as it stops any run (``loopctl-sim resume`` fires it on Ctrl-C). Raises
    ``TraceFormatError`` for an unreadable trace, ``ResumeError`` when there is no run to resume
    or its brain leaves the trace, ``AgentError`` when the agent cannot be built."""
    source = os.fspath(path)
    if source == STDIN and out is None:
        raise ValueError("a trace read from stdin is resumed into a new file: give out=")
    point = resume_point(source)
    machine = point.machine
    if not machine.started:
        raise ResumeError(
            point.path, point.line, "the run never started: its input is not in the trace"
        )
    factory = load_agent(agent, cwd=cwd)
    target, replace = _target(source, out)
    writer = _writer(source, target, in_place=out is None and target == source)
    resumed = ResumeResult(point, None, os.fspath(out) if out is not None else source)
    try:
        if machine.is_terminal and machine.finalized:
            if not point.ended:  # the end record was the one being written
                writer.end(end_outcome(machine), machine.digest())
                resumed.notes.append("the run had ended: its end record was written")
            return resumed
        meta = {"resumed": {"from_line": point.line, "trace": point.path}}
        loop, _ = await going_on(factory, client, writer, meta, resumed)
        resumed.result = await loop.run(None, cancel)
    finally:
        writer.close()
        if replace is not None:
            replace_with(replace, source)
    resumed.notes[:0] = point.notes
    return resumed


#: ``resume_trace_async`` for scripts without an event loop (on the simulators' kept loop).
resume_trace = synchronous(resume_trace_async)


def _target(source: str, out: str | os.PathLike[str] | None) -> tuple[str, str | None]:
    """Where the continuation is written, and the temporary file that replaces ``source``
    afterwards, if any."""
    if out is not None:
        return os.fspath(out), None
    if not is_gzip_name(source):
        return source, None
    temp = temporary_beside(source)  # (a killed resume's is swept by the next one)
    return temp, temp


def _writer(source: str, target: str, *, in_place: bool) -> TraceWriter:
    """A plain trace continued in place, or a new file holding the source's complete records."""
    if in_place:
        return TraceWriter(target, append=True)
    writer = TraceWriter(target)
    with open_for_reading(source) as f:
        writer.copy_lines([raw.decode("utf-8") for raw in lines_of(f) if raw.endswith(b"\n")])
    return writer


async def going_on(
    factory: AgentFactory,
    client: ApiClient | None,
    writer: TraceWriter,
    meta: dict[str, Any],
    resumed: ResumeResult,
    settings: Mapping[str, Any] | None = None,
) -> tuple[BareLoop, TraceRecorder]:
    """The agent around ``resumed.point``'s brain, ready to run on (a resume's, a fork's): its
    continuation recorded after a header holding ``meta``, the exchange the trace stopped in
    finished as the driver would have."""
    point = resumed.point
    recorder = TraceRecorder(writer)
    loop = build_agent(factory, client=client, observers=[recorder], machine=point.machine)
    loop = with_settings(loop, settings)
    recorder.continue_run(loop.machine, meta)
    if point.compact_requested:  # the killed driver still held a manual compaction request
        loop.request_compaction()
    machine = loop.machine
    exchange = machine.exchange
    message: Message | None = point.uncounted
    if exchange is not None and machine.state.kind == "awaiting_tools":
        calls = exchange.dispatch
        missing = [c for c in calls if c.id not in point.results]
        fresh: Sequence[ToolResult] = ()
        if missing:
            fresh = await dispatch(
                missing,
                loop.registry,
                pre_hooks=loop.hooks.pre_tool,
                post_hooks=loop.hooks.post_tool,
                middleware=loop.middleware,
                default_timeout=loop.config.tool_timeout,
                on_event=recorder.io,
                turn=exchange.turn,
            )
        answered = {**point.results, **{r.call_id: r for r in fresh}}
        resumed.reused = [c.id for c in calls if c.id in point.results]
        resumed.dispatched = [c.id for c in missing]
        message = Message.from_results([answered[c.id] for c in calls])
        tokens = machine.context_tokens + loop.estimator.count([message])
        machine.tool_results(message, tokens)
        recorder.feed("tool_results", {"message": message, "context_tokens": tokens}, machine)
    elif message is not None:
        tokens = machine.context_tokens + loop.estimator.count([message])
        machine.set_context_tokens(tokens)
        recorder.feed("set_context_tokens", {"n": tokens}, machine)
    return loop, recorder
