"""The texts the brain itself writes into a conversation.

The brain answers two things on its own, without the driver: a loop warning (a user message in
pending, when the loop detector's verdict says to warn) and the answer to a call of a tool the
driver did not advertise (an error result, so the model learns what it may call). Their words
live here, apart from the transition table, so a change of wording is not a change of logic.
Pure functions of their arguments.
"""

from __future__ import annotations

from loopctl.core.messages import ToolCall, ToolResult

LOOP_NOTE = (
    "[loopctl] Loop warning: {what}. Repeating it will not help: change approach or give your "
    "final answer. A further repeat ends the run."
)


def not_available(call: ToolCall, advertised: tuple[str, ...]) -> ToolResult:
    """The pre-answer to a call of a tool the driver did not advertise."""
    return ToolResult(
        call_id=call.id,
        name=call.name,
        content=f"tool '{call.name}' is not available; available tools: "
        + (", ".join(advertised) or "none"),
        is_error=True,
    )


def loop_note(what: str) -> str:
    """The loop warning's text, for a verdict described as ``what``."""
    return LOOP_NOTE.format(what=what)
