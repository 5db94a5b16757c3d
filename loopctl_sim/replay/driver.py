"""Driver-level replay: a trace re-run through a fresh ``BareLoop`` that answers from the trace.

``replay_driver(trace)`` replays a trace through a fresh ``BareLoop`` whose client and tools
answer from the trace itself: each model attempt gets the recorded reply or error (retried only
where the trace retried), each tool call the recorded result, each compaction the recorded
outcome. A checking observer compares every step and feed the driver gives the brain with the
trace, digests included, and the client checks that every request matches the recorded request
summary (number of messages, tools, last message). This keeps the driver honest, not just the
brain. Recorded cancels and injections are given through the driver's public ``before_step``
seam at the step where the trace has them; a header in the middle of a run (a resume after a
crash) stops the run there and resumes the brain in a fresh body. Limits: the whole trace is held
in memory; the driver's default estimator (``CharEstimator``) is assumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from loopctl.api import ApiError, ModelRequest, StreamEvent, Usage
from loopctl.core import (
    CompactReason,
    LoopError,
    LoopMachine,
    MachinePolicy,
    MachineStep,
    Message,
    ToolCall,
    ToolResult,
)
from loopctl.driver import BareLoop, CancelSignal, LoopObserver, StepPoint
from loopctl.tools import NextTool
from loopctl_sim.replay.report import Divergence, RecentFeed, ReplayResult
from loopctl_sim.sim import Crash, configs_for, message_events, no_sleep, stub_tools
from loopctl_sim.trace import (
    EndRecord,
    HeaderRecord,
    IoRecord,
    Record,
    StepRecord,
    TraceFormatError,
    TraceReader,
    encode_feed_args,
)

__all__ = ["replay_driver"]


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
    run_config, session = configs_for(policy)
    cancel = CancelSignal()

    async def answer(call: ToolCall, next_tool: NextTool) -> ToolResult:
        queue = plan.results.get(call.id)
        if queue:
            return queue.popleft()
        cancel.cancel()  # the trace has no result: the run was cancelled while it ran
        await asyncio.Event().wait()
        raise AssertionError("unreachable")  # pragma: no cover

    def before_step(point: StepPoint) -> None:
        item = checker.peek()
        while item is not None:
            rec = item[1]
            if rec.type == "feed" and rec.name in ("cancel", "inject"):
                if rec.name == "cancel":
                    point.cancel()
                else:
                    point.inject(rec.args.message)
            elif isinstance(rec, HeaderRecord):  # a resume: the recorded driver crashed here
                raise Crash(0)
            else:
                if isinstance(rec, StepRecord) and rec.policy.compact_now:
                    point.request_compaction()
                return
            item = checker.peek()

    def body(machine: LoopMachine) -> BareLoop:
        return BareLoop(
            _ReplayClient(plan, checker),
            stub_tools(policy.tools),
            run_config,
            session,
            machine=machine,
            compactor=_ReplayCompactor(plan),
            middleware=[answer],
            observers=[checker],
            sleep=no_sleep,
            rng=lambda: 0.0,
            before_step=before_step,
        )

    loop: BareLoop | None = None
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
        except Crash:
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
