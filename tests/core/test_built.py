"""The brain's own models built without validation (``built``): each pinned to what pydantic's
validator builds."""

from __future__ import annotations

import pytest
from brain_helpers import POLICY, answer, ask, call
from pydantic import BaseModel

from loopctl import Completed, Done, LoopError, LoopMachine, Message
from loopctl.core import Terminal
from loopctl.core.prebuilt import EARLY_TURNS as _EARLY_TURNS
from loopctl.core.snapshot import Exchange
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


def test_the_loop_window_is_what_the_validator_builds() -> None:
    """``LoopMachine.loop_window`` is built from the brain's fields: empty, part-judged, warned."""
    policy = POLICY.model_copy(update={"max_turns": 50})
    m = LoopMachine()
    m.accept_input("go")
    _same_as_validated(m.loop_window)
    warned = False
    for turn in range(1, 8):
        m.next_step(policy)
        if m.is_terminal:  # the loop detector ended the run
            break
        asked = call(f"c{turn}", a=1)  # the same call every turn: a loop
        m.model_response(ask(asked), context_tokens=10)
        m.next_step(policy)
        m.tool_results(answer(asked))
        _same_as_validated(m.loop_window)
        warned = warned or m.loop_window.warned
    assert m.loop_window.calls and warned


def _ended(how: str) -> LoopMachine:
    """A machine that ended ``how``: completed, cancelled, failed or out of turns."""
    m = LoopMachine()
    m.accept_input("go")
    policy = POLICY.model_copy(update={"max_turns": 0}) if how == "max_turns" else POLICY
    m.next_step(policy)
    if how == "completed":
        m.model_response(Message.assistant("all done"), 10)
    elif how == "cancelled":
        m.cancel()
    elif how == "failed":
        m.fail(LoopError(kind="provider", message="down"))
    return m


@pytest.mark.parametrize("how", ["completed", "cancelled", "failed", "max_turns"])
def test_the_terminal_state_and_done_step_are_what_the_validator_builds(how: str) -> None:
    """The end of a run (``terminal``, ``done``, ``completed``) is built, as a turn is."""
    m = _ended(how)
    state = m.state
    assert isinstance(state, Terminal)
    step = m.next_step(POLICY)
    assert isinstance(step, Done) and step.outcome == state.outcome
    for value in (state, step, state.outcome):
        _same_as_validated(value)
    if how == "completed":
        assert state.outcome == Completed(final_text="all done")
    # and it restores to the same machine, which answers the same step
    restored = LoopMachine.model_validate_json(m.model_dump_json())
    assert restored == m and restored.next_step(POLICY) == step
