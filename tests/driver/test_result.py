"""``RunResult``: the conversation is an attribute, kept out of the repr; its usage is the
run's usages added up."""

from __future__ import annotations

from loopctl import BareLoop, Message
from loopctl.api import ModelReply, Usage
from loopctl.testing import ScriptedClient


def test_the_repr_leaves_the_conversation_out() -> None:
    question = "a question only the conversation holds"
    result = BareLoop(ScriptedClient([Message.assistant("done")])).run_sync(question)
    assert result.messages == (Message.user(question), Message.assistant("done"))
    shown = repr(result)
    assert "messages" not in shown and question not in shown
    assert "final_text='done'" in shown and "turns=1" in shown
    assert result.model_dump()["messages"][0]["parts"][0]["text"] == question


def test_a_runs_usage_adds_every_count_and_keeps_the_last_known_context() -> None:
    first = Usage(input_tokens=10, output_tokens=2, cache_read_tokens=1, context_tokens=12)
    second = Usage(output_tokens=3, cache_write_tokens=4, reasoning_tokens=2)
    replies = [ModelReply(message=Message.assistant("a"), usage=u) for u in (first, second)]
    client = ScriptedClient(replies)
    loop = BareLoop(client)
    assert loop.run_sync("one").usage == first
    assert loop.run_sync("two").usage == second  # a run's own usage: context unknown
    total = Usage.total([first, second, Usage()])
    assert total == Usage(
        input_tokens=10,
        output_tokens=5,
        cache_read_tokens=1,
        cache_write_tokens=4,
        context_tokens=12,
        reasoning_tokens=2,
    )
    assert Usage.total([]) == Usage() and first + second == Usage.total([first, second])
