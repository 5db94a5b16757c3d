"""The brain's own texts: the loop warning and the answer to an unadvertised tool."""

from __future__ import annotations

import pytest

from loopctl import LoopMachine, MachinePolicy, Message, ToolCall
from loopctl.core.loopdetect import loop_note
from loopctl.core.machine import not_available


def test_the_loop_note_names_what_repeats_and_what_to_do() -> None:
    note = loop_note("search({'q': 'x'}) called 3 times")
    assert "search({'q': 'x'}) called 3 times" in note
    assert note.startswith("[loopctl] Loop warning:")
    assert "final answer" in note


@pytest.mark.parametrize(("advertised", "listed"), [(("add", "echo"), "add, echo"), ((), "none")])
def test_an_unadvertised_call_is_answered_with_an_error_naming_what_is_available(
    advertised: tuple[str, ...], listed: str
) -> None:
    result = not_available(ToolCall(id="c1", name="rm", arguments={"path": "/"}), advertised)
    assert (result.call_id, result.name, result.is_error) == ("c1", "rm", True)
    assert result.content == f"tool 'rm' is not available; available tools: {listed}"


def test_the_brain_answers_an_unadvertised_call_with_that_text() -> None:
    machine = LoopMachine()
    machine.accept_input("go")
    policy = MachinePolicy(tools=("add",))
    machine.next_step(policy)
    call = ToolCall(id="c1", name="rm", arguments={})
    machine.model_response(Message.assistant(tool_calls=[call]), 10)
    [answer] = machine.conversation()[-1].tool_results
    assert answer == not_available(call, ("add",))
