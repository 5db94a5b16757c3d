"""The feed codec (every feed, both ways, onto a machine) and secret scrubbing."""

from __future__ import annotations

import inspect
import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl import (
    LoopError,
    LoopMachine,
    MachinePolicy,
    Message,
    ProtocolError,
    ToolCall,
    ToolResult,
)
from loopctl.core import FEED_TYPES, FEEDS, AcceptInput
from loopctl_sim.trace import (
    REDACTED,
    FeedCodecError,
    TraceWriter,
    decode_feed,
    encode_feed,
    read_record,
    scrub,
)
from loopctl_sim.trace.records import trace_json_schema
from loopctl_sim.trace.scrub import LITERALS, default_scrubber

CALL = ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})
ERROR = LoopError(kind="rate_limited", message="slow down", retryable=True, status=429)

# feed name -> the driver's canonical args
CANONICAL: dict[str, dict[str, Any]] = {
    "accept_input": {"input": Message.user("hi")},
    "model_response": {"response": Message.assistant("", [CALL]), "context_tokens": 12},
    "tool_results": {
        "message": Message.from_results([ToolResult(call_id="c1", name="add", content="3")]),
        "context_tokens": 40,
    },
    "compaction_result": {"compacted": [Message.user("x")], "before": 10, "after": 2},
    "compaction_noop": {"before": 10, "after": 10},
    "set_context_tokens": {"n": 99},
    "inject": {"message": Message.user("steer")},
    "cancel": {},
    "fail": {"error": ERROR},
    "commit_pending": {},
    "discard_pending": {},
}


def test_the_codec_covers_exactly_the_brains_feeds() -> None:
    assert tuple(CANONICAL) == FEEDS
    feeds = [
        d for d in trace_json_schema()["$defs"].values() if d.get("title", "").endswith("Feed")
    ]
    assert [d["properties"]["name"]["enum"] for d in feeds] == [[n] for n in FEEDS]


@pytest.mark.parametrize("name", list(CANONICAL))
def test_encode_then_decode_is_identity(name: str) -> None:
    feed = decode_feed(name, CANONICAL[name])
    assert type(feed) is FEED_TYPES[name] and feed == FEED_TYPES[name](**CANONICAL[name])
    data = encode_feed(feed)
    assert isinstance(data, dict) and json.loads(json.dumps(data)) == data
    assert decode_feed(name, data) == feed
    assert encode_feed(decode_feed(name, data)) == data


def test_text_input_is_taken_as_a_user_message() -> None:
    feed = decode_feed("accept_input", {"input": "hi"})
    assert feed == AcceptInput(Message.user("hi"))
    line = b'{"seq":1,"type":"feed","digest":"d","name":"accept_input","args":{"input":"hi"}}'
    assert read_record(line).args == feed  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("fly", {}, "unknown feed 'fly'"),
        ("set_context_tokens", {"n": "many"}, "bad arguments for feed 'set_context_tokens': n"),
        ("set_context_tokens", {"n": 3, "m": 1}, "bad arguments for feed 'set_context_tokens': m"),
        ("cancel", {"why": 1}, "bad arguments for feed 'cancel'"),
        ("model_response", {"response": Message.assistant("x")}, "context_tokens"),
    ],
)
def test_bad_feeds_are_refused_clearly(name: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(FeedCodecError, match=message):
        decode_feed(name, args)


def _machine_in(state: str) -> LoopMachine:
    m = LoopMachine()
    m.accept_input("hi")
    if state == "start":
        return m
    policy = MachinePolicy(tools=("add",), context_window=100, compact_threshold=0.5)
    if state == "awaiting_model":
        m.next_step(policy)
    elif state == "awaiting_tools":
        m.next_step(policy)
        m.model_response(Message.assistant("", [CALL]), 5)
    elif state == "awaiting_compaction":
        m.set_context_tokens(60)
        m.next_step(policy)
    elif state == "terminal":
        m.next_step(policy)
        m.model_response(Message.assistant("done"), 5)
        m.next_step(policy)
    return m


# feed -> state it is valid in (a fresh machine in that state, fed directly and via the codec)
VALID_IN = {
    "model_response": "awaiting_model",
    "tool_results": "awaiting_tools",
    "compaction_result": "awaiting_compaction",
    "compaction_noop": "awaiting_compaction",
    "set_context_tokens": "start",
    "inject": "start",
    "cancel": "awaiting_model",
    "fail": "awaiting_tools",
    "commit_pending": "terminal",
}


@pytest.mark.parametrize(("name", "state"), list(VALID_IN.items()))
def test_a_decoded_feed_equals_the_direct_call(name: str, state: str) -> None:
    direct, via_codec = _machine_in(state), _machine_in(state)
    getattr(direct, name)(**CANONICAL[name])
    via_codec.feed(decode_feed(name, encode_feed(decode_feed(name, CANONICAL[name]))))
    assert via_codec == direct
    assert via_codec.digest() == direct.digest()


def test_accept_input_and_discard_from_data() -> None:
    m = LoopMachine()
    m.feed(
        decode_feed(
            "accept_input", {"input": {"role": "user", "parts": [{"kind": "text", "text": "hi"}]}}
        )
    )
    assert m.pending == (Message.user("hi"),)
    m.feed(decode_feed("cancel", {}))
    m.feed(decode_feed("discard_pending", {}))
    assert m.finalized


def test_a_decoded_feed_the_brain_refuses_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="tool_results"):
        _machine_in("start").feed(decode_feed("tool_results", CANONICAL["tool_results"]))


# --- scrubbing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"Authorization": "Bearer abc"}, {"Authorization": REDACTED}),
        ({"authorization": "x", "other": 1}, {"authorization": REDACTED, "other": 1}),
        ({"x-api-key": "k"}, {"x-api-key": REDACTED}),
        ({"api_key": "k", "API-Key": "k"}, {"api_key": REDACTED, "API-Key": REDACTED}),
        ({"proxy-authorization": "k"}, {"proxy-authorization": REDACTED}),
        ({"headers": {"Authorization": "b"}}, {"headers": {"Authorization": REDACTED}}),
        ("key sk-abcdefghijklmnop here", f"key {REDACTED} here"),
        (["sk-proj-ABCDEFGH12345678"], [REDACTED]),
        ({"context_tokens": 5, "tokens": 3}, {"context_tokens": 5, "tokens": 3}),
        ("skeleton sk-short", "skeleton sk-short"),
        ({"api_key": None}, {"api_key": None}),
    ],
)
def test_scrub_table(value: Any, expected: Any) -> None:
    assert scrub(value) == expected


def test_scrub_returns_the_same_object_when_clean() -> None:
    clean = {"a": [1, "two", {"b": None}]}
    assert scrub(clean) is clean


def test_secrets_never_land_in_a_trace() -> None:
    buf = io.StringIO()
    w = TraceWriter(buf)
    w.header(None, {"api_key": "sk-live-1234567890abcdef", "Authorization": "Bearer xyz"})
    m = LoopMachine()
    m.accept_input("my key is sk-abcdefghijklmnopqrstuv")
    w.feed(AcceptInput("my key is sk-abcdefghijklmnopqrstuv"), m)
    w.io(
        "model_request",
        data={
            "headers": {"x-api-key": "secret", "Authorization": "Bearer t"},
            "body": "sk-abcdefghijklmnopqrstuv",
        },
    )
    text = buf.getvalue()
    for secret in ("sk-live", "sk-abcdefghij", "Bearer", "secret"):
        assert secret not in text
    records = [read_record(line) for line in text.splitlines()]
    assert records[0].scrubbed and records[1].scrubbed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": "b"}', False),
        ('{"Authorization": "x"}', True),
        ('{"x-api-key": 1}', True),
        ('{"text": "my api_key is"}', False),
        ('{"text": "sk-"}', True),  # the pre-test looks for literals: the walk decides
        ('{"text": "sk-abcdefgh"}', True),
        ('{"text": "Bearer abcdefgh"}', True),
        ('{"text": "ghp_abcdefghijklmnopqrst"}', True),
        ('{"text": "AKIAABCDEFGHIJKLMNOP"}', True),
        ('{"token": "t"}', True),
        ('{"context_tokens": 5}', False),
        ('{"max_tokens": 5}', False),
    ],
)
def test_might_hold_secrets_table(text: str, expected: bool) -> None:
    assert default_scrubber().might_hold(text) is expected


@settings(max_examples=300, deadline=None)
@given(
    before=st.text(max_size=20),
    literal=st.sampled_from(LITERALS),
    after=st.text(max_size=20),
    upper=st.booleans(),
)
def test_the_grouped_literal_search_finds_every_literal(
    before: str, literal: str, after: str, upper: bool
) -> None:
    """The literals are searched by group (``ghp_`` ... under ``gh``): the answer is the plain
    search's, for each literal in either case anywhere in a text, and for texts without one."""
    text = before + (literal.upper() if upper else literal) + after
    assert default_scrubber().might_hold(text)
    low = (before + after).lower()
    assert default_scrubber().might_hold(before + after) is any(x in low for x in LITERALS)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["a", "api_key", "Authorization", "x-api-key", "text", "k"])
            | st.text(max_size=12),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(value=_json)
def test_the_fast_check_never_lets_a_secret_through(value: Any) -> None:
    """When the cheap text test says "no secret", the exact walk agrees."""
    if not default_scrubber().might_hold(json.dumps(value)):
        assert scrub(value) is value


@pytest.mark.parametrize("name", FEEDS)
def test_a_feeds_fields_are_its_machine_methods_parameters_in_order(name: str) -> None:
    """A trace's args are the feed's fields, named as the seed-named method's parameters."""
    parameters = list(inspect.signature(getattr(LoopMachine, name)).parameters)[1:]
    assert list(FEED_TYPES[name].__match_args__) == parameters
