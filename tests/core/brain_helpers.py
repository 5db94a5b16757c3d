"""Builders for the brain's tests: messages, and machines brought into every state by feeds only.

Named ``brain_helpers`` (not ``helpers``) because test directories are not packages here and two
modules of one name would shadow each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loopctl import (
    CallLLM,
    CallTools,
    Compact,
    CompactReason,
    Completed,
    Done,
    LoopError,
    LoopMachine,
    MachinePolicy,
    MachineStep,
    Message,
    ProviderPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
)

POLICY = MachinePolicy(tools=("read", "write"), context_window=1000)
"""Threshold at 800 tokens, emergency line at 950."""


def call(id: str, name: str = "read", **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


def ask(*calls: ToolCall, text: str = "") -> Message:
    """An assistant reply asking for ``calls``."""
    return Message.assistant(text, tool_calls=list(calls))


def answer(*calls: ToolCall, content: str = "ok") -> Message:
    """The results message answering ``calls`` in order."""
    return Message.from_results(
        [ToolResult(call_id=c.id, name=c.name, content=f"{content}:{c.id}") for c in calls]
    )


def exchange_messages(n: int) -> list[Message]:
    """A provider-valid history of ``n`` complete exchanges (4 messages each)."""
    out: list[Message] = []
    for i in range(n):
        c = call(f"h{i}", path=f"/h/{i}")
        out += [Message.user(f"q{i}"), ask(c), answer(c), Message.assistant(f"a{i}")]
    return out


def tool_turn(m: LoopMachine, reply: Message, tokens: int) -> None:
    """One turn through feeds: the model asked, ``reply`` (asking for tools) answered, its
    calls dispatched and answered (``answer``), back in ``Start``."""
    m.next_step(POLICY)
    m.model_response(reply, tokens)
    m.next_step(POLICY)
    m.tool_results(answer(*reply.tool_calls))


def reasoning() -> LoopMachine:
    """A run whose conversation holds parts version 1 lacks (content version 2)."""
    m = LoopMachine([Message.user("earlier"), Message.assistant("before")])
    m.accept_input("go")
    reply = Message(
        role="assistant",
        parts=(
            ThinkingPart(provider="anthropic", text="hmm", signature="sig"),
            *ask(call("c1", path="/a")).parts,
            ProviderPart(provider="anthropic", data={"type": "citation", "n": 1}),
        ),
    )
    tool_turn(m, reply, 10)
    return m


def started(history: list[Message] | None = None, context_tokens: int = 0) -> LoopMachine:
    m = LoopMachine(history or [], context_tokens)
    m.accept_input("go")
    return m


def awaiting_model(policy: MachinePolicy = POLICY) -> LoopMachine:
    m = started()
    assert isinstance(m.next_step(policy), CallLLM)
    return m


def after_exchange(policy: MachinePolicy = POLICY) -> LoopMachine:
    """Back in ``Start`` after one complete exchange (turn 1 used)."""
    m = awaiting_model(policy)
    c = call("c1", path="/a")
    m.model_response(ask(c), 100)
    assert isinstance(m.next_step(policy), CallTools)
    m.tool_results(answer(c))
    return m


def awaiting_tools(policy: MachinePolicy = POLICY) -> LoopMachine:
    """Turn 2 asked for a known call, an unknown one and another known one."""
    m = after_exchange(policy)
    assert m.next_step(policy) == CallLLM(turn=2)
    m.model_response(ask(call("k1", x=1), call("u1", "nope"), call("k2", "write", y=2)), 200)
    assert isinstance(m.next_step(policy), CallTools)
    return m


def awaiting_compaction(reason: CompactReason) -> LoopMachine:
    m = after_exchange()
    policy = POLICY
    if reason is CompactReason.MANUAL:
        policy = POLICY.model_copy(update={"compact_now": True})
    elif reason is CompactReason.EMERGENCY:
        m.set_context_tokens(960)
    else:
        m.set_context_tokens(850)
    assert m.next_step(policy) == Compact(reason=reason)
    return m


def completed() -> LoopMachine:
    m = after_exchange()
    m.next_step(POLICY)
    m.model_response(Message.assistant("done"), 300)
    assert m.next_step(POLICY) == Done(outcome=Completed(final_text="done"))
    return m


def committed() -> LoopMachine:
    m = completed()
    m.commit_pending()
    return m


def cancelled_mid_tools() -> LoopMachine:
    m = awaiting_tools()
    m.cancel()
    return m


def failed_mid_model() -> LoopMachine:
    m = awaiting_model()
    m.fail(LoopError(kind="network", message="connection reset", retryable=True))
    return m


def failed_mid_tools_discarded() -> LoopMachine:
    m = awaiting_tools()
    m.fail(LoopError(kind="tool", message="boom"))
    m.discard_pending()
    return m


def max_turns() -> LoopMachine:
    m = after_exchange()
    m.next_step(POLICY.model_copy(update={"max_turns": 1}))
    return m


def warned() -> LoopMachine:
    """Awaiting the model after a loop warning was appended."""
    m = started()
    for i in range(3):
        m.next_step(POLICY)
        c = call(f"r{i}", path="/same")
        m.model_response(ask(c), 100)
        m.next_step(POLICY)
        m.tool_results(answer(c))
    assert isinstance(m.next_step(POLICY), CallLLM)
    assert m.loop_window.warned
    return m


SCENARIOS: dict[str, Callable[[], LoopMachine]] = {
    "fresh": LoopMachine,
    "started": started,
    "awaiting_model": awaiting_model,
    "after_exchange": after_exchange,
    "awaiting_tools": awaiting_tools,
    "compaction_manual": lambda: awaiting_compaction(CompactReason.MANUAL),
    "compaction_emergency": lambda: awaiting_compaction(CompactReason.EMERGENCY),
    "compaction_threshold": lambda: awaiting_compaction(CompactReason.THRESHOLD_EXCEEDED),
    "warned": warned,
    "completed": completed,
    "committed": committed,
    "cancelled_mid_tools": cancelled_mid_tools,
    "failed_mid_model": failed_mid_model,
    "failed_mid_tools_discarded": failed_mid_tools_discarded,
    "max_turns": max_turns,
}
"""Machines in every state (and the interesting variants of each), built through feeds only."""

BY_STATE: dict[str, Callable[[], LoopMachine]] = {
    "start": started,
    "awaiting_model": awaiting_model,
    "awaiting_tools": awaiting_tools,
    "awaiting_compaction": lambda: awaiting_compaction(CompactReason.THRESHOLD_EXCEEDED),
    "terminal": completed,
}
"""One representative machine per state kind (the keys are ``loopctl.core.machine.STATES``)."""


def respond(machine: LoopMachine, step: MachineStep) -> None:
    """A deterministic driver's answer to ``step``: the same step always gets the same feed.

    Turn 1 and 2 ask for a tool (turn 2 also for an unknown one), turn 3 answers in text.
    Compaction keeps only the last message of history and the run's input.
    """
    if isinstance(step, CallLLM):
        if step.turn >= 3:
            machine.model_response(Message.assistant(f"final after {step.turn}"), 100 * step.turn)
        else:
            calls = [call(f"t{step.turn}", path=f"/{step.turn}")]
            if step.turn == 2:
                calls.append(call("t2u", "missing"))
            machine.model_response(ask(*calls), 100 * step.turn)
    elif isinstance(step, CallTools):
        machine.tool_results(answer(*step.calls))
    elif isinstance(step, Compact):
        machine.compaction_result([Message.user("summary")], machine.context_tokens, 10)
    elif isinstance(step.outcome, Completed):
        if not machine.finalized:
            machine.commit_pending()
    elif not machine.finalized:
        machine.discard_pending()


def drive(
    machine: LoopMachine, policy: MachinePolicy = POLICY, limit: int = 12
) -> list[tuple[MachineStep, str]]:
    """Play ``respond`` until the run is over (or ``limit`` steps); the steps and digests seen."""
    seen: list[tuple[MachineStep, str]] = []
    for _ in range(limit):
        step = machine.next_step(policy)
        respond(machine, step)
        seen.append((step, machine.digest()))
        if isinstance(step, Done):
            break
    return seen
