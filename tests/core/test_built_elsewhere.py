"""Models built without validation (``built``) outside the brain, each pinned to what pydantic's
validator builds: the fold's reply (its text, calls, message), dispatch's results, the driver's
request and results message."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from test_built import _same_as_validated

from loopctl import BareLoop, Message, RunConfig, SessionConfig, ToolCall, tool
from loopctl.api import (
    ModelReply,
    ModelRequest,
    PartEvent,
    StopEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageEvent,
    fold_events,
)
from loopctl.core import ProviderPart, ThinkingPart
from loopctl.testing import FunctionClient, reply_events
from loopctl.tools import ToolRegistry, dispatch

EVENTS: list[list[Any]] = [
    [StopEvent(reason="end_turn")],
    [TextDelta(text="hel"), TextDelta(text="lo"), StopEvent(reason="end_turn")],
    [
        ToolCallStart(index=0, id="c1", name="add"),
        ToolCallDelta(index=0, arguments='{"a": 1,'),
        ToolCallDelta(index=0, arguments=' "b": [2, {"c": null}]}'),
        UsageEvent(usage=Usage(input_tokens=3, context_tokens=9)),
    ],
    [ToolCallStart(index=0, id="c2", name="noargs")],
    [
        PartEvent(part=ThinkingPart(provider="p", text="hmm", signature="s")),
        TextDelta(text="text"),
        ToolCallStart(index=0, id="c3", name="x"),
        PartEvent(part=ProviderPart(provider="p", data={"k": 1})),
        TextDelta(text="more"),
    ],
]


@pytest.mark.parametrize("events", EVENTS)
def test_the_folded_reply_is_what_the_validator_builds(events: list[Any]) -> None:
    reply = fold_events(events)
    _same_as_validated(reply)
    _same_as_validated(reply.message)
    for part in reply.message.parts:
        _same_as_validated(part)


async def test_dispatch_results_are_what_the_validator_builds() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    calls = [
        ToolCall(id="ok", name="add", arguments={"a": 1, "b": 2}),
        ToolCall(id="bad", name="add", arguments={"a": "x"}),
        ToolCall(id="unknown", name="nothing"),
    ]
    results = await dispatch(calls, ToolRegistry([add]))
    assert [r.is_error for r in results] == [False, True, True]
    for result in results:
        _same_as_validated(result)


async def test_the_drivers_request_and_results_message_are_what_the_validator_builds() -> None:
    seen: list[ModelRequest] = []

    def model(request: ModelRequest) -> Message:
        seen.append(request)
        if len(seen) == 1:
            return Message.assistant(tool_calls=[ToolCall(id="c", name="add", arguments={"a": 1})])
        return Message.assistant("done")

    @tool
    async def add(a: int) -> int:
        return a

    loop = BareLoop(
        FunctionClient(model),
        [add],
        RunConfig(),
        SessionConfig(system_prompt="be brief", options={"temperature": 0.5}),
    )
    result = await loop.run("go")
    assert result.final_text == "done"
    first, second = seen
    for request in seen:
        reference = ModelRequest(
            messages=request.messages.as_tuple(),
            tools=request.tools,
            system=request.system,
            options=request.options,
            turn=request.turn,
        )
        assert request == reference
        assert request.model_fields_set == reference.model_fields_set
        assert request.model_dump_json() == reference.model_dump_json()
    assert first.options == {"temperature": 0.5} and first.options is not second.options
    assert first.options is not loop.session.options  # each request owns its options
    results_message = second.messages[-1]
    _same_as_validated(results_message)
    assert results_message == Message.from_results(results_message.tool_results)


def test_a_run_adds_its_usage_as_plus_would() -> None:
    usages = [
        Usage(input_tokens=1, output_tokens=2, context_tokens=5),
        Usage(cache_read_tokens=3, reasoning_tokens=1),
        Usage(input_tokens=4, cache_write_tokens=2, context_tokens=11),
        Usage(),
    ]
    expected = Usage()
    for usage in usages:
        expected = expected + usage
    assert Usage.total(usages) == expected
    assert Usage.total([]) == Usage()
    assert Usage.total(iter(usages[:2])) == usages[0] + usages[1]
    for some in (usages, [], usages[1:2]):
        _same_as_validated(Usage.total(some))  # built: as the validator builds it, all given
        assert Usage.total(some).model_fields_set == (Usage() + Usage()).model_fields_set


def test_a_subclass_of_usage_totals_to_its_own_class() -> None:
    class Metered(Usage):
        pass

    total = Metered.total([Usage(input_tokens=2), Usage(input_tokens=3, context_tokens=9)])
    assert type(total) is Metered
    assert (total.input_tokens, total.context_tokens) == (5, 9)


def test_run_usage_is_the_sum_of_its_calls() -> None:
    replies = iter([Message.assistant("done")])

    class Client:
        async def stream(self, request: ModelRequest) -> Any:
            yield TextDelta(text=next(replies).text)
            yield UsageEvent(usage=Usage(input_tokens=7, output_tokens=2, context_tokens=9))

    result = asyncio.run(BareLoop(Client()).run("go"))
    assert result.usage == Usage(input_tokens=7, output_tokens=2, context_tokens=9)


REPLIES: list[Any] = [
    Message.assistant("a text longer than one sixteen-character chunk"),
    Message.assistant(tool_calls=[ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})]),
    Message.assistant(
        "both",
        tool_calls=[
            ToolCall(id="c1", name="add", arguments={"a": 1, "b": [2, {"c": None}]}),
            ToolCall(id="c2", name="noargs"),
        ],
    ),
    Message(
        role="assistant",
        parts=[
            ThinkingPart(provider="p", text="hmm", signature="s"),
            ProviderPart(provider="p", data={"k": 1}),
        ],
    ),
    ModelReply(
        message=Message.assistant("x"), usage=Usage(input_tokens=3), stop_reason="max_tokens"
    ),
]


@pytest.mark.parametrize("reply", REPLIES)
def test_the_test_clients_events_are_what_their_constructors_build(reply: Any) -> None:
    events = list(reply_events(reply))
    for event in events:
        fields = {name: getattr(event, name) for name in event.__slots__}
        reference = type(event)(**fields)  # the constructor checks every field
        assert event == reference and repr(event) == repr(reference)
    message = reply if isinstance(reply, Message) else reply.message
    assert fold_events(events).message == message


@pytest.mark.parametrize("tokens", [0, 1, 12_345, 10**12])
def test_a_context_usage_is_what_the_validator_builds(tokens: int) -> None:
    usage = Usage.context(tokens)
    _same_as_validated(usage)
    assert usage == Usage(context_tokens=tokens)
    assert usage.model_fields_set == {"context_tokens"}


def test_a_context_usage_of_anything_but_an_int_is_validated() -> None:
    assert Usage.context(True) == Usage(context_tokens=True)  # pydantic's own answer
    with pytest.raises(ValueError):
        Usage.context("many")  # type: ignore[arg-type]
