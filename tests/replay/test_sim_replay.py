"""Recorders and machine-level replay: exact replays pass, any change is a divergence."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from sim_helpers import adding_world, lines, write_lines

from loopctl import LoopMachine, MachinePolicy, Message, ProtocolError, ToolCall, ToolResult
from loopctl.observe import IoEvent
from loopctl_sim.replay import replay_trace
from loopctl_sim.sim.faults import Fault
from loopctl_sim.sim.machine import simulate
from loopctl_sim.trace import (
    HeaderRecord,
    RecordingMachine,
    TraceFormatError,
    TraceRecorder,
    read_trace,
)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    simulate(adding_world(Fault(kind="rate_limited", model_call=2)), path, created="t")
    return path


def test_a_recorded_run_replays_exactly(trace: Path) -> None:
    result = replay_trace(trace)
    assert result.ok, result.summary()
    assert result.complete and result.runs == 1
    assert result.steps == 6 and result.feeds == 7
    assert result.outcome == {"kind": "completed", "final_text": "15"}
    assert result.final_digest == read_trace(trace)[-1].digest  # type: ignore[union-attr]
    assert result.summary().startswith(f"ok: {trace}: ")


def _edit(trace: Path, tmp_path: Path, seq: int, **changes: object) -> Path:
    records = lines(trace)
    target = records[seq]
    for dotted, value in changes.items():
        node = target
        *path, last = dotted.split("__")
        for key in path:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[last] = value
    out = tmp_path / "edited.jsonl"
    write_lines(out, records)
    return out


def _seq_of(trace: Path, predicate) -> int:  # type: ignore[no-untyped-def]
    return next(r["seq"] for r in lines(trace) if predicate(r))


def test_a_changed_step_is_a_divergence_with_a_diff(trace: Path, tmp_path: Path) -> None:
    seq = _seq_of(trace, lambda r: r["type"] == "step" and r["step"]["kind"] == "call_tools")
    edited = _edit(trace, tmp_path, seq, step__turn=7)
    result = replay_trace(edited)
    assert not result.ok and result.divergence is not None
    d = result.divergence
    assert (d.seq, d.line, d.what) == (seq, seq + 1, "step")
    assert '-  "turn": 7' in d.diff and '+  "turn": 1' in d.diff
    assert d.recent_feeds and d.recent_feeds[-1].name == "model_response"
    assert d.report(str(edited)).startswith(f"divergence at seq {seq} ({edited}:{seq + 1})")


def test_a_changed_policy_changes_the_answer(trace: Path, tmp_path: Path) -> None:
    seq = _seq_of(trace, lambda r: r["type"] == "step")
    edited = _edit(trace, tmp_path, seq, policy__max_turns=0)
    d = replay_trace(edited).divergence
    assert d is not None and d.what == "step" and "max_turns_exceeded" in d.diff


def test_a_changed_feed_is_a_digest_divergence(trace: Path, tmp_path: Path) -> None:
    seq = _seq_of(trace, lambda r: r.get("name") == "tool_results")
    records = lines(trace)
    records[seq]["args"]["message"]["parts"][0]["content"] = "6"
    edited = tmp_path / "e.jsonl"
    write_lines(edited, records)
    d = replay_trace(edited).divergence
    assert d is not None and (d.seq, d.what) == (seq, "digest")
    assert d.expected == {"digest": records[seq]["digest"], "brain": records[seq]["brain"]}
    assert d.recent_feeds[-1].args["message"]["parts"][0]["content"] == "6"
    # the same small fields, other content: the report says where the difference must be
    assert d.actual["brain"] == records[seq]["brain"]
    assert "inside its messages or loop window" in d.message


def test_a_digest_divergence_names_the_brain_fields_that_differ(
    trace: Path, tmp_path: Path
) -> None:
    seq = _seq_of(trace, lambda r: r.get("name") == "tool_results")
    records = lines(trace)
    records[seq]["args"]["context_tokens"] += 7  # a count the recorded brain never had
    edited = tmp_path / "e.jsonl"
    write_lines(edited, records)
    d = replay_trace(edited).divergence
    assert d is not None and (d.seq, d.what) == (seq, "digest")
    n = records[seq]["brain"]["context_tokens"]
    assert f"context_tokens {n} -> {n + 7}" in d.message


def test_a_feed_the_brain_refuses_is_a_divergence(trace: Path, tmp_path: Path) -> None:
    seq = _seq_of(trace, lambda r: r.get("name") == "tool_results")
    edited = _edit(trace, tmp_path, seq, args__message__parts__0__call_id="nope")
    d = replay_trace(edited).divergence
    assert d is not None and d.what == "protocol_error" and "tool_results" in d.message


def test_a_changed_outcome_is_a_divergence(trace: Path, tmp_path: Path) -> None:
    seq = len(lines(trace)) - 1
    edited = _edit(trace, tmp_path, seq, outcome={"kind": "cancelled"})
    d = replay_trace(edited).divergence
    assert d is not None and d.what == "outcome"


def test_until_stops_and_keeps_the_machine(trace: Path) -> None:
    seq = _seq_of(trace, lambda r: r.get("name") == "model_response")
    result = replay_trace(trace, until=seq)
    assert result.ok and result.stopped_at == seq
    assert result.machine is not None and result.machine.turns_taken == 1
    assert result.machine.state.kind == "awaiting_tools"


@pytest.mark.parametrize("until", [-5, 0, 1, 3, 4, 10, 10**9])
def test_until_stops_after_the_first_record_at_or_past_it(trace: Path, until: int) -> None:
    """Whatever the kind of that record (io records included), and counts only what was read."""
    records = read_trace(trace)
    result = replay_trace(trace, until=until)
    stop = max(until, 0)
    if stop < len(records):
        assert result.stopped_at == stop and result.records == stop + 1
    else:
        assert result.stopped_at is None and result.records == len(records)
    read = records[: result.records]
    assert result.io == sum(r.type == "io" for r in read)
    assert result.steps == sum(r.type == "step" for r in read)
    assert result.feeds == sum(r.type == "feed" for r in read)


def test_an_incomplete_trace_replays_what_it_has(trace: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(trace.read_text().splitlines(keepends=True)[:12]))
    result = replay_trace(cut)
    assert result.ok and not result.complete
    assert "no end record" in result.summary()


def test_scrubbed_traces_replay_and_say_how_far_digests_were_compared(tmp_path: Path) -> None:
    path = tmp_path / "secret.jsonl"
    world = adding_world()
    world.input = "use key sk-abcdefghijklmnopqrstuvwx"
    simulate(world, path)
    assert "sk-abcdefghij" not in path.read_text()
    result = replay_trace(path)
    assert result.ok and result.complete, result.summary()
    assert any("digests compared up to seq 1" in note for note in result.notes), result.notes
    # a decision the brain takes differently is still found past the secret
    records = [json.loads(line) for line in path.read_text().splitlines()]
    calls = [r for r in records if r["type"] == "step" and r["step"]["kind"] == "call_llm"]
    calls[1]["policy"]["max_turns"] = 1  # the second model call is now over the limit
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    d = replay_trace(path).divergence
    assert d is not None and d.what == "step" and d.note is not None and "scrubbed" in d.note


# --- recorders ---------------------------------------------------------------------------------


def test_recording_machine_records_nothing_for_a_refused_feed() -> None:
    buf = io.StringIO()
    rec = RecordingMachine(LoopMachine(), buf)
    with pytest.raises(ProtocolError):
        rec.tool_results(Message.user("x"))
    assert len(buf.getvalue().splitlines()) == 1  # the header only
    assert rec.state.kind == "start"  # views pass through


def test_recording_machine_without_a_target_just_drives() -> None:
    rec = RecordingMachine()
    rec.accept_input("hi")
    rec.next_step(MachinePolicy())
    rec.model_response(Message.assistant("ok"), 3)
    rec.next_step(MachinePolicy())
    rec.commit_pending()
    assert rec.ended and rec.machine.history_len() == 2


class _FakeDriver:
    """The observer calls BareLoop makes, in its order, around a bare machine."""

    def __init__(self, observer: TraceRecorder) -> None:
        self.o = observer
        self.m = LoopMachine()

    def feed(self, name: str, **args: object) -> None:
        getattr(self.m, name)(**args)
        self.o.feed(name, args, self.m)

    def run(self, text: str) -> None:
        policy = MachinePolicy(tools=("add",))
        self.o.run_started(self.m, text)
        self.feed("accept_input", input=Message.user(text))
        call = ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})
        for reply in (Message.assistant("", [call]), Message.assistant("3")):
            step = self.m.next_step(policy)
            self.o.step(policy, step, self.m)
            self.o.io(IoEvent(kind="model_request", turn=1, duration_s=0.01))
            self.feed("model_response", response=reply, context_tokens=10)
            step = self.m.next_step(policy)
            self.o.step(policy, step, self.m)
            if step.kind == "call_tools":
                result = ToolResult(call_id="c1", name="add", content="3")
                self.feed("tool_results", message=Message.from_results([result]))
        self.feed("commit_pending")
        self.o.run_ended(self.m)
        self.m = self.m.next_run()


def test_trace_recorder_writes_a_replayable_trace_per_run(tmp_path: Path) -> None:
    path = tmp_path / "driver.jsonl"
    recorder = TraceRecorder(path, metadata={"model": "scripted", "api_key": "sk-1234567890ab"})
    driver = _FakeDriver(recorder)
    driver.run("add 1 and 2")
    second = driver.m.digest()  # the brain the second run starts from: the first's next_run()
    driver.run("again")
    recorder.close()
    records = read_trace(path)
    headers = [r for r in records if isinstance(r, HeaderRecord)]
    assert len(headers) == 2
    assert headers[0].metadata == {"model": "scripted", "api_key": "[REDACTED]"}
    assert headers[0].snapshot is not None and not headers[0].snapshot.started
    assert headers[0].version == 4 and headers[0].continues is None
    # the second run goes on from the first one's next_run(): its header names that brain
    assert headers[1].snapshot is None and headers[1].version == 4
    assert headers[1].continues == second
    result = replay_trace(path)
    assert result.ok, result.summary()
    assert result.runs == 2 and result.complete


def test_snapshot_headers_write_every_run_s_brain(tmp_path: Path) -> None:
    path = tmp_path / "driver.jsonl"
    recorder = TraceRecorder(path, snapshot_headers=True)
    driver = _FakeDriver(recorder)
    driver.run("add 1 and 2")
    driver.run("again")
    recorder.close()
    headers = [r for r in read_trace(path) if isinstance(r, HeaderRecord)]
    assert [h.version for h in headers] == [4, 4]
    assert len(headers[1].snapshot.history) == 4  # type: ignore[union-attr]
    assert b'"continues"' not in path.read_bytes()
    assert replay_trace(path).ok


def test_a_next_run_header_must_continue_the_previous_run(tmp_path: Path) -> None:
    path = tmp_path / "driver.jsonl"
    recorder = TraceRecorder(path)
    driver = _FakeDriver(recorder)
    driver.run("one")
    driver.m = LoopMachine()  # the second run forgets the history
    driver.run("two")
    recorder.close()
    d = replay_trace(path).divergence
    assert d is not None and d.what == "snapshot" and "next_run" in d.message


def test_a_header_snapshot_that_does_not_restore_is_a_format_error(
    trace: Path, tmp_path: Path
) -> None:
    from loopctl_sim.replay import replay_driver

    records = lines(trace)
    call = {"kind": "tool_call", "id": "x", "name": "add", "arguments": {}}
    records[0]["snapshot"]["history"] = [{"role": "assistant", "parts": [call]}]
    bad = tmp_path / "bad.jsonl"
    write_lines(bad, records)
    for replay in (replay_trace, replay_driver):
        with pytest.raises(TraceFormatError, match=r":1: .*snapshot"):
            replay(bad)


# --- digest checkpoints (replay_trace(digest_every=N)) ----------------------------------------


def test_a_checkpointed_replay_gives_the_same_result(trace: Path) -> None:
    exact = replay_trace(trace)
    for every in (2, 3, 100):
        fast = replay_trace(trace, digest_every=every)
        assert fast.ok and fast.to_json() == exact.to_json()


def test_a_checkpointed_replay_reports_the_first_divergence_exactly(
    trace: Path, tmp_path: Path
) -> None:
    """A changed feed between checkpoints: the second pass names it, as the default does."""
    seq = _seq_of(trace, lambda r: r.get("name") == "tool_results")
    edited = _edit(trace, tmp_path, seq, args__message__parts__0__content="999")
    exact = replay_trace(edited).divergence
    fast = replay_trace(edited, digest_every=100).divergence
    assert exact is not None and fast is not None
    assert fast.to_json() == exact.to_json() and fast.seq == seq and fast.what == "digest"


def test_a_checkpointed_replay_compares_the_last_feed_of_an_incomplete_trace(
    trace: Path, tmp_path: Path
) -> None:
    records = lines(trace)
    last_feed = max(i for i, r in enumerate(records) if r["type"] == "feed" and i < 12)
    records[last_feed]["digest"] = "0" * 16
    cut = tmp_path / "cut.jsonl"
    write_lines(cut, records[: last_feed + 1])
    d = replay_trace(cut, digest_every=100).divergence
    assert d is not None and d.seq == records[last_feed]["seq"] and d.what == "digest"


@pytest.mark.parametrize(
    ("kind", "change"),
    [
        ("io", {"turn": "soon"}),
        ("io", {"extra": 1}),
        ("io", {"seq": -1}),
        ("step", {"policy": {"max_turns": -1}}),
        ("step", {"step": {"kind": "dance"}}),
        ("step", {"extra": True}),
    ],
)
def test_replay_reads_step_and_io_records_as_strictly_as_the_reader(
    trace: Path, tmp_path: Path, kind: str, change: dict[str, object]
) -> None:
    """A damaged step or io line stops a replay (either pass) with the reader's own error."""

    records = lines(trace)
    index = next(i for i, r in enumerate(records) if r["type"] == kind)
    records[index].update(change)
    bad = tmp_path / "bad.jsonl"
    write_lines(bad, records)
    with pytest.raises(TraceFormatError) as expected:
        read_trace(bad)
    for every in (1, 100):
        with pytest.raises(TraceFormatError) as got:
            replay_trace(bad, digest_every=every)
        assert str(got.value) == str(expected.value)
