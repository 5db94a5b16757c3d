"""``Conversation``: the brain's conversation as a view that reads, compares and serializes as
the tuple it replaces, and never shows what the brain does after it was taken."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from loopctl.api import ModelRequest
from loopctl.core import Conversation, LoopMachine, MachinePolicy, Message, ToolCall, ToolResult

MESSAGES = [Message.user(f"m{i}") for i in range(6)]


def test_reads_as_the_tuple_of_its_messages() -> None:
    view = Conversation(MESSAGES[:4], MESSAGES[4:])
    expected = tuple(MESSAGES)
    assert len(view) == 6
    assert list(view) == list(expected)
    assert view[0] == expected[0] and view[5] == expected[5] and view[-1] == expected[-1]
    assert view[-6] == expected[0]
    assert view[1:4] == expected[1:4] and view[::-1] == expected[::-1]
    assert view == expected and expected == view
    assert view != list(expected)  # as a tuple: never equal to a list
    assert view != expected[:-1] and view != (*expected[:-1], Message.user("other"))
    assert hash(view) == hash(expected)
    assert MESSAGES[3] in view and view.index(MESSAGES[4]) == 4 and view.count(MESSAGES[0]) == 1
    assert list(reversed(view)) == list(reversed(expected))
    assert view.as_tuple() == expected


@pytest.mark.parametrize("index", [6, 7, -7, 100])
def test_an_index_out_of_range_raises_index_error(index: int) -> None:
    with pytest.raises(IndexError):
        Conversation(MESSAGES[:4], MESSAGES[4:])[index]


def test_appends_after_the_view_was_taken_do_not_show() -> None:
    head, tail = list(MESSAGES[:2]), list(MESSAGES[2:3])
    view = Conversation(head, tail, 2, 1)
    head.append(Message.user("later"))
    tail.append(Message.user("later too"))
    assert len(view) == 3
    assert list(view) == MESSAGES[:3]
    assert view[-1] == MESSAGES[2]
    with pytest.raises(IndexError):
        view[3]


def test_the_brains_view_is_frozen_at_the_moment_it_was_taken() -> None:
    machine = LoopMachine(MESSAGES[:2])
    machine.accept_input("go")
    before = machine.conversation()
    assert before == (*MESSAGES[:2], Message.user("go"))
    machine.next_step(MachinePolicy(tools=("add",)))
    call = ToolCall(id="c1", name="add", arguments={"a": 1})
    machine.model_response(Message.assistant(tool_calls=[call]), 10)
    machine.next_step(MachinePolicy(tools=("add",)))
    machine.tool_results(Message.from_results([ToolResult(call_id="c1", name="add", content="1")]))
    assert len(before) == 3 and before == (*MESSAGES[:2], Message.user("go"))
    assert machine.conversation() == tuple(machine.messages())


def test_views_compare_by_their_messages() -> None:
    a = Conversation(MESSAGES[:3], MESSAGES[3:])
    b = Conversation(tuple(MESSAGES))
    assert a == b and b == a
    assert a != Conversation(MESSAGES[:5])
    assert Conversation() == () and len(Conversation()) == 0


def test_of_copies_a_sequence_and_keeps_a_view() -> None:
    source = list(MESSAGES)
    view = Conversation.of(source)
    source.append(Message.user("more"))
    assert len(view) == 6
    assert Conversation.of(view) is view


def test_pickles_and_prints_as_its_messages() -> None:
    view = Conversation(MESSAGES[:2], MESSAGES[2:4])
    assert pickle.loads(pickle.dumps(view)) == view
    assert repr(view) == f"Conversation({tuple(MESSAGES[:4])!r})"


def test_a_request_takes_any_sequence_of_messages_and_serializes_as_a_tuple() -> None:
    as_tuple = ModelRequest(messages=tuple(MESSAGES))
    as_list = ModelRequest(messages=list(MESSAGES))
    as_view = ModelRequest(messages=Conversation(MESSAGES[:1], MESSAGES[1:]))
    assert isinstance(as_tuple.messages, Conversation)
    assert as_tuple == as_list == as_view
    dumped = as_view.model_dump()
    assert dumped["messages"] == tuple(m.model_dump() for m in MESSAGES)
    assert as_view.model_dump_json() == as_tuple.model_dump_json()
    restored = ModelRequest.model_validate_json(as_view.model_dump_json())
    assert restored == as_view
    schema = ModelRequest.model_json_schema()["properties"]["messages"]
    assert schema["type"] == "array" and schema["items"]["title"] == "Message"
    assert set(schema["items"]["properties"]) == {"role", "parts"}


def test_a_view_in_a_request_is_kept_as_it_is() -> None:
    view = Conversation(MESSAGES[:1], MESSAGES[1:])
    assert ModelRequest(messages=view).messages is view


@pytest.mark.parametrize("bad", [[1], ["text"], "text", None, [{"role": "nobody"}]])
def test_a_request_rejects_what_is_not_messages(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        ModelRequest(messages=bad)
    assert info.value.errors()[0]["loc"][0] == "messages"


@given(
    st.integers(0, 6),
    st.integers(0, 6),
    st.integers(-14, 14),
    st.one_of(st.none(), st.integers(-8, 8)),
)
def test_indexing_and_slicing_agree_with_the_tuple(
    split: int, size: int, index: int, stop: int | None
) -> None:
    messages = MESSAGES[:size]
    split = min(split, size)
    view = Conversation(messages[:split], messages[split:])
    expected = tuple(messages)
    assert view[index:stop] == expected[index:stop]
    if -size <= index < size:
        assert view[index] == expected[index]
    else:
        with pytest.raises(IndexError):
            view[index]


def _is_prefix(earlier: Conversation, later: Conversation) -> bool:
    return len(earlier) <= len(later) and all(a is b for a, b in zip(earlier, later, strict=False))


def test_an_earlier_view_of_the_brains_lists_is_a_prefix_of_a_later_one() -> None:
    machine = LoopMachine(MESSAGES[:2])
    policy = MachinePolicy(tools=("add",))
    views = [machine.conversation()]
    machine.accept_input("go")
    views.append(machine.conversation())
    machine.next_step(policy)
    call = ToolCall(id="c1", name="add", arguments={"a": 1})
    machine.model_response(Message.assistant(tool_calls=[call]), 10)
    views.append(machine.conversation())
    machine.next_step(policy)
    machine.tool_results(Message.from_results([ToolResult(call_id="c1", name="add", content="1")]))
    views.append(machine.conversation())
    for i, earlier in enumerate(views):
        for later in views[i:]:
            assert _is_prefix(earlier, later)
