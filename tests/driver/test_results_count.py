"""An exchange is reported to the brain in one feed: the results with the driver's count of the
context after them (``tool_results(message, context_tokens)``), no ``set_context_tokens`` after."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.api import ModelReply, ModelRequest, Usage
from loopctl.core import (
    FEED_TYPES,
    LoopMachine,
    MachinePolicy,
    MachineStep,
    Message,
    SetContextTokens,
    ToolCall,
    ToolResults,
)
from loopctl.driver import BareLoop
from loopctl.driver.estimate import json_length, message_chars
from loopctl.observe import LoopObserver
from loopctl.testing import FunctionClient
from loopctl.tools import tool
from tests.driver.helpers import answer, ask, call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Tape(LoopObserver):
    """Every step (with its policy) and feed the driver reports, in order, and the brain's
    digest after each feed."""

    def __init__(self) -> None:
        self.items: list[tuple[str, Any, Any]] = []
        self.digests: list[str] = []

    def step(self, policy: MachinePolicy, step: MachineStep, machine: LoopMachine) -> None:
        self.items.append(("step", policy, step))

    def feed(self, name: str, args: Mapping[str, Any], machine: LoopMachine) -> None:
        self.items.append(("feed", name, dict(args)))
        self.digests.append(machine.digest())

    def feeds(self) -> list[tuple[str, dict[str, Any]]]:
        return [(name, args) for kind, name, args in self.items if kind == "feed"]


def script(reported: int | None) -> FunctionClient:
    """Two waves of additions, then an answer; each reply's usage reports ``reported`` tokens
    of context (None: the provider says nothing, the driver estimates)."""

    def reply(request: ModelRequest) -> ModelReply | Message:
        message = ask(call(f"c{request.turn}", "add", a=request.turn, b=1))
        if request.turn > 2:
            message = answer("done")
        if reported is None:
            return message
        return ModelReply(message=message, usage=Usage(context_tokens=reported * request.turn))

    return FunctionClient(reply)


async def run(reported: int | None) -> tuple[BareLoop, Tape]:
    tape = Tape()
    loop = BareLoop(script(reported), tools=[add], observers=[tape])
    await loop.run("add things")
    return loop, tape


@pytest.mark.parametrize("reported", [None, 500], ids=["estimated", "provider-count"])
async def test_each_exchange_is_one_feed_with_the_count_after_the_results(
    reported: int | None,
) -> None:
    loop, tape = await run(reported)
    names = [name for name, _ in tape.feeds()]
    assert names == [
        "accept_input",
        "model_response",
        "tool_results",
        "model_response",
        "tool_results",
        "model_response",
        "commit_pending",
    ]
    feeds = tape.feeds()
    for i, (name, args) in enumerate(feeds):
        if name != "tool_results":
            continue
        reply_count = feeds[i - 1][1]["context_tokens"]  # the count the reply before left
        message = args["message"]
        assert args["context_tokens"] == reply_count + loop.estimator.count([message]) > 0
    assert loop.machine.context_tokens == feeds[-2][1]["context_tokens"]


@pytest.mark.parametrize("reported", [None, 500], ids=["estimated", "provider-count"])
async def test_the_one_feed_leaves_the_brain_the_old_pair_of_feeds_left(
    reported: int | None,
) -> None:
    """The same steps and feeds given to a fresh brain, each exchange as the pair the driver
    once gave (the results, then ``set_context_tokens`` of the same count): the brain after the
    pair is the brain after the one feed, digest for digest."""
    _, tape = await run(reported)
    one, pair = LoopMachine(), LoopMachine()
    after_one: list[str] = []
    after_pair: list[str] = []
    for kind, first, second in tape.items:
        if kind == "step":
            assert one.next_step(first) == pair.next_step(first) == second
            continue
        feed = FEED_TYPES[first](**second)
        one.feed(feed)
        after_one.append(one.digest())
        if isinstance(feed, ToolResults):
            assert feed.context_tokens is not None
            pair.feed(ToolResults(feed.message))
            pair.feed(SetContextTokens(feed.context_tokens))
        else:
            pair.feed(feed)
        after_pair.append(pair.digest())
    assert after_one == after_pair == tape.digests
    assert one == pair


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["plain", 'a "quote"', "back\\slash", "tab\t", "é", "\x7f", "it's"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner)
        | st.dictionaries(st.text(max_size=4) | st.integers() | st.none(), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=1000, deadline=None, derandomize=True)
@given(_JSON)
def test_the_estimate_counts_arguments_as_json_dumps_writes_them(value: Any) -> None:
    """``json_length`` is ``len(json.dumps(value))`` (the estimate a trace's counts hold), for
    plain data and for what it hands to ``json.dumps`` (floats, escapes, non-str keys)."""
    assert json_length(value) == len(json.dumps(value))
    message = Message.assistant(tool_calls=[ToolCall(id="c", name="t", arguments={"v": value})])
    assert message_chars(message) == len("t") + len(json.dumps({"v": value}))
