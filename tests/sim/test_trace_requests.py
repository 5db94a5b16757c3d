"""The model request as a trace records it (``loopctl_sim.trace.requests``): what a replay leaves
out of the live request's data (its last message) comes back key for key where it is needed."""

from __future__ import annotations

import pytest

from loopctl import Message
from loopctl.api import ModelRequest, ToolSpec
from loopctl_sim.trace.requests import RequestLog, with_last

SPEC = ToolSpec(name="add", description="Add.", parameters={"type": "object"})


@pytest.mark.parametrize(
    "messages",
    [
        (),
        (Message.user("hi"),),
        (Message.user("hi"), Message.assistant("hello")),
    ],
    ids=["none", "one", "two"],
)
@pytest.mark.parametrize("brain", ["0123456789abcdef", None], ids=["brain", "altered"])
def test_the_last_message_comes_back_in_its_place(
    messages: tuple[Message, ...], brain: str | None
) -> None:
    request = ModelRequest(messages=messages, tools=(SPEC,), system="s", turn=1)
    whole = RequestLog().see(request, "m", "p", brain)
    lean = RequestLog().see(request, "m", "p", brain, last=False)
    assert "last" not in lean.data and lean.digest == whole.digest
    back = with_last(lean.data, request.messages)
    assert back == whole.data and list(back) == list(whole.data)
    assert whole.data["last"] == (messages[-1].model_dump(mode="json") if messages else None)
