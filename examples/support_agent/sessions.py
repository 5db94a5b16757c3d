"""The sample agent's conversations: its customer as a simulated user, and a check that needs
the whole session to be judged.

    loopctl-sim fuzz --agent examples.support_agent.agent:build \\
        --user examples.support_agent.sessions:make_user --user-turns 4 \\
        --check examples.support_agent.sessions:refunds_within_limit --seeds 0:50

``make_user(seed, turns)`` is the shop's customer: an exploring user (``loopctl_sim.sim.users``)
whose topics are the shop's (its orders, shipping, refunds), from the seed. The hook of
``agent.py`` keeps every single refund within the limit; ``refunds_within_limit`` checks what
one run cannot see: the refunds of the whole conversation together. ``session.yaml`` is the
three customers of ``traces/session.jsonl`` as a session scenario (``loopctl-sim session``).
"""

from __future__ import annotations

from typing import Any

from examples.support_agent.agent import REFUND_LIMIT
from loopctl_sim.sim.users import ExploringUser
from loopctl_sim.trace import IoRecord, Record

#: What the shop's customers write about (openings and topic switches).
TOPICS = (
    "My order A-1001 arrived broken. Can I get my money back?",
    "What does it cost to ship 2 kg to France, and to Japan?",
    "Please refund my barista course, order A-1003.",
    "Where is my coffee grinder, order A-1002?",
)


def make_user(seed: int, turns: int) -> ExploringUser:
    """The shop's customer of ``seed``, writing ``turns`` turns."""
    return ExploringUser(seed, turns=turns, topics=TOPICS)


def refunds_within_limit(session: Any, records: list[Record]) -> str | None:
    """The refunds made in one conversation add up to at most the shop's limit."""
    total = 0
    refunded: dict[str, str] = {}  # call id -> order, for the calls whose result says refunded
    calls: dict[str, dict[str, Any]] = {}
    for record in records:
        if not isinstance(record, IoRecord):
            continue
        if record.kind == "tool_call" and record.data.get("name") == "refund":
            calls[str(record.data.get("id"))] = dict(record.data.get("arguments") or {})
        elif record.kind == "tool_result" and str(record.data.get("id")) in calls:
            arguments = calls[str(record.data.get("id"))]
            if not record.data.get("is_error") and "fault" not in record.data:
                amount = arguments.get("amount")
                if isinstance(amount, int):
                    total += amount
                    refunded[str(record.data.get("id"))] = str(arguments.get("order_id"))
    if total > REFUND_LIMIT:
        return f"the conversation refunded {total} EUR in {len(refunded)} refunds"
    return None
