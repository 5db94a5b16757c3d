"""Replies handed over whole (``loopctl.api.folded``, ``WholeReplyClient``, ``whole_reply_of``):
the driver skips building a reply's events and folding them back when nobody watches the
stream. Everything here pins that shortcut to the long way: the same reply, the same errors, the
same run and the same trace, byte for byte."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl import BareLoop, Message, RunConfig, tool
from loopctl.api import (
    ApiError,
    ModelReply,
    ModelRequest,
    StreamEvent,
    ToolSpec,
    Usage,
    fold_events,
    folded,
    plain_json,
    reply_events,
    whole_reply_of,
)
from loopctl.core import LoopError, ProviderPart, TextPart, ThinkingPart, ToolCall
from loopctl.core.values import MAX_NESTING
from loopctl.testing import ExploringClient, FunctionClient, ScriptedClient
from loopctl_sim import TraceRecorder

_DURATION = re.compile(r'"duration_s":[^,}]+')
THINK = ThinkingPart(provider="anthropic", text="hmm", signature="s")
BLOCK = ProviderPart(provider="anthropic", data={"type": "web_search_tool_result"})


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value, sort_keys, plain",
    [
        ({"a": 1, "b": [1, 2.5, None, True, "x"], "c": {"d": -0.0}}, False, True),
        ({"b": 1, "a": 2}, False, True),
        ({"b": 1, "a": 2}, True, False),  # a sorted stream reads them back as a, b
        ({"a": {"d": 1, "c": 2}}, True, False),  # nested dicts too
        ({"a": [{"b": 1}], "c": 2}, True, True),
        ({"a": (1, 2)}, False, False),  # a tuple reads back as a list
        ({"a": math.nan}, False, False),
        ({"a": math.inf}, False, False),
        ({1: "a"}, False, False),  # JSON keys are strings
        ({"a": {1, 2}}, False, False),  # not JSON at all: the long way raises
        (_deep(MAX_NESTING - 1), False, True),
        (_deep(MAX_NESTING + 5), False, False),
        (2**80, False, True),
        # a dict of scalars, answered without the walk
        ({"a": 1, "b": 2.5, "c": None, "d": True, "e": "x"}, False, True),
        ({"a": 1, "b": 2}, True, True),
        ({"b": 1, "a": 2, "c": [1]}, True, False),  # unsorted, though not flat
        ({"a": 1, "b": -math.inf}, False, False),
        ({"a": 1, 2: "b"}, False, False),
        ({"a": 1, "b": (1,)}, False, False),
        ({}, True, True),
    ],
)
def test_plain_json_says_when_a_json_round_trip_gives_the_value_back(
    value: Any, sort_keys: bool, plain: bool
) -> None:
    assert plain_json(value, sort_keys) is plain
    if plain:  # the claim itself: written and read back, equal and in the same order
        back = json.loads(json.dumps(value, sort_keys=sort_keys))
        assert back == value and json.dumps(back) == json.dumps(value)


_TEXT = st.text(max_size=4)
_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=2)
        | st.tuples(inner)
        | st.dictionaries(st.sampled_from("zyab"), inner, max_size=2)
    ),
    max_leaves=6,
)


@st.composite
def any_messages(draw: st.DrawFn) -> Message:
    """Messages of every shape: parts in any order, empty and repeated texts, arguments a JSON
    round trip changes (tuples, NaN, unsorted keys), either role."""
    parts: list[Any] = []
    for n in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["text", "call", "part"]))
        if kind == "text":
            parts.append(TextPart(text=draw(_TEXT)))
        elif kind == "call":
            arguments = draw(st.dictionaries(st.sampled_from("zyab"), _VALUE, max_size=3))
            parts.append(ToolCall(id=f"c{n}", name="f", arguments=arguments))
        else:
            parts.append(draw(st.sampled_from([THINK, BLOCK])))
    role = draw(st.sampled_from(["assistant", "assistant", "assistant", "user"]))
    return Message(role=role, parts=tuple(parts))


_USAGE = st.none() | st.builds(Usage, input_tokens=st.integers(0, 9))
_STOP = st.none() | st.sampled_from(["", "max_tokens", "end_turn"])


@settings(max_examples=400, deadline=None)
@given(any_messages(), _USAGE, _STOP)
def test_folded_is_the_fold_of_the_replys_events_or_none(
    message: Message, usage: Usage | None, stop: str | None
) -> None:
    """Whenever ``folded`` answers, it is what the fold of the events gives, JSON included;
    where the fold refuses the events, ``folded`` never answers."""
    whole = folded(message, usage, stop)
    try:
        expected = fold_events(reply_events(message, usage, stop))
    except (ApiError, TypeError, ValueError):
        assert whole is None
        return
    if whole is not None:
        assert whole == expected
        assert whole.model_dump_json() == expected.model_dump_json()


def test_folded_answers_for_the_replies_the_fold_makes() -> None:
    """The shortcut is taken where it should be: a reply already in the fold's form (segments
    of one text, then calls, between parts) is handed over as it is."""
    calls = [ToolCall(id=f"c{i}", name="f", arguments={"b": [i], "a": {"x": None}}) for i in (1, 2)]
    for message in [
        Message.assistant("hello"),
        Message.assistant("", calls),
        Message.assistant("two", calls),
        Message(role="assistant", parts=(THINK, TextPart(text="a"), calls[0], BLOCK, calls[1])),
        Message(role="assistant", parts=()),
    ]:
        whole = folded(message)
        assert whole is not None and whole.message is message
        assert whole == fold_events(reply_events(message))
    not_folded = [
        Message(role="assistant", parts=(calls[0], TextPart(text="after"))),
        Message(role="assistant", parts=(TextPart(text="a"), TextPart(text="b"))),
        Message(role="assistant", parts=(TextPart(text=""),)),
        Message(role="user", parts=(TextPart(text="hi"),)),
    ]
    for message in not_folded:
        assert folded(message) is None
    assert folded(Message.assistant("", calls), sort_keys=True) is None  # b before a


class _Both:
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        for event in reply_events(Message.assistant("streamed")):
            yield event

    async def whole_reply(self, request: ModelRequest) -> ModelReply:
        return fold_events(reply_events(Message.assistant("whole")))


class _StreamOverridden(_Both):
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        for event in reply_events(Message.assistant("the subclass's stream")):
            yield event


class _WholeOverridden(_StreamOverridden):
    async def whole_reply(self, request: ModelRequest) -> ModelReply:
        return fold_events(reply_events(Message.assistant("the subclass's whole")))


class _Proxy:
    """A logging proxy: its own stream, everything else forwarded."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        async for event in self.inner.stream(request):
            yield event


@pytest.mark.parametrize(
    "client, whole",
    [
        (_Both(), True),
        (_StreamOverridden(), False),  # its own stream wins over the inherited whole_reply
        (_WholeOverridden(), True),
        (_Proxy(_Both()), False),  # the forwarded whole_reply would skip the proxy's stream
        (ScriptedClient([]), True),
        (FunctionClient(lambda r: Message.assistant("x")), True),
    ],
    ids=["both", "stream-overridden", "whole-overridden", "proxy", "scripted", "function"],
)
def test_whole_reply_of_uses_whole_only_where_it_stands_for_the_stream(
    client: Any, whole: bool
) -> None:
    assert (whole_reply_of(client) is not None) is whole
    loop = BareLoop(client, config=RunConfig(max_turns=2))
    text = loop.run_sync("go").final_text
    if isinstance(client, _Both | _Proxy):
        expected = {
            _Both: "whole",
            _StreamOverridden: "the subclass's stream",
            _WholeOverridden: "the subclass's whole",
            _Proxy: "streamed",
        }[type(client)]
        assert text == expected


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _script() -> list[Any]:
    """A reply of every kind the fold handles, one that is not in its form, and an error."""
    return [
        Message(
            role="assistant",
            parts=(
                THINK,
                TextPart(text="adding"),
                ToolCall(id="c1", name="add", arguments={"b": 2, "a": 1}),
            ),
        ),
        LoopError(kind="overloaded", message="busy", retryable=True),
        # not in the fold's form (a call before its text): the whole path folds it too
        Message(
            role="assistant",
            parts=(ToolCall(id="c2", name="add", arguments={"a": 3, "b": 4}), TextPart(text="x")),
        ),
        Message(role="assistant", parts=(BLOCK, TextPart(text="7 and 3"))),
    ]


async def _no_sleep(seconds: float) -> None:
    return None


def _run(path: Path, client: Any, on_stream: Any) -> Any:
    recorder = TraceRecorder(path, created="2026-12-01T00:00:00+00:00")
    loop = BareLoop(
        client,
        [add],
        RunConfig(max_turns=5),
        observers=[recorder],
        on_stream=on_stream,
        sleep=_no_sleep,
        rng=lambda: 0.5,
    )
    result = loop.run_sync("add things")
    recorder.close()
    return result


@pytest.mark.parametrize("kind", ["scripted", "function"])
def test_a_run_and_its_trace_are_the_same_whole_or_streamed(tmp_path: Path, kind: str) -> None:
    """The same script run twice, once watched (``on_stream``: the events are streamed and
    folded) and once not (the replies handed over whole): the same result and the same trace,
    byte for byte, retries, reasoning and provider parts included."""

    def client() -> Any:
        if kind == "scripted":
            return ScriptedClient(_script())
        script = iter(_script())
        return FunctionClient(lambda request: next(script))

    seen: list[StreamEvent] = []
    streamed = _run(tmp_path / "streamed.jsonl", client(), seen.append)
    whole = _run(tmp_path / "whole.jsonl", client(), None)
    assert seen, "the watched run streamed"
    assert streamed.final_text == whole.final_text == "7 and 3"
    assert streamed.messages == whole.messages
    # byte for byte but for the measured durations
    traces = [
        _DURATION.sub("", (tmp_path / n).read_text()) for n in ("streamed.jsonl", "whole.jsonl")
    ]
    assert traces[0] == traces[1]


def test_a_scripted_whole_reply_is_the_fold_of_its_stream() -> None:
    """Each of ``ScriptedClient``'s replies, asked whole, is the fold of the same reply
    streamed, and a scripted error is the same ``ApiError``."""

    async def both() -> None:
        streamed, whole = ScriptedClient(_script()), ScriptedClient(_script())
        request = ModelRequest(messages=())
        for _ in _script():
            try:
                expected = fold_events([e async for e in streamed.stream(request)])
            except ApiError as exc:
                with pytest.raises(ApiError) as got:
                    await whole.whole_reply(request)
                assert got.value.error == exc.error
                continue
            assert await whole.whole_reply(request) == expected

    asyncio.run(both())


def test_an_exploring_clients_whole_reply_is_the_fold_of_its_stream() -> None:
    """The schema-driven model, asked whole, gives what the same seed streams and folds to:
    calls with valid, broken and missing arguments, unknown tools, texts, final answers."""
    spec = ToolSpec(
        name="add",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    )

    async def both() -> None:
        streamed, whole = ExploringClient(7), ExploringClient(7)
        assert whole_reply_of(whole) is not None
        for turn in range(40):
            request = ModelRequest(messages=(Message.user("go"),), tools=(spec,), turn=turn)
            expected = fold_events([e async for e in streamed.stream(request)])
            got = await whole.whole_reply(request)
            assert got == expected
            assert got.model_dump_json() == expected.model_dump_json()
        assert streamed.moves == whole.moves and len(whole.moves) > 2

    asyncio.run(both())
