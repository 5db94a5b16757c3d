"""The IO events the driver and the tool dispatcher report: built by ``io_event`` (slots filled,
no dataclass ``__init__``), they are the events the constructor makes, and a reply's data is its
message and usage as ``model_dump(mode="json")`` gives them."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from loopctl.api import ModelReply, Usage
from loopctl.core import Message, ProviderPart, ThinkingPart
from loopctl.driver.loop import BareLoop
from loopctl.observe import IoEvent, io_event
from loopctl.testing import ScriptedClient
from loopctl.tools import tool
from tests.driver.conftest import Recorder
from tests.driver.helpers import answer, ask, call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.mark.parametrize(
    ("kind", "turn", "data", "duration"),
    [
        ("tool_call", 3, {"id": "c1", "name": "add", "arguments": {"a": 1}}, None),
        ("tool_result", 0, {"id": "c1", "content": "2", "is_error": False}, 0.25),
        ("model_reply", None, {}, 1e-6),
        ("model_request", 7, {"n_messages": 2}, None),
    ],
)
def test_io_event_is_the_constructors_event(kind, turn, data, duration) -> None:  # type: ignore[no-untyped-def]
    built = io_event(kind, turn, data, duration)
    made = IoEvent(kind=kind, turn=turn, data=data, duration_s=duration)
    assert built == made
    assert dataclasses.asdict(built) == dataclasses.asdict(made)
    assert repr(built) == repr(made)
    assert hash((built.kind, built.turn)) == hash((made.kind, made.turn))
    assert pickle.loads(pickle.dumps(built)) == made
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.kind = "cancel"  # type: ignore[misc]
    raised = (("tool", "add", ValueError("x")),)
    with_raised = io_event(kind, turn, data, duration, raised)
    assert with_raised == IoEvent(
        kind=kind, turn=turn, data=data, duration_s=duration, raised=raised
    )


def test_an_observed_run_reports_replies_as_model_dump_gives_them() -> None:
    reply = Message(
        role="assistant",
        parts=(
            ThinkingPart(provider="anthropic", text="hmm", data={"signature": "s"}),
            *ask(call("c1", "add", a=1, b=2), text="adding").parts,
            ProviderPart(provider="anthropic", data={"type": "server_tool_use", "id": "x"}),
        ),
    )
    usage = Usage(input_tokens=3, output_tokens=4, context_tokens=7, reasoning_tokens=1)
    client = ScriptedClient([ModelReply(message=reply, usage=usage), answer("3")])
    recorder = Recorder()
    BareLoop(client, [add], observers=[recorder]).run_sync("go")
    replies = [e for e in recorder.io_events if e.kind == "model_reply"]
    assert [e.data["message"] for e in replies] == [
        reply.model_dump(mode="json"),
        answer("3").model_dump(mode="json"),
    ]
    assert [e.data["usage"] for e in replies] == [
        usage.model_dump(mode="json"),
        Usage().model_dump(mode="json"),
    ]
    kinds = [e.kind for e in recorder.io_events]
    assert kinds == [
        "model_request",
        "model_reply",
        "tool_call",
        "tool_result",
        "model_request",
        "model_reply",
    ]
    result = next(e for e in recorder.io_events if e.kind == "tool_result")
    assert result.data == {"id": "c1", "name": "add", "content": "3", "is_error": False}
    assert isinstance(result.duration_s, float) and result.turn == 1
    assert all(type(e) is IoEvent for e in recorder.io_events)
