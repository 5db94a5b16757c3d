"""The sample support agent (examples/support_agent) tested against a model through a cassette.

The cassettes were recorded once against the local fake OpenAI server (tests/plugin/fake_openai,
started by the test), with::

    pytest tests/plugin/test_support_agent_cassette.py --loopctl-record-mode=rewrite

and are committed under cassettes/agents/support_agent/, named by the marker relative to this
file (``../../cassettes/...``, as pytest-recording resolves paths; validated below with the
OpenAI SDK's types and scanned for secrets). In CI (``--loopctl-record-mode`` left at ``none``)
they replay offline: the fake server is up but gets no request, and the network,
loopback included, is closed by the plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_openai import FAKE_KEY, FakeOpenAI

from loopctl import Completed
from loopctl.providers import OpenAIClient
from loopctl_sim.plugin.cassette_rules import SECRET_REQUEST_HEADERS
from loopctl_sim.sim import load_agent
from loopctl_sim.trace import Scrubber

ROOT = Path(__file__).resolve().parents[2]
CASSETTES = ROOT / "cassettes" / "agents" / "support_agent"
#: The cassettes, from this file's directory (the marker resolves a relative path from there).
RELATIVE = "../../cassettes/agents/support_agent"
build = load_agent("examples.support_agent.agent:build", cwd=ROOT)


async def completed_run(server: FakeOpenAI, prompt: str) -> tuple[Any, list[tuple[str, Any]]]:
    """The agent's run of ``prompt`` (it must complete) and the tool calls it made."""
    client = OpenAIClient("gpt-4o-mini", base_url=server.url, api_key=FAKE_KEY)
    result = await build(client=client).run(prompt)
    assert isinstance(result.outcome, Completed), result.error
    return result, [(c.name, c.arguments) for m in result.messages for c in m.tool_calls]


def check_offline(server: FakeOpenAI, cassette: Any, record_mode: str, recorded: int) -> None:
    assert len(cassette) == recorded
    if record_mode == "none":
        assert server.requests == []  # every answer came from the cassette
        assert cassette.all_played
    else:
        assert len(server.requests) == recorded
        assert all(h["authorization"] == f"Bearer {FAKE_KEY}" for _, h in server.requests)


@pytest.mark.loopctl_cassette(f"{RELATIVE}/order_status")
async def test_the_agent_looks_the_order_up_and_answers(
    fake_openai: FakeOpenAI, loopctl_cassette: Any, loopctl_record_mode: str
) -> None:
    result, calls = await completed_run(fake_openai, "Where is my order A-1002?")
    assert result.final_text == "Order A-1002 (coffee grinder) is shipped."
    assert calls == [("lookup_order", {"order_id": "A-1002"})]
    check_offline(fake_openai, loopctl_cassette, loopctl_record_mode, 2)


@pytest.mark.loopctl_cassette(f"{RELATIVE}/refund_over_limit")
async def test_a_refund_over_the_limit_is_handed_to_a_human(
    fake_openai: FakeOpenAI, loopctl_cassette: Any, loopctl_record_mode: str
) -> None:
    result, calls = await completed_run(fake_openai, "Please refund my order A-1003.")
    assert calls == [
        ("lookup_order", {"order_id": "A-1003"}),
        ("refund", {"order_id": "A-1003", "amount": 1500}),
    ]
    denied = [r for m in result.messages for r in m.tool_results if r.name == "refund"]
    assert len(denied) == 1 and denied[0].is_error
    assert "need a human" in (result.final_text or "")
    check_offline(fake_openai, loopctl_cassette, loopctl_record_mode, 3)


@pytest.mark.parametrize("name", ["order_status", "refund_over_limit"])
def test_the_committed_cassettes_are_openai_streams_without_secrets(name: str) -> None:
    from openai.types.chat import ChatCompletionChunk

    text = (CASSETTES / f"{name}.yaml").read_text()
    assert FAKE_KEY not in text
    data = yaml.safe_load(text)
    assert Scrubber()(data) is data  # no key shape, no credential-named field
    interactions = data["interactions"]
    for interaction in interactions:
        headers = {k.lower() for k in interaction["request"]["headers"]}
        assert headers.isdisjoint(SECRET_REQUEST_HEADERS)
        lines = interaction["response"]["body"]["string"].split("\n\n")
        events = [line.removeprefix("data: ") for line in lines if line.strip()]
        assert events[-1] == "[DONE]"
        for event in events[:-1]:
            ChatCompletionChunk.model_validate_json(event)
