"""The user's own agent under faults: one run of the loop their factory builds, with the model
played by an exploring model or a script, their tools live, simulated or recorded, and the fault
layers of ``loopctl_sim.sim.layers`` around it.

``AgentWorld`` says what the run is. Everything else is the user's; only the client,
observers, ``sleep``, the jitter draw, the innermost tool middleware and a ``before_step`` hook
are put in. A crash restores the brain from its JSON into a fresh loop built by the factory, as
a restarted process would. What escapes the user's code is not caught (``AgentRunError``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from loopctl.core import AwaitingTools, LoopMachine, MachinePolicy, Message, ToolCall, ToolResult
from loopctl.driver import BareLoop, RunResult, StepPoint
from loopctl.observe import IoEvent, LoopObserver
from loopctl.testing import ExploreConfig, ExploringClient
from loopctl.tools import ToolRegistry
from loopctl_sim.errors import SimError
from loopctl_sim.sim.agent import AgentFactory, agent_name, build_agent, load_agent
from loopctl_sim.sim.body import agent_failure, synchronous
from loopctl_sim.sim.faults import Fault, FaultPlan
from loopctl_sim.sim.layers import (
    Counting,
    FaultyClient,
    ModelSource,
    RunFaults,
    ScriptSource,
    ToolFaults,
    chain_before_step,
    layer_counts,
    run_resuming,
)
from loopctl_sim.sim.machine import SimResult
from loopctl_sim.sim.world import ModelScript, ToolFn
from loopctl_sim.trace import IoRecord, TraceReader, TraceRecorder, TraceWriter

ToolModes = str | Mapping[str, str]
_MODES = ("live", "simulated", "recorded")


def tool_modes(mode: ToolModes, names: Sequence[str]) -> Callable[[str], str]:
    """How each tool runs, ``live``, ``simulated`` or ``recorded``, for ``mode``: one of those
    for every tool; ``live:a,b`` (those live, the others simulated); ``simulated:a,b`` or
    ``recorded:a,b`` (those so, the others live); or a mapping of tool to mode (the others
    live). ``names`` are the agent's tools: a name given is checked against them."""
    if isinstance(mode, Mapping):
        chosen, rest = dict(mode), "live"
        bad = sorted(m for m in mode.values() if m not in _MODES)
        if bad:
            raise ValueError(f"tool modes {bad}: expected {', '.join(_MODES)}")
    elif mode in _MODES:
        return lambda name: mode
    else:
        kind, sep, listed = mode.partition(":")
        chosen = {n.strip(): kind for n in listed.split(",") if n.strip()}
        if not sep or kind not in _MODES or not chosen:
            raise ValueError(
                f"tools {mode!r}: expected live, simulated, recorded, or one of them followed "
                "by :A,B (live:A,B runs those, the others simulated; simulated:A,B and "
                "recorded:A,B those so, the others live)"
            )
        rest = "simulated" if kind == "live" else "live"
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise ValueError(
            f"tools {mode}: unknown tool(s) {', '.join(unknown)} (the agent has: "
            f"{', '.join(names) or 'none'})"
        )
    return lambda name: chosen.get(name, rest)


def live_tools(mode: ToolModes, names: Sequence[str]) -> Callable[[str], bool]:
    """Which tools run live for ``mode`` (see ``tool_modes``)."""
    modes = tool_modes(mode, names)
    return lambda name: modes(name) == "live"


@dataclass
class AgentWorld:
    """One run of the user's agent under faults: the factory, the input, the replies
    (``explore`` seed or a ``script``), the faults, and how the tools run (``tools``: see
    ``tool_modes``; ``exempt``: never faulted; ``scripted``: answered by a function of the
    arguments)."""

    agent: str | AgentFactory
    input: str | Message
    explore: int | None = 0
    explore_config: ExploreConfig = field(default_factory=ExploreConfig)
    script: Sequence[Message] | None = None
    tokens: Sequence[int | None] = ()
    faults: Sequence[Fault] = ()
    tools: ToolModes = "live"
    exempt: frozenset[str] = frozenset()
    #: traces whose tool results answer the ``recorded`` tools (files or directories)
    recorded: Sequence[str] = ()
    scripted: Mapping[str, ToolFn] = field(default_factory=dict)
    history: Sequence[Message] = ()
    max_steps: int = 10_000
    name: str = "agent"
    metadata: dict[str, Any] = field(default_factory=dict)
    cwd: str | None = None

    def source(self) -> ModelSource:
        """A fresh model source: the script when there is one, else the exploring model."""
        if self.script is not None:
            return ScriptSource(ModelScript(self.script, tokens=self.tokens), estimate=False)
        return ExploringClient(self.explore or 0, self.explore_config)


@dataclass
class AgentRun(SimResult):
    """What one run of an agent did: how it ended (``outcome``: None when something escaped
    it), and what the harness counted on the way (``SimResult``'s counts, and these)."""

    outcome: Any
    result: RunResult | None = None
    #: the replies delivered intact, in order: the model script that replays the run
    script: list[Message] = field(default_factory=list)
    #: the moves the exploring model made (empty for a script)
    moves: Counter[str] = field(default_factory=Counter)
    #: how often each call id ran a live tool, and the ids a crash allows to run again
    executions: Counter[str] = field(default_factory=Counter)
    rerun_allowed: set[str] = field(default_factory=set)
    #: the agent's tools, those that ran live, and those a fault struck
    tools: tuple[str, ...] = ()
    live: frozenset[str] = frozenset()
    faulted_tools: set[str] = field(default_factory=set)
    #: the policy of the run's last step (the agent's configs)
    policy: MachinePolicy | None = None


class AgentRunError(SimError):
    """Something escaped the agent's run (``__cause__``; also ``error``): a tool's, hook's or
    compactor's exception, the engine refusing a feed, a checker's violation, the step bound.
    ``run`` holds what the run did until then (the replies it got, the faults that struck)."""

    def __init__(self, run: AgentRun, error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.run = run
        self.error = error


async def run_agent_async(
    world: AgentWorld,
    trace: str | os.PathLike[str] | IO[str] | TraceWriter | TraceRecorder | None = None,
    *,
    machine: LoopMachine | None = None,
    created: str | None = None,
    observers: Sequence[LoopObserver] = (),
    before_step: Callable[[StepPoint], None] | None = None,
) -> AgentRun:
    """Run ``world`` once (on ``machine``: a next run on its history, default a fresh brain).
    ``trace`` may be a ``FaultMarks`` recorder: a session passes one for all its runs, so its
    trace holds them as one conversation. ``run_agent`` is the same for callers outside
    an event loop."""
    factory = load_agent(world.agent, cwd=world.cwd)
    plan = FaultPlan(world.faults)
    source = world.source()
    current: list[BareLoop] = []
    usage = source.usage if isinstance(source, ScriptSource) else None
    client = FaultyClient(source, plan, lambda: current[-1].policy(), usage=usage)
    run_faults = RunFaults(plan, max_steps=world.max_steps)
    tools = ToolFaults(plan, scripted=world.scripted, exempt=world.exempt)
    recordings = recorded_answers(world.recorded) if world.recorded else None
    meta = {
        "agent": agent_name(world.agent),
        "world": world.name,
        "simulated": True,
        "level": "agent",
        **world.metadata,
    }
    recorder: TraceRecorder | None = None
    if isinstance(trace, TraceRecorder):
        recorder = trace  # a session's, kept across its runs
    elif trace is not None:
        recorder = FaultMarks(trace, metadata=meta, created=created, record_raised=agent_failure)
    if isinstance(recorder, FaultMarks):
        recorder.altered = tools.altered
    counting = Counting()
    # no observer of the harness's own: a loop nobody observes builds no IO events
    watchers: list[LoopObserver] = [*([recorder] if recorder is not None else []), *observers]
    rerun: set[str] = set()
    result: RunResult | None = None

    def body(brain: LoopMachine) -> BareLoop:
        # the calls a crash interrupted after they ran: the contract dispatches them again
        exchange = brain.exchange
        if isinstance(brain.state, AwaitingTools) and exchange is not None:
            rerun.update(c.id for c in exchange.dispatch if tools.executions[c.id])
        loop = build_agent(factory, client=client, observers=watchers)
        names = loop.registry.names()
        tools.registry = loop.registry
        modes = tool_modes(world.tools, names)
        tools.live = lambda name: modes(name) == "live"
        if recordings is not None:
            tools.recorded = lambda call: (
                recordings(call) if modes(call.name) == "recorded" else None
            )
        counting.inner = loop.compactor
        registry, default = loop.registry, loop.config.tool_timeout
        tools.timeout = lambda name: tool_timeout(registry, name, default)  # not the loop: a cycle
        hook = chain_before_step(
            loop.before_step, run_faults.before_step, tools.before_step, before_step
        )
        built = loop.replace(
            machine=brain,
            middleware=[*loop.middleware, tools.middleware],
            compactor=counting,
            sleep=counting.sleep,
            rng=lambda: 0.0,
            before_step=hook,
        )
        current.append(built)
        return built

    def collected() -> AgentRun:
        loop = current[-1]
        names = loop.registry.names()
        return AgentRun(
            world=world.name,
            outcome=result.outcome if result is not None else None,
            machine=loop.machine,
            result=result,
            script=list(client.script),
            moves=Counter(source.moves) if isinstance(source, ExploringClient) else Counter(),
            executions=tools.executions,
            rerun_allowed=rerun,
            trace=None if recorder is None else recorder.writer.path,
            tools=names,
            live=frozenset(n for n in names if tools.live(n) and n not in world.scripted),
            faulted_tools=set(tools.faulted),
            policy=loop.policy(),
            **layer_counts(client, tools, run_faults, counting),
        )

    loop = body(machine if machine is not None else LoopMachine(world.history))
    try:
        result, loop = await run_resuming(loop, world.input, body, tools, watchers)
        return collected()
    except Exception as exc:
        raise AgentRunError(collected(), exc) from exc
    finally:
        current.clear()  # the client's policy reads the loop through it: a cycle, else
        if recorder is not None and not isinstance(trace, TraceWriter | TraceRecorder):
            recorder.close()


run_agent = synchronous(run_agent_async)


class FaultMarks(TraceRecorder):
    """A recorder that marks the results a fault altered (``altered``: ``ToolFaults.altered``,
    set by ``run_agent`` for each run it records, so a session passes one for all its runs):
    their ``tool_result`` records say ``"fault": kind``, as the built-in world's do, so a
    user's check can tell an injected fault from the tool's own output."""

    altered: Mapping[str, str] = {}

    def io(self, event: IoEvent) -> None:
        if event.kind == "tool_result" and self.altered:
            kind = self.altered.get(str(event.data.get("id")))
            if kind is not None:
                data = {**event.data, "fault": kind}
                event = IoEvent(
                    kind=event.kind, turn=event.turn, data=data, duration_s=event.duration_s
                )
        super().io(event)


def tool_timeout(registry: ToolRegistry, name: str, default: float | None) -> float | None:
    """The timeout the driver gives a call of ``name``: the tool's own, else the run's."""
    found = registry.get(name)
    if found is not None and found.timeout is not None:
        return found.timeout
    return default


def recorded_answers(
    paths: Iterable[str | os.PathLike[str]],
) -> Callable[[ToolCall], ToolResult | None]:
    """What a ``recorded`` tool answers: the first result the traces at ``paths`` (files, or
    every ``*.jsonl`` under a directory) hold for the same tool and arguments (by their canonical
    JSON), or None (the stand-in answers). A tool with side effects cannot run in a campaign,
    and a stand-in's answer is not what the model would read; the user's traces hold real ones."""

    def key(name: str, arguments: Any) -> tuple[str, str]:
        return name, json.dumps(arguments, sort_keys=True, default=str)

    results: dict[tuple[str, str], tuple[str, bool]] = {}
    for path in map(Path, paths):
        for file in sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]:
            calls: dict[str, tuple[str, str]] = {}
            for record in TraceReader(file):
                if not isinstance(record, IoRecord):
                    continue
                data = record.data
                if record.kind == "tool_call":
                    calls[str(data.get("id"))] = key(str(data.get("name")), data.get("arguments"))
                elif record.kind == "tool_result":
                    found = calls.get(str(data.get("id")))
                    if found is not None and found not in results:
                        results[found] = (str(data.get("content", "")), bool(data.get("is_error")))

    def answer(call: ToolCall) -> ToolResult | None:
        found = results.get(key(call.name, call.arguments))
        if found is None:
            return None
        return ToolResult(call_id=call.id, name=call.name, content=found[0], is_error=found[1])

    return answer
