"""Trace format v3 and on: a run that goes on from the previous run's brain gets a header naming
that brain's digest (``HeaderRecord.continues``), not its whole snapshot, so a session of many runs
writes its conversation once. Every reader rebuilds the brain from the records before the header
(the previous run's ``next_run()``) and checks the digest: machine replay, agent replay, resume,
the invariant walk and the views. Shown on the sample support agent, one conversation a run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from examples.support_agent import agent as support
from examples.support_agent.record import CONVERSATIONS, record
from loopctl import BareLoop, Hooks, Message, RunConfig, ToolCall
from loopctl.testing import ScriptedClient
from loopctl.tools import Deny
from loopctl_sim import (
    TraceRecorder,
    check_trace,
    replay_agent,
    replay_driver,
    replay_trace,
    resume_point,
    resume_trace,
)
from loopctl_sim.trace import HeaderRecord, TraceFormatError, read_trace
from loopctl_sim.view import describe

#: The support agent's traces as trace format version 3 wrote them (before the driver's count
#: after an exchange's results went into the results' feed): kept to show they are still read.
V3 = Path(__file__).resolve().parents[1] / "traces" / "v3" / "support_agent"


def _session(path: Path, *, snapshot_headers: bool = False, cut_last: bool = False) -> Path:
    """The support agent answering three customers in one conversation, one run each (the
    shipped ``session.jsonl``, recorded by ``examples/support_agent/record.py``)."""
    support.REFUNDS.clear()
    path.write_text(record("session", snapshot_headers=snapshot_headers))
    if cut_last:  # killed in the last run, after its first tool result
        lines = path.read_bytes().splitlines(keepends=True)
        last_header = max(i for i, raw in enumerate(lines) if b'"type":"header"' in raw[:40])
        results = [
            i for i, raw in enumerate(lines) if i > last_header and b'"name":"tool_results"' in raw
        ]
        path.write_bytes(b"".join(lines[: results[0] + 1]))
    return path


@pytest.fixture
def session(tmp_path: Path) -> Path:
    return _session(tmp_path / "session.jsonl")


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(raw) for raw in path.read_bytes().splitlines()]


def _write(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


def _header_at(records: list[dict[str, object]], index: int) -> int:
    return [i for i, r in enumerate(records) if r["type"] == "header"][index]


def test_a_version_3_session_still_replays_at_every_level(session: Path) -> None:
    """The session as version 3 wrote it (each exchange's results, then the count in a feed of
    its own) ends in today's brain at machine, driver and agent level."""
    old = V3 / "session.jsonl"
    assert [h.version for h in read_trace(old) if isinstance(h, HeaderRecord)] == [2, 3, 3]
    assert b'"set_context_tokens"' in old.read_bytes()
    today = replay_trace(session).final_digest
    for level in (replay_trace(old), replay_driver(old), replay_agent(old, support.build)):
        assert level.ok and level.complete and level.runs == 3, level.summary()
        assert level.final_digest == today


def test_a_session_writes_its_conversation_once(session: Path, tmp_path: Path) -> None:
    headers = [r for r in read_trace(session) if isinstance(r, HeaderRecord)]
    assert [h.version for h in headers] == [4, 4, 4]
    assert headers[0].snapshot is not None and headers[0].continues is None
    assert all(h.snapshot is None and h.continues for h in headers[1:])
    every = _session(tmp_path / "every.jsonl", snapshot_headers=True)
    written = [r for r in read_trace(every) if isinstance(r, HeaderRecord)]
    assert [h.version for h in written] == [4, 4, 4]
    assert len(written[2].snapshot.history) > len(written[1].snapshot.history) > 0  # type: ignore[union-attr]
    # the same records but for the headers: the bytes saved are the history written again
    assert session.stat().st_size < every.stat().st_size
    big = [len(json.dumps(r)) for r in _lines(every) if r["type"] == "header"]
    small = [len(json.dumps(r)) for r in _lines(session) if r["type"] == "header"]
    assert small[1] < 600 < big[2]


def test_every_reader_rebuilds_the_brain_a_header_continues(session: Path) -> None:
    replayed = replay_trace(session)
    assert replayed.ok and replayed.complete and replayed.runs == 3, replayed.summary()
    agent = replay_agent(session, support.build)
    assert agent.ok and agent.complete and agent.runs == 3, agent.summary()
    assert agent.final_digest == replayed.final_digest
    assert check_trace(session) == []
    point = resume_point(session)
    assert point.ended and point.restored_from == "header" and point.checkpoint == 1
    assert point.machine.digest() == replayed.final_digest


def test_a_resume_goes_through_the_headers_that_continue(tmp_path: Path) -> None:
    cut = _session(tmp_path / "cut.jsonl", cut_last=True)
    point = resume_point(cut)
    # rebuilt from the first header, across both runs before the last: no header holds it
    assert point.restored_from == "header" and point.checkpoint == 1
    # the results' feed holds their count: nothing is left for the continuation to count
    assert not point.ended and point.uncounted is None
    assert point.machine.state.kind == "start"
    whole = _session(tmp_path / "whole.jsonl", snapshot_headers=True, cut_last=True)
    from_snapshot = resume_point(whole)
    assert from_snapshot.checkpoint > 1  # version 2's form: the last run's header holds it
    assert point.machine == from_snapshot.machine


def test_a_wrong_continuation_digest_is_the_divergence_it_names(
    session: Path, tmp_path: Path
) -> None:
    records = _lines(session)
    at = _header_at(records, 2)
    records[at]["continues"] = "0" * 16
    bad = _write(tmp_path / "bad.jsonl", records)
    d = replay_trace(bad).divergence
    assert d is not None and d.what == "snapshot" and d.line == at + 1
    assert "next_run()" in d.message and "inside its messages or loop window" in d.message
    assert d.expected["digest"] == "0" * 16 and d.expected["brain"] == records[at]["brain"]
    assert d.actual["brain"] == records[at]["brain"]  # the small fields agree: not named
    agent = replay_agent(bad, support.build).divergence
    assert agent is not None and agent.what == "snapshot" and agent.line == at + 1
    assert "next_run()" in agent.message
    with pytest.raises(Exception, match="next_run"):
        resume_point(bad)
    assert any("next_run() is not the brain" in p for p in check_trace(bad))


def test_a_continuation_divergence_names_the_brain_fields_that_differ(
    session: Path, tmp_path: Path
) -> None:
    records = _lines(session)
    at = _header_at(records, 1)
    brain = records[at]["brain"]
    assert isinstance(brain, dict) and brain["history"] == 6  # the first customer's exchange
    records[at]["continues"] = "0" * 16
    brain["history"] = 7
    bad = _write(tmp_path / "bad.jsonl", records)
    for d in (replay_trace(bad).divergence, replay_agent(bad, support.build).divergence):
        assert d is not None and d.what == "snapshot"
        assert d.message.endswith("continues from: history 7 -> 6"), d.message
    with pytest.raises(Exception, match="history 7 -> 6"):
        resume_point(bad)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("first", ":1: a header that continues the previous run starts the trace"),
        ("inside", "a header that continues the previous run is inside a run"),
        ("both", "holds a snapshot or continues a run, not both"),
        ("version", "continues is a version 3 field"),
        ("brain", "a brain summary only with continues"),
    ],
)
def test_a_continuation_header_out_of_place_is_a_format_error(
    session: Path, tmp_path: Path, edit: str, message: str
) -> None:
    records = _lines(session)
    at = _header_at(records, 1)
    if edit == "first":
        records = records[at:]
    elif edit == "inside":
        del records[at - 1]  # the end record before it
    elif edit == "both":
        records[at]["snapshot"] = records[0]["snapshot"]
    elif edit == "brain":
        records[0]["brain"] = records[at]["brain"]
    else:
        records[at]["version"] = 2
    for seq, rec in enumerate(records):
        rec["seq"] = seq
    bad = _write(tmp_path / "bad.jsonl", records)
    with pytest.raises(TraceFormatError, match=message):
        read_trace(bad)


def test_a_secret_before_a_continuation_marks_its_header_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the order's record holds a key: the tool result, and so the brain, hold its placeholder
    order = dict(support.ORDERS["A-1001"], note="api key sk-abcdefghijklmnopqrstuvwx")
    monkeypatch.setitem(support.ORDERS, "A-1001", order)
    path = _session(tmp_path / "secret.jsonl")
    assert b"sk-abcdefghijklmnopqrstuvwx" not in path.read_bytes()
    headers = [r for r in read_trace(path) if isinstance(r, HeaderRecord)]
    assert [h.scrubbed for h in headers] == [False, True, True]
    assert replay_trace(path).ok
    assert replay_agent(path, support.build).ok
    assert resume_point(path).scrubbed


def test_views_say_the_run_continues(session: Path) -> None:
    records = _lines(session)
    described = describe(records[_header_at(records, 1)])
    assert described.kind == "header"
    assert "continues the previous run, brain " in described.lines[0]


@pytest.mark.parametrize("version", ["today", "v3"])
def test_otel_spans_of_a_session_say_each_run_s_history(version: str, session: Path) -> None:
    from loopctl_sim.view.otel_spans import export_spans

    trace = session if version == "today" else V3 / "session.jsonl"
    runs = [s for s in export_spans(trace) if s.name.startswith("invoke_agent")]
    assert [s.attributes["loopctl.history_messages"] for s in runs] == [0, 6, 10]


def _counting_agent(client: Any = None, observers: Sequence[Any] = ()) -> BareLoop:
    """An agent that keeps state across runs: its hook refuses every call after the second
    one this loop has seen (a budget per session)."""
    seen: list[str] = []

    def budget(call: ToolCall) -> Deny | None:
        seen.append(call.id)
        return Deny("the session's budget of two calls is spent") if len(seen) > 2 else None

    return BareLoop(
        client,
        [support.lookup_order],
        RunConfig(max_turns=5),
        hooks=Hooks(pre_tool=[budget]),
        observers=list(observers),
    )


def test_a_session_goes_on_in_one_loop_so_state_across_runs_replays(tmp_path: Path) -> None:
    def record_session(path: Path, *, snapshot_headers: bool) -> Path:
        replies: list[Message] = []
        for run in range(3):
            call = ToolCall(id=f"r{run}", name="lookup_order", arguments={"order_id": "A-1001"})
            replies += [Message.assistant("", [call]), Message.assistant(f"answer {run}")]
        recorder = TraceRecorder(path, snapshot_headers=snapshot_headers)
        loop = _counting_agent(ScriptedClient(replies), [recorder])

        async def go() -> None:
            for run in range(3):
                await loop.run(f"question {run}")

        asyncio.run(go())
        recorder.close()
        return path

    path = record_session(tmp_path / "budget.jsonl", snapshot_headers=False)
    fed = [r for r in read_trace(path) if r.type == "feed" and r.name == "tool_results"]
    errors = [r.args.message.tool_results[0].is_error for r in fed]  # type: ignore[union-attr]
    assert errors == [False, False, True]  # the third run's call was over the budget
    replayed = replay_agent(path, _counting_agent)
    assert replayed.ok and replayed.runs == 3, replayed.summary()
    # the same session with every header a snapshot says nothing of one loop: each run is
    # replayed in a fresh one, whose budget is whole again, and the third run diverges
    every = record_session(tmp_path / "every.jsonl", snapshot_headers=True)
    d = replay_agent(every, _counting_agent).divergence
    assert d is not None and d.what == "feed" and "lookup_order" in d.message


def test_a_version_3_trace_cut_between_results_and_their_count_resumes_with_the_count(
    tmp_path: Path,
) -> None:
    """Killed between an exchange's results and the count that followed them (version 3's two
    feeds): the rebuilt brain lacks the count, and the continuation feeds it before going on,
    to the brain of the uninterrupted run."""
    old = V3 / "refund.jsonl"
    lines = old.read_bytes().splitlines(keepends=True)
    first = next(i for i, raw in enumerate(lines) if b'"name":"tool_results"' in raw)
    assert b'"name":"set_context_tokens"' in lines[first + 1]
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[: first + 1]))
    point = resume_point(cut)
    assert point.uncounted is not None and not point.ended
    support.REFUNDS.clear()
    replies = CONVERSATIONS["refund"][1][1:]  # the model's answers after the first exchange
    resumed = resume_trace(cut, support.build, client=ScriptedClient(replies))
    assert resumed.result is not None and resumed.reused == resumed.dispatched == []
    after = _lines(cut)[first + 1 :]
    assert [after[0]["type"], after[0]["version"]] == ["header", 4]
    assert after[1]["name"] == "set_context_tokens"  # the count the killed driver owed
    replayed = replay_trace(cut)
    assert replayed.ok and replayed.complete and replayed.resumes == 1, replayed.summary()
    assert replayed.final_digest == replay_trace(old).final_digest


def test_a_version_3_trace_forks_and_the_fork_replays(tmp_path: Path) -> None:
    """A fork's prefix of a version 3 trace is replayed against the agent (its pairs read as
    one feed each); the fork goes on in version 4 and replays at agent and machine level."""
    from loopctl_sim.replay.fork import Edits, fork

    support.REFUNDS.clear()
    out = tmp_path / "fork.jsonl"
    replies = CONVERSATIONS["refund"][1][1:]  # the model's answers from turn 2 on
    done = fork(
        V3 / "refund.jsonl",
        turn=2,
        agent=support.build,
        client=ScriptedClient(replies),
        out=out,
        edits=Edits(inject="Please hurry."),
    )
    assert done.prefix.ok and done.point.kind == "set_context_tokens"  # after the pair
    assert done.result.outcome.kind == "completed"
    headers = [h for h in read_trace(out) if isinstance(h, HeaderRecord)]
    assert [h.version for h in headers] == [2, 4]
    support.REFUNDS.clear()
    for replayed in (replay_agent(out, support.build, tools="recorded"), replay_trace(out)):
        assert replayed.ok and replayed.complete and replayed.resumes == 1, replayed.summary()
