"""The writer searches only the part of a record that can hold user data, and still no secret
lands in any record kind.

A step's search leaves out the policy when it is the previous step's, found clean; a feed's
leaves out the record's own fields and the brain's summary but its last call (a tool's name).
These tests put a secret in each place such a record holds user data, and compare the bytes
with those of a writer that searches every record whole.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from test_trace_secrets import ALL, SECRETS, USER_PATTERN, agent, script

from loopctl import Message, ToolCall
from loopctl.core import (
    FEED_TYPES,
    AcceptInput,
    CallLLM,
    CallTools,
    LoopMachine,
    MachinePolicy,
    ModelResponse,
    SetContextTokens,
    ToolResults,
)
from loopctl.core.messages import ToolResult
from loopctl_sim import Scrubber, TraceRecorder
from loopctl_sim.trace import TraceWriter
from loopctl_sim.trace.records import (
    BrainSummary,
    EndRecord,
    FeedRecord,
    IoRecord,
    StepRecord,
    record_json,
)
from loopctl_sim.trace.scrub import is_secret_key

SECRET = SECRETS["openai"]
CREATED = "2026-01-01T00:00:00+00:00"


class _Odd:
    """An object pydantic cannot write: written as its ``repr``."""

    def __repr__(self) -> str:
        return "odd"


def _written(scrubber: Scrubber) -> str:
    """The secrets test's run, traced to memory with ``scrubber`` (its times and the retry's
    random delay, which differ from run to run, written as 0)."""
    out = io.StringIO()
    recorder = TraceRecorder(TraceWriter(out, scrubber=scrubber), created=CREATED)
    result = agent(script(), [recorder]).run_sync(f"my keys: {ALL}")
    recorder.close()
    assert result.completed
    return re.sub(r'"(duration_s|delay_s)":[0-9.e-]+', r'"\1":0', out.getvalue())


@pytest.mark.parametrize("key", [b"a key", None], ids=["with a key", "without a key"])
@pytest.mark.parametrize("patterns", [(), (USER_PATTERN,)], ids=["built-in", "user's"])
def test_the_bytes_are_those_of_a_writer_that_searches_every_record(
    key: bytes | None, patterns: tuple[str, ...]
) -> None:
    """Every secret of every path is scrubbed, the lines hold nothing left to scrub, and the
    bytes are those written when every record is searched."""
    scrubber = Scrubber(key, patterns)
    text = _written(scrubber)
    for name, secret in SECRETS.items():
        assert (secret not in text) == (name != "custom" or bool(patterns)), name
    lines = [json.loads(line) for line in text.splitlines()]
    assert all(scrubber(record) is record for record in lines)  # a fixpoint: nothing left
    assert {"step", "feed", "io", "end"} <= {r["type"] for r in lines if r.get("scrubbed")}
    whole = Scrubber(key, patterns)
    whole.user_patterns = True  # the whole text of every record searched
    assert _written(whole) == text


def _records(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_secret_in_a_feeds_message_or_a_steps_call_is_scrubbed() -> None:
    """A step whose policy was found clean is searched for its call; a feed for its message."""
    out = io.StringIO()
    writer = TraceWriter(out, scrubber=Scrubber(b"k"))
    machine = LoopMachine()
    clean = Message.user("hello")
    machine.feed(AcceptInput(clean))
    writer.feed(AcceptInput(clean), machine)
    writer.io("note", data={"last": clean})  # the same object: known clean
    writer.io("note", data={"last": Message.user(f"hello {SECRET}")})
    call = ToolCall(id="c1", name="fetch", arguments={"token": SECRET})
    reply = Message.assistant("calling", [call])
    policy = MachinePolicy(tools=["fetch"])
    machine.next_step(policy)
    machine.feed(ModelResponse(reply, 10))
    writer.feed(ModelResponse(reply, 10), machine)
    assert machine.next_step(policy) == CallTools(turn=1, calls=(call,))
    writer.step(policy, CallTools(turn=1, calls=(call,)))
    writer.step(policy, CallTools(turn=1, calls=(call,)))  # the step's call is searched again
    records = _records(out)
    assert SECRET not in out.getvalue()
    assert [r["scrubbed"] for r in records] == [False, False, True, True, True, True]
    assert records[1]["data"]["last"] == clean.model_dump(mode="json")


def test_a_secret_in_the_policy_or_in_the_brains_last_call_is_scrubbed() -> None:
    """A tool's name is the user's: in the policy a step record holds and in the brain's last
    call a feed record holds."""
    name = "sk-" + "proj0123456789abcdefghij"
    out = io.StringIO()
    writer = TraceWriter(out, scrubber=Scrubber(None))
    machine = LoopMachine()
    machine.feed(AcceptInput(Message.user("go")))
    fine, secret = MachinePolicy(tools=["fine"]), MachinePolicy(tools=[name])
    writer.step(fine, CallLLM(turn=1))
    writer.step(secret, machine.next_step(secret))
    writer.step(secret, CallLLM(turn=1))  # a policy that held a secret is searched again
    call = ToolCall(id="c1", name=name, arguments={})
    machine.feed(ModelResponse(Message.assistant("", [call]), 5))
    machine.next_step(secret)
    results = Message.from_results([ToolResult(call_id="c1", name=name, content="ok")])
    machine.feed(ToolResults(results))
    brain = BrainSummary.of(machine)
    assert brain.last_call is not None and name in brain.last_call
    writer.feed(ToolResults(results), machine)
    machine.feed(SetContextTokens(7))  # the brain's last call is the record's only text
    writer.feed(SetContextTokens(7), machine)
    assert name not in out.getvalue()
    assert [r["scrubbed"] for r in _records(out)] == [False, True, True, True, True]


def test_no_key_a_record_writes_outside_its_parts_names_a_secret() -> None:
    """The writer does not search the keys of a record's own fields, of the brain's summary
    and of a feed's or a step's fields: no such key names a secret (a secret name's value is
    scrubbed whole)."""
    keys = {"type", "format", "version", "engine_version", "created", "continues", "brain"}
    for model in (FeedRecord, StepRecord, IoRecord, EndRecord, BrainSummary):
        keys.update(model.__struct_fields__)
    for feed_type in FEED_TYPES.values():
        keys.update(feed_type.__match_args__)
    keys.update(["kind", "turn", "calls", "reason", "outcome"])
    named = sorted(k for k in keys if is_secret_key(k))
    assert named == []


@pytest.mark.parametrize(
    ("data", "written"),
    [
        ({"a": [1, (2, {"b": None})], "c": 1.5}, {"a": [1, [2, {"b": None}]], "c": 1.5}),
        ({1: "one", "n": {True: 2}}, {"1": "one", "n": {"true": 2}}),
        ({"s": {3}}, {"s": [3]}),
        ({"m": Message.user("hi")}, {"m": Message.user("hi").model_dump(mode="json")}),
        ({"deep": [{"x": [{"y": {5}, "o": _Odd()}]}]}, {"deep": [{"x": [{"y": [5], "o": "odd"}]}]}),
    ],
    ids=["plain", "keys", "set", "model", "deep"],
)
def test_io_data_is_written_as_json_data_whatever_it_holds(
    data: dict[Any, Any], written: dict[str, Any]
) -> None:
    """IO data is written as its record model writes it (a model as its JSON, a set as a list, a
    key as JSON names it), an object pydantic does not know as its ``repr``; a header's metadata
    too."""
    out = io.StringIO()
    writer = TraceWriter(out)
    writer.io("tool_result", turn=1, data=data)
    writer.header(None, data, created=CREATED)
    assert [r.get("data", r.get("metadata")) for r in _records(out)] == [written, written]
    record = IoRecord(seq=0, kind="tool_result", turn=1, data=data)
    assert out.getvalue().splitlines()[0] == record_json(record)


@pytest.mark.parametrize("key", [b"a key", None], ids=["with a key", "without a key"])
def test_a_secret_in_a_headers_created_metadata_or_snapshot_is_scrubbed(key: bytes | None) -> None:
    """A header is searched without its own ``scrub_key`` field (whose name holds ``key"``);
    a secret in each of its parts is still scrubbed, and the bytes are those of a writer that
    searches the whole text."""

    def written(scrubber: Scrubber) -> list[str]:
        out = io.StringIO()
        writer = TraceWriter(out, scrubber=scrubber)
        machine = LoopMachine()
        machine.feed(AcceptInput(Message.user(f"mine: {SECRET}")))
        writer.header(machine.snapshot(), {"note": SECRET}, created=CREATED)
        writer.header(None, {"scrub_key": "x", "deep": [{"token": "hunter22"}]}, created=SECRET)
        writer.header(None, {"plain": "nothing here"}, created=CREATED)
        return out.getvalue().splitlines()

    lines = written(Scrubber(key))
    assert not any(SECRET in line or "hunter22" in line for line in lines)
    assert [json.loads(line)["scrubbed"] for line in lines] == [True, True, False]
    whole = Scrubber(key)
    whole.user_patterns = True  # every record searched whole
    assert written(whole) == lines


def test_a_secret_in_an_io_records_kind_turn_or_data_is_scrubbed() -> None:
    """An io record is searched in its kind, turn and data (a caller's own values)."""
    out = io.StringIO()
    writer = TraceWriter(out, scrubber=Scrubber(None))
    writer.io(f"kind {SECRET}")
    writer.io("note", turn=SECRET, data={})  # type: ignore[arg-type]  # a caller's bad turn
    writer.io("note", turn=2, data={"deep": [{"x": SECRET}]}, duration_s=0.5)
    writer.io("note", turn=3, data={"fine": "nothing"})
    assert SECRET not in out.getvalue()
    assert [r["scrubbed"] for r in _records(out)] == [True, True, True, False]
