"""Agents and users the session tests fuzz: the sample support agent with a flaky tool (its
answers depend on how often it was called in this process), and user factories."""

from __future__ import annotations

import json
from collections.abc import Sequence

from examples.support_agent import agent as shop
from loopctl import ApiClient, BareLoop, LoopObserver, ToolError, tool
from loopctl_sim.sim.users import ScriptedUser, UserTurn

#: lookup_order calls made in this process (a test sets it to 0 first)
CALLS = [0]


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up by its id (like A-1001): the item, the amount paid, the status."""
    CALLS[0] += 1
    if CALLS[0] % 3 == 0:  # the flake: every third call in the process times out
        raise ToolError("the order database timed out")
    order = shop.ORDERS.get(order_id)
    if order is None:
        raise ToolError(f"there is no order {order_id}")
    return json.dumps({"order_id": order_id, **order}, sort_keys=True)


def flaky(client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()) -> BareLoop:
    """The support agent whose order database times out now and then."""
    loop = shop.build(client, observers)
    return loop.replace(tools=[lookup_order, shop.shipping_quote, shop.refund])


def no_database_timeouts(session: object, records: list[object]) -> str | None:
    """A user check: no lookup in the whole session timed out."""
    for record in records:
        data = getattr(record, "data", None)
        result = getattr(record, "kind", None) == "tool_result" and isinstance(data, dict)
        if result and "timed out" in str(getattr(record, "data", {}).get("content", "")):
            return "an order lookup timed out"
    return None


def make_user(seed: int, turns: int) -> ScriptedUser:
    """A customer who always looks the same order up, then asks about shipping."""
    script = [
        UserTurn("Where is my order A-1001?"),
        UserTurn("And A-1002?", "follow_up", interject="Please hurry."),
        UserTurn("Ship 2 kg to France?", "topic_switch", cancel_at=2),
    ]
    return ScriptedUser([script[i % len(script)] for i in range(turns)])


def not_a_user(seed: int, turns: int) -> int:
    """A factory that returns no user."""
    return seed


def sees_every_run(session: object, records: list[object]) -> str | None:
    """A user check that needs the whole session: the trace it is given holds one header per
    run of the session, and the session object every run."""
    headers = sum(1 for r in records if getattr(r, "type", None) == "header")
    runs = len(getattr(session, "runs", ()))
    turns = len(getattr(session, "turns", ()))
    if not headers == runs == turns:
        return f"{headers} headers, {runs} runs, {turns} turns"
    return None
