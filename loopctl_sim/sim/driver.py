"""The driver-level simulator: a ``World`` through the real ``BareLoop``.

``simulate_driver(world)`` runs the real driver (retries, fold, tool dispatch, compaction, cancel,
crash and resume via ``from_machine``) against the world: ``WorldClient`` is a scripted
``ApiClient`` that applies the world's model faults, a tool middleware answers every call from
the world's tools and tool faults, and run-level faults (cancel, crash, a manual compaction, an
injected note) are applied through the driver's public ``before_step`` seam right before the
driver asks its next step. Sleeping is a no-op and the retry jitter is off, so the run is
deterministic.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import IO, Any

from loopctl.api import ModelRequest, StreamEvent, Usage
from loopctl.core import LoopMachine, Message, Start, ToolCall, ToolResult
from loopctl.driver import (
    BareLoop,
    CancelSignal,
    IoEvent,
    LoopObserver,
    MiddleOutCompactor,
    StepPoint,
)
from loopctl.tools import NextTool
from loopctl_sim.sim.body import Crash, configs_for, no_sleep, stub_tools
from loopctl_sim.sim.machine import SimError, SimResult
from loopctl_sim.sim.world import (
    FaultPlan,
    ToolHang,
    World,
    fault_error,
    faulty_reply,
    run_tool,
)
from loopctl_sim.trace import TraceRecorder, TraceWriter

__all__ = ["WorldClient", "simulate_driver", "simulate_driver_async"]


class WorldClient:
    """A scripted ``ApiClient`` playing the world's model, with its model-side faults.

    Every request counts (retries included); a scripted reply is used up only when it is
    delivered intact (no fault, or an ``unknown_tool`` rename), as a provider's retry would
    answer the same question again.
    """

    def __init__(self, world: World, plan: FaultPlan | None = None) -> None:
        self.world = world
        self.plan = plan or FaultPlan(world.faults)
        self.requests = 0
        self.replies = 0
        self.policy = world.run_policy()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests += 1
        fault = self.plan.model_fault(self.requests)
        if fault is not None:
            error = fault_error(fault, self.policy)
            if error is not None:
                raise error
        conversation = list(request.messages)
        message = self.world.model.reply(conversation, self.replies)
        tokens = self.world.model.context_tokens(conversation, message, self.replies)
        events = faulty_reply(fault, message, Usage(context_tokens=tokens))
        if fault is None or fault.kind == "unknown_tool":
            self.replies += 1
        for event in events:
            yield event


class _Counter(LoopObserver):
    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.compactions = 0

    def io(self, event: IoEvent) -> None:
        self.kinds[event.kind] += 1
        if event.kind == "compaction" and not event.data.get("noop"):
            self.compactions += 1


@dataclass
class _SimState:
    world: World
    plan: FaultPlan
    cancel: CancelSignal
    steps: int = 0
    fired: set[int] = field(default_factory=set)
    injects: list[str] = field(default_factory=list)
    tool_calls: int = 0
    per_tool: Counter[str] = field(default_factory=Counter)
    crashes: int = 0

    def before_step(self, point: StepPoint) -> None:
        self.steps += 1
        if self.steps > self.world.max_steps:
            raise SimError(f"{self.world.name}: no Done after {self.world.max_steps} steps")
        for i, fault in enumerate(self.plan.faults):
            if fault.step != self.steps or i in self.fired:
                continue
            self.fired.add(i)
            if fault.kind == "cancel":
                point.cancel({"step": self.steps, "reason": fault.message or "scheduled"})
            elif fault.kind == "crash":
                self.steps -= 1  # the resumed driver asks this step again
                raise Crash(self.steps + 1)
            elif fault.kind == "compact_now":
                point.request_compaction()
            elif fault.kind == "inject":
                assert fault.text is not None
                self.injects.append(fault.text)
        if self.injects and isinstance(point.machine.state, Start):
            for text in self.injects:
                point.inject(Message.user(text))
            self.injects.clear()

    async def tool_middleware(self, call: ToolCall, next_tool: NextTool) -> ToolResult:
        self.tool_calls += 1
        self.per_tool[call.name] += 1
        fault = self.plan.tool_fault(self.tool_calls, call.name, self.per_tool[call.name])
        try:
            return run_tool(call, self.world.tools.get(call.name), fault, self.world.tool_timeout)
        except ToolHang:
            self.cancel.cancel()  # nobody else will: the user gives up on the hung tool
            await asyncio.Event().wait()
            raise AssertionError("unreachable") from None  # pragma: no cover


def simulate_driver(
    world: World,
    trace: str | os.PathLike[str] | IO[str] | TraceWriter | None = None,
    *,
    created: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> SimResult:
    """Run ``world`` through ``BareLoop``; ``TraceRecorder`` writes the trace (when given)."""
    return asyncio.run(simulate_driver_async(world, trace, created=created, metadata=metadata))


async def simulate_driver_async(
    world: World,
    trace: str | os.PathLike[str] | IO[str] | TraceWriter | None = None,
    *,
    created: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> SimResult:
    """``simulate_driver`` for callers already inside an event loop."""
    plan = FaultPlan(world.faults)
    cancel = CancelSignal()
    state = _SimState(world, plan, cancel)
    client = WorldClient(world, plan)
    policy = world.run_policy()
    run_config, session = configs_for(policy, world)
    meta = {
        "world": world.name,
        "simulated": True,
        "level": "driver",
        **world.metadata,
        **(metadata or {}),
    }
    recorder = None if trace is None else TraceRecorder(trace, metadata=meta, created=created)
    counter = _Counter()
    observers: list[LoopObserver] = [counter] if recorder is None else [recorder, counter]

    def body(machine: LoopMachine) -> BareLoop:
        return BareLoop(
            client,
            stub_tools(policy.tools),
            run_config,
            session,
            machine=machine,
            compactor=MiddleOutCompactor(world.keep_head, world.keep_tail),
            middleware=[state.tool_middleware],
            observers=observers,
            sleep=no_sleep,
            rng=lambda: 0.0,
            before_step=state.before_step,
        )

    loop = body(LoopMachine(world.history))
    input: str | Message | None = world.input
    try:
        while True:
            try:
                result = await loop.run(input, cancel)
                break
            except Crash as crash:
                saved = loop.machine.model_dump_json()
                restored = LoopMachine.model_validate_json(saved)
                if restored != loop.machine:
                    raise SimError(f"step {crash.step}: the restored machine differs") from None
                if recorder is not None:
                    recorder.writer.io(
                        "crash",
                        data={
                            "step": crash.step,
                            "snapshot_bytes": len(saved),
                            "digest": restored.digest(),
                        },
                    )
                state.crashes += 1
                loop = body(restored)
                input = None
    finally:
        if recorder is not None and not isinstance(trace, TraceWriter):
            recorder.close()
    machine = loop.machine
    return SimResult(
        world=world.name,
        outcome=result.outcome,
        machine=machine,
        steps=state.steps,
        model_requests=client.requests,
        replies=client.replies,
        retries=counter.kinds["retry"],
        tool_calls=state.tool_calls,
        compactions=counter.compactions,
        crashes=state.crashes,
        trace=None if recorder is None else recorder.writer.path,
    )
