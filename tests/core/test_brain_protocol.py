"""Misuse of the brain: every feed outside its states, and every guard inside them.

A refused feed raises ``ProtocolError`` naming the feed and the state, and leaves the machine
exactly as it was. The table of invalid (state, feed) pairs is generated from the brain's own
``TRANSITIONS``, so a transition added or removed there is tested here without an edit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from brain_helpers import (
    BY_STATE,
    POLICY,
    after_exchange,
    answer,
    ask,
    awaiting_compaction,
    awaiting_model,
    awaiting_tools,
    call,
    completed,
    failed_mid_model,
    started,
)
from pydantic import TypeAdapter

from loopctl import (
    CompactReason,
    LoopError,
    LoopMachine,
    Message,
    ProtocolError,
    TextPart,
    ToolResult,
)
from loopctl.core import FEED_TYPES, FEEDS, TRANSITIONS, Cancel
from loopctl.core.machine import STATES

SAMPLE_ARGS: dict[str, tuple[Any, ...]] = {
    "accept_input": ("hello",),
    "model_response": (Message.assistant("hi"), 10),
    "tool_results": (answer(call("k1")), 12),
    "compaction_result": ([Message.user("summary")], 100, 10),
    "compaction_noop": (100, 100),
    "set_context_tokens": (10,),
    "inject": (Message.user("steer"),),
    "cancel": (),
    "fail": (LoopError(kind="internal", message="x"),),
    "commit_pending": (),
    "discard_pending": (),
}

INVALID = [(s, f) for s in STATES for f in FEEDS if (s, FEED_TYPES[f]) not in TRANSITIONS]


def test_the_tables_cover_the_contract() -> None:
    assert set(SAMPLE_ARGS) == set(FEEDS)
    assert len(FEEDS) == 11
    assert set(BY_STATE) == set(STATES)
    assert {s for s, _ in TRANSITIONS} == set(STATES)
    assert {f.name for _, f in TRANSITIONS} == set(FEEDS)
    assert len(INVALID) + len(TRANSITIONS) == len(STATES) * len(FEEDS)


def _refused(
    m: LoopMachine, feed: str, args: tuple[Any, ...], state: str, via: str = "method"
) -> ProtocolError:
    """``feed`` with ``args`` is refused, through its seed-named method or as a ``Feed`` object
    given to ``machine.feed`` (the one way in, which the methods wrap)."""
    before_json = m.model_dump_json()
    before = LoopMachine.model_validate_json(before_json)
    with pytest.raises(ProtocolError) as raised:
        if via == "method":
            getattr(m, feed)(*args)
        else:
            m.feed(FEED_TYPES[feed](*args))
    assert raised.value.feed == feed
    assert raised.value.state == state
    assert feed in str(raised.value) and state in str(raised.value)
    assert m == before
    assert m.model_dump_json() == before_json
    return raised.value


@pytest.mark.parametrize("via", ["method", "feed"])
@pytest.mark.parametrize(("state", "feed"), INVALID, ids=[f"{s}-{f}" for s, f in INVALID])
def test_feed_outside_its_states_is_refused(state: str, feed: str, via: str) -> None:
    m = BY_STATE[state]()
    assert m.state.kind == state
    _refused(m, feed, SAMPLE_ARGS[feed], state, via)


@pytest.mark.parametrize("feed", FEEDS)
def test_a_feed_object_and_its_method_do_the_same(feed: str) -> None:
    """Each seed-named method is ``machine.feed(FeedType(*args))``: in every state, the same
    machine after, or the same refusal."""
    for build in BY_STATE.values():
        by_method, by_feed = build(), build()
        try:
            getattr(by_method, feed)(*SAMPLE_ARGS[feed])
        except ProtocolError as refused:
            with pytest.raises(ProtocolError) as raised:
                by_feed.feed(FEED_TYPES[feed](*SAMPLE_ARGS[feed]))
            assert str(raised.value) == str(refused)
        else:
            by_feed.feed(FEED_TYPES[feed](*SAMPLE_ARGS[feed]))
        assert by_feed == by_method
        assert by_feed.digest() == by_method.digest()


def test_each_feed_type_is_named_for_its_method() -> None:
    assert tuple(FEED_TYPES) == FEEDS
    for name, cls in FEED_TYPES.items():
        assert cls.name == name
        assert callable(getattr(LoopMachine, name))
        assert FEED_TYPES[name](*SAMPLE_ARGS[name]).args() == dict(
            zip(cls.__match_args__, SAMPLE_ARGS[name], strict=True)
        )


@pytest.mark.parametrize("name", FEEDS)
def test_a_feed_round_trips_through_json_as_its_own_type(name: str) -> None:
    """The feed types are the one definition a trace needs: pydantic writes one as JSON data
    and validates that data back into an equal feed of the same type."""
    feed = FEED_TYPES[name](*SAMPLE_ARGS[name])
    adapter: TypeAdapter[Any] = TypeAdapter(FEED_TYPES[name])
    data = json.loads(json.dumps(adapter.dump_python(feed, mode="json")))
    assert adapter.validate_python(data) == feed


@pytest.mark.parametrize("thing", ["cancel", Message.user("x"), None, Cancel])
def test_feed_takes_only_a_feed(thing: object) -> None:
    m = started()
    before_json = m.model_dump_json()
    with pytest.raises(ProtocolError, match="feed\\(\\) takes a Feed") as raised:
        m.feed(thing)  # type: ignore[arg-type]
    assert (raised.value.feed, raised.value.state) == ("feed", "start")
    assert m.model_dump_json() == before_json


# --- guards inside valid states ---------------------------------------------------------------

_k1, _u1, _k2 = call("k1", x=1), call("u1", "nope"), call("k2", "write", y=2)
_bad = ToolResult(call_id="zz", name="read", content="?")

GUARDS: list[tuple[str, Callable[[], LoopMachine], str, tuple[Any, ...]]] = [
    ("input-twice", started, "accept_input", ("again",)),
    ("input-assistant", LoopMachine, "accept_input", (Message.assistant("x"),)),
    ("input-results", LoopMachine, "accept_input", (answer(_k1),)),
    ("input-not-a-message", LoopMachine, "accept_input", (42,)),
    ("inject-before-input", LoopMachine, "inject", (Message.user("x"),)),
    ("inject-calls", after_exchange, "inject", (ask(call("q")),)),
    ("inject-results", after_exchange, "inject", (answer(call("q")),)),
    ("inject-text", after_exchange, "inject", ("plain text",)),
    ("reply-from-user", awaiting_model, "model_response", (Message.user("x"), 1)),
    (
        "reply-with-results",
        awaiting_model,
        "model_response",
        (Message(role="assistant", parts=answer(_k1).parts), 1),
    ),
    ("reply-duplicate-ids", awaiting_model, "model_response", (ask(call("a"), call("a", n=2)), 1)),
    ("reply-empty-id", awaiting_model, "model_response", (ask(call("")), 1)),
    ("reply-negative-tokens", awaiting_model, "model_response", (Message.assistant("x"), -1)),
    ("reply-bool-tokens", awaiting_model, "model_response", (Message.assistant("x"), True)),
    ("reply-float-tokens", awaiting_model, "model_response", (Message.assistant("x"), 1.5)),
    ("reply-not-a-message", awaiting_model, "model_response", ("text", 1)),
    ("reply-nan-argument", awaiting_model, "model_response", (ask(call("n", x=float("nan"))), 1)),
    (
        "reply-inf-argument",
        awaiting_model,
        "model_response",
        (ask(call("n", x={"deep": [float("-inf")]})), 1),
    ),
    ("results-missing-one", awaiting_tools, "tool_results", (answer(_k1),)),
    ("results-extra", awaiting_tools, "tool_results", (answer(_k1, _k2, call("k3")),)),
    (
        "results-wrong-id",
        awaiting_tools,
        "tool_results",
        (Message.from_results([*answer(_k1).tool_results, _bad]),),
    ),
    ("results-twice", awaiting_tools, "tool_results", (answer(_k1, _k1, _k2),)),
    ("results-answer-preanswered", awaiting_tools, "tool_results", (answer(_k1, _u1, _k2),)),
    (
        "results-from-assistant",
        awaiting_tools,
        "tool_results",
        (Message(role="assistant", parts=answer(_k1, _k2).parts),),
    ),
    (
        "results-with-text",
        awaiting_tools,
        "tool_results",
        (Message(role="user", parts=(*answer(_k1, _k2).parts, TextPart(text="also"))),),
    ),
    ("results-not-a-message", awaiting_tools, "tool_results", ([],)),
    (
        "compacted-incoherent",
        lambda: awaiting_compaction(CompactReason.MANUAL),
        "compaction_result",
        ([Message.user("x"), ask(call("open"))], 10, 5),
    ),
    (
        "compacted-negative",
        lambda: awaiting_compaction(CompactReason.MANUAL),
        "compaction_result",
        ([Message.user("x")], 10, -5),
    ),
    (
        "noop-negative",
        lambda: awaiting_compaction(CompactReason.MANUAL),
        "compaction_noop",
        (10, -1),
    ),
    ("tokens-negative", started, "set_context_tokens", (-1,)),
    ("tokens-float", awaiting_tools, "set_context_tokens", (3.0,)),
    ("tokens-none", awaiting_model, "set_context_tokens", (None,)),
    ("fail-not-an-error", awaiting_model, "fail", (RuntimeError("x"),)),
    ("commit-not-completed", failed_mid_model, "commit_pending", ()),
    ("discard-completed", completed, "discard_pending", ()),
]


@pytest.mark.parametrize("via", ["method", "feed"])
@pytest.mark.parametrize(
    ("build", "feed", "args"), [g[1:] for g in GUARDS], ids=[g[0] for g in GUARDS]
)
def test_guard_refuses_and_changes_nothing(
    build: Callable[[], LoopMachine], feed: str, args: tuple[Any, ...], via: str
) -> None:
    """Bad arguments inside a feed (a wrong type included) are refused with a ProtocolError by
    the brain, the machine unchanged: building the feed object checks nothing."""
    m = build()
    _refused(m, feed, args, m.state.kind, via)


@pytest.mark.parametrize("feed", ["commit_pending", "discard_pending"])
def test_the_exit_door_opens_once(feed: str) -> None:
    m = completed() if feed == "commit_pending" else failed_mid_model()
    getattr(m, feed)()
    _refused(m, feed, (), "terminal")


def test_next_run_needs_the_exit_door() -> None:
    for m in (started(), completed()):
        with pytest.raises(ProtocolError) as raised:
            m.next_run()
        assert raised.value.feed == "next_run"


def test_the_machine_still_works_after_a_refusal() -> None:
    m = awaiting_tools()
    with pytest.raises(ProtocolError):
        m.tool_results(answer(_k1))
    m.tool_results(answer(_k1, _k2))
    assert m.next_step(POLICY).kind == "call_llm"


def test_tool_results_carries_the_count_or_keeps_it() -> None:
    """One feed per exchange: the results and the driver's count after them; None keeps it."""
    results = answer(call("k1", x=1), call("k2", "write", y=2))
    counted, kept = awaiting_tools(), awaiting_tools()
    before = kept.context_tokens
    counted.tool_results(results, 420)
    kept.tool_results(results)
    assert counted.context_tokens == 420 and kept.context_tokens == before
    assert counted.history == kept.history and counted.pending == kept.pending
    refused = awaiting_tools()
    saved = refused.digest()
    with pytest.raises(ProtocolError, match="not a token count"):
        refused.tool_results(results, -1)
    assert refused.digest() == saved  # refused before any change
