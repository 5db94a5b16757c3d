"""Compaction through the driver: threshold, manual, emergency from a provider overflow, both
compactors, and the pure cut planning."""

from __future__ import annotations

import pytest

from loopctl.api import ModelReply, Usage
from loopctl.core import (
    Compact,
    CompactReason,
    Completed,
    Failed,
    LoopError,
    Message,
    coherence_problem,
)
from loopctl.driver.compaction import (
    MiddleOutCompactor,
    SummarizingCompactor,
    plan_cut,
    render_transcript,
)
from loopctl.driver.config import RunConfig, SessionConfig
from loopctl.driver.loop import BareLoop
from loopctl.testing import ScriptedClient
from loopctl.tools import tool
from tests.driver.helpers import answer, ask, call


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def exchange(i: int) -> list[Message]:
    c = call(f"c{i}", "add", a=i, b=i)
    return [ask(c), Message.from_results([add_result(c.id, i)])]


def add_result(id: str, i: int):
    from loopctl.core import ToolResult

    return ToolResult(call_id=id, name="add", content=str(2 * i))


def conversation(n_exchanges: int) -> list[Message]:
    messages = [Message.user("start")]
    for i in range(n_exchanges):
        messages.extend(exchange(i))
    return messages


@pytest.mark.parametrize(
    ("n", "head", "tail", "expected"),
    [
        (1, 2, 6, None),  # nothing to cut
        (3, 2, 2, (1, 5)),  # head may not end on an open call; tail may not start on results
        (6, 2, 6, (1, 7)),
        (6, 1, 4, (1, 9)),
        (6, 3, 3, (3, 11)),
    ],
)
def test_plan_cut_never_splits_a_call_from_its_result(n, head, tail, expected) -> None:
    messages = conversation(n)
    cut = plan_cut(messages, head, tail)
    assert cut == expected
    if cut is not None:
        start, end = cut
        kept = [*messages[:start], Message.user("marker"), *messages[end:]]
        assert coherence_problem(kept) is None


async def test_middle_out_compactor_replaces_the_middle_by_a_marker() -> None:
    messages = conversation(6)
    out = await MiddleOutCompactor(keep_head=1, keep_tail=4).compact(messages, CompactReason.MANUAL)
    assert out is not None
    assert out[0] == messages[0]
    assert "8 earlier messages were removed" in out[1].text
    assert out[2:] == messages[9:]
    assert coherence_problem(out) is None
    assert await MiddleOutCompactor().compact(conversation(1), CompactReason.MANUAL) is None


async def test_summarizing_compactor_asks_the_model() -> None:
    summarizer = ScriptedClient([answer("they added numbers")])
    compactor = SummarizingCompactor(summarizer, keep_head=1, keep_tail=4)
    out = await compactor.compact(conversation(6), CompactReason.THRESHOLD_EXCEEDED)
    assert out is not None and "they added numbers" in out[1].text
    prompt = summarizer.requests[0].messages[0].text
    assert "assistant called add" in prompt and "result of add: 2" in prompt
    assert "result of add" in render_transcript(conversation(1))


def big_reply(i: int, tokens: int) -> ModelReply:
    return ModelReply(
        message=ask(call(f"c{i}", "add", a=i, b=i)), usage=Usage(context_tokens=tokens)
    )


async def test_threshold_compaction_is_a_step_and_a_commit_point(recorder) -> None:
    replies = [big_reply(i, 100 * (i + 1)) for i in range(6)]
    replies.append(ModelReply(message=answer("done"), usage=Usage(context_tokens=100)))
    loop = BareLoop(
        ScriptedClient(replies),
        tools=[add],
        session=SessionConfig(context_window=1000),
        config=RunConfig(compact_threshold=0.5, emergency_threshold=0.95, loop_action="off"),
        compactor=MiddleOutCompactor(keep_head=1, keep_tail=2),
        observers=[recorder],
    )
    result = await loop.run("go")
    assert isinstance(result.outcome, Completed)
    compacts = [s for s in recorder.steps if isinstance(s, Compact)]
    assert compacts and all(s.reason is CompactReason.THRESHOLD_EXCEEDED for s in compacts)
    assert "compaction_result" in recorder.feed_names()
    history = loop.machine.history
    assert coherence_problem(history) is None
    assert any("earlier messages were removed" in m.text for m in history)
    # the run's messages still list everything the run said
    assert result.messages[0].text == "go" and result.messages[-1].text == "done"


async def test_manual_compaction_request(recorder) -> None:
    loop = BareLoop(
        ScriptedClient(
            [ask(call(f"c{i}", "add", a=i, b=i)) for i in range(4)] + [answer("x"), answer("y")]
        ),
        tools=[add],
        config=RunConfig(loop_action="off"),
        observers=[recorder],
        compactor=MiddleOutCompactor(keep_head=1, keep_tail=2),
    )
    await loop.run("first")
    loop.request_compaction()
    await loop.run("second")
    manual = [s for s in recorder.steps if isinstance(s, Compact)]
    assert [s.reason for s in manual] == [CompactReason.MANUAL]
    assert loop.policy().compact_now is False  # the request is used up


async def test_provider_context_overflow_becomes_an_emergency_compaction(recorder) -> None:
    overflow = LoopError(kind="context_overflow", message="maximum context length", status=400)
    replies = [ask(call(f"c{i}", "add", a=i, b=i)) for i in range(5)]
    replies += [overflow, answer("fits now")]
    loop = BareLoop(
        ScriptedClient(replies),
        tools=[add],
        config=RunConfig(loop_action="off"),
        compactor=MiddleOutCompactor(keep_head=1, keep_tail=2),
        observers=[recorder],
    )
    result = await loop.run("go")
    assert result.final_text == "fits now"
    compacts = [s for s in recorder.steps if isinstance(s, Compact)]
    assert [s.reason for s in compacts] == [CompactReason.EMERGENCY]
    assert result.turns == 6  # the withdrawn call was not counted


async def test_emergency_noop_fails_with_context_overflow() -> None:
    overflow = LoopError(kind="context_overflow", message="too long", status=400)
    loop = BareLoop(ScriptedClient([overflow]))
    result = await loop.run("a single huge message")
    assert isinstance(result.outcome, Failed)
    assert result.error is not None and result.error.kind == "context_overflow"


async def test_compactor_exception_fails_the_run() -> None:
    class Broken:
        async def compact(self, messages, reason):
            raise RuntimeError("summarizer down")

    loop = BareLoop(ScriptedClient([answer("x")]), compactor=Broken())
    loop.request_compaction()
    result = await loop.run("go")
    assert isinstance(result.outcome, Failed)
    assert result.error is not None and result.error.kind == "compaction"


async def test_a_compactor_that_cuts_nothing_counts_as_a_noop() -> None:
    class Same:
        calls = 0

        async def compact(self, messages, reason):
            self.calls += 1
            return list(messages)

    overflow = LoopError(kind="context_overflow", message="too long", status=400)
    compactor = Same()
    result = await BareLoop(ScriptedClient([overflow]), compactor=compactor).run("x")
    assert isinstance(result.outcome, Failed)
    assert result.error is not None and result.error.kind == "context_overflow"
    assert compactor.calls == 1
