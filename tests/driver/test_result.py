"""``RunResult``: the conversation is an attribute, kept out of the repr."""

from __future__ import annotations

from loopctl import BareLoop, Message
from loopctl.testing import ScriptedClient


def test_the_repr_leaves_the_conversation_out() -> None:
    question = "a question only the conversation holds"
    result = BareLoop(ScriptedClient([Message.assistant("done")])).run_sync(question)
    assert result.messages == (Message.user(question), Message.assistant("done"))
    shown = repr(result)
    assert "messages" not in shown and question not in shown
    assert "final_text='done'" in shown and "turns=1" in shown
    assert result.model_dump()["messages"][0]["parts"][0]["text"] == question
