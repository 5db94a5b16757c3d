"""A message a trace carries in several records (the reply as data and as the feed, its calls in
the step and the tool_call records, the results in the tool_result record, the feed and the next
request) is scrubbed in every one of them when it holds a secret, and written whole in every one
when it holds none."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from loopctl import LoopError, Message, ToolCall
from loopctl.core import (
    AcceptInput,
    CallTools,
    CompactionResult,
    Fail,
    Feed,
    Inject,
    LoopMachine,
    MachinePolicy,
    ModelResponse,
    ToolResults,
    to_json,
)
from loopctl.core.messages import ToolResult
from loopctl_sim.trace import Scrubber, TraceWriter
from loopctl_sim.trace.feeds import written

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8"


def _turn(arguments: dict[str, Any], content: str) -> list[dict[str, Any]]:
    """One turn's records, as the driver gives them, each message carried again where a trace
    carries it: the reply (as data, then as the feed), its call (the step, the tool_call), the
    results (the tool_result, the feed, the next request's last message)."""
    call = ToolCall(id="c1", name="fetch", arguments=arguments)
    reply = Message.assistant("calling", [call])
    result = ToolResult(call_id="c1", name="fetch", content=content)
    results = Message.from_results([result])
    out = io.StringIO()
    writer = TraceWriter(out, scrubber=Scrubber(key=b"k"))
    machine = LoopMachine()
    reply_data = {"message": reply.model_dump(mode="json")}
    writer.io("model_reply", turn=1, data={**reply_data, "stop_reason": "tool_use"})
    writer.feed(ModelResponse(reply, 10), machine)
    writer.step(MachinePolicy(tools=("fetch",)), CallTools(turn=1, calls=(call,)))
    asked = {"id": call.id, "name": call.name, "arguments": dict(call.arguments)}
    writer.io("tool_call", turn=1, data=asked)
    answered = {"id": "c1", "name": "fetch", "content": result.content, "is_error": False}
    writer.io("tool_result", turn=1, data=answered)
    writer.feed(ToolResults(results, 20), machine)
    last = results.model_dump(mode="json")
    request = {"digest": "0" * 32, "n_messages": 3, "tools": ["fetch"], "last": last}
    writer.io("model_request", turn=2, data={**request, "messages": "brain"})
    writer.io("model_request", turn=3, data={**request, "messages": "brain"})
    writer.feed(Inject(results), machine)
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.mark.parametrize(
    ("arguments", "content"),
    [({"url": "https://x", "token": SECRET}, "ok"), ({"url": "https://x"}, f"key {SECRET}")],
    ids=["in the call", "in the result"],
)
def test_a_message_with_a_secret_carried_again_is_scrubbed_in_every_record(
    arguments: dict[str, Any], content: str
) -> None:
    records = _turn(arguments, content)
    carrying = [r for r in records if r["type"] != "step" or r["step"]["kind"] == "call_tools"]
    in_call = "token" in arguments
    expected = {
        "model_reply": in_call,
        "model_response": in_call,
        "call_tools": in_call,
        "tool_call": in_call,
        "tool_result": not in_call,
        "tool_results": True,  # the brain's last call is fetch's in both cases
        "model_request": not in_call,
        "inject": not in_call,
    }
    for record in carrying:
        kind = record.get("kind") or record.get("name") or record["step"]["kind"]
        assert SECRET not in json.dumps(record)
        if kind != "tool_results":
            assert record["scrubbed"] is expected[kind], record
    assert sum(r["scrubbed"] for r in records) >= 4


def test_a_clean_message_carried_again_is_written_whole_and_not_scrubbed() -> None:
    records = _turn({"url": "https://x"}, "ok")
    assert not any(r["scrubbed"] for r in records)
    results = records[5]["args"]["message"]
    assert [r["data"]["last"] for r in records[6:8]] == [results, results]
    assert records[8]["args"] == {"message": results}
    assert records[2]["step"]["calls"] == [records[0]["data"]["message"]["parts"][1]]
    assert list(records[6]["data"]) == ["digest", "n_messages", "tools", "last", "messages"]


@pytest.mark.parametrize(
    "feed",
    [
        AcceptInput("hello"),
        AcceptInput(Message.user("hi")),
        ModelResponse(Message.assistant("x"), 3),
        ToolResults(Message.from_results([ToolResult(call_id="a", name="t", content="c")])),
        ToolResults(Message.from_results([ToolResult(call_id="a", name="t", content="c")]), 9),
        Inject(Message.user("note")),
        CompactionResult([Message.user("a"), Message.assistant("b")], 10, 4),
        Fail(LoopError(kind="internal", message="boom")),
    ],
    ids=lambda f: f.name,
)
def test_a_feed_record_args_are_the_feed_json(feed: Feed) -> None:
    """The arguments, written a field at a time, are the JSON of the feed as a trace holds it."""
    out = io.StringIO()
    TraceWriter(out).feed(feed, LoopMachine())
    line = out.getvalue()
    args = line[line.index('"args":') + 7 : -2]
    assert args == to_json(written(feed)).decode()


def test_io_records_of_any_shape_are_written_and_searched() -> None:
    """A harness's own tool_call and tool_result data (an id that is not a string, keys of its
    own) are written and searched as any record."""
    out = io.StringIO()
    writer = TraceWriter(out)
    writer.io("tool_call", turn=1, data={"id": ["c1"], "name": "t", "arguments": {}})
    writer.io("tool_result", turn=1, data={"id": {"n": 1}, "content": "ok"})
    writer.io("tool_result", turn=1, data={"id": "c2", "content": f"password: {SECRET}"})
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["data"]["id"] for r in records[:2]] == [["c1"], {"n": 1}]
    assert records[2]["scrubbed"] and SECRET not in out.getvalue()
