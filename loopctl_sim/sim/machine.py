"""The machine-level simulator: drive a bare ``LoopMachine`` synchronously against a ``World``.

What the driver does, minus the IO: ask the brain, do what it says in the scripted world, report
back through exactly one feed. Model faults become what the driver would feed (retries then
``fail``; an overflow a count over the emergency line; duplicate ids a provider error).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any

from loopctl.api import ApiError, Usage
from loopctl.core import (
    CallLLM,
    CallTools,
    Compact,
    CompactReason,
    Completed,
    Done,
    Failed,
    LoopMachine,
    MachineOutcome,
    MachinePolicy,
    Message,
    Start,
)
from loopctl.driver import check_call_ids, retry_delay
from loopctl_sim.errors import SimError
from loopctl_sim.sim.faults import FaultPlan
from loopctl_sim.sim.world import (
    ToolHang,
    World,
    delivered_reply,
    estimate_tokens,
    fault_error,
    middle_out,
    run_tool,
)
from loopctl_sim.trace import RecordingMachine, TraceWriter


class SimulationError(SimError):
    """The simulation itself went wrong (not the run): a restore that differs, a runaway loop."""


@dataclass
class SimResult:
    world: str
    outcome: MachineOutcome
    machine: LoopMachine
    steps: int = 0
    model_requests: int = 0
    replies: int = 0
    retries: int = 0
    tool_calls: int = 0
    compactions: int = 0
    crashes: int = 0
    trace: str | None = None
    #: the faults that struck, by kind
    fired: Counter[str] = field(default_factory=Counter)

    @property
    def final_text(self) -> str | None:
        return self.outcome.final_text if isinstance(self.outcome, Completed) else None

    @property
    def digest(self) -> str:
        return self.machine.digest()

    def summary(self) -> str:
        outcome = str(getattr(self.outcome, "kind", self.outcome))  # None: an agent's run raised
        if isinstance(self.outcome, Failed):
            outcome += f" ({self.outcome.error})"
        return (
            f"{self.world}: {outcome}; {self.steps} steps, {self.model_requests} model requests "
            f"({self.retries} retries), {self.tool_calls} tool calls, {self.compactions} "
            f"compactions, {self.crashes} crash-restores; digest {self.digest}"
        )


class SimRun:
    """One run of a world against a recording brain, to ``Done`` (``go()``); ``simulate`` is the
    usual door, the fuzzer runs one on its own checking brain."""

    def __init__(self, world: World, rec: RecordingMachine) -> None:
        self.world = world
        self.rec = rec
        self.plan = FaultPlan(world.faults)
        self.policy = world.run_policy()
        self.retry_config = world.retry_config()
        self.result = SimResult(
            world=world.name, outcome=Completed(final_text=""), machine=rec.machine
        )
        self.per_tool: Counter[str] = Counter()
        self.injects: list[str] = []
        # a compaction request stands until a Compact(MANUAL) step answers it, as in BareLoop
        self.compact_requested = False

    def go(self) -> SimResult:
        rec, world, result = self.rec, self.world, self.result
        rec.accept_input(world.input)
        while True:
            result.steps += 1
            if result.steps > world.max_steps:
                raise SimulationError(f"{world.name}: no Done after {world.max_steps} steps")
            policy = self._run_faults(result.steps)
            if self.injects and isinstance(rec.machine.state, Start):
                for text in self.injects:
                    rec.inject(Message.user(text))
                self.injects.clear()
            step = rec.next_step(policy)
            if isinstance(step, CallLLM):
                self._call_model(step.turn, policy)
            elif isinstance(step, CallTools):
                self._call_tools(step)
            elif isinstance(step, Compact):
                if step.reason is CompactReason.MANUAL:
                    self.compact_requested = False
                self._compact(step)
            else:
                assert isinstance(step, Done)
                if isinstance(step.outcome, Completed):
                    rec.commit_pending()
                else:
                    rec.discard_pending()
                result.outcome = step.outcome
                result.machine = rec.machine
                return result

    def _run_faults(self, step: int) -> MachinePolicy:
        rec = self.rec
        for fault in self.plan.run_faults(step):
            self.result.fired[fault.kind] += 1
            if fault.kind == "cancel":
                rec.io("cancel", data={"step": step, "reason": fault.message or "scheduled"})
                rec.cancel()
            elif fault.kind == "crash":
                saved = rec.machine.model_dump_json()
                restored = LoopMachine.model_validate_json(saved)
                if restored != rec.machine:
                    raise SimulationError(
                        f"step {step}: the restored machine differs from the saved one"
                    )
                rec.io(
                    "crash",
                    data={"step": step, "snapshot_bytes": len(saved), "digest": restored.digest()},
                )
                rec.replace(restored)
                self.result.crashes += 1
            elif fault.kind == "compact_now":
                self.compact_requested = True
            elif fault.kind == "inject":
                assert fault.text is not None
                self.injects.append(fault.text)
        if self.compact_requested:
            return self.policy.model_copy(update={"compact_now": True})
        return self.policy

    def _call_model(self, turn: int, policy: MachinePolicy) -> None:
        rec, world, result = self.rec, self.world, self.result
        attempt = 0
        conversation = rec.machine.messages()
        rec.io(
            "model_request",
            turn=turn,
            data={
                "n_messages": len(conversation),
                "tools": list(policy.tools),
                # the message itself: the trace writer turns it into data (only when tracing)
                "last": conversation[-1] if conversation else None,
            },
        )
        while True:
            result.model_requests += 1
            fault = self.plan.model_fault(result.model_requests)
            if fault is not None:
                result.fired[fault.kind] += 1
            try:
                error = fault_error(fault, policy) if fault is not None else None
                if error is not None:
                    raise error
                message = world.model.reply(conversation, result.replies)
                tokens = world.model.context_tokens(conversation, message, result.replies)
                usage = Usage.context(tokens)
                reply = delivered_reply(fault, message, usage, result.model_requests)
                check_call_ids(reply.message)
            except ApiError as exc:
                rec.io(
                    "model_error",
                    turn=turn,
                    data={
                        "attempt": attempt,
                        "error": exc.error.model_dump(mode="json"),
                        "fault": fault.kind if fault is not None else None,
                    },
                )
                delay = retry_delay(exc, attempt, self.retry_config, 0.0)
                if delay is not None:
                    attempt += 1
                    result.retries += 1
                    rec.io(
                        "retry",
                        turn=turn,
                        data={"attempt": attempt, "delay_s": delay, "kind": exc.error.kind},
                    )
                    continue
                if exc.error.kind == "context_overflow":
                    # the brain withdraws the call for an over-the-line count: Compact(EMERGENCY)
                    rec.set_context_tokens(policy.emergency_tokens)
                    return
                rec.fail(exc.error)
                return
            result.replies += 1
            rec.io(
                "model_reply",
                turn=turn,
                data={
                    "message": reply.message,
                    "usage": reply.usage,
                    "stop_reason": reply.stop_reason,
                    "attempts": attempt + 1,
                },
            )
            context = reply.usage.context_tokens
            if context is None:
                context = rec.machine.context_tokens + estimate_tokens([reply.message])
            rec.model_response(reply.message, context)
            return

    def _call_tools(self, step: CallTools) -> None:
        rec, world = self.rec, self.world
        results = []
        for call in step.calls:
            self.result.tool_calls += 1
            self.per_tool[call.name] += 1
            fault = self.plan.tool_fault(
                self.result.tool_calls, call.name, self.per_tool[call.name]
            )
            if fault is not None:
                self.result.fired[fault.kind] += 1
            rec.io(
                "tool_call",
                turn=step.turn,
                data={"id": call.id, "name": call.name, "arguments": call.arguments},
            )
            try:
                res = run_tool(call, world.tools.get(call.name), fault, world.tool_timeout)
            except ToolHang:
                rec.io(
                    "cancel",
                    turn=step.turn,
                    data={"reason": f"tool '{call.name}' hung and has no timeout"},
                )
                rec.cancel()
                return
            rec.io(
                "tool_result",
                turn=step.turn,
                data={
                    "id": res.call_id,
                    "name": res.name,
                    "content": res.content,
                    "is_error": res.is_error,
                    "fault": fault.kind if fault is not None else None,
                },
            )
            results.append(res)
        message = Message.from_results(results)
        rec.tool_results(message, rec.machine.context_tokens + estimate_tokens([message]))

    def _compact(self, step: Compact) -> None:
        rec, world = self.rec, self.world
        before = rec.machine.context_tokens
        messages = rec.machine.messages()
        compacted = middle_out(messages, world.keep_head, world.keep_tail)
        if compacted is None:
            rec.io("compaction", data={"reason": step.reason.value, "noop": True, "before": before})
            rec.compaction_noop(before, before)
            return
        after = estimate_tokens(compacted)
        rec.io(
            "compaction",
            data={
                "reason": step.reason.value,
                "noop": False,
                "before": before,
                "after": after,
                "messages_before": len(messages),
                "messages_after": len(compacted),
            },
        )
        self.result.compactions += 1
        rec.compaction_result(compacted, before, after)


def simulate(
    world: World,
    trace: str | os.PathLike[str] | IO[str] | TraceWriter | None = None,
    *,
    created: str | None = None,
    metadata: dict[str, Any] | None = None,
    fsync: bool = False,
) -> SimResult:
    """Run ``world`` against a fresh brain (holding ``world.history``), recording a trace to
    ``trace`` when given. Deterministic: the same world gives the same trace (pass ``created``
    to fix the header's time too)."""
    meta = {"world": world.name, "simulated": True, **world.metadata, **(metadata or {})}
    rec = RecordingMachine(
        LoopMachine(world.history), trace, metadata=meta, fsync=fsync, created=created
    )
    try:
        result = SimRun(world, rec).go()
    finally:
        if trace is not None and not isinstance(trace, TraceWriter):
            rec.close()
    result.trace = None if rec.writer is None else rec.writer.path
    return result
