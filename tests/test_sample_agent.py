"""The sample agent's own choices, shown through the public API: its shipping quote, mere
arithmetic, is an inline tool (``@tool(inline=True)``) and runs on the event loop's thread, while
its other sync tools keep the worker thread; its shipped shipping trace still replays against it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from examples.support_agent import agent as shop
from loopctl import Message, ToolCall
from loopctl.testing import ScriptedClient
from loopctl_sim.replay import replay_agent

TRACES = Path(__file__).resolve().parents[1] / "examples" / "support_agent" / "traces"


def _recording(monkeypatch: pytest.MonkeyPatch, tool: Any, threads: list[int]) -> None:
    """Note the thread each call of ``tool``'s function runs on."""
    original = tool.fn

    def fn(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return original(*args, **kwargs)

    monkeypatch.setattr(tool, "fn", fn)


async def test_the_quote_runs_on_the_event_loop_and_the_lookup_in_a_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    quoted: list[int] = []
    looked_up: list[int] = []
    _recording(monkeypatch, shop.shipping_quote, quoted)
    _recording(monkeypatch, shop.lookup_order, looked_up)
    calls = [
        ToolCall(id="q1", name="shipping_quote", arguments={"country": "DE", "weight_kg": 2}),
        ToolCall(id="l1", name="lookup_order", arguments={"order_id": "A-1002"}),
    ]
    replies = [Message.assistant(tool_calls=calls), Message.assistant("ok")]
    loop = shop.build(ScriptedClient(replies))

    result = await loop.run("What does shipping 2 kg to Germany cost, and where is A-1002?")

    assert result.final_text == "ok"
    answers = {r.call_id: r for m in result.messages for r in m.tool_results}
    assert answers["q1"].content == "10.00 EUR" and not answers["q1"].is_error
    assert '"status": "shipped"' in answers["l1"].content
    here = threading.get_ident()
    assert quoted == [here]  # inline: the loop's own thread
    assert len(looked_up) == 1 and looked_up[0] != here  # the default: a worker thread
    assert shop.shipping_quote.inline and not shop.lookup_order.inline


def test_the_shipped_shipping_trace_replays_against_the_inline_quote() -> None:
    report = replay_agent(TRACES / "shipping.jsonl", "examples.support_agent.agent:build")
    assert report.ok, report.divergence
