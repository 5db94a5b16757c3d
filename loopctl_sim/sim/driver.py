"""Driver level: the same worlds through ``BareLoop``, and replay of a trace through ``BareLoop``.

``simulate_driver(world)`` runs the real driver (retries, fold, tool dispatch, compaction, cancel,
crash and resume via ``from_machine``) against the world: ``WorldClient`` is a scripted
``ApiClient`` that applies the world's model faults, a tool middleware answers every call from
the world's tools and tool faults, and run-level faults are applied before the driver asks its
next step. Sleeping is a no-op and the retry jitter is off, so the run is deterministic.

``replay_driver(trace)`` replays a trace through a fresh ``BareLoop`` whose client and tools
answer from the trace itself: each model attempt gets the recorded reply or error (retried only
where the trace retried), each tool call the recorded result, each compaction the recorded
outcome. A checking observer compares every step and feed the driver gives the brain with the
trace, digests included, and the client checks that every request matches the recorded request
summary (number of messages, tools, last message). This keeps the driver honest, not just the
brain. Limits: the whole trace is held in memory; the driver's default estimator
(``CharEstimator``) is assumed.

The run-level hooks use two private methods of ``BareLoop`` (``_feed`` and ``_emit``): a
scheduled cancel or injection must enter exactly where the trace has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter, defaultdict, deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, NoReturn

from loopctl.api import ApiError, ModelRequest, StreamEvent, Usage
from loopctl.core import (
    CompactReason,
    LoopError,
    LoopMachine,
    MachinePolicy,
    MachineStep,
    Message,
    Start,
    ToolCall,
    ToolResult,
)
from loopctl.driver import BareLoop, IoEvent, LoopObserver, RetryConfig, RunConfig, SessionConfig
from loopctl.driver.cancel import CancelSignal
from loopctl.driver.compaction import MiddleOutCompactor
from loopctl.tools import NextTool, Tool, ToolRegistry
from loopctl_sim.replay.machine import Divergence, RecentFeed, ReplayResult
from loopctl_sim.sim.machine import SimError, SimResult
from loopctl_sim.sim.world import (
    FaultPlan,
    ToolHang,
    World,
    fault_error,
    faulty_reply,
    message_events,
    run_tool,
)
from loopctl_sim.trace.feeds import encode_feed_args
from loopctl_sim.trace.recorder import TraceRecorder
from loopctl_sim.trace.records import (
    EndRecord,
    HeaderRecord,
    IoRecord,
    Record,
    StepRecord,
    TraceFormatError,
    TraceReader,
    TraceWriter,
)

__all__ = ["WorldClient", "replay_driver", "simulate_driver", "simulate_driver_async"]


# --- shared plumbing ----------------------------------------------------------------------------


async def _no_sleep(seconds: float) -> None:
    return None


def _stub_tools(names: Sequence[str]) -> ToolRegistry:
    """Tools the driver can advertise; the middleware answers every call, so they never run."""

    def stub() -> str:  # pragma: no cover - never called
        raise AssertionError("a world tool runs through the middleware")

    return ToolRegistry(
        [Tool(stub, name=name, description=f"scripted tool {name}") for name in names]
    )


def _configs(policy: MachinePolicy, world: World | None = None) -> tuple[RunConfig, SessionConfig]:
    run = RunConfig(
        max_turns=policy.max_turns,
        compact_threshold=policy.compact_threshold,
        emergency_threshold=policy.emergency_threshold,
        loop_window=policy.loop_window,
        loop_repeat_limit=policy.loop_repeat_limit,
        loop_action=policy.loop_action,
        # Replaying, the trace decides: an error is retried exactly when the trace retried it.
        retry=world.retry_config() if world is not None else RetryConfig(max_retries=10**6),
        tool_timeout=world.tool_timeout if world is not None else None,
    )
    return run, SessionConfig(context_window=policy.context_window)


class _Crash(Exception):
    def __init__(self, step: int) -> None:
        super().__init__(f"crash before step {step}")
        self.step = step


Hook = Callable[["_HookedLoop"], None]


class _HookedLoop(BareLoop):
    """A ``BareLoop`` that runs ``before_step`` right before it builds each step's policy."""

    before_step: Hook | None = None

    def policy(self) -> MachinePolicy:
        if self.before_step is not None:
            self.before_step(self)
        return super().policy()

    def feed_now(self, name: str, **args: Any) -> None:
        self._feed(name, **args)

    def emit_now(self, event: IoEvent) -> None:
        self._emit(event)


# --- simulation ---------------------------------------------------------------------------------


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

    def before_step(self, loop: _HookedLoop) -> None:
        self.steps += 1
        if self.steps > self.world.max_steps:
            raise SimError(f"{self.world.name}: no Done after {self.world.max_steps} steps")
        for i, fault in enumerate(self.plan.faults):
            if fault.step != self.steps or i in self.fired:
                continue
            self.fired.add(i)
            if fault.kind == "cancel":
                loop.emit_now(
                    IoEvent(
                        kind="cancel",
                        data={"step": self.steps, "reason": fault.message or "scheduled"},
                    )
                )
                loop.feed_now("cancel")
            elif fault.kind == "crash":
                self.steps -= 1  # the resumed driver asks this step again
                raise _Crash(self.steps + 1)
            elif fault.kind == "compact_now":
                loop.request_compaction()
            elif fault.kind == "inject":
                assert fault.text is not None
                self.injects.append(fault.text)
        if self.injects and isinstance(loop.machine.state, Start):
            for text in self.injects:
                loop.feed_now("inject", message=Message.user(text))
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
    run_config, session = _configs(policy, world)
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

    def body(machine: LoopMachine) -> _HookedLoop:
        loop = _HookedLoop(
            client,
            _stub_tools(policy.tools),
            run_config,
            session,
            machine=machine,
            compactor=MiddleOutCompactor(world.keep_head, world.keep_tail),
            middleware=[state.tool_middleware],
            observers=observers,
            sleep=_no_sleep,
            rng=lambda: 0.0,
        )
        loop.before_step = state.before_step
        return loop

    loop = body(LoopMachine(world.history))
    input: str | Message | None = world.input
    try:
        while True:
            try:
                result = await loop.run(input, cancel)
                break
            except _Crash as crash:
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


# --- replay -------------------------------------------------------------------------------------


class _Diverged(BaseException):
    """Stops the replaying driver at the first divergence. A ``BaseException``, so that the
    driver's own recovery (``except Exception``: a broken stream becomes a provider error) does
    not swallow it."""


@dataclass
class _Attempt:
    request: dict[str, Any] | None
    reply: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    retried: bool = False


@dataclass
class _Plan:
    """What the world did, taken from the trace: model attempts, tool results, compactions."""

    attempts: deque[_Attempt] = field(default_factory=deque)
    results: dict[str, deque[ToolResult]] = field(default_factory=lambda: defaultdict(deque))
    compactions: deque[list[Message] | None] = field(default_factory=deque)


def _plan(records: Sequence[tuple[int, Record]]) -> _Plan:
    plan = _Plan()
    request: dict[str, Any] | None = None
    last: _Attempt | None = None
    for _, r in records:
        if isinstance(r, IoRecord):
            if r.kind == "model_request":
                request = r.data
            elif r.kind in ("model_reply", "model_error"):
                last = _Attempt(request)
                if r.kind == "model_reply":
                    last.reply = r.data
                else:
                    last.error = r.data.get("error")
                plan.attempts.append(last)
                continue
            elif r.kind == "retry" and last is not None:
                last.retried = True
            last = None if r.kind != "retry" else last
        elif r.type == "feed":
            if r.name == "tool_results":
                for res in r.args.message.tool_results:
                    plan.results[res.call_id].append(res)
            elif r.name == "compaction_result":
                plan.compactions.append(list(r.args.compacted))
            elif r.name == "compaction_noop":
                plan.compactions.append(None)
    return plan


def _summary(request: ModelRequest) -> dict[str, Any]:
    return {
        "n_messages": len(request.messages),
        "tools": [t.name for t in request.tools],
        "last": request.messages[-1].model_dump(mode="json") if request.messages else None,
    }


class _Checker(LoopObserver):
    """Compares what the driver does with the trace's brain records, in order."""

    def __init__(
        self, path: str, brain: Sequence[tuple[int, Record]], result: ReplayResult
    ) -> None:
        self.path = path
        self.brain = brain
        self.pos = 0
        self.result = result
        self.recent: deque[RecentFeed] = deque(maxlen=3)

    def peek(self) -> tuple[int, Record] | None:
        return self.brain[self.pos] if self.pos < len(self.brain) else None

    def fail(
        self, line: int, seq: int, what: str, message: str, expected: Any, actual: Any
    ) -> NoReturn:
        if self.result.divergence is not None:  # the first divergence is the one to report
            raise _Diverged
        self.result.divergence = Divergence(
            seq, line, what, message, expected, actual, list(self.recent)
        )
        raise _Diverged

    def _next(self, kind: str, actual: Any) -> tuple[int, Record]:
        item = self.peek()
        if item is None:
            self.fail(
                0, -1, kind, f"the driver went on ({kind}) after the trace ended", None, actual
            )
        assert item is not None
        self.pos += 1
        return item

    def step(self, policy: MachinePolicy, step: MachineStep, machine: LoopMachine) -> None:
        actual = {"policy": policy.model_dump(mode="json"), "step": step.model_dump(mode="json")}
        line, rec = self._next("step", actual)
        if not isinstance(rec, StepRecord) or rec.policy != policy or rec.step != step:
            self.fail(
                line, rec.seq, "step", "the driver asked another step", _brain_view(rec), actual
            )
        self.result.steps += 1

    def feed(self, name: str, args: Any, machine: LoopMachine) -> None:
        data = encode_feed_args(name, args)
        digest = machine.digest()
        actual = {"name": name, "args": data, "digest": digest}
        line, rec = self._next("feed", actual)
        self.recent.append(RecentFeed(rec.seq, line, name, data))
        if (
            rec.type != "feed"
            or rec.name != name
            or rec.args.model_dump(mode="json") != data
            or rec.digest != digest
        ):
            self.fail(
                line,
                rec.seq,
                "feed",
                f"the driver fed {name}() differently",
                _brain_view(rec),
                actual,
            )
        self.result.feeds += 1

    def run_ended(self, machine: LoopMachine) -> None:
        line, rec = self._next("end", None)
        outcome = machine.state.outcome if machine.is_terminal else None  # type: ignore[union-attr]
        actual = {
            "outcome": None if outcome is None else outcome.model_dump(mode="json"),
            "digest": machine.digest(),
        }
        if not isinstance(rec, EndRecord) or _brain_view(rec) != {**actual}:
            self.fail(
                line, rec.seq, "outcome", "the run ended differently", _brain_view(rec), actual
            )
        self.result.complete = True
        self.result.outcome = actual["outcome"]


def _brain_view(rec: Record) -> dict[str, Any]:
    data = rec.model_dump(mode="json")
    for key in ("seq", "type", "scrubbed"):
        data.pop(key, None)
    return data


class _ReplayClient:
    def __init__(self, plan: _Plan, checker: _Checker) -> None:
        self.plan = plan
        self.checker = checker

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if not self.plan.attempts:
            self.checker.fail(
                0,
                -1,
                "request",
                "the driver called the model more often than the trace",
                None,
                _summary(request),
            )
        attempt = self.plan.attempts.popleft()
        if attempt.request is not None and attempt.request != _summary(request):
            self.checker.fail(
                0,
                -1,
                "request",
                "the driver sent another request",
                attempt.request,
                _summary(request),
            )
        if attempt.error is not None:
            raise ApiError(LoopError.model_validate(attempt.error), should_retry=attempt.retried)
        assert attempt.reply is not None
        message = Message.model_validate(attempt.reply["message"])
        usage = Usage.model_validate(attempt.reply.get("usage") or {})
        for event in message_events(message, usage):
            yield event


class _ReplayCompactor:
    def __init__(self, plan: _Plan) -> None:
        self.plan = plan

    async def compact(
        self, messages: Sequence[Message], reason: CompactReason
    ) -> list[Message] | None:
        if not self.plan.compactions:
            raise RuntimeError("the trace holds no more compactions")
        return self.plan.compactions.popleft()


def replay_driver(path: str | os.PathLike[str]) -> ReplayResult:
    """Replay the trace at ``path`` through ``BareLoop`` (see the module docstring)."""
    reader = TraceReader(path)
    records = list(reader.numbered())
    result = ReplayResult(path=reader.path, records=len(records))
    result.warnings = reader.warnings
    result.io = sum(1 for _, r in records if r.type == "io")
    if not records:
        return result
    with contextlib.suppress(_Diverged):
        asyncio.run(_replay_driver(reader.path, records, result))
    return result


async def _replay_driver(
    path: str, records: list[tuple[int, Record]], result: ReplayResult
) -> None:
    plan = _plan(records)
    brain = [(line, r) for line, r in records if r.type != "io"]
    checker = _Checker(path, brain, result)
    first_step = next((r for _, r in brain if isinstance(r, StepRecord)), None)
    policy = first_step.policy if first_step is not None else MachinePolicy()
    run_config, session = _configs(policy)
    cancel = CancelSignal()

    async def answer(call: ToolCall, next_tool: NextTool) -> ToolResult:
        queue = plan.results.get(call.id)
        if queue:
            return queue.popleft()
        cancel.cancel()  # the trace has no result: the run was cancelled while it ran
        await asyncio.Event().wait()
        raise AssertionError("unreachable")  # pragma: no cover

    def before_step(loop: _HookedLoop) -> None:
        item = checker.peek()
        while item is not None:
            rec = item[1]
            if rec.type == "feed" and rec.name in ("cancel", "inject"):
                loop.feed_now(rec.name, **dict(rec.args))
            elif isinstance(rec, HeaderRecord):  # a resume: the recorded driver crashed here
                raise _Crash(0)
            else:
                if isinstance(rec, StepRecord) and rec.policy.compact_now:
                    loop.request_compaction()
                return
            item = checker.peek()

    def body(machine: LoopMachine) -> _HookedLoop:
        loop = _HookedLoop(
            _ReplayClient(plan, checker),
            _stub_tools(policy.tools),
            run_config,
            session,
            machine=machine,
            compactor=_ReplayCompactor(plan),
            middleware=[answer],
            observers=[checker],
            sleep=_no_sleep,
            rng=lambda: 0.0,
        )
        loop.before_step = before_step
        return loop

    loop: _HookedLoop | None = None
    while (item := checker.peek()) is not None:
        line, rec = item
        if not isinstance(rec, HeaderRecord):
            checker.fail(
                line,
                rec.seq,
                "header",
                "the driver stopped before the trace did",
                _brain_view(rec),
                None,
            )
        checker.pos += 1
        if rec.snapshot is not None and rec.snapshot.started:
            result.resumes += 1
        else:
            result.runs += 1
        try:
            machine = rec.machine()
        except ValueError as exc:
            raise TraceFormatError(
                path, line, f"the header's snapshot does not restore: {exc}"
            ) from None
        if loop is not None:
            previous = loop.machine
            expected = previous.next_run() if previous.finalized else previous
            if expected != machine:
                checker.fail(
                    line,
                    rec.seq,
                    "snapshot",
                    "the header's snapshot does not continue the replayed run",
                    expected.model_dump(),
                    machine.model_dump(),
                )
            if not previous.finalized:
                machine = expected
        loop = body(machine)
        input = _input_of(checker) if not machine.started else None
        try:
            await loop.run(input, cancel)
        except _Crash:
            continue
    if loop is not None:
        result.machine = loop.machine
        result.final_digest = loop.machine.digest()


def _input_of(checker: _Checker) -> Message | None:
    item = checker.peek()
    if item is not None and item[1].type == "feed" and item[1].name == "accept_input":
        message: Message = item[1].args.input
        return message
    return None
