"""Traces holding periodic snapshot records (``snapshot_every``) are read by everything: the
reader, machine and driver replay, show,
diff, html, otel, export-test; a run whose arguments sit at the nesting limit still writes
snapshot lines the reader reads."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl import BareLoop, Message, ToolCall, tool
from loopctl.core.values import MAX_NESTING
from loopctl.testing import ScriptedClient
from loopctl_sim import TraceReader, TraceRecorder, replay_driver, replay_trace
from loopctl_sim.cli import main
from tests.reliability.test_nesting import _MAX_DEPTH, json_depth


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
def test_snapshot_records_are_read_and_replayed(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    record(path)
    records = list(TraceReader(path).numbered())
    snapshots = [r for _, r in records if getattr(r, "kind", None) == "snapshot"]
    assert len(snapshots) >= 9  # after every feed that leaves the run going
    assert all(r.type == "io" and set(r.data) == {"digest", "snapshot"} for r in snapshots)
    for result in (replay_trace(path), replay_trace(path, digest_every=4), replay_driver(path)):
        assert result.ok and result.complete and result.records == len(records)


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
