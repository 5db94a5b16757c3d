"""``Data``: the brain's msgspec data answers pydantic's ``model_*`` methods, embeds in pydantic
models both ways, and a value that does not fit is a pydantic ``ValidationError``."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from loopctl import LoopError, LoopMachine, Message, ToolCall
from loopctl.core import Done, Failed, MachineState, Start, Terminal, to_json, to_jsonable
from loopctl.core.steps import AwaitingModel

CALL = ToolCall(id="c1", name="add", arguments={"a": 1})
REPLY = Message.assistant("adding", [CALL])
FAILED = Failed(error=LoopError(kind="tool", message="boom", details={"n": 1}))


class Holder(BaseModel):
    message: Message
    state: MachineState
    extra: Any = None


@pytest.mark.parametrize("value", [REPLY, CALL, FAILED, Terminal(outcome=FAILED), Start()])
def test_a_value_round_trips_through_builtins_and_json(value: Any) -> None:
    cls = type(value)
    assert cls.model_validate(value.model_dump()) == value
    assert cls.model_validate_json(value.model_dump_json()) == value
    assert cls.model_validate(value) is value
    assert to_jsonable(value) == value.model_dump()
    assert to_json(value).decode() == value.model_dump_json()


def test_the_json_is_kind_first_then_the_fields_in_order() -> None:
    assert REPLY.model_dump_json() == (
        '{"role":"assistant","parts":[{"kind":"text","text":"adding"},'
        '{"kind":"tool_call","id":"c1","name":"add","arguments":{"a":1}}]}'
    )
    assert Done(outcome=FAILED).model_dump_json() == (
        '{"kind":"done","outcome":{"kind":"failed","error":{"kind":"tool","message":"boom",'
        '"retryable":false,"status":null,"details":{"n":1}}}}'
    )


def test_a_pydantic_model_embeds_data_both_ways() -> None:
    holder = Holder(message=REPLY, state=Terminal(outcome=FAILED), extra=[CALL])
    # pydantic does not know msgspec's types in an ``Any`` field: ``to_json`` writes them
    again = Holder.model_validate_json(to_json(holder))
    assert again.message == REPLY and again.state == Terminal(outcome=FAILED)
    assert again.extra == [CALL.model_dump()]  # Any: written as builtins, read as builtins
    assert Holder.model_validate(holder.model_dump()).state == holder.state
    by_kind = Holder(message=REPLY, state={"kind": "awaiting_model", "turn": 2})  # type: ignore[arg-type]
    assert by_kind.state == AwaitingModel(turn=2)


@pytest.mark.parametrize(
    "data",
    [
        {"role": "tool", "parts": []},
        {"role": "user", "parts": [{"kind": "text", "text": 5}]},
        {"role": "user", "parts": [{"kind": "nope"}]},
        {"role": "user", "parts": [], "extra": 1},
        "not a message",
    ],
)
def test_what_does_not_fit_is_a_validation_error(data: Any) -> None:
    with pytest.raises(ValidationError):
        Message.model_validate(data)
    with pytest.raises(ValidationError):
        Holder.model_validate({"message": data, "state": {"kind": "start"}})


def test_copies_replace_fields_and_values_are_frozen() -> None:
    assert CALL.model_copy(update={"name": "sub"}) == ToolCall(
        id="c1", name="sub", arguments={"a": 1}
    )
    assert CALL.model_copy() == CALL
    with pytest.raises(AttributeError):
        CALL.name = "x"  # type: ignore[misc]


def test_the_json_schema_is_msgspec_s_written_in_place() -> None:
    schema = Holder.model_json_schema()
    message = schema["properties"]["message"]
    assert message["title"] == "Message" and "$ref" not in str(message)
    assert set(message["properties"]) == {"role", "parts"}


def test_a_float_is_written_in_its_shortest_form_and_reads_back() -> None:
    call = ToolCall(id="c", name="t", arguments={"big": 1e20, "small": 1.5e-7, "x": 0.1})
    text = call.model_dump_json()
    assert text.endswith('"arguments":{"big":1e20,"small":1.5e-7,"x":0.1}}')
    assert ToolCall.model_validate_json(text) == call


def test_indented_json_and_the_schema_of_a_value_s_own_class() -> None:
    text = REPLY.model_dump_json(indent=2)
    assert (
        text.startswith('{\n  "role": "assistant",') and Message.model_validate_json(text) == REPLY
    )
    schema = Message.model_json_schema()
    assert schema["title"] == "Message" and set(schema["properties"]) == {"role", "parts"}


def test_text_nested_past_the_recursion_limit_is_a_validation_error() -> None:
    """msgspec raises ``RecursionError`` past the interpreter's limit: a reader of loopctl
    answers it as any bad input (a call's arguments may be any JSON; a sealed snapshot too)."""
    deep = "[" * 5000 + "]" * 5000
    call = '{"role":"assistant","parts":[{"kind":"tool_call","id":"a","name":"b","arguments":'
    with pytest.raises(ValidationError, match="nested too deep"):
        Message.model_validate_json(call + '{"x":' + deep + "}}]}")
    with pytest.raises(ValidationError, match="nested too deep"):
        LoopMachine.model_validate_json(
            '{"format":"loopctl-machine","version":3,"history":[' + call + '{"x":' + deep + "}}]}]}"
        )


def test_a_pydantic_model_inside_data_that_does_not_fit_is_one_line() -> None:
    """A ``LoopError`` inside a ``Failed`` outcome is read by pydantic: its complaint is one
    line, as msgspec's own, with the field it names."""
    with pytest.raises(ValidationError) as refused:
        Failed.model_validate_json('{"error":{"kind":"nope","message":"m"}}')
    assert "Input should be" in str(refused.value) and "(in kind)" in str(refused.value)
    assert "validation errors for LoopError" not in str(refused.value)
