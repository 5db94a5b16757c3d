"""Fork a recorded run at any step: replay its prefix against the agent as it stands, then branch
(docs/testing.md, "fork").

The prefix is replayed as ``replay --agent`` replays it; one that no longer replays is refused
(``ForkDiverged``) before anything is written: the branch would start from a state today's agent
cannot reach. The brain at the branch point is then rebuilt (``resume_point``) and the run goes
on live with ``client``, as ``loopctl-sim resume`` continues a trace. The new trace holds the
prefix, then a header whose ``fork`` metadata names the parent, its ancestors, the ``Edits`` and
the settings in force (``fork_edits``): replay reads it as a resume after a kill.

A branch point is a step that asks the model, runs tools or compacts, or a feed that leaves the
brain started and not terminal; io records sit inside a model call or a tool wave and are
refused with the nearest valid points named (``ForkPointError``).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from loopctl.api import ApiClient, ModelRequest, StreamEvent, Usage, reply_events
from loopctl.core import Message, ToolResult
from loopctl.driver import RunResult
from loopctl_sim.errors import SimError
from loopctl_sim.replay.continuation import ResumeResult, going_on
from loopctl_sim.replay.driver import replay_agent
from loopctl_sim.replay.fork_edits import FORK_KEY, fork_metadata, trace_sha256
from loopctl_sim.replay.report import Divergence, ReplayResult
from loopctl_sim.replay.resume import recorded_result, resume_point
from loopctl_sim.sim.agent import AgentFactory, load_agent
from loopctl_sim.trace import (
    STDIN,
    BrainSummary,
    HeaderRecord,
    IoRecord,
    Record,
    StepRecord,
    TraceReader,
    TraceWriter,
    lines_of,
    open_for_reading,
)

#: Feeds after which the run cannot go on (the brain is finished or the run was stopped).
_FINISHING = frozenset({"cancel", "fail", "commit_pending", "discard_pending"})
_STEP_WORDS = {"call_llm": "call the model", "call_tools": "run tools", "compact": "compact"}


class ForkError(ValueError, SimError):
    """An edit or argument the fork cannot take (a call id the wave does not hold, a reply
    edit away from a model call); nothing is written."""


class ForkPointError(ForkError):
    """The branch point does not exist or cannot be one; ``nearest`` are the valid points
    around it."""

    def __init__(self, message: str, nearest: list[BranchPoint]) -> None:
        named = "; ".join(p.describe() for p in nearest) or "none (no run to branch from)"
        super().__init__(f"{message}; nearest valid branch points: {named}")
        self.nearest = nearest


class ForkDiverged(SimError):
    """The prefix no longer replays against the agent: ``divergence`` is its first difference
    (the ``Divergence`` every replay reports), ``result`` the prefix's replay, as ``replay
    --agent`` reports it. Nothing was written."""

    def __init__(self, result: ReplayResult) -> None:
        assert result.divergence is not None
        super().__init__(result.divergence.report(result.path))
        self.result = result
        self.divergence: Divergence = result.divergence


@dataclass(frozen=True)
class BranchPoint:
    """A record the run can be forked after: its ``seq``, line, kind and the brain's state."""

    seq: int
    line: int
    kind: str  # a step's kind or a feed's name
    state: str  # the brain's state after the record
    turn: int | None = None
    calls: tuple[str, ...] = ()  # the call ids of a call_tools step

    def describe(self) -> str:
        if self.kind in _STEP_WORDS:
            turn = "" if self.turn is None else f"turn {self.turn}: "
            return f"seq {self.seq} ({turn}{_STEP_WORDS[self.kind]})"
        return f"seq {self.seq} (after {self.kind})"


@dataclass(frozen=True)
class Edits:
    """What changes at the branch point; see the module docstring."""

    inject: str | None = None
    tool_results: Mapping[str, str | ToolResult] = field(default_factory=dict)
    reply: str | Message | None = None
    max_turns: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def listed(self, point: BranchPoint) -> list[dict[str, Any]]:
        """The edits as the fork header lists them."""
        out: list[dict[str, Any]] = []
        if self.inject is not None:
            out.append({"kind": "inject", "text": self.inject})
        for call_id, value in self.tool_results.items():
            content = value.content if isinstance(value, ToolResult) else value
            out.append({"kind": "tool_result", "call_id": call_id, "content": content})
        if self.reply is not None:
            text = self.reply if isinstance(self.reply, str) else self.reply.text
            out.append({"kind": "reply", "turn": point.turn, "text": text})
        if self.max_turns is not None:
            out.append({"kind": "policy", "max_turns": self.max_turns})
        if self.options:
            out.append({"kind": "options", "options": dict(self.options)})
        return out


@dataclass
class ForkResult:
    """A fork: where it branched, the prefix's replay, the new run's result and trace."""

    path: str
    parent: dict[str, Any]
    point: BranchPoint
    prefix: ReplayResult
    result: RunResult
    edits: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"forked {self.parent['path']} at {self.point.describe()}: prefix of "
            f"{self.prefix.records} records replayed; {len(self.edits)} edit(s); the run went on "
            f"to {self.result.outcome.kind}; written to {self.path}"
        )


def _records(path: str) -> list[tuple[int, Record]]:
    if path == STDIN:
        raise ForkError("a fork names its parent by its file: give the trace's path, not -")
    return list(TraceReader(path).numbered())


def branch_point(
    trace: str | os.PathLike[str],
    *,
    at: int | None = None,
    turn: int | None = None,
    edits: Edits | None = None,
) -> BranchPoint:
    """The branch point ``at`` (a seq) or of ``turn`` with ``edits`` checked against it, as
    ``fork`` chooses it; raises ``ForkError`` (``ForkPointError``) as ``fork`` would."""
    edits = edits or Edits()
    point = _choose(_records(os.fspath(trace)), at, turn, edits)
    _check_edits(point, edits)
    return point


def branch_points(trace: str | os.PathLike[str]) -> list[BranchPoint]:
    """Every valid branch point of the trace, in order."""
    return [p for p in _classified(_records(os.fspath(trace))) if isinstance(p, BranchPoint)]


def _classified(records: list[tuple[int, Record]]) -> Iterator[BranchPoint | tuple[int, str]]:
    """Each record as a ``BranchPoint``, or ``(seq, why it is none)``."""
    inside = ""  # what the io records after the last brain record are inside of
    for line, rec in records:
        if isinstance(rec, IoRecord):
            yield rec.seq, f"it is {inside or 'an io record, not a point the brain stood at'}"
            continue
        inside = ""
        if isinstance(rec, StepRecord):
            kind, turn = rec.step.kind, getattr(rec.step, "turn", None)
            if kind == "call_llm":
                inside = "inside a model call (mid-stream)"
            elif kind == "call_tools":
                inside = "inside a tool wave (mid-wave)"
            if kind in _STEP_WORDS:
                calls = tuple(c.id for c in getattr(rec.step, "calls", ()))
                awaits = {"call_llm": "awaiting_model", "call_tools": "awaiting_tools"}
                yield BranchPoint(rec.seq, line, kind, awaits.get(kind, kind), turn, calls)
            else:
                yield rec.seq, "the brain is done there (nothing to go on with)"
        elif rec.type == "feed":
            name, brain = str(getattr(rec, "name", "")), getattr(rec, "brain", None)
            state = brain.state if isinstance(brain, BrainSummary) else "unknown"
            if name in _FINISHING or state == "terminal":
                yield rec.seq, f"the run is finished after {name}"
            else:
                yield BranchPoint(rec.seq, line, name, state)
        else:
            yield rec.seq, "it is a run's header" if rec.type == "header" else "the run ended there"


def _choose(
    records: list[tuple[int, Record]], at: int | None, turn: int | None, edits: Edits
) -> BranchPoint:
    """The branch point ``at`` (a seq) or of ``turn``, checked; see the module docstring."""
    classified = list(_classified(records))
    points = [p for p in classified if isinstance(p, BranchPoint)]
    if (at is None) == (turn is None):
        raise ForkError("give the branch point: a record's seq (at) or a turn")
    if turn is not None:
        return _of_turn(points, turn, edits)
    assert at is not None
    for item in classified:
        if isinstance(item, BranchPoint) and item.seq == at:
            return item
        if not isinstance(item, BranchPoint) and item[0] == at:
            raise ForkPointError(f"seq {at} cannot be a branch point: {item[1]}", _near(points, at))
    last = records[-1][1].seq if records else -1
    raise ForkPointError(f"seq {at} is not in the trace (its seqs: 0 to {last})", _near(points, at))


def _of_turn(points: list[BranchPoint], turn: int, edits: Edits) -> BranchPoint:
    """Turn ``turn``'s branch point: its tool wave when a tool result is edited, its model call
    when the reply is, else where the brain stands right before that call (a new turn's start,
    where a message can be injected)."""
    kind = "call_tools" if edits.tool_results else "call_llm"
    found = [i for i, p in enumerate(points) if p.kind == kind and p.turn == turn]
    if not found:
        turns = sorted({p.turn for p in points if p.kind == kind and p.turn is not None})
        raise ForkError(
            f"turn {turn}: the trace has no {_STEP_WORDS[kind]!r} step of that turn "
            f"(its turns that have one: {', '.join(map(str, turns)) or 'none'})"
        )
    if kind == "call_tools" or edits.reply is not None:
        return points[found[0]]
    before = [p for p in points[: found[0]] if p.state == "start"]
    if not before:
        raise ForkError(f"turn {turn}: the trace holds no point right before its model call")
    return before[-1]


def _near(points: list[BranchPoint], at: int) -> list[BranchPoint]:
    before = [p for p in points if p.seq < at][-1:]
    after = [p for p in points if p.seq > at][:1]
    return before + after


def _check_edits(point: BranchPoint, edits: Edits) -> None:
    if edits.tool_results:
        if point.kind != "call_tools":
            raise ForkError(
                f"a tool result is replaced at a call_tools step; {point.describe()} is not one"
            )
        unknown = sorted(set(edits.tool_results) - set(point.calls))
        if unknown:
            raise ForkError(
                f"call id(s) {', '.join(unknown)} are not in the wave at seq {point.seq} "
                f"(its calls: {', '.join(point.calls)})"
            )
    if edits.reply is not None and point.kind != "call_llm":
        raise ForkError(f"a model reply is replaced at a call_llm step; {point.describe()} is not")
    if edits.inject is not None and point.state != "start" and point.kind != "call_tools":
        raise ForkError(
            f"a message is injected between turns (the brain at its start, or after a tool "
            f"wave: a call_tools step); at {point.describe()} the brain is {point.state}"
        )
    if edits.max_turns is not None and edits.max_turns < 0:
        raise ForkError(f"max_turns must be 0 or more, not {edits.max_turns}")


def _wave_results(records: list[tuple[int, Record]], point: BranchPoint) -> dict[str, ToolResult]:
    """The results the parent recorded for the wave of a ``call_tools`` branch point: its
    ``tool_results`` feed's, else the ``tool_result`` io records the trace has (cut mid-wave)."""
    found: dict[str, ToolResult] = {}
    for _, rec in records:
        if rec.seq <= point.seq:
            continue
        if isinstance(rec, IoRecord) and rec.kind == "tool_result":
            found[str(rec.data.get("id"))] = recorded_result(rec.data)
        elif rec.type == "feed" and getattr(rec, "name", None) == "tool_results":
            message: Message = rec.args.message  # type: ignore[union-attr]
            return {r.call_id: r for r in message.tool_results}
        elif not isinstance(rec, IoRecord):
            break
    return found


def _lineage(records: list[tuple[int, Record]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The parent's own ancestors and fork settings (its last fork header's), if it is a fork."""
    ancestors: list[dict[str, Any]] = []
    settings: dict[str, Any] = {}
    for _, rec in records:
        if isinstance(rec, HeaderRecord) and (meta := fork_metadata(rec)) is not None:
            ancestors = [dict(a) for a in meta.get("ancestors") or ()]
            settings = dict(meta.get("settings") or {})
    return ancestors, settings


class _ReplyFirst:
    """The client that goes on with the run, its first answer replaced by the edited reply."""

    def __init__(self, client: ApiClient, reply: Message) -> None:
        self.client = client
        self.reply: Message | None = reply
        self.model = getattr(client, "model", None)
        self.provider = getattr(client, "provider", None)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        reply, self.reply = self.reply, None
        if reply is not None:
            for event in reply_events(reply, Usage(), "stop"):
                yield event
            return
        async for event in self.client.stream(request):
            yield event


def fork(
    trace: str | os.PathLike[str],
    *,
    agent: str | AgentFactory,
    client: ApiClient,
    out: str | os.PathLike[str],
    at: int | None = None,
    turn: int | None = None,
    edits: Edits | None = None,
    tools: str = "recorded",
    cwd: str | os.PathLike[str] | None = None,
) -> ForkResult:
    """Fork the run in ``trace`` (see the module docstring) into ``out``. Raises ``ForkError``
    (``ForkPointError``) for a bad branch point or edit, ``ForkDiverged`` when the prefix no
    longer replays, ``TraceFormatError`` for an unreadable trace, ``AgentError`` for an agent
    that cannot be built; in each case nothing is written."""
    source, target = os.fspath(trace), os.fspath(out)
    edits = edits or Edits()
    records = _records(source)
    point = _choose(records, at, turn, edits)
    _check_edits(point, edits)
    factory = load_agent(agent, cwd=cwd)
    with open_for_reading(source) as f:
        prefix = [
            raw.decode("utf-8") for _, raw in zip(range(point.line), lines_of(f), strict=False)
        ]
    with tempfile.TemporaryDirectory() as folder:
        temp = os.path.join(folder, "prefix.jsonl")
        with open(temp, "w", encoding="utf-8") as copy:
            copy.writelines(prefix)
        replayed = replay_agent(temp, factory, tools=tools, cwd=cwd)
        if not replayed.ok:
            replayed.path = source
            raise ForkDiverged(replayed)
        resumed_at = resume_point(temp)
    ancestors, settings = _lineage(records)
    parent = {"path": source, "sha256": trace_sha256(source), "at": point.seq}
    if edits.max_turns is not None:
        settings["max_turns"] = edits.max_turns
    if edits.options:
        settings["options"] = {**settings.get("options", {}), **edits.options}
    listed = edits.listed(point)
    meta = {"parent": parent, "ancestors": [*ancestors, parent], "edits": listed}
    if settings:
        meta["settings"] = settings
    if point.kind == "call_tools":
        resumed_at.results = {**_wave_results(records, point), **resumed_at.results}
        for call_id, value in edits.tool_results.items():
            name = resumed_at.results.get(call_id)
            resumed_at.results[call_id] = (
                value
                if isinstance(value, ToolResult)
                else ToolResult(call_id=call_id, name=name.name if name else "", content=value)
            )
    live: ApiClient = client
    if edits.reply is not None:
        reply = edits.reply if isinstance(edits.reply, Message) else Message.assistant(edits.reply)
        live = _ReplyFirst(client, reply)

    async def go() -> RunResult:
        writer = TraceWriter(target)
        try:
            writer.copy_lines(prefix)
            going = ResumeResult(resumed_at, None, target)
            loop, recorder = await going_on(
                factory, live, writer, {FORK_KEY: meta}, going, settings
            )
            if edits.inject is not None:
                message = Message.user(edits.inject)
                loop.machine.inject(message)
                recorder.feed("inject", {"message": message}, loop.machine)
            return await loop.run(None)
        finally:
            writer.close()

    result = asyncio.run(go())
    return ForkResult(target, parent, point, replayed, result, listed, notes=resumed_at.notes)
