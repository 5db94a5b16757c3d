"""The driver-level simulator: a ``World`` through the real ``BareLoop``, through the fault layers
of ``loopctl_sim.sim.layers`` (a scripted client with the model faults, a tool middleware
answering from the world's tools, run-level faults at ``before_step``). Sleeping is a no-op and
the retry jitter is off, so the run is deterministic.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import IO, Any, Protocol

from loopctl.api import StreamEvent
from loopctl.core import LoopMachine
from loopctl.driver import BareLoop, MiddleOutCompactor, StepPoint
from loopctl.observe import LoopObserver
from loopctl_sim.sim.body import agent_failure, configs_for, stub_tools, synchronous
from loopctl_sim.sim.faults import FaultPlan
from loopctl_sim.sim.layers import (
    Counting,
    FaultyClient,
    RunFaults,
    ScriptSource,
    StepLimit,
    ToolFaults,
    chain_before_step,
    layer_counts,
    run_resuming,
)
from loopctl_sim.sim.machine import SimResult, SimulationError
from loopctl_sim.sim.world import World
from loopctl_sim.trace import TraceRecorder, TraceWriter


class LoopWatch(Protocol):
    """What ``simulate_driver`` asks of a watch on the driver (``DriverWatch`` is one)."""

    def install(self, loop: BareLoop) -> BareLoop: ...

    def restarted(self, loop: BareLoop) -> BareLoop: ...


async def simulate_driver_async(
    world: World,
    trace: str | os.PathLike[str] | IO[str] | TraceWriter | None = None,
    *,
    created: str | None = None,
    metadata: dict[str, Any] | None = None,
    observers: Sequence[LoopObserver] = (),
    before_step: Callable[[StepPoint], None] | None = None,
    machine: LoopMachine | None = None,
    watch: LoopWatch | None = None,
    on_stream: Callable[[StreamEvent], None] | None = None,
) -> SimResult:
    """Run ``world`` through ``BareLoop``, recording a trace when given (``simulate_driver``:
    the same outside an event loop), on ``machine`` (a next run) or a fresh brain. A checking
    harness's seams: ``observers`` (after the recorder), ``before_step`` (after the run-level
    faults), ``watch`` (put into every body), ``on_stream`` (every reply streamed: the same run)."""
    plan = FaultPlan(world.faults)
    run_faults = RunFaults(plan, max_steps=world.max_steps)
    tools = ToolFaults(plan, scripted=world.tools, timeout=lambda name: world.tool_timeout)
    policy = world.run_policy()
    source = ScriptSource(world.model)
    client = FaultyClient(source, plan, lambda: policy, usage=source.usage)
    run_config, session = configs_for(policy, world)
    recorder = None
    if trace is not None:
        meta = {"world": world.name, "simulated": True, "level": "driver", **world.metadata}
        meta.update(metadata or {})
        recorder = TraceRecorder(trace, metadata=meta, created=created, record_raised=agent_failure)
    watchers: list[LoopObserver] = [*([recorder] if recorder is not None else []), *observers]
    counting = Counting(MiddleOutCompactor(world.keep_head, world.keep_tail))
    hook = chain_before_step(run_faults.before_step, tools.before_step, before_step)

    def body(machine: LoopMachine) -> BareLoop:
        return BareLoop(
            client,
            stub_tools(policy.tools),
            run_config,
            session,
            machine=machine,
            compactor=counting,
            middleware=[tools.middleware],
            observers=watchers,
            sleep=counting.sleep,
            rng=lambda: 0.0,
            before_step=hook,
            on_stream=on_stream,
        )

    def resumed(brain: LoopMachine) -> BareLoop:
        return body(brain) if watch is None else watch.restarted(body(brain))

    loop = body(machine if machine is not None else LoopMachine(world.history))
    if watch is not None:
        loop = watch.install(loop)
    try:
        result, loop = await run_resuming(loop, world.input, resumed, tools, watchers)
    except StepLimit as exc:
        raise SimulationError(f"{world.name}: {exc}") from None
    finally:
        if recorder is not None and not isinstance(trace, TraceWriter):
            recorder.close()
    return SimResult(
        world=world.name,
        outcome=result.outcome,
        machine=loop.machine,
        trace=None if recorder is None else recorder.writer.path,
        **layer_counts(client, tools, run_faults, counting),
    )


simulate_driver = synchronous(simulate_driver_async)
