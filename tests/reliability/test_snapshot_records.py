"""Traces holding periodic snapshot records (``snapshot_every``) are read by everything: the
reader with and without its fast path (the same replay forms), machine and driver replay, show,
diff, html, otel, export-test; a run whose arguments sit at the nesting limit still writes
snapshot lines the reader reads."""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl import BareLoop, Message, ToolCall, tool
from loopctl.core.values import MAX_NESTING
from loopctl.testing import ScriptedClient
from loopctl_sim import TraceReader, TraceRecorder, replay_driver, replay_trace
from loopctl_sim.cli import main
from loopctl_sim.trace.fast import _MAX_DEPTH
from tests.reliability.test_nesting import json_depth

sys.path.insert(0, str(Path(__file__).parents[1] / "sim_support"))  # test_tracefast's own helpers
from tests.trace.test_tracefast import assert_replay_form


@tool
def echo(x: object) -> str:
    """Echo."""
    return "ok"


def deep(depth: int) -> dict[str, object]:
    value: object = 0
    for _ in range(depth - 1):
        value = {"x": value}
    return {"x": value}


def record(path: Path, depth: int = 2, every: int = 1) -> None:
    replies = [
        Message.assistant(
            f"turn {i}", tool_calls=[ToolCall(id=f"c{i}", name="echo", arguments=deep(depth))]
        )
        for i in range(4)
    ]
    recorder = TraceRecorder(path, snapshot_every=every)
    loop = BareLoop(
        ScriptedClient([*replies, Message.assistant("done")]), tools=[echo], observers=[recorder]
    )
    asyncio.run(loop.run("go"))
    recorder.close()


@pytest.mark.parametrize("name", ["snap.jsonl", "snap.jsonl.gz"])
def test_the_fast_path_and_pydantic_agree_on_snapshot_records(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    record(path)
    expected = list(TraceReader(path, fast=False).numbered())
    assert sum(1 for _, r in expected if getattr(r, "kind", None) == "snapshot") >= 10
    fast, slow = (
        list(TraceReader(path).replay_records()),
        list(TraceReader(path, fast=False).replay_records()),
    )
    for (_, item), (_, slow_item), (_, rec) in zip(fast, slow, expected, strict=True):
        if rec.type in ("header", "end"):
            assert item == rec == slow_item
        else:
            assert_replay_form(item, rec)
            assert_replay_form(slow_item, rec)
    for result in (replay_trace(path), replay_trace(path, digest_every=4), replay_driver(path)):
        assert result.ok and result.complete


def test_every_command_reads_a_trace_with_snapshots(tmp_path: Path) -> None:
    path = tmp_path / "snap.jsonl.gz"
    record(path)
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    runner = CliRunner()
    for args in (
        ["show", str(path)],
        ["diff", str(path), str(plain)],
        ["html", str(path), "-o", str(tmp_path / "t.html")],
        ["otel", str(path), "-o", str(tmp_path / "t.json")],
        ["export-test", str(path), "-o", str(tmp_path / "test_t.py")],
        ["replay", "--driver", str(path)],
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 0, (args, result.output)
    shown = runner.invoke(main, ["show", str(path)]).output
    assert "snapshot of the brain" in shown


def test_snapshot_lines_of_a_run_at_the_nesting_limit_read_back(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    record(path, depth=MAX_NESTING)
    depths = [
        json_depth(line) for line in path.read_text().splitlines() if '"kind":"snapshot"' in line
    ]
    assert depths and max(depths) <= _MAX_DEPTH
    assert replay_trace(path).ok and replay_driver(path).ok
    assert all(json.loads(line)["seq"] == i for i, line in enumerate(path.read_text().splitlines()))
