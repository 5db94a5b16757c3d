"""A session: user turn, run, user turn, run... of the user's agent, with a simulated user
(``sim.users``), until the user is done or something escapes the agent; every run goes on from
the brain the run before left (salvaged history included).

One trace holds the whole session: every run's header after the first continues the previous
brain and carries the user's turn in its metadata (``"session": {...}``), so ``recorded_turns``
gives the turns back and the session replays offline. The same world (seeds, faults) writes
the same trace.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from loopctl.api import ModelRequest
from loopctl.core import LoopMachine, MachinePolicy, MachineStep, Message, Start
from loopctl.driver import BareLoop, RunResult, StepPoint
from loopctl.observe import IoEvent, LoopObserver
from loopctl.testing import ExploreConfig
from loopctl_sim.sim.agent import AgentFactory, agent_name
from loopctl_sim.sim.agent_run import (
    AgentRun,
    AgentRunError,
    AgentWorld,
    FaultMarks,
    ToolModes,
    run_agent_async,
)
from loopctl_sim.sim.body import agent_failure, synchronous
from loopctl_sim.sim.faults import Fault
from loopctl_sim.sim.layers import chain_before_step
from loopctl_sim.sim.users import RecordedUser, SimUser, UserTurn
from loopctl_sim.trace import HeaderRecord, TraceRecorder, TraceWriter, read_trace

#: A fixed creation time: the same session writes the same trace.
CREATED = "2026-12-01T00:00:00+00:00"


def session_seed(explore: int, run: int) -> int:
    """The exploring model's seed for run ``run`` (0-based) of a session explored from
    ``explore``: each run draws its own replies, all of them from the one seed."""
    return explore * 1_009 + run


@dataclass
class SessionWorld:
    """A session of the user's agent: see the module docstring. ``scripts``: the model's
    replies run by run (a shrunk reproducer's), instead of exploring; ``faults``: each run's
    faults, by run index (0-based); ``max_runs`` bounds a user who never stops."""

    agent: str | AgentFactory
    user: SimUser
    explore: int = 0
    explore_config: ExploreConfig = field(default_factory=ExploreConfig)
    scripts: Sequence[Sequence[Message]] | None = None
    faults: Mapping[int, Sequence[Fault]] = field(default_factory=dict)
    tools: ToolModes = "live"
    exempt: frozenset[str] = frozenset()
    max_steps: int = 10_000
    max_runs: int = 50
    name: str = "session"
    metadata: dict[str, Any] = field(default_factory=dict)
    cwd: str | None = None

    def run_world(self, index: int, text: str) -> AgentWorld:
        """Run ``index`` of the session, on the user's ``text``."""
        script = None
        if self.scripts is not None:
            script = list(self.scripts[index]) if index < len(self.scripts) else []
        return AgentWorld(
            agent=self.agent,
            input=text,
            explore=None if script is not None else session_seed(self.explore, index),
            explore_config=self.explore_config,
            script=script,
            faults=list(self.faults.get(index, ())),
            tools=self.tools,
            exempt=self.exempt,
            max_steps=self.max_steps,
            name=f"{self.name} run {index + 1}",
            cwd=self.cwd,
        )


@dataclass
class SessionRun:
    """What a session did: its turns, its runs, and what each run saw and left."""

    turns: list[UserTurn] = field(default_factory=list)
    runs: list[AgentRun] = field(default_factory=list)
    #: the history the brain held after each run (a cancelled run's salvaged prefix included)
    histories: list[tuple[Message, ...]] = field(default_factory=list)
    #: the messages of each run's first model request (None: the run asked the model nothing)
    first_requests: list[tuple[Message, ...] | None] = field(default_factory=list)
    #: the runs the user cancelled, and the interjections the brain took (run index each)
    cancelled: list[int] = field(default_factory=list)
    interjected: list[int] = field(default_factory=list)
    #: what escaped the agent, ending the session (its last run is ``error.run``)
    error: AgentRunError | None = None
    trace: str | None = None
    machine: LoopMachine | None = None

    @property
    def scripts(self) -> list[list[Message]]:
        """The model's replies run by run: with the turns, the session's reproducer."""
        runs = [*self.runs, *([self.error.run] if self.error is not None else [])]
        return [list(r.script) for r in runs]

    def summary(self) -> str:
        outcomes = [getattr(r.outcome, "kind", r.outcome) for r in self.runs]
        end = f"; {self.error}" if self.error is not None else ""
        digest = self.machine.digest() if self.machine is not None else "-"
        return f"{len(self.turns)} user turns, runs {outcomes}{end}; digest {digest}"


class _UserSide(LoopObserver):
    """The user during one run: cancels before step ``cancel_at``, sends ``interject`` once a
    tool wave starts (the brain takes it at its next ``Start``); and notes the run's first
    model request, so a check can see what the run was shown."""

    def __init__(self, turn: UserTurn) -> None:
        self.turn = turn
        self.steps = 0
        self.arrived = False
        self.delivered = False
        self.cancelled = False
        self.first_request: tuple[Message, ...] | None = None

    def before_step(self, point: StepPoint) -> None:
        self.steps += 1
        turn = self.turn
        due = turn.cancel_at is not None and self.steps == turn.cancel_at
        if due and not self.cancelled and not point.machine.is_terminal:
            self.cancelled = True
            point.cancel({"step": self.steps, "by": "user", "reason": "the user cancelled"})
        if self.arrived and not self.delivered and isinstance(point.machine.state, Start):
            assert turn.interject is not None
            self.delivered = True
            point.inject(Message.user(turn.interject))

    def step(self, policy: MachinePolicy, step: MachineStep, machine: LoopMachine) -> None:
        if step.kind == "call_tools" and self.turn.interject is not None:
            self.arrived = True

    def io(self, event: IoEvent) -> None:
        request = event.data.get("request")
        if self.first_request is None and isinstance(request, ModelRequest):
            self.first_request = tuple(request.messages)

    def settle(self, index: int, session: SessionRun | LiveSession, carried: list[str]) -> None:
        """After run ``index``: note a cancel and a taken interjection; one the brain never took
        is carried into the next turn's input."""
        if self.cancelled:
            session.cancelled.append(index)
        if self.delivered:
            session.interjected.append(index)
        elif self.turn.interject is not None:
            carried.append(self.turn.interject)


def _input(carried: list[str], turn: UserTurn) -> str:
    """The next run's input: what came after the last run's tools, then the turn's text."""
    text = "\n\n".join([*carried, turn.text])
    carried.clear()
    return text


async def run_session_async(
    world: SessionWorld, trace: str | os.PathLike[str] | IO[str] | TraceWriter | None = None
) -> SessionRun:
    """Run the session ``world`` describes, into ``trace`` (one file for the whole session;
    ``run_session``: the same outside an event loop). A session killed in its middle is
    finished from its trace (``loopctl_sim.replay.session_resume``), not from here."""
    recorder = None
    if trace is not None:
        recorder = FaultMarks(trace, created=CREATED, record_raised=agent_failure)
    session = SessionRun()
    machine: LoopMachine | None = None
    carried: list[str] = []
    user_name = type(world.user).__name__
    try:
        for index in range(world.max_runs):
            history = tuple(machine.history) if machine is not None else ()
            turn = await world.user.next_turn(history, index)
            if turn is None:
                break
            run_world = world.run_world(index, _input(carried, turn))
            session.turns.append(turn)
            if recorder is not None:
                recorder.metadata = {
                    "agent": agent_name(run_world.agent),
                    "world": world.name,
                    "simulated": True,
                    "level": "agent",
                    **world.metadata,
                    "session": {"run": index + 1, "user": user_name, "turn": turn.to_json()},
                }
            side = _UserSide(turn)
            try:
                run = await run_agent_async(
                    run_world,
                    recorder,
                    machine=machine,
                    created=CREATED,
                    observers=[side],
                    before_step=side.before_step,
                )
            except AgentRunError as exc:
                session.error = exc
                session.machine = exc.run.machine
                session.first_requests.append(side.first_request)
                break
            machine = session.machine = run.machine
            session.runs.append(run)
            session.histories.append(tuple(machine.history))
            session.first_requests.append(side.first_request)
            side.settle(index, session, carried)
    finally:
        if recorder is not None and not isinstance(trace, TraceWriter):
            recorder.close()
    session.trace = None if recorder is None else recorder.writer.path
    return session


run_session = synchronous(run_session_async)


@dataclass
class LiveSession:
    """What ``drive_session`` did: the turns, each run's result, the runs the user cancelled
    and those whose interjection the brain took (run indexes)."""

    turns: list[UserTurn] = field(default_factory=list)
    results: list[RunResult] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    interjected: list[int] = field(default_factory=list)


async def drive_session(
    loop: BareLoop,
    user: SimUser,
    *,
    recorder: TraceRecorder | None = None,
    start: int = 0,
    max_runs: int = 50,
) -> LiveSession:
    """A session on the user's own ``loop`` as it runs in production (its own client):
    ``user``'s turns from turn ``start`` on, each a ``run()`` of the same loop, so whatever the
    agent keeps across runs is kept. ``recorder`` (one of the loop's observers) gets each run's
    user turn into its header's metadata, as ``run_session`` writes it."""
    live = LiveSession()
    observers, hook = loop.observers, loop.before_step
    base = dict(recorder.metadata) if recorder is not None else {}
    carried: list[str] = []
    for index in range(start, start + max_runs):
        turn = await user.next_turn(tuple(loop.machine.history), index)
        if turn is None:
            break
        live.turns.append(turn)
        if recorder is not None:
            entry = {"run": index + 1, "user": type(user).__name__, "turn": turn.to_json()}
            recorder.metadata = {**base, "session": entry}
        side = _UserSide(turn)
        loop.observers = [*observers, side]
        loop.before_step = chain_before_step(hook, side.before_step)
        try:
            live.results.append(await loop.run(_input(carried, turn)))
        finally:
            loop.observers, loop.before_step = observers, hook
        side.settle(index, live, carried)
    return live


def recorded_turns(path: str | os.PathLike[str]) -> list[UserTurn]:
    """The user turns a session's trace holds, in order (its runs' headers' ``session``)."""
    turns: list[UserTurn] = []
    for record in read_trace(path):
        if isinstance(record, HeaderRecord):
            entry = (record.metadata or {}).get("session")
            if isinstance(entry, Mapping) and isinstance(entry.get("turn"), Mapping):
                run = entry.get("run")
                if run == len(turns) + 1:  # a crash's resumed header repeats its run's
                    turns.append(UserTurn.from_json(entry["turn"]))
    return turns


def recorded_user(path: str | os.PathLike[str]) -> RecordedUser:
    """The user of a session's trace, to run the session again offline."""
    return RecordedUser(recorded_turns(path))


def replayed_world(world: SessionWorld, session: SessionRun) -> SessionWorld:
    """``world`` with its user and model fixed to what ``session`` did: the same session again."""
    return dataclasses.replace(world, user=RecordedUser(session.turns), scripts=session.scripts)


def run_at(path: str | os.PathLike[str], line: int) -> str | None:
    """Which run of a trace of several holds ``line`` (1-based), in words: the run's number,
    its header's line and, for a session's, the user's turn. None for a trace of one run, or
    one that cannot be read (the replay that asks has said why)."""
    headers: list[tuple[int, HeaderRecord]] = []
    try:
        for number, record in enumerate(read_trace(path), start=1):
            if isinstance(record, HeaderRecord):
                headers.append((number, record))
    except (OSError, ValueError):
        return None
    if len(headers) < 2:
        return None
    before = [(n, h) for n, h in headers if n <= line]
    if not before:
        return None
    number, header = before[-1]
    entry = (header.metadata or {}).get("session")
    words = f"in run {len(before)} of {len(headers)} (its header at line {number})"
    if isinstance(entry, Mapping) and isinstance(entry.get("turn"), Mapping):
        text = str(entry["turn"].get("text", ""))
        shown = text if len(text) <= 60 else text[:57] + "..."
        kind = entry["turn"].get("kind", "message")
        words += f", user turn {entry.get('run')} ({kind}): {shown!r}"
    return words
