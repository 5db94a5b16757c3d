"""The brain's own models built without validation (``built``), its tool calls' JSON remembered
(``call_json``), the exchange's JSON written by hand (``exchange_json``): each pinned to what
pydantic builds and writes."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from brain_helpers import POLICY, answer, ask, call
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from loopctl import LoopMachine, ToolCall, ToolResult
from loopctl.core.encoding import (
    _CALLS_KEPT,
    _CALLS_SEEN,
    call_json,
)
from loopctl.core.machine import _EARLY_TURNS
from loopctl.core.snapshot import Exchange, exchange_json
from loopctl.core.steps import AwaitingModel, AwaitingTools, CallLLM, CallTools


def _same_as_validated(value: BaseModel) -> None:
    """``value`` is what pydantic's validator builds from its fields set."""
    cls = type(value)
    given_fields = {name: getattr(value, name) for name in value.model_fields_set}
    reference = cls.__pydantic_validator__.validate_python(given_fields)
    assert value == reference
    assert value.__dict__ == reference.__dict__
    assert list(value.__dict__) == list(reference.__dict__)  # field order
    assert value.model_fields_set == reference.model_fields_set
    assert value.__pydantic_extra__ == reference.__pydantic_extra__
    assert value.__pydantic_private__ == reference.__pydantic_private__
    assert value.model_dump_json() == reference.model_dump_json()


def test_late_turns_states_and_steps_are_what_the_validator_builds() -> None:
    """Past the prebuilt turns the brain builds its states and steps itself."""
    policy = POLICY.model_copy(update={"loop_action": "off", "max_turns": 10_000})
    m = LoopMachine()
    m.accept_input("go")
    seen: list[BaseModel] = []
    for turn in range(1, _EARLY_TURNS + 5):
        step = m.next_step(policy)
        assert isinstance(step, CallLLM) and step.turn == turn
        assert isinstance(m.state, AwaitingModel)
        if turn >= _EARLY_TURNS - 1:
            seen += [step, m.state]
        c = call(f"c{turn}", n=turn)
        m.model_response(ask(c, text=f"t{turn}"), 10)
        assert isinstance(m.state, AwaitingTools)
        tools = m.next_step(policy)
        assert isinstance(tools, CallTools)
        exchange = m.exchange
        assert exchange is not None
        if turn >= _EARLY_TURNS - 1:
            seen += [m.state, tools, exchange]
        m.tool_results(answer(c))
    assert {type(v) for v in seen} == {AwaitingModel, CallLLM, AwaitingTools, CallTools, Exchange}
    for value in seen:
        _same_as_validated(value)
    # and a restored machine (all validated) is equal to the one that built them
    assert LoopMachine.model_validate_json(m.model_dump_json()) == m


def test_exchange_with_preanswered_calls_is_what_the_validator_builds() -> None:
    m = LoopMachine()
    m.accept_input("go")
    m.next_step(POLICY)
    m.model_response(ask(call("a", name="read"), call("b", name="unknown")), 10)
    exchange = m.exchange
    assert exchange is not None and exchange.preanswered
    _same_as_validated(exchange)
    _same_as_validated(m.next_step(POLICY))  # CallTools of the dispatched call only


_TEXT = st.text(st.characters(codec="utf-8"), max_size=8) | st.sampled_from(
    ['"', "\\", "\x00\x1f\x7f", "é ✓ \u2028 😀"]
)
_CALLS = st.builds(
    ToolCall,
    id=_TEXT,
    name=_TEXT,
    arguments=st.dictionaries(
        _TEXT, _TEXT | st.integers() | st.floats() | st.booleans() | st.none(), max_size=3
    ),
)
_RESULTS = st.builds(ToolResult, call_id=_TEXT, name=_TEXT, content=_TEXT, is_error=st.booleans())


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.lists(_CALLS, max_size=3), st.lists(_RESULTS, max_size=2))
def test_exchange_json_is_pydantics_json(turn: int, calls: list[Any], pre: list[Any]) -> None:
    exchange = Exchange.model_construct(turn=turn, calls=tuple(calls), preanswered=tuple(pre))
    expected = Exchange.__pydantic_serializer__.to_json(exchange)
    assert exchange_json(exchange) == expected
    assert exchange_json(exchange) == expected  # the calls' JSON remembered


def test_exchange_json_leaves_what_it_cannot_write_to_pydantic() -> None:
    class Odd(ToolCall):
        pass

    odd = Exchange.model_construct(turn=1, calls=(Odd(id="x", name="n"),), preanswered=())
    assert exchange_json(odd) == Exchange.__pydantic_serializer__.to_json(odd)
    lone = Exchange.model_construct(
        turn=1, calls=(), preanswered=(ToolResult(call_id="\ud800", name="n", content=""),)
    )
    with pytest.raises(Exception) as theirs:
        Exchange.__pydantic_serializer__.to_json(lone)
    with pytest.raises(type(theirs.value)):
        exchange_json(lone)


def test_call_json_is_remembered_by_identity_and_bounded() -> None:
    first = ToolCall(id="a", name="read", arguments={"p": 1})
    twin = ToolCall(id="a", name="read", arguments={"p": 1})
    assert call_json(first) == call_json(twin) == ToolCall.__pydantic_serializer__.to_json(first)
    assert _CALLS_SEEN[id(first)][0] is first and _CALLS_SEEN[id(twin)][0] is twin
    # a call that lives where an older one lived is never answered with the older one's JSON
    for i in range(3 * _CALLS_KEPT):
        c = ToolCall(id=f"c{i}", name="read", arguments={"i": i})
        assert call_json(c) == ToolCall.__pydantic_serializer__.to_json(c)
        del c
        gc.collect()
    assert len(_CALLS_SEEN) <= _CALLS_KEPT
