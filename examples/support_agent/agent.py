"""A small, real support agent for an online shop: the sample every harness feature is shown on.

Three tools (look an order up, quote a shipping price, refund an order; the quote, mere
arithmetic, runs inline on the event loop), a system prompt, and a pre-tool hook that keeps
refunds above the shop's limit for a human. ``build`` is the factory the harness calls
(``loopctl-sim replay TRACE --agent examples.support_agent.agent:build``): it takes the model
client and observers the harness brings, and builds the loop exactly as the shop runs it
otherwise (with a real OpenAI model when no client is given).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from loopctl import (
    ApiClient,
    BareLoop,
    Hooks,
    LoopObserver,
    RunConfig,
    SessionConfig,
    ToolCall,
    ToolError,
    tool,
)
from loopctl.tools import Deny

SYSTEM_PROMPT = (
    "You are the support agent of ShopCo. Look orders up before you answer questions about "
    "them, refund only delivered orders, and never promise what a tool did not confirm."
)

#: The shop's orders (a real agent would ask a database).
ORDERS: dict[str, dict[str, object]] = {
    "A-1001": {"item": "espresso machine", "amount": 800, "status": "delivered"},
    "A-1002": {"item": "coffee grinder", "amount": 120, "status": "shipped"},
    "A-1003": {"item": "barista course", "amount": 1500, "status": "delivered"},
}

#: Refunds above this need a human (the hook below enforces it).
REFUND_LIMIT = 1000

REFUNDS: list[tuple[str, int]] = []


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up by its id (like A-1001): the item, the amount paid, the status."""
    order = ORDERS.get(order_id)
    if order is None:
        raise ToolError(f"there is no order {order_id}")
    return json.dumps({"order_id": order_id, **order}, sort_keys=True)


# Arithmetic only, so it runs on the event loop (``inline=True``): no hop to a worker thread,
# which costs more than the quote itself. A tool that waits on IO or computes for long stays
# off the loop: while an inline tool runs, nothing else does.
@tool(inline=True)
def shipping_quote(country: str, weight_kg: float) -> str:
    """The shipping price, in euros, of a parcel of ``weight_kg`` to ``country``."""
    base = 5.0 if country.upper() in ("DE", "FR", "NL") else 15.0
    return f"{base + 2.5 * weight_kg:.2f} EUR"


@tool(parallel_safe=False)
def refund(order_id: str, amount: int) -> str:
    """Refund ``amount`` euros of a delivered order."""
    order = ORDERS.get(order_id)
    if order is None or order["status"] != "delivered":
        raise ToolError(f"order {order_id} cannot be refunded")
    REFUNDS.append((order_id, amount))
    return f"refunded {amount} EUR for order {order_id}"


def refunds_within_limit(call: ToolCall) -> Deny | None:
    """A pre-tool hook: a refund above the limit is denied, with a reason the model reads."""
    amount = call.arguments.get("amount")
    # hooks run before the arguments are validated: an amount that is not a number is left to
    # the tool's own validation, which answers the model with what is wrong
    if call.name == "refund" and isinstance(amount, int | float) and amount > REFUND_LIMIT:
        return Deny(f"refunds above {REFUND_LIMIT} EUR need a human: hand the case over")
    return None


def build(client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()) -> BareLoop:
    """The support agent as the shop runs it."""
    if client is None:
        from loopctl.providers import OpenAIClient

        client = OpenAIClient("gpt-4o-mini")
    return BareLoop(
        client,
        tools=[lookup_order, shipping_quote, refund],
        config=RunConfig(max_turns=12),
        session=SessionConfig(system_prompt=SYSTEM_PROMPT),
        hooks=Hooks(pre_tool=[refunds_within_limit]),
        observers=observers,
    )
