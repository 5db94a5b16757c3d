"""The brain holds only what it can save and read back: a tool call's arguments or a part's data
nested deeper than ``MAX_NESTING`` (or holding NaN) is refused by every feed that takes messages,
with a ``ProtocolError`` that leaves the brain as it was; at the limit it is accepted, saved and
restored whole (as JSON text and as the in-process dict), and a run recorded at
the limit reads back and replays. Through the driver, a reply past the limit (from a whole-reply
client or a model middleware, neither of which streams through the fold) ends the run with a
typed provider error, never an exception out of ``run``; so does one a provider client streams
over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from brain_helpers import POLICY, answer, awaiting_compaction, awaiting_model, started

from loopctl import (
    BareLoop,
    CompactReason,
    LoopMachine,
    Message,
    ProtocolError,
    ProviderPart,
    ThinkingPart,
    ToolCall,
    tool,
)
from loopctl.api import ModelReply, ModelRequest
from loopctl.core.values import MAX_NESTING
from loopctl.providers import OpenAIClient
from loopctl.testing import FunctionClient, ScriptedClient
from loopctl_sim import TraceRecorder, read_trace, replay_driver, replay_trace
from tests.reliability.local_server import Answer, call_chunks, local_server, text_chunks

LIMIT = MAX_NESTING


def nested(depth: int) -> dict[str, Any]:
    """A value ``depth`` levels deep (``{"x": 0}`` is 1), built without recursion."""
    value: Any = 0
    for _ in range(depth):
        value = {"x": value}
    return value  # type: ignore[no-any-return]


# How each kind of free-form value rides a message (role, value) -> parts.
CARRIERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "arguments": lambda v: ToolCall(id="c1", name="read", arguments=v),
    "thinking": lambda v: ThinkingPart(provider="p", text="hmm", data=v),
    "provider": lambda v: ProviderPart(provider="p", data=v),
}


def reply_with(carrier: str, value: dict[str, Any]) -> Message:
    return Message(role="assistant", parts=(CARRIERS[carrier](value),))


def model_response(carrier: str, value: dict[str, Any]) -> tuple[LoopMachine, Callable[[], None]]:
    m = awaiting_model()
    return m, lambda: m.model_response(reply_with(carrier, value), 10)


def accept_input(carrier: str, value: dict[str, Any]) -> tuple[LoopMachine, Callable[[], None]]:
    m = LoopMachine()
    message = Message(role="user", parts=(CARRIERS[carrier](value),))
    return m, lambda: m.accept_input(message)


def inject(carrier: str, value: dict[str, Any]) -> tuple[LoopMachine, Callable[[], None]]:
    m = started()
    message = Message(role="assistant", parts=(CARRIERS[carrier](value),))
    return m, lambda: m.inject(message)


def compaction_result(
    carrier: str, value: dict[str, Any]
) -> tuple[LoopMachine, Callable[[], None]]:
    m = awaiting_compaction(CompactReason.MANUAL)
    reply = reply_with(carrier, value)
    history = [Message.user("q"), reply]
    if carrier == "arguments":
        history += [answer(*reply.tool_calls), Message.assistant("a")]
    return m, lambda: m.compaction_result(history, 100, 50)


# (feed, carrier): accept_input and inject take no tool parts; tool_results takes only results,
# whose content is a string (nothing nests there).
CASES: list[tuple[str, str]] = [
    ("model_response", "arguments"),
    ("model_response", "thinking"),
    ("model_response", "provider"),
    ("accept_input", "thinking"),
    ("accept_input", "provider"),
    ("inject", "provider"),
    ("inject", "thinking"),
    ("compaction_result", "arguments"),
    ("compaction_result", "provider"),
]
FEEDS: dict[str, Callable[[str, dict[str, Any]], tuple[LoopMachine, Callable[[], None]]]] = {
    "model_response": model_response,
    "accept_input": accept_input,
    "inject": inject,
    "compaction_result": compaction_result,
}


def round_trips(m: LoopMachine) -> None:
    """Saved as JSON text and as a dict, and restored from each."""
    text = m.model_dump_json()
    restored = LoopMachine.model_validate_json(text)
    assert restored == m and restored.digest() == m.digest()
    assert restored.messages() == m.messages()
    assert restored.model_dump_json() == text
    assert LoopMachine.model_validate(m.model_dump()) == m


@pytest.mark.parametrize(("feed", "carrier"), CASES, ids=[f"{f}-{c}" for f, c in CASES])
def test_at_the_limit_a_value_is_accepted_and_saves_and_restores_whole(
    feed: str, carrier: str
) -> None:
    m, go = FEEDS[feed](carrier, nested(LIMIT))
    go()
    assert any(nested(LIMIT) in _values(message) for message in m.messages())
    round_trips(m)


@pytest.mark.parametrize("depth", [LIMIT + 1, 200, 255, 300, 5_000])
@pytest.mark.parametrize(("feed", "carrier"), CASES, ids=[f"{f}-{c}" for f, c in CASES])
def test_past_the_limit_the_feed_refuses_and_changes_nothing(
    feed: str, carrier: str, depth: int
) -> None:
    m, go = FEEDS[feed](carrier, nested(depth))
    before, state = m.model_dump_json(), m.state
    with pytest.raises(ProtocolError) as refused:
        go()
    assert refused.value.feed == feed and refused.value.state == state.kind
    assert f"nested more than {LIMIT} levels deep" in str(refused.value)
    assert m.model_dump_json() == before and m.state == state


@pytest.mark.parametrize("number", [float("nan"), float("inf")])
def test_a_number_json_cannot_hold_is_refused_like_depth(number: float) -> None:
    m, go = model_response("provider", {"x": [1, number]})
    with pytest.raises(ProtocolError, match="JSON cannot represent"):
        go()
    assert m.state.kind == "awaiting_model"


def test_a_history_handed_to_the_constructor_is_held_to_the_same_limit() -> None:
    ok = [Message.user("q"), reply_with("provider", nested(LIMIT))]
    round_trips(LoopMachine(ok))
    with pytest.raises(ValueError, match=r"history\[1\].*nested more than 128"):
        LoopMachine([Message.user("q"), reply_with("provider", nested(LIMIT + 1))])


def test_after_a_refusal_the_same_turn_goes_on() -> None:
    m = awaiting_model()
    with pytest.raises(ProtocolError):
        m.model_response(reply_with("arguments", nested(LIMIT + 1)), 10)
    reply = reply_with("arguments", nested(LIMIT))
    m.model_response(reply, 10)
    m.next_step(POLICY)
    m.tool_results(answer(*reply.tool_calls))
    m.next_step(POLICY)
    m.model_response(Message.assistant("done"), 20)
    m.commit_pending()
    round_trips(m)


def _values(message: Message) -> list[Any]:
    return [getattr(p, "arguments", None) or getattr(p, "data", None) for p in message.parts]


# --- through the driver ---------------------------------------------------------------------


@tool
def read(x: Any) -> str:
    """Answer with how deep x is."""
    depth, value = 0, x
    while isinstance(value, dict):
        depth, value = depth + 1, value["x"]
    return f"depth {depth}"


def deep_call(depth: int) -> Message:
    return Message.assistant("", [ToolCall(id="c1", name="read", arguments=nested(depth))])


def test_a_run_at_the_limit_records_a_trace_that_reads_back_and_replays(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    recorder = TraceRecorder(path)
    client = ScriptedClient([deep_call(LIMIT), Message.assistant("done")])
    loop = BareLoop(client, tools=[read], observers=[recorder])
    result = loop.run_sync("go deep")
    recorder.close()
    assert result.final_text == "done"
    assert loop.machine.history[2].tool_results[0].content == f"depth {LIMIT - 1}"
    assert read_trace(path)[-1].type == "end"
    for replayed in (replay_trace(path), replay_driver(path)):
        assert replayed.ok and replayed.complete, replayed.divergence
        assert replayed.final_digest == loop.machine.digest()
    round_trips(loop.machine)


@pytest.mark.parametrize("depth", [LIMIT + 1, 300, 2_000])
@pytest.mark.parametrize("client_kind", ["scripted", "function"])
def test_a_whole_reply_client_past_the_limit_fails_the_run_typed(
    depth: int, client_kind: str
) -> None:
    replies = [deep_call(depth), Message.assistant("done")]
    client: Any = (
        ScriptedClient(replies)
        if client_kind == "scripted"
        else FunctionClient(lambda request: replies[request.turn - 1])
    )
    result = BareLoop(client, tools=[read]).run_sync("go deep")
    assert result.outcome.kind == "failed"
    assert result.error is not None and result.error.kind == "provider"
    assert f"nested more than {LIMIT} levels deep" in result.error.message


def test_a_model_middleware_reply_past_the_limit_fails_the_run_typed() -> None:
    async def deepen(request: ModelRequest, call_next: Any) -> ModelReply:
        reply: ModelReply = await call_next(request)
        return reply.model_copy(update={"message": reply_with("provider", nested(LIMIT + 1))})

    client = ScriptedClient([Message.assistant("fine")])
    loop = BareLoop(client, model_middleware=[deepen])
    result = asyncio.run(loop.run("go"))
    assert result.outcome.kind == "failed"
    assert result.error is not None and result.error.kind == "provider"
    assert "provider part's data cannot be saved" in result.error.message
    round_trips(loop.machine)


@pytest.mark.parametrize("depth", [LIMIT, LIMIT + 1, 300, 5_000])
def test_a_provider_client_over_http_ends_the_run_typed_past_the_limit(
    tmp_path: Path, depth: int
) -> None:
    """``OpenAIClient`` against a local server streaming the call's arguments as JSON text:
    at the limit the run completes and its trace replays; past it the run fails with a
    provider error, not retried, and the trace still reads back."""
    raw = '{"x":' * depth + "0" + "}" * depth
    path = tmp_path / "http.jsonl"
    with local_server() as server:
        server.script(Answer(call_chunks("read", raw)), Answer(text_chunks("done")))
        client = OpenAIClient("m", api_key="sk-test-" + "0" * 16, base_url=server.base_url)
        recorder = TraceRecorder(path)
        loop = BareLoop(client, tools=[read], observers=[recorder])
        result = loop.run_sync("go deep")
        recorder.close()
    if depth <= LIMIT:
        assert result.final_text == "done"
    else:
        assert result.outcome.kind == "failed" and result.error is not None
        assert (result.error.kind, result.error.retryable) == ("provider", False)
        assert f"nested more than {LIMIT} levels deep" in result.error.message
    assert read_trace(path)[-1].type == "end"
    assert replay_trace(path).ok
    round_trips(loop.machine)
