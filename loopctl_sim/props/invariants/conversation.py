"""Provider validity, modelled independently of the brain (a checker that trusts the code under
test cannot catch it lying): which conversations a provider accepts, the largest salvageable
prefix of a run's pending messages, and when an open tail (calls in flight) is allowed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from loopctl.core import (
    AwaitingTools,
    Cancelled,
    Failed,
    LoopMachine,
    Message,
    Terminal,
    ToolCall,
    ToolResult,
)


def calls_in(message: Message) -> list[ToolCall]:
    """The tool calls among ``message``'s parts (read from the parts, not ``tool_calls``)."""
    return [p for p in message.parts if isinstance(p, ToolCall)]


def results_in(message: Message) -> list[ToolResult]:
    """The tool results among ``message``'s parts (read from the parts, not ``tool_results``)."""
    return [p for p in message.parts if isinstance(p, ToolResult)]


def provider_problems(messages: Sequence[Message], *, open_tail: bool = False) -> list[str]:
    """Why ``messages`` would be rejected by a provider ([] when valid): tool calls only in
    assistant messages, results only in user messages; calls answered at once by one user
    message, exactly and once each; ``open_tail``: the last message's calls may be in flight."""
    problems: list[str] = []
    awaiting: list[str] | None = None
    for i, message in enumerate(messages):
        calls = calls_in(message)
        results = results_in(message)
        if calls and message.role != "assistant":
            problems.append(f"message {i} ({message.role}) holds tool calls")
        if results and message.role != "user":
            problems.append(f"message {i} ({message.role}) holds tool results")
        ids = [r.call_id for r in results]
        if awaiting is not None:
            if message.role != "user" or Counter(ids) != Counter(awaiting):
                problems.append(f"message {i} answers {ids} but the calls before it are {awaiting}")
            awaiting = None
        elif results:
            problems.append(f"message {i} holds results {ids} for no call right before it")
        if calls:
            awaiting = [c.id for c in calls]
            if len(set(awaiting)) != len(awaiting) or "" in awaiting:
                problems.append(f"message {i} repeats a call id or has an empty one: {awaiting}")
    if awaiting is not None and not open_tail:
        problems.append(f"the last message's calls {awaiting} have no results")
    return problems


def maximal_coherent_prefix(history: Sequence[Message], pending: Sequence[Message]) -> int:
    """The independent reference for salvage: the largest k such that history + pending[:k] is
    provider-valid and pending[:k] ends right after a complete exchange (0 if none does)."""
    for k in range(len(pending), 0, -1):
        last = pending[k - 1]
        if last.role != "user" or not results_in(last) or k < 2:
            continue
        if not provider_problems([*history, *pending[:k]]):
            return k
    return 0


def open_tail_allowed(machine: LoopMachine) -> bool:
    """Unanswered calls at the end are allowed while tools run, and on a machine cancelled or
    failed while tools ran until its exit door (``discard_pending``) drops them."""
    state = machine.state
    if isinstance(state, AwaitingTools):
        return True
    return (
        isinstance(state, Terminal)
        and isinstance(state.outcome, Cancelled | Failed)
        and not machine.finalized
    )
