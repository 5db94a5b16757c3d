"""Trace format v4: an exchange's results and the driver's count after them are one feed record
(``tool_results`` with ``context_tokens``). New traces are version 4, which a loopctl_sim
reading only older versions refuses; older traces, which hold the count as a feed of its own
right after the results, are still read, and driver-level replay reads that pair as the one
feed the driver now gives."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Literal

import pytest
from click.testing import CliRunner
from pydantic import TypeAdapter
from sim_helpers import CREATED, TRACES, adding_world

from loopctl.core import LoopMachine, Message, ToolResult, ToolResults
from loopctl_sim.cli import main
from loopctl_sim.replay.cursor import folded
from loopctl_sim.sim import simulate, simulate_driver
from loopctl_sim.trace import (
    FeedRecord,
    HeaderRecord,
    Record,
    StepRecord,
    TraceFormatError,
    TraceReader,
    TraceWriter,
    decode_feed,
    encode_feed,
    read_record,
    read_trace,
    reader,
)

OLD = TRACES / "v3"


@pytest.fixture(params=["machine", "driver"])
def new_trace(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / f"{request.param}.jsonl"
    record = simulate if request.param == "machine" else simulate_driver
    record(adding_world(), path, created=CREATED)
    return path


def test_a_new_trace_is_version_4_and_counts_each_exchange_in_its_results(
    new_trace: Path,
) -> None:
    records = read_trace(new_trace)
    assert [r.version for r in records if isinstance(r, HeaderRecord)] == [4]
    feeds = [r for r in records if isinstance(r, FeedRecord)]
    results = [r for r in feeds if r.name == "tool_results"]
    assert len(results) == 2
    for rec in results:
        assert isinstance(rec.args, ToolResults) and rec.args.context_tokens is not None
        assert rec.brain is not None and rec.brain.context_tokens == rec.args.context_tokens
    assert "set_context_tokens" not in {r.name for r in feeds}


def test_a_new_trace_reads_back_equal(new_trace: Path) -> None:
    """Every line, read into its record and written again, is the same bytes."""
    for raw in new_trace.read_text().splitlines():
        assert read_record(raw).model_dump_json() == raw


def test_a_loopctl_sim_reading_only_older_versions_refuses_a_new_trace(
    new_trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a loopctl_sim of version 3 reads: its header's ``version`` is ``Literal[1, 2, 3]``
    and it names the versions it reads."""
    validate = reader.read_record

    def older(raw: bytes) -> Record:
        record = validate(raw)
        if isinstance(record, HeaderRecord):
            TypeAdapter(Literal[1, 2, 3]).validate_python(record.version)
        return record

    monkeypatch.setattr(reader, "read_record", older)
    monkeypatch.setattr(reader, "READABLE_VERSIONS", (1, 2, 3))
    reason = (
        "trace format version 4 is not supported: this loopctl_sim reads versions 1, 2 and 3; "
        "use the loopctl that wrote it, or upgrade"
    )
    with pytest.raises(TraceFormatError) as refused:
        read_trace(new_trace)
    assert refused.value.line == 1 and refused.value.reason == reason
    result = CliRunner().invoke(main, ["replay", str(new_trace)])
    assert result.exit_code == 2 and reason in result.output


def _brain_before(path: Path, seq: int) -> LoopMachine:
    """The brain a trace's records before ``seq`` build (machine replay, by hand)."""
    machine = LoopMachine()
    for rec in TraceReader(path):
        if rec.seq == seq:
            return machine
        if isinstance(rec, HeaderRecord):
            machine = rec.machine()
        elif isinstance(rec, StepRecord):
            machine.next_step(rec.policy)
        elif isinstance(rec, FeedRecord):
            machine.feed(rec.args)
    raise AssertionError(f"no record {seq}")


def test_results_without_a_count_are_written_as_version_3_wrote_them() -> None:
    """The count is left out when None: the record is byte for byte the older one."""
    path = OLD / "basic.jsonl"
    raw = next(line for line in path.read_text().splitlines() if '"name":"tool_results"' in line)
    rec = read_record(raw)
    assert isinstance(rec, FeedRecord) and isinstance(rec.args, ToolResults)
    assert rec.args.context_tokens is None
    machine = _brain_before(path, rec.seq)
    machine.feed(rec.args)
    out = io.StringIO()
    TraceWriter(out, seq=rec.seq).feed(rec.args, machine)
    assert out.getvalue() == raw + "\n"
    assert "context_tokens" not in encode_feed(rec.args)


def test_the_feed_codec_carries_the_count_both_ways() -> None:
    message = Message.from_results([ToolResult(call_id="c1", name="add", content="5")])
    counted = decode_feed("tool_results", {"message": message, "context_tokens": 24})
    assert counted == ToolResults(message, 24)
    assert encode_feed(counted)["context_tokens"] == 24
    assert decode_feed("tool_results", {"message": message}) == ToolResults(message)


def test_driver_replay_reads_an_old_pair_as_the_one_feed() -> None:
    """``folded``: the results and the count right after them are one ``tool_results`` with
    the count, holding the second record's seq, digest, brain summary and line; today's
    recording of the same world has exactly those brain records."""
    old = list(folded(TraceReader(OLD / "driver" / "basic.jsonl").numbered()))
    new = list(TraceReader(TRACES / "driver" / "basic.jsonl").numbered())
    pairs = TraceReader(OLD / "driver" / "basic.jsonl")
    counts = [r for r in pairs if r.type == "feed" and r.name == "set_context_tokens"]
    assert len(counts) == 2
    for line, rec in old:
        if rec.type == "feed" and rec.name == "tool_results":
            count = next(c for c in counts if c.seq == rec.seq)
            assert (line, rec.args.context_tokens) == (rec.seq + 1, count.args.n)  # type: ignore[union-attr]
            assert (rec.digest, rec.brain) == (count.digest, count.brain)

    def brain(items: list[tuple[int, object]]) -> list[object]:
        return [
            (getattr(r, "type", None), getattr(r, "name", None), getattr(r, "digest", None))
            for _, r in items
            if getattr(r, "type", None) != "io"
        ]

    assert brain(old) == brain(new)  # type: ignore[arg-type]
    assert "set_context_tokens" not in {getattr(r, "name", None) for _, r in old}


def test_results_without_a_count_not_followed_by_one_are_left_as_they_are() -> None:
    """Results without a count followed by anything but a count (a user's own feed, the end of
    a cut trace) stay as they are: only the old driver's pair is read as one feed."""
    lines = (OLD / "basic.jsonl").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"name":"tool_results"' in line)
    numbered = [(i + 1, read_record(line)) for i, line in enumerate(lines[: at + 1])]
    assert list(folded(numbered)) == numbered
    step = json.loads(lines[at + 2])
    assert step["type"] == "step"  # the record after the count
    mixed = [*numbered, (at + 2, read_record(lines[at + 2]))]
    assert list(folded(mixed)) == mixed


def test_a_count_that_differs_is_named_and_shown(tmp_path: Path) -> None:
    """Driver replay names a results count that is not the driver's; the views show it."""
    from loopctl_sim.replay import replay_driver
    from loopctl_sim.view import describe

    records = [json.loads(line) for line in (TRACES / "driver" / "basic.jsonl").open()]
    at = next(i for i, r in enumerate(records) if r.get("name") == "tool_results")
    counted = records[at]["args"]["context_tokens"]
    assert f"  (context {counted} tokens)" in describe(records[at]).lines
    records[at]["args"]["context_tokens"] = counted + 7
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(r) + "\n" for r in records))
    d = replay_driver(edited).divergence
    assert d is not None and (d.seq, d.what) == (at, "feed")
    assert f"the driver counted the context as {counted} tokens, the trace as {counted + 7}" in (
        d.message
    )
