"""Fault layers: the fault catalogue applied around a real ``BareLoop`` and its parts, one layer
per place a fault strikes (``FaultyClient``: the model; ``ToolFaults``: the tools, as the
innermost middleware, so the user's hooks and middleware see a faulted result as a real one;
``RunFaults``: the run, at ``before_step``), each put in through a public seam only, so they
work on the user's own agent as well as on the built-in world.

Each layer counts the faults that struck (``fired``). Faults are assigned to tool calls right
before the brain asks for them, in call order, so the calls of one wave get the same faults
whatever order they run in. The harness puts no observer of its own into a loop (``Counting``
counts retries and compactions through ``sleep`` and the compactor): a loop with no observer
builds no IO events, a tenth of a simulated turn.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol

from loopctl.api import ModelReply, ModelRequest, StreamEvent, Usage
from loopctl.core import (
    CompactReason,
    LoopMachine,
    MachinePolicy,
    Message,
    Start,
    ToolCall,
    ToolResult,
)
from loopctl.driver import BareLoop, CancelSignal, ContextCompactor, RunResult, StepPoint
from loopctl.observe import IoEvent, LoopObserver
from loopctl.tools import NextTool, ToolArgumentsError, ToolRegistry
from loopctl_sim.errors import SimError
from loopctl_sim.sim.body import Crash
from loopctl_sim.sim.faults import Fault, FaultPlan
from loopctl_sim.sim.machine import SimulationError
from loopctl_sim.sim.world import (
    ModelScript,
    ToolFn,
    ToolHang,
    delivered_reply,
    distort,
    fault_error,
    fault_result,
    faulty_reply,
    run_tool,
)


class ModelSource(Protocol):
    """Where a ``FaultyClient``'s replies come from: an ``ExploringClient``, a ``ScriptSource``."""

    def peek(self, request: ModelRequest) -> Message:
        """The next reply to ``request``, not used up (a faulted attempt's)."""
        ...

    def deliver(self, request: ModelRequest) -> Message:
        """The next reply to ``request``, used up (it reached the driver intact)."""
        ...


class Replies:
    """A model source whose next reply is made (``reply``) when first asked for and kept while
    the same request asks again: a retried request gets the same reply, made once."""

    def __init__(self) -> None:
        self.delivered = 0
        self._last: tuple[int, ModelRequest, Message] | None = None

    def reply(self, request: ModelRequest) -> Message:
        raise NotImplementedError

    def peek(self, request: ModelRequest) -> Message:
        last = self._last
        if last is not None and last[0] == self.delivered and last[1] is request:
            return last[2]
        message = self.reply(request)
        self._last = (self.delivered, request, message)
        return message

    def deliver(self, request: ModelRequest) -> Message:
        message = self.peek(request)
        self.delivered += 1
        return message


class ScriptSource(Replies):
    """A ``ModelScript`` as a model source: reply ``i`` is the script's ``i``-th. Its replies
    report the script's context counts; unscripted ones estimated, or (``estimate=False``) not
    reported, so the driver estimates them."""

    def __init__(self, script: ModelScript, *, estimate: bool = True) -> None:
        super().__init__()
        self.script = script
        self.estimate = estimate

    def reply(self, request: ModelRequest) -> Message:
        return self.script.reply(request.messages, self.delivered)

    def usage(self, request: ModelRequest, message: Message) -> Usage | None:
        tokens, index = self.script.tokens, self.delivered
        if self.estimate or (index < len(tokens) and tokens[index] is not None):
            return Usage.context(self.script.context_tokens(request.messages, message, index))
        return None


#: The usage a ``FaultyClient``'s reply carries (None: none; the driver estimates the context).
UsageFn = Callable[[ModelRequest, Message], Usage | None]


@dataclass(eq=False)
class FaultyClient:
    """An ``ApiClient`` over ``source`` with the model-side faults of ``plan``; every request
    counts (retries included). ``policy`` gives the context window a ``context_overflow`` error
    reports; ``usage`` the usage each reply carries (default: none, the driver estimates)."""

    source: ModelSource
    plan: FaultPlan
    policy: Callable[[], MachinePolicy]
    _: KW_ONLY
    usage: UsageFn | None = None
    requests: int = 0
    replies: int = 0
    fired: Counter[str] = field(default_factory=Counter)
    script: list[Message] = field(default_factory=list)  # every reply delivered intact, in order

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        fault, message, usage = self._attempt(request)
        for event in faulty_reply(fault, message, usage, self.requests):
            yield event

    async def whole_reply(self, request: ModelRequest) -> ModelReply:
        """The folded ``stream(request)``, without the events where the fault leaves the reply
        whole (``loopctl.api.WholeReplyClient``; ``delivered_reply``): streaming and folding
        every reply took a 20-turn simulated run from 9.0M to 13.4M instructions (cachegrind)."""
        fault, message, usage = self._attempt(request)
        return delivered_reply(fault, message, usage, self.requests)

    def _attempt(self, request: ModelRequest) -> tuple[Fault | None, Message, Usage | None]:
        """Request number ``requests``: its fault (an error fault raised), the reply it
        answers, that reply's usage; the reply used up if it is delivered intact."""
        self.requests += 1
        fault = self.plan.model_fault(self.requests)
        if fault is not None:
            self.fired[fault.kind] += 1
            error = fault_error(fault, self.policy())
            if error is not None:
                try:
                    raise error
                finally:
                    del error  # else the frame holds its own exception's traceback: a cycle
        intact = fault is None or fault.kind == "unknown_tool"
        message = self.source.peek(request)
        usage = self.usage(request, message) if self.usage is not None else None
        if intact:
            self.source.deliver(request)
            self.script.append(message)
            self.replies += 1
        return fault, message, usage


def simulated_result(call: ToolCall) -> str:
    """What a simulated tool answers: its name and the arguments it was given, as JSON (the
    same call, the same answer)."""
    answer = {"tool": call.name, "simulated": True, "arguments": call.arguments}
    return json.dumps(answer, sort_keys=True, default=str)


@dataclass(eq=False)
class ToolFaults:
    """The innermost tool middleware of a faulted run, and the ``before_step`` hook that
    assigns the faults of the calls the next step dispatches. ``live(name)``: the tool runs,
    else ``recorded(call)`` or ``simulated_result`` answers once the arguments validate;
    ``scripted``: answered by a function of the arguments; ``timeout(name)``: what a hang
    reports (None: the layer cancels ``cancel``, as a user who gives up would)."""

    plan: FaultPlan
    _: KW_ONLY
    live: Callable[[str], bool] = lambda name: True
    scripted: Mapping[str, ToolFn] = field(default_factory=dict)
    exempt: frozenset[str] = frozenset()
    timeout: Callable[[str], float | None] = lambda name: None
    registry: ToolRegistry | None = None
    recorded: Callable[[ToolCall], ToolResult | None] | None = None
    cancel: CancelSignal | None = None
    index: int = 0
    per_tool: Counter[str] = field(default_factory=Counter)
    assigned: dict[str, Fault | None] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    fired: Counter[str] = field(default_factory=Counter)
    faulted: set[str] = field(default_factory=set)  # the tools a fault struck
    #: the fault kind that altered each call's result, by call id (a trace marks them)
    altered: dict[str, str] = field(default_factory=dict)
    executions: Counter[str] = field(default_factory=Counter)
    calls: int = 0

    def before_step(self, point: StepPoint) -> None:
        if not self.plan.tool_faults:
            return  # nothing to assign (the walk: 300,000 instructions a 20-turn run)
        machine = point.machine
        exchange = machine.exchange
        if machine.state.kind != "awaiting_tools" or exchange is None:
            return
        # each call's fault, in call order; a call asked again after a crash keeps its own
        for call in exchange.dispatch:
            if call.id in self.seen:
                continue
            self.seen.add(call.id)
            self.index += 1
            self.per_tool[call.name] += 1
            fault = None
            if call.name not in self.exempt:
                fault = self.plan.tool_fault(self.index, call.name, self.per_tool[call.name])
            self.assigned[call.id] = fault

    async def middleware(self, call: ToolCall, next_tool: NextTool) -> ToolResult:
        self.calls += 1
        fault = self.assigned.pop(call.id, None)
        if fault is not None:
            self.fired[fault.kind] += 1
            self.faulted.add(call.name)
            self.altered[call.id] = fault.kind
        timeout = self.timeout(call.name) if fault is not None else None  # a fault's only
        try:
            scripted = self.scripted.get(call.name)
            if scripted is not None:
                return run_tool(call, scripted, fault, timeout)
            if not self.live(call.name):
                return self._simulated(call, fault, timeout)
            if fault is not None and fault.kind != "tool_timeout":
                faulted = fault_result(call, fault, timeout)
                if faulted is not None:
                    return faulted
            self.executions[call.id] += 1
            result = await next_tool(call)
            if fault is not None and fault.kind == "tool_timeout":
                late = fault_result(call, fault, timeout)
                assert late is not None
                return late
            if fault is not None:
                return result.model_copy(update={"content": distort(result.content, fault)})
            return result
        except ToolHang:
            if self.cancel is not None:
                self.cancel.cancel()  # nobody else will: the user gives up on the hung tool
            await asyncio.Event().wait()
            raise AssertionError("unreachable") from None  # pragma: no cover

    def _simulated(self, call: ToolCall, fault: Fault | None, timeout: float | None) -> ToolResult:
        found = self.registry.get(call.name) if self.registry is not None else None
        if found is not None:
            try:
                found.parse_arguments(call.arguments)
            except ToolArgumentsError as exc:
                return ToolResult(call_id=call.id, name=call.name, content=str(exc), is_error=True)
        answer = self.recorded(call) if self.recorded is not None else None
        if answer is not None and answer.is_error:
            faulted = fault_result(call, fault, timeout) if fault is not None else None
            return faulted if faulted is not None else answer
        text = answer.content if answer is not None else None
        return run_tool(
            call, lambda args: text if text is not None else simulated_result(call), fault, timeout
        )


class Counting:
    """Counts what a run did without observing it: retries as its ``sleep`` (the driver sleeps
    before every retry, and only then) and compactions that cut something as its compactor."""

    def __init__(self, inner: ContextCompactor | None = None) -> None:
        self.inner = inner
        self.retries = 0
        self.compactions = 0

    async def sleep(self, seconds: float) -> None:
        self.retries += 1

    async def compact(
        self, messages: Sequence[Message], reason: CompactReason
    ) -> list[Message] | None:
        assert self.inner is not None
        result = await self.inner.compact(messages, reason)
        if result is not None and len(result) < len(messages):
            self.compactions += 1
        return result


class StepLimit(SimError):
    """A run asked more steps than its bound: it does not end (a livelock)."""


@dataclass(eq=False)
class RunFaults:
    """The run-level faults of ``plan`` at their steps, through ``before_step``. Steps are
    counted across crashes (the resumed driver asks the crashed step again: not counted twice,
    no fault strikes twice); injected messages wait for the next ``Start``, where the brain takes
    them; one step more than ``max_steps`` raises ``StepLimit``."""

    plan: FaultPlan
    _: KW_ONLY
    max_steps: int = 10_000
    steps: int = 0
    crashes: int = 0
    fired: Counter[str] = field(default_factory=Counter)
    _done: set[int] = field(default_factory=set)
    _injects: list[str] = field(default_factory=list)

    def before_step(self, point: StepPoint) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise StepLimit(f"no Done after {self.max_steps} steps")
        for i, fault in enumerate(self.plan.faults):
            if fault.step != self.steps or i in self._done:
                continue
            self._done.add(i)
            self.fired[fault.kind] += 1
            self._strike(fault, point)
        if self._injects and isinstance(point.machine.state, Start):
            for text in self._injects:
                point.inject(Message.user(text))
            self._injects.clear()

    def _strike(self, fault: Fault, point: StepPoint) -> None:
        if fault.kind == "cancel":
            point.cancel({"step": self.steps, "reason": fault.message or "scheduled"})
        elif fault.kind == "crash":
            self.steps -= 1  # the resumed driver asks this step again
            self.crashes += 1
            raise Crash(self.steps + 1)
        elif fault.kind == "compact_now":
            point.request_compaction()
        elif fault.kind == "inject":
            assert fault.text is not None
            self._injects.append(fault.text)


async def run_resuming(
    loop: BareLoop,
    input: str | Message | None,
    body: Callable[[LoopMachine], BareLoop],
    tools: ToolFaults,
    observers: Sequence[LoopObserver],
) -> tuple[RunResult, BareLoop]:
    """Run ``loop`` to its end through the crashes its ``before_step`` raises; the result and
    the last body. At a ``Crash`` the brain is saved as JSON and read back, as a restarted
    process finds it, the observers get a ``crash`` io event, and a fresh body resumes it; a
    compaction the user requested is asked of it again (the request stands until answered)."""
    while True:
        cancel = tools.cancel = CancelSignal()
        try:
            return await loop.run(input, cancel), loop
        except Crash as crash:
            saved = loop.machine.model_dump_json()
            restored = LoopMachine.model_validate_json(saved)
            if restored != loop.machine:
                raise SimulationError(f"step {crash.step}: the restored machine differs") from None
            data = {"step": crash.step, "snapshot_bytes": len(saved), "digest": restored.digest()}
            event = IoEvent(kind="crash", data=data)
            for observer in observers:
                observer.io(event)
            requested = loop.policy().compact_now
            loop = body(restored)
            if requested:
                loop.request_compaction()
            input = None


def layer_counts(
    client: FaultyClient, tools: ToolFaults, run_faults: RunFaults, counting: Counting
) -> dict[str, Any]:
    """``SimResult``'s counts from a run's layers (``simulate_driver``'s, ``run_agent``'s)."""
    return {
        "steps": run_faults.steps,
        "model_requests": client.requests,
        "replies": client.replies,
        "retries": counting.retries,
        "tool_calls": tools.calls,
        "compactions": counting.compactions,
        "crashes": run_faults.crashes,
        "fired": client.fired + tools.fired + run_faults.fired,
    }


def chain_before_step(
    *hooks: Callable[[StepPoint], None] | None,
) -> Callable[[StepPoint], None] | None:
    """One ``before_step`` hook that calls ``hooks`` in order (None ones left out)."""
    live = [h for h in hooks if h is not None]
    if not live:
        return None
    if len(live) == 1:
        return live[0]

    def both(point: StepPoint) -> None:
        for hook in live:
            hook(point)

    return both
