"""The model request as a trace records it (``loopctl_sim.trace.requests``): what a replay leaves
out of the live request's data (its last message) comes back key for key where it is needed."""

from __future__ import annotations

import pytest

from loopctl import Message
from loopctl.api import ModelRequest, ToolSpec
from loopctl_sim.trace.requests import (
    RequestLog,
    canonical_context,
    messages_fingerprint,
    request_context,
    request_digest,
    with_last,
)

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


@pytest.mark.parametrize("brain", ["0123456789abcdef", None], ids=["brain", "altered"])
def test_the_digest_is_the_context_and_the_fingerprint_hashed(brain: str | None) -> None:
    """The log hashes a context once and each request's fingerprint onto it: the digest is still
    ``request_digest`` of the two, also after the context changed and changed back."""
    log = RequestLog()
    other = ToolSpec(name="sub", description="Subtract.", parameters={"type": "object"})
    messages = (Message.user("hi é"),)
    for tools, system in [((SPEC,), "s"), ((SPEC,), "s"), ((SPEC, other), "s"), ((SPEC,), "t")]:
        request = ModelRequest(messages=messages, tools=tools, system=system, turn=1)
        seen = log.see(request, "m", "p", brain)
        fingerprint = brain if brain is not None else messages_fingerprint(messages)
        context = canonical_context(request_context(request, "m", "p"))
        assert seen.digest == request_digest(context, fingerprint)
        assert seen.data["tools"] == [t.name for t in tools]
