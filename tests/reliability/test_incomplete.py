"""Incomplete traces (cut anywhere, as a kill -9 or a Ctrl-C leaves them) replay up to their
last complete record, at machine and driver level, say so, and exit 0; damaged ones exit 2 with
``file:line``; a directory of them is replayed whole; divergences always name a real record.

Also: a complete trace of a run cancelled while a model attempt streamed replays as recorded.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl import BareLoop, Cancelled, tool
from loopctl.api import (
    ModelRequest,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from loopctl.driver import CancelSignal
from loopctl_sim import TraceRecorder, replay_driver, replay_trace
from loopctl_sim.cli import main
from loopctl_sim.replay import ReplayResult

TRACES = Path(__file__).parents[1] / "traces" / "driver"
EVERY_CUT = ["basic", "cancel", "crash_restore"]  # every byte boundary of a record and mid-line
SOME_CUTS = ["rate_limited", "tool_exception", "threshold_compaction", "loop_detected"]


def cuts(name: str, every: bool) -> list[tuple[str, int]]:
    data = (TRACES / f"{name}.jsonl").read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    first = ends[0]
    points = [
        p for end, start in zip(ends, [0, *ends], strict=False) for p in (end, (start + end) // 2)
    ]
    points = [p for p in points if p >= first and p < len(data)]  # a whole header, not the whole
    if not every:
        points = points[:: max(1, len(points) // 6)]
    return [(name, p) for p in points]


CASES = [c for n in EVERY_CUT for c in cuts(n, True)] + [
    c for n in SOME_CUTS for c in cuts(n, False)
]


def check_location(result: ReplayResult) -> None:
    if result.divergence is not None:
        assert result.divergence.line >= 1 and result.divergence.seq == result.divergence.line - 1


@pytest.mark.parametrize(("name", "cut"), CASES, ids=[f"{n}@{c}" for n, c in CASES])
def test_a_trace_cut_anywhere_replays_up_to_its_last_record(
    tmp_path: Path, name: str, cut: int
) -> None:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes((TRACES / f"{name}.jsonl").read_bytes()[:cut])
    complete = path.read_bytes().count(b"\n")
    for result in (replay_trace(path), replay_driver(path)):
        check_location(result)
        assert result.ok, result.divergence and result.divergence.report()
        assert result.records == complete
        assert not result.complete
        if not path.read_bytes().endswith(b"\n"):
            assert any("truncated last line" in w for w in result.warnings)
    driver = replay_driver(path)
    assert driver.notes, "an incomplete trace says so"
    assert driver.final_digest is not None and driver.machine is not None
    assert driver.final_digest == driver.machine.digest()


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_a_header_only_trace_and_one_cut_after_its_header_exit_0(tmp_path: Path) -> None:
    header = (TRACES / "basic.jsonl").read_bytes().split(b"\n")[0] + b"\n"
    only = tmp_path / "header_only.jsonl"
    only.write_bytes(header)
    cut = tmp_path / "cut_after_header.jsonl"
    cut.write_bytes(header + b'{"seq":1,"type":"fe')
    for path in (only, cut):
        for level in ([], ["--driver"]):
            code, out = cli("replay", *level, str(path), "--machine" if not level else "--driver")
            assert code == 0, out
            assert "incomplete run" in out


def test_a_directory_with_incomplete_and_damaged_traces_is_replayed_whole(tmp_path: Path) -> None:
    basic = (TRACES / "basic.jsonl").read_bytes()
    header = basic.split(b"\n")[0] + b"\n"
    (tmp_path / "a_header_only.jsonl").write_bytes(header)
    (tmp_path / "b_cut.jsonl").write_bytes(basic[: len(basic) // 2])
    (tmp_path / "c_whole.jsonl").write_bytes((TRACES / "cancel.jsonl").read_bytes())
    (tmp_path / "d_cut_in_header.jsonl").write_bytes(basic[:100])
    lines = basic.split(b"\n")
    lines[3] = lines[3][:-5] + b"!!!!}"  # a damaged line in the middle
    (tmp_path / "e_damaged.jsonl").write_bytes(b"\n".join(lines))
    code, out = cli("replay", "--driver", str(tmp_path))
    assert code == 2, out
    assert "3 of 5 traces replayed without divergence" in out
    assert "d_cut_in_header.jsonl:1:" in out and "e_damaged.jsonl:4:" in out
    code, out = cli("replay", "--machine", str(tmp_path))
    assert code == 2 and "3 of 5 traces replayed without divergence" in out


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class CancelsMidStream:
    """One tool call, then a reply that streams a little and is cancelled while it streams."""

    def __init__(self, cancel: CancelSignal) -> None:
        self.cancel = cancel
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        if self.calls == 1:
            yield ToolCallStart(index=0, id="c1", name="add")
            yield ToolCallDelta(index=0, arguments='{"a": 1, "b": 2}')
            yield ToolCallEnd(index=0)
            yield StopEvent(reason="tool_use")
            return
        yield TextDelta(text="partial ")
        self.cancel.cancel()
        await asyncio.sleep(3600)  # cut off by the cancel
        yield TextDelta(text="never")


def test_a_run_cancelled_during_a_model_stream_replays_as_recorded(tmp_path: Path) -> None:
    path = tmp_path / "cancelled.jsonl"
    cancel = CancelSignal()
    recorder = TraceRecorder(path)
    loop = BareLoop(CancelsMidStream(cancel), tools=[add], observers=[recorder])
    result = asyncio.run(loop.run("add 1 and 2", cancel))
    recorder.close()
    assert isinstance(result.outcome, Cancelled)
    kinds = [
        json.loads(line).get("kind") or json.loads(line)["type"]
        for line in path.read_text().splitlines()
    ]
    assert kinds[-4:] == ["cancel", "cancel", "call_llm", "discard_pending"] or "end" in kinds
    for replayed in (replay_trace(path), replay_driver(path)):
        assert replayed.ok, replayed.divergence and replayed.divergence.report()
        assert replayed.complete and replayed.outcome == {"kind": "cancelled"}
        assert replayed.final_digest == loop.machine.digest()
