"""Finishing a session whose process died in its middle, from its trace.

A session's trace (``loopctl_sim.sim.session``) holds its runs in order, each header naming the
user's turn. The run a kill cut is finished by ``resume_trace``, then the user (the session's
own: a seeded one writes the same turns again) is asked for the turns after those the trace
holds, each recorded in the same trace, appended. ``replay --agent`` then replays the whole
session.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from loopctl_sim.replay.continuation import ResumeResult, resume_trace
from loopctl_sim.replay.resume import ResumeError, resume_point
from loopctl_sim.sim.agent import AgentFactory, agent_name, build_agent, load_agent
from loopctl_sim.sim.session import LiveSession, drive_session, recorded_turns
from loopctl_sim.sim.users import SimUser
from loopctl_sim.trace import TraceRecorder, TraceWriter, is_gzip_name


@dataclass
class SessionResume:
    """What finishing a session did: the run it finished (None: the trace was cut between
    runs), the turns the trace held, and the runs after them."""

    finished: ResumeResult | None
    turns_before: int
    rest: LiveSession
    trace: str

    def summary(self) -> str:
        first = self.finished.summary() if self.finished is not None else "no run was under way"
        outcomes = [r.outcome.kind for r in self.rest.results]
        return (
            f"{first}; {self.turns_before} user turn(s) in the trace, {len(outcomes)} more run "
            f"now: {outcomes}"
        )


def resume_session(
    path: str | os.PathLike[str],
    agent: str | AgentFactory,
    user: SimUser,
    *,
    cwd: str | os.PathLike[str] | None = None,
) -> SessionResume:
    """Finish the session in the trace at ``path`` (see the module docstring). Raises
    ``TraceFormatError`` for an unreadable trace, ``ResumeError`` when its brain and the engine
    disagree or it is not a session's, ``AgentError`` when the agent cannot be built, and
    ``ValueError`` for a compressed trace (resume it whole with ``loopctl-sim resume``)."""
    source = os.fspath(path)
    if is_gzip_name(source):
        raise ValueError(f"{source}: a session is resumed in a plain trace (not .gz)")
    turns = recorded_turns(source)
    point = resume_point(source)
    if not turns:
        raise ResumeError(source, point.line, "not a session's trace: no run names a user turn")
    finished: ResumeResult | None = None
    machine = point.machine
    if machine.started and not (machine.is_terminal and machine.finalized):
        finished = resume_trace(source, agent, cwd=cwd)
        machine = finished.point.machine
    elif not machine.started:
        raise ResumeError(
            source, point.line, "the trace was cut at a run's header, before its input"
        )
    factory = load_agent(agent, cwd=cwd)
    metadata = {"agent": agent_name(agent)}
    recorder = TraceRecorder(TraceWriter(source, append=True), metadata=metadata)
    try:
        loop = build_agent(factory, observers=[recorder], machine=machine)
        drive = drive_session(loop, user, recorder=recorder, start=len(turns))
        rest = asyncio.run(drive)
    finally:
        recorder.close()
    return SessionResume(finished, len(turns), rest, source)
