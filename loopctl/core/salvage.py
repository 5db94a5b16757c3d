"""Pure helpers about the shape of a conversation: coherence and salvage.

A conversation is *provider-valid* when every assistant message with tool calls is followed at
once by a user message whose results answer exactly those calls, and every result answers a call
of the assistant message right before it. Providers reject anything else, and a history that holds
a call without its result is poisoned for good, so the brain keeps this invariant at every feed.
"""

from __future__ import annotations

from collections.abc import Sequence

from loopctl.core.messages import Message


def coherent_prefix_length(pending: Sequence[Message]) -> int:
    """Length of the longest prefix of ``pending`` that ends right after a complete exchange.

    Only the brain appends result messages, always answering the assistant message before them,
    so the prefix ends at the last message holding results. No completed exchange: 0.
    """
    for i in range(len(pending) - 1, -1, -1):
        msg = pending[i]
        if msg.role == "user" and msg.tool_results:
            return i + 1
    return 0


def coherence_problem(messages: Sequence[Message], *, open_tail: bool = False) -> str | None:
    """Why ``messages`` is not provider-valid, or None when it is. Linear in the messages.

    ``open_tail`` allows the last message's calls to be still unanswered (tools in flight).
    """
    expected: list[str] | None = None
    for i, msg in enumerate(messages):
        parts = msg.parts
        results = [p.call_id for p in parts if p.kind == "tool_result"]
        calls = [p.id for p in parts if p.kind == "tool_call"]
        if expected is not None:
            if msg.role != "user" or (results != expected and sorted(results) != sorted(expected)):
                return f"message {i} does not answer the tool calls {expected} before it"
            expected = None
        elif results:
            return f"message {i} holds results {results} for no tool call before it"
        if results and msg.role != "user":
            return f"message {i} holds tool results outside a user message"
        if calls:
            if msg.role != "assistant":
                return f"message {i} holds tool calls outside an assistant message"
            if (len(calls) > 1 and len(set(calls)) != len(calls)) or not all(calls):
                return f"message {i} holds duplicate or empty tool call ids {calls}"
            expected = calls
    if expected is not None and not open_tail:
        return f"the last message's tool calls {expected} have no results"
    return None
