"""Driver-level replay: a trace re-run through a real ``BareLoop``, the built-in one or the user's.

``replay_agent(trace, "mypkg.agent:build")`` runs the user's agent as its factory builds it today:
the model's answers (every recorded attempt) come from the trace, while the user's tools, hooks,
middleware and compactor run live (``tools="recorded"`` or ``"live:a,b"`` answers all or the
other tools from the trace). ``replay_driver(trace)`` runs loopctl's built-in body, everything
answered from the trace. A ``Checker`` compares every step, feed, model request and end with the
trace in one pass and stops at the first difference. Recorded cancels and injections are given
through ``before_step`` where the trace has them (unless the agent has its own hook, which then
runs live). A header in the middle of a run is a resume after a kill: the replayed run stops there
(``Killed``), the brain goes on in a fresh body, and the feeds the resume made before its first
step are given as recorded. A header that continues the previous run (v3) goes on in the same
loop, so what the agent keeps across runs is replayed as it was. A trace that ends under a run
replays up to its last record: no divergence.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence
from typing import Any, Final

from loopctl.core import (
    AcceptInput,
    Cancel,
    Inject,
    LoopMachine,
    MachinePolicy,
    Message,
    to_jsonable,
)
from loopctl.driver import BareLoop, CancelSignal, StepPoint
from loopctl.observe import LoopObserver
from loopctl_sim.replay.answers import (
    RecordedCompactor,
    RecordedTools,
    ReplayClient,
    header_metadata,
    own_model,
    tools_live,
)
from loopctl_sim.replay.checker import Checker, Incomplete, Killed, brain_view
from loopctl_sim.replay.cursor import Cursor
from loopctl_sim.replay.explain import NOT_CONTINUED, brain_divergence
from loopctl_sim.replay.fork_edits import fork_metadata, with_settings
from loopctl_sim.replay.machine import summary_divergence
from loopctl_sim.replay.mcp import mcp_replay
from loopctl_sim.replay.raised import RaisedAsRecorded, raised
from loopctl_sim.replay.report import Diverged, ReplayResult
from loopctl_sim.replay.resume import header_brain
from loopctl_sim.sim import Crash, configs_for, no_sleep, stub_tools
from loopctl_sim.sim.agent import AgentFactory, agent_name, build_agent, load_agent
from loopctl_sim.trace import (
    BrainSummary,
    ContinuationError,
    FeedRecord,
    HeaderRecord,
    StepRecord,
    TraceFormatError,
    TraceReader,
    default_scrubber,
)

#: Builds the replayed run's loop for a brain (the body shared by every run of the trace).
Body = Callable[[LoopMachine], BareLoop]


def replay_driver(path: str | os.PathLike[str]) -> ReplayResult:
    """Replay the trace at ``path`` through loopctl's own ``BareLoop``, everything answered from
    the trace (see the module docstring)."""
    return _replay(path, None, "recorded", (), None)


def replay_agent(
    path: str | os.PathLike[str],
    agent: str | AgentFactory,
    *,
    tools: str = "live",
    compactor: str = "live",
    observers: Sequence[LoopObserver] = (),
    cwd: str | os.PathLike[str] | None = None,
) -> ReplayResult:
    """Replay the trace at ``path`` against the user's agent (``module:factory`` or the factory
    itself); ``tools``: ``live``, ``recorded`` or ``live:a,b``; ``compactor``: ``live`` or
    ``recorded``; ``observers`` are added to the replayed loop (a recorder, to re-record)."""
    if compactor not in ("live", "recorded"):
        raise ValueError(f"compactor {compactor!r}: expected live or recorded")
    name = agent_name(agent)
    # MCP servers are stood in for from the import on (an agent may list its tools there)
    with mcp_replay(path, tools_live(tools)) as notes:
        factory = load_agent(agent, cwd=cwd)
        result = _replay(path, (name, factory, compactor == "recorded"), tools, observers, cwd)
    result.notes.extend(notes)  # which MCP server and tool changed, where one did
    return result


def _replay(
    path: str | os.PathLike[str],
    agent: tuple[str, AgentFactory, bool] | None,
    tools: str,
    observers: Sequence[LoopObserver],
    cwd: str | os.PathLike[str] | None,
) -> ReplayResult:
    reader = TraceReader(path)
    cursor = Cursor(reader)
    result = ReplayResult(path=reader.path, agent=None if agent is None else agent[0])
    first = cursor.peek()  # reads the first line: an unreadable trace raises here
    if first is None:
        return result
    scrubber = default_scrubber()
    header = first[1]
    key = header.scrub_key if isinstance(header, HeaderRecord) else None
    same_key = key is not None and key == scrubber.key_id
    checker = Checker(
        cursor, result, scrubber, fingerprints=same_key, own_context=agent is not None
    )
    if key is not None and scrubber.key_id is None:
        result.notes.append(
            "the trace's secrets were scrubbed with a key and no LOOPCTL_SCRUB_KEY is set: they "
            "are compared by where they stand; set the key that recorded the trace to compare "
            "them by their fingerprints"
        )
    elif key is not None and key != scrubber.key_id:
        result.notes.append(
            "the trace's secrets were scrubbed with another key (LOOPCTL_SCRUB_KEY): they are "
            "compared by where they stand, not by their fingerprints"
        )
    try:
        with contextlib.suppress(Diverged):
            asyncio.run(_runs(cursor, checker, result, agent, tools, observers, reader.path))
    finally:
        result.records = cursor.line
        result.io = cursor.io
        result.warnings = reader.warnings
    return result


async def _runs(
    cursor: Cursor,
    checker: Checker,
    result: ReplayResult,
    agent: tuple[str, AgentFactory, bool] | None,
    tools: str,
    observers: Sequence[LoopObserver],
    path: str,
) -> None:
    recorded_tools = RecordedTools(cursor, lambda name: False)
    body = _body(cursor, checker, recorded_tools, agent, tools, observers, path)
    loop: BareLoop | None = None
    killed = False  # the last run stopped where the recorded driver was killed
    while (item := cursor.next_brain()) is not None:
        line, found = item
        if found.type != "header":
            why = "the driver stopped before the trace did"
            checker.fail(line, found.seq, "header", why, brain_view(found), None)
        cursor.take_brain()  # the header, and the io records before it (a crash)
        checker.new_run()
        machine = _starting_brain(checker, result, line, found, loop, killed, path)
        killed = False
        input = None if machine.started else _input_of(cursor)
        if not machine.started and input is None:
            result.notes.append(
                f"the trace ends after the header on line {line}: the run never started"
            )
            result.machine = machine  # the brain as the header has it, as machine replay says
            result.final_digest = machine.digest()
            return
        if machine.started:
            _finishing(cursor, checker, machine)
        if loop is None or not _continues_run(found):
            loop = body(machine)
            forked = fork_metadata(found)  # a fork's branch point: the settings it changed
            if forked is not None:
                loop = with_settings(loop, forked.get("settings"))
        cancel = CancelSignal()
        recorded_tools.cancel = cancel
        if isinstance(loop.client, ReplayClient):
            loop.client.cancel = cancel
        try:
            await loop.run(input, cancel)
        except Crash:
            pass
        except Killed:
            killed = True
        except BaseExceptionGroup as group:  # a wave of tools, one of them stopped by the kill
            if group.subgroup(lambda e: isinstance(e, Killed)) is None:
                raise
            killed = True
        except TraceFormatError:  # the trace itself is damaged: refused with its line
            raise
        except Exception as exc:  # the agent's own code raised out of the run
            raised(cursor, checker, loop.machine, exc)
        except RaisedAsRecorded as again:  # a part answered from the trace raised as it did
            raised(cursor, checker, loop.machine, again.error)
        except Incomplete:
            result.notes.append(
                f"the trace ends at line {cursor.last_read()} under a run (a crash or an "
                "interrupt while recording): replayed up to its last record"
            )
            break
    if loop is not None:
        result.machine = loop.machine
        result.final_digest = loop.machine.digest()


def _continues_run(header: HeaderRecord) -> bool:
    """Whether ``header`` continues the previous run (v3): the recorder saw that run end, so the
    session went on in the same loop, and so does the replay (a hook's count, a tool's cache)."""
    return isinstance(header, HeaderRecord) and header.continues is not None


def _starting_brain(
    checker: Checker,
    result: ReplayResult,
    line: int,
    header: HeaderRecord,
    loop: BareLoop | None,
    killed: bool,
    path: str,
) -> LoopMachine:
    """The brain the run after ``header`` starts from, checked against the replay's."""
    previous = None if loop is None else loop.machine
    if header.scrubbed:  # its brain holds placeholders: the run's digests cannot be reached
        checker.scrubbed_from(line)
    if _continues_run(header):
        result.runs += 1  # (v3) no snapshot: the replayed run's next_run()
        return _continued(checker, line, header, None if killed else previous)
    if header.snapshot is not None and header.snapshot.started:
        result.resumes += 1
    else:
        result.runs += 1
    machine = header_brain(path, line, header)
    if previous is not None and killed:
        # the brain as of the trace's last record before the header: the replayed brain as of
        # the last record the checker matched (the driver may have gone a step further)
        if checker.matched is not None and machine.digest() != checker.matched:
            why = "the header's snapshot is not the brain the records before it build"
            matched = {"digest": checker.matched}
            checker.fail(line, header.seq, "snapshot", why, matched, {"digest": machine.digest()})
    elif previous is not None:
        expected = previous.next_run() if previous.finalized else previous
        if expected != machine:
            why = "the header's snapshot does not continue the replayed run"
            checker.fail(
                line, header.seq, "snapshot", why, expected.model_dump(), machine.model_dump()
            )
        if not previous.finalized:
            machine = expected
    return machine


def _continued(
    checker: Checker, line: int, rec: HeaderRecord, previous: LoopMachine | None
) -> LoopMachine:
    """The replayed run's ``next_run()`` (``previous``: None after a kill), whose digest must be
    the one the header names."""
    try:
        machine = rec.machine(previous)
    except ContinuationError as exc:
        live = None if previous is None else to_jsonable(BrainSummary.of(previous))
        named = {"continues": rec.continues}
        checker.fail(line, rec.seq, "snapshot", f"{exc} in the replay", named, live)
    if checker.digests and machine.digest() != rec.continues:
        found = brain_divergence(NOT_CONTINUED, rec.continues, rec.brain, machine)
        checker.fail(line, rec.seq, "snapshot", *found)
    if checker.digests and rec.brain is not None:  # its summary is checked like a feed's
        summary = summary_divergence(rec.brain, machine, "in the header", rec.continues)
        if summary is not None:
            checker.fail(line, rec.seq, "summary", *summary)
    return machine


#: The feeds a resume writes between its header and the run's first step.
_FINISHING: Final = frozenset({"tool_results", "set_context_tokens"})


def _finishing(cursor: Cursor, checker: Checker, machine: LoopMachine) -> None:
    """The feeds a resume wrote before its first step (it finished the exchange the trace was
    cut in): the resume's work, not the driver's, so given as recorded, checked by digest."""
    while (item := cursor.next_brain()) is not None:
        line, rec = item
        if not isinstance(rec, FeedRecord) or rec.name not in _FINISHING:
            return
        cursor.take_brain()
        machine.feed(rec.args)
        digest = machine.digest()
        if checker.digests and not rec.scrubbed and digest != rec.digest:
            why = f"after the resume's {rec.name}(), the brain is not the recorded one"
            checker.fail(line, rec.seq, "digest", why, {"digest": rec.digest}, {"digest": digest})
        checker.result.feeds += 1


def _input_of(cursor: Cursor) -> Message | None:
    item = cursor.next_brain()
    if item is not None and item[1].type == "feed" and isinstance(item[1].args, AcceptInput):
        input = item[1].args.input
        return input if isinstance(input, Message) else Message.user(input)
    return None


def _body(
    cursor: Cursor,
    checker: Checker,
    recorded_tools: RecordedTools,
    agent: tuple[str, AgentFactory, bool] | None,
    tools: str,
    observers: Sequence[LoopObserver],
    path: str,
) -> Body:
    """How each run's loop is built: the user's factory with the replay's parts, or built in."""

    def replayed_events(point: StepPoint) -> None:
        """The recorded cancels and injections; a header (a crash) stops the run."""
        while (item := cursor.next_brain()) is not None:
            rec = item[1]
            if rec.type == "feed" and isinstance(rec.args, Cancel):
                point.cancel()
            elif rec.type == "feed" and isinstance(rec.args, Inject):
                point.inject(rec.args.message)
            elif rec.type == "header":
                raise Crash(0)
            else:
                if rec.type == "step" and rec.policy.compact_now:
                    point.request_compaction()
                return

    if agent is None:
        # the first step's policy (opened again): the built-in body advertises its tools
        steps = (r.policy for r in TraceReader(cursor.reader.source) if isinstance(r, StepRecord))
        policy = next(steps, MachinePolicy())
        run_config, session = configs_for(policy)
        recorded_tools.live = lambda name: False

        def builtin(machine: LoopMachine) -> BareLoop:
            return BareLoop(
                ReplayClient(cursor, checker, trace_retries=True),
                stub_tools(policy.tools),
                run_config,
                session,
                machine=machine,
                compactor=RecordedCompactor(cursor, checker),
                middleware=[recorded_tools.answer],
                observers=[checker, *observers],
                sleep=no_sleep,
                rng=lambda: 0.0,
                before_step=replayed_events,
            )

        return builtin

    _, factory, compactor_recorded = agent
    # what the agent's code asks for, compared with the trace's (not a --model it was given)
    model = own_model(factory, header_metadata(cursor))

    def theirs(machine: LoopMachine) -> BareLoop:
        client = ReplayClient(cursor, checker, trace_retries=False, model=model)
        loop = build_agent(factory, client=client, observers=[checker, *observers])
        if loop.client is not client:  # pragma: no cover - build_agent swaps it in
            raise AssertionError("the replay client was not swapped in")
        recorded_tools.live = tools_live(tools, loop.registry.names())
        own_hook = loop.before_step
        changes: dict[str, Any] = {
            "machine": machine,
            "middleware": [*loop.middleware, recorded_tools.answer],
            "sleep": no_sleep,
            "rng": lambda: 0.0,
            "before_step": _both(own_hook, replayed_events, cursor),
        }
        if compactor_recorded:
            changes["compactor"] = RecordedCompactor(cursor, checker)
        return loop.replace(**changes)

    return theirs


def _both(
    own: Callable[[StepPoint], None] | None,
    replayed: Callable[[StepPoint], None],
    cursor: Cursor,
) -> Callable[[StepPoint], None]:
    """The agent's own ``before_step`` hook runs live, and the trace's cancels and injections are
    then not given (its hook is what made them); a recorded crash still stops the run."""
    if own is None:
        return replayed

    def hook(point: StepPoint) -> None:
        own(point)
        item = cursor.next_brain()
        if item is not None and item[1].type == "header":
            raise Crash(0)

    return hook
