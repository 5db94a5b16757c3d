"""The models the driver builds every turn (requests, dispatched results, folded replies) are
those pydantic builds from the same fields: equal, the same fields set, the same JSON."""

from __future__ import annotations

import asyncio
import enum
from typing import Any

import msgspec
import pytest

from loopctl import BareLoop, Message, RunConfig, SessionConfig, tool
from loopctl.api import ModelReply, ModelRequest, Usage, fold_events, folded
from loopctl.core import ToolCall
from loopctl.testing import FunctionClient, reply_events
from loopctl.tools import ToolRegistry, dispatch


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _validated(model: Any) -> Any:
    """``model`` built again the long way: the validator handed the fields it was given (the
    brain's msgspec data: read from its builtins, every field checked)."""
    if isinstance(model, msgspec.Struct):
        return type(model).model_validate(model.model_dump())
    return type(model)(**{name: getattr(model, name) for name in model.model_fields_set})


def _same(built: Any, validated: Any) -> None:
    assert built == validated
    assert built.model_dump_json() == validated.model_dump_json()
    if not isinstance(built, msgspec.Struct):
        assert built.model_fields_set == validated.model_fields_set
        assert built.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)


def test_the_driver_s_requests_are_the_validated_requests() -> None:
    """Every request of a run (system prompt, options, tools, a growing conversation) is the
    request pydantic builds from the same fields; a middleware's ``model_copy`` of one changes
    the copy alone."""
    calls = iter([{"a": 1, "b": 2}, {"a": 3, "b": 4}])

    def fn(request: ModelRequest) -> Message:
        arguments = next(calls, None)
        if arguments is None:
            return Message.assistant("done")
        return Message(role="assistant", parts=(ToolCall(id="c", name="add", arguments=arguments),))

    client = FunctionClient(fn)
    loop = BareLoop(
        client,
        tools=[add],
        config=RunConfig(max_turns=5),
        session=SessionConfig(system_prompt="Be brief.", options={"temperature": 0}),
    )
    result = loop.run_sync("add")
    assert result.final_text == "done"
    assert [r.turn for r in client.requests] == [1, 2, 3]
    for request in client.requests:
        _same(request, _validated(request))
        assert request.model_fields_set == {"messages", "tools", "system", "options", "turn"}
        changed = request.model_copy(update={"system": "other"})
        assert changed.system == "other" and request.system == "Be brief."
        assert "system" in changed.model_fields_set
    assert client.requests[0].options is not client.requests[1].options  # each owns its dict
    # the exchanges' results and their messages, as validation builds them
    for message in result.messages:
        _same(message, _validated(message))
        for part in message.parts:
            _same(part, _validated(part))


class Colour(enum.StrEnum):
    RED = "red"


@tool
def shade(name: str) -> Any:
    """A value of each kind a tool may return."""
    values: dict[str, Any] = {"int": 3, "text": "plain", "enum": Colour.RED, "none": None}
    if name == "boom":
        raise ValueError("no such shade")
    return values[name]


@pytest.mark.parametrize("name", ["int", "text", "enum", "none", "boom"])
def test_dispatched_results_are_the_validated_results(name: str) -> None:
    call = ToolCall(id="c1", name="shade", arguments={"name": name})
    [result] = asyncio.run(dispatch([call], ToolRegistry([shade])))
    _same(result, _validated(result))
    assert type(result.content) is str
    expected = {"int": "3", "text": "plain", "enum": "red", "none": "null"}
    assert result.content == expected.get(name, result.content)
    assert result.is_error is (name == "boom")


@pytest.mark.parametrize(
    "message, usage, stop",
    [
        (Message.assistant("hi"), None, None),
        (Message.assistant("hi"), Usage(input_tokens=3, output_tokens=1), "max_tokens"),
        (
            Message(
                role="assistant",
                parts=(ToolCall(id="c", name="add", arguments={"a": 1, "b": [2, {"c": None}]}),),
            ),
            None,
            None,
        ),
    ],
)
def test_folded_and_fold_events_replies_are_the_validated_replies(
    message: Message, usage: Usage | None, stop: str | None
) -> None:
    whole = folded(message, usage, stop)
    assert whole is not None
    _same(whole, _validated(whole))
    streamed = fold_events(reply_events(ModelReply(message=message, usage=usage or Usage())))
    _same(streamed, _validated(streamed))
    assert streamed.message == whole.message
