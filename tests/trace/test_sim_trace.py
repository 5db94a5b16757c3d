"""Trace format v1: writer, streaming reader, errors naming file:line, schema, scrubbing."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import astuple
from sim_helpers import adding_world, lines, write_lines

from loopctl import LoopError, LoopMachine, MachinePolicy, Message, ToolCall
from loopctl.core import AcceptInput, Fail, ModelResponse
from loopctl.observe import IoEvent
from loopctl_sim.sim.machine import simulate
from loopctl_sim.trace import (
    EndRecord,
    FeedRecord,
    HeaderRecord,
    IoRecord,
    StepRecord,
    TraceFormatError,
    TraceReader,
    TraceWriter,
    read_record,
    read_trace,
    trace_json_schema,
)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    simulate(adding_world(), path, created="2026-01-01T00:00:00+00:00")
    return path


def test_records_have_consecutive_seq_and_types(trace: Path) -> None:
    records = read_trace(trace)
    assert [r.seq for r in records] == list(range(len(records)))
    assert isinstance(records[0], HeaderRecord)
    assert isinstance(records[-1], EndRecord)
    kinds = {r.type for r in records}
    assert kinds == {"header", "step", "feed", "io", "end"}
    header = records[0]
    assert header.format == "loopctl-trace" and header.version == 4
    assert header.engine_version == "0.1.0"
    assert header.created == "2026-01-01T00:00:00+00:00"
    assert header.metadata["world"] == "adding"


def test_every_line_round_trips_through_the_record_union(trace: Path) -> None:
    for raw in trace.read_text().splitlines():
        record = read_record(raw)
        assert json.loads(record.model_dump_json()) == json.loads(raw)
        # its JSON data reads back into the same record (a feed record's args by their text)
        assert type(record).model_validate(record.model_dump()) == record == read_record(raw)


def test_writer_flushes_each_record_before_the_next(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as w:
        w.header(None, {"k": "v"})
        assert len(path.read_text().splitlines()) == 1  # on disk already
        machine = LoopMachine()
        machine.accept_input("hi")
        w.feed(AcceptInput(Message.user("hi")), machine)
        assert len(path.read_text().splitlines()) == 2


def test_writer_with_fsync_writes_the_same(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    simulate(adding_world(), a, created="x")
    simulate(adding_world(), b, created="x", fsync=True)
    assert a.read_bytes() == b.read_bytes()


def test_reader_streams_records_with_line_numbers(trace: Path) -> None:
    reader = TraceReader(trace)
    numbered = list(reader.numbered())
    assert [line for line, _ in numbered] == list(range(1, len(numbered) + 1))
    assert reader.header is not None and reader.warnings == []


def _broken(tmp_path: Path, trace: Path, index: int, replacement: str) -> Path:
    raw = trace.read_text().splitlines()
    raw[index] = replacement
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(raw) + "\n")
    return path


@pytest.mark.parametrize(
    ("index", "replacement", "reason"),
    [
        (3, "{not json", "not valid JSON"),
        (3, '{"seq": 3, "type": "bogus"}', "invalid record: type: Invalid value 'bogus'"),
        (3, '{"seq": "3", "type": "io", "kind": "x"}', "invalid record: seq: Expected `int`"),
        (3, '{"seq": 3, "type": "io", "kind": "x", "extra": 1}', "unknown field `extra`"),
        (
            3,
            '{"seq": 3, "type": "feed", "name": "set_context_tokens", "args": {"n": "9"}, '
            '"digest": "x"}',
            "invalid record: bad arguments for feed 'set_context_tokens': n: Expected `int`",
        ),
        (
            3,
            '{"seq": 3, "type": "header", "format": "loopctl-trace", "engine_version": "0", '
            '"created": "t", '
            '"continues": "ab", "snapshot": null, "version": 2}',
            "invalid record: continues is a version 3 field",
        ),
        (
            3,
            '{"seq": 3, "type": "io", "kind": "x", "data": {"a": ' + "[" * 5000 + "]" * 5000 + "}}",
            "too deep",
        ),
        (3, "", "empty line"),
        (1, '{"seq": 1, "type": "feed", "name": "fly", "args": {}, "digest": "x"}', "fly"),
    ],
)
def test_a_malformed_line_names_file_and_line(
    tmp_path: Path, trace: Path, index: int, replacement: str, reason: str
) -> None:
    path = _broken(tmp_path, trace, index, replacement)
    with pytest.raises(TraceFormatError) as info:
        read_trace(path)
    assert info.value.line == index + 1
    assert str(info.value).startswith(f"{path}:{index + 1}: ")
    assert reason in str(info.value)


def test_non_consecutive_seq_is_an_error(tmp_path: Path, trace: Path) -> None:
    records = lines(trace)
    del records[4]
    path = tmp_path / "gap.jsonl"
    write_lines(path, records)
    with pytest.raises(TraceFormatError, match=r":5: seq 5 is not consecutive \(expected 4\)"):
        read_trace(path)


def test_a_truncated_last_line_is_a_warning_and_skipped(tmp_path: Path, trace: Path) -> None:
    text = trace.read_text()
    cut = text[: len(text) - 20]  # the end record loses its tail and its newline
    path = tmp_path / "cut.jsonl"
    path.write_text(cut)
    reader = TraceReader(path)
    records = list(reader)
    assert len(records) == len(text.splitlines()) - 1
    assert len(reader.warnings) == 1 and "truncated last line" in reader.warnings[0]
    assert f":{len(text.splitlines())}:" in reader.warnings[0]


def test_a_complete_last_line_without_newline_is_accepted(tmp_path: Path, trace: Path) -> None:
    path = tmp_path / "nonl.jsonl"
    path.write_text(trace.read_text().rstrip("\n"))
    reader = TraceReader(path)
    assert isinstance(list(reader)[-1], EndRecord)
    assert reader.warnings == []


def test_a_truncated_line_in_the_middle_is_an_error(tmp_path: Path, trace: Path) -> None:
    path = _broken(tmp_path, trace, 2, trace.read_text().splitlines()[2][:30])
    with pytest.raises(TraceFormatError, match=":3: not valid JSON"):
        read_trace(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 5}, "trace format version 5 is not supported"),
        ({"format": "other"}, "not a loopctl trace"),
    ],
)
def test_unknown_format_or_version_is_refused_clearly(
    tmp_path: Path, trace: Path, change: dict[str, object], message: str
) -> None:
    records = lines(trace)
    records[0].update(change)
    path = tmp_path / "v2.jsonl"
    write_lines(path, records)
    with pytest.raises(TraceFormatError, match=f":1: {message}"):
        read_trace(path)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda rs: rs[1:], "starts with a header"),
        (lambda rs: [*rs, {**rs[2], "seq": len(rs)}], "after the end of a run"),
    ],
)
def test_record_order_is_checked(tmp_path: Path, trace: Path, mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    records = mutate(lines(trace))
    for i, r in enumerate(records):
        r["seq"] = i
    path = tmp_path / "order.jsonl"
    write_lines(path, records)
    with pytest.raises(TraceFormatError, match=message):
        read_trace(path)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(TraceFormatError, match="empty trace"):
        read_trace(empty)
    with pytest.raises(TraceFormatError, match="cannot open"):
        read_trace(tmp_path / "missing.jsonl")


def test_a_header_may_follow_an_end(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    with TraceWriter(path) as w:
        for _ in range(2):
            m = LoopMachine()
            w.header(m.snapshot())
            w.end(None, m.digest())
    assert [r.type for r in read_trace(path)] == ["header", "end", "header", "end"]


def test_the_schema_covers_every_record_type_and_feed() -> None:
    schema = trace_json_schema()
    text = json.dumps(schema)
    for name in (
        "HeaderRecord",
        "StepRecord",
        "IoRecord",
        "EndRecord",
        "AcceptInputFeed",
        "CompactionResultFeed",
        "FailFeed",
        "DiscardPendingFeed",
    ):
        assert name in schema["$defs"], name
    assert "loopctl-trace" in text and schema["title"].startswith("loopctl trace record")


def test_io_records_accept_driver_events_and_models() -> None:
    buf = io.StringIO()
    w = TraceWriter(buf)
    w.header(None)
    w.io(
        IoEvent(
            kind="model_reply", turn=1, data={"message": Message.assistant("x")}, duration_s=0.5
        )
    )
    w.io("crash", data={"step": 3})
    records = [read_record(line) for line in buf.getvalue().splitlines()]
    assert isinstance(records[1], IoRecord) and records[1].duration_s == 0.5
    assert records[1].data["message"]["role"] == "assistant"
    assert isinstance(records[2], IoRecord) and records[2].kind == "crash"


def test_step_and_feed_records_keep_typed_data() -> None:
    buf = io.StringIO()
    w = TraceWriter(buf)
    w.header(None)
    machine = LoopMachine()
    machine.accept_input("hi")
    w.feed(AcceptInput("hi"), machine)
    step = machine.next_step(MachinePolicy())
    w.step(MachinePolicy(), step)
    error = LoopError(kind="network", message="down", retryable=True)
    machine.fail(error)
    w.feed(Fail(error), machine)
    records = [read_record(line) for line in buf.getvalue().splitlines()]
    feed: FeedRecord = records[1]  # type: ignore[assignment]
    assert feed.name == "accept_input" and feed.args.input == Message.user("hi")  # type: ignore[union-attr]
    assert isinstance(records[2], StepRecord) and records[2].step == step
    assert records[3].args.error == error  # type: ignore[union-attr]


def test_each_record_is_written_as_its_models_own_json() -> None:
    """The writer writes a step, a feed and an io record from their pieces: each line is the
    bytes its record model writes, whatever the turn, duration, kind and data hold."""
    buf = io.StringIO()
    w = TraceWriter(buf)
    w.header(None)
    machine = LoopMachine()
    machine.accept_input("hi")
    w.feed(AcceptInput("hi"), machine)
    policy = MachinePolicy(tools=("add",))
    for _ in range(2):  # the second step's policy is the first's: written from its kept JSON
        w.step(policy, machine.next_step(policy))
    call = ToolCall(id="c1", name="add", arguments={"a": 1})
    machine.model_response(Message.assistant("", [call]), 7)
    w.feed(ModelResponse(Message.assistant("", [call]), 7), machine)
    w.step(MachinePolicy(), machine.next_step(MachinePolicy()))
    w.io('odd "kind"\n', turn=None, data={1: Message.user("x"), "n": None}, duration_s=2)
    w.io(IoEvent(kind="retry", turn=3, data={"delay_s": 0.25}, duration_s=1e-05))
    w.io("crash")
    lines = buf.getvalue().splitlines()
    kinds = ["feed", "step", "step", "feed", "step", "io", "io", "io"]
    assert [json.loads(line)["type"] for line in lines[1:]] == kinds
    for line in lines:
        assert read_record(line).model_dump_json() == line
    assert json.loads(lines[6])["data"] == {
        "1": Message.user("x").model_dump(mode="json"),
        "n": None,
    }


def test_the_reader_streams_records_before_reading_the_rest(tmp_path: Path, trace: Path) -> None:
    """Records come out one line at a time: a bad line late in the file is only met when the
    iteration gets there."""
    path = _broken(tmp_path, trace, 5, "{broken")
    records = TraceReader(path).numbered()
    first = [next(records) for _ in range(5)]
    assert [line for line, _ in first] == [1, 2, 3, 4, 5]
    with pytest.raises(TraceFormatError, match=":6: "):
        next(records)


def test_every_corpus_line_validates_against_the_printed_schema() -> None:
    import jsonschema
    from sim_helpers import TRACES

    validator = jsonschema.Draft202012Validator(trace_json_schema())
    paths = sorted(TRACES.rglob("*.jsonl"))
    assert paths
    for path in paths:
        for n, raw in enumerate(path.read_text().splitlines(), 1):
            errors = list(validator.iter_errors(json.loads(raw)))
            assert not errors, f"{path}:{n}: {errors[0].message}"
    bad = {"seq": 0, "type": "feed", "name": "cancel", "args": {}, "digest": 5}
    assert list(validator.iter_errors(bad))


_FRAGMENTS = [
    '"authorization":',
    '"Proxy-Authorization" :',
    '"X-API-KEY":',
    '"api_key"',
    '"apikey":',
    "sk-",
    "sk-abcdefghijk",
    "Bearer abcdefghij",
    "ghp_abcdefghijklmnopqrstuv",
    "AKIAABCDEFGHIJKLMNOP",
    "token",
    "key",
    "KEY",
    '"',
    ":",
    " ",
    "abc",
    "é",
    "\u212a",  # the Kelvin sign: 'k' to a case-insensitive regex
    "\u0130",  # I with a dot: 'i' to a case-insensitive regex
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=8).map("".join))
def test_the_secret_pre_test_never_misses_what_scrubbing_would_change(text: str) -> None:
    """The writer scrubs a record only when ``might_hold`` says so: whatever it lets through,
    scrubbing would have left alone (as a string value, and as a mapping key's value)."""
    import json

    from loopctl_sim.trace import Scrubber

    scrubber = Scrubber(b"key")
    for data in ({"text": text}, {text: "value"}, {"x": {text.strip('" :'): text}}):
        if not scrubber.might_hold(json.dumps(data)):
            assert scrubber(data) is data, data


def test_an_escape_in_the_json_text_does_not_hide_a_secret_from_the_pre_test() -> None:
    """``Bearer<TAB>token`` is ``Bearer\\ttoken`` in JSON: the pre-test finds the literal and
    the data is walked, where the pattern matches."""
    import json

    from loopctl_sim.trace import Scrubber

    scrubber = Scrubber(b"key")
    data = {"header": "Bearer\tabcdefghijklmnop"}
    assert scrubber.might_hold(json.dumps(data))
    assert "abcdefghijklmnop" not in json.dumps(scrubber(data))


def test_the_brain_summary_is_what_the_validator_builds() -> None:
    """BrainSummary.of builds without validation: pinned to the validator's, mid-run and at
    rest, with and without a loop window."""
    from loopctl import LoopMachine, MachinePolicy, Message, ToolCall, ToolResult
    from loopctl_sim.trace.records import BrainSummary

    machine = LoopMachine()
    seen = [BrainSummary.of(machine)]
    machine.accept_input("go")
    policy = MachinePolicy(tools=("add",))
    machine.next_step(policy)
    call = ToolCall(id="c1", name="add", arguments={"a": 1})
    machine.model_response(Message.assistant(tool_calls=[call]), 10)
    seen.append(BrainSummary.of(machine))
    machine.next_step(policy)
    machine.tool_results(Message.from_results([ToolResult(call_id="c1", name="add", content="1")]))
    seen.append(BrainSummary.of(machine))
    for summary in seen:
        reference = BrainSummary.model_validate(summary.model_dump())
        assert summary == reference and astuple(summary) == astuple(reference)
        assert summary.model_dump_json() == reference.model_dump_json()
    assert (seen[1].state, seen[1].turn, seen[1].pending) == ("awaiting_tools", 1, 2)
    assert seen[2].window == 1 and seen[2].last_call is not None


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(data=st.dictionaries(st.text(), _JSON, max_size=4), turn=st.none() | st.integers(0, 99))
def test_free_data_the_writer_takes_reads_back_as_written(
    data: dict[str, object], turn: int | None
) -> None:
    """An ``io`` record's data and a header's metadata, any JSON data (big integers, any text,
    floats of any size), read back from the written line as the same data (unless it held
    something shaped like a secret, which the record then says)."""
    from loopctl_sim.trace import HeaderRecord, IoRecord, Scrubber, record_json

    out = io.StringIO()
    writer = TraceWriter(out, scrubber=Scrubber())
    writer.header(None, data)
    writer.io("tool_result", turn=turn, data=data)
    header, record = (read_record(line) for line in out.getvalue().split("\n")[:2])
    assert isinstance(header, HeaderRecord) and isinstance(record, IoRecord)
    if not (header.scrubbed or record.scrubbed):
        assert header.metadata == data and record.data == data and record.turn == turn
        assert json.loads(record_json(record)) == json.loads(out.getvalue().split("\n")[1])
