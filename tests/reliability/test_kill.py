"""kill -9 while recording: a trace loses at most the record being written, replays at machine
and driver level, and resumes to the uninterrupted run's exact final brain with no tool call run
twice.

A recording process (forked from the test, so it starts in milliseconds) is killed with SIGKILL
after its k-th record for k = 1 .. 20 and beyond (and once in the middle of writing a record: a
torn last line); another is a real ``python`` subprocess killed by the test at a moment of its
own. Each trace is checked, then resumed with ``loopctl-sim resume`` semantics (``resume_trace``)
in this process: its final digest must be the uninterrupted run's, and every tool call must have
run exactly once across both processes (the tool logs its runs).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopctl.observe import LoopObserver
from loopctl_sim import (
    ResumeError,
    TraceRecorder,
    read_trace,
    replay_driver,
    replay_trace,
    resume_trace,
)
from loopctl_sim.trace import TraceWriter
from tests.reliability import killable_agent

AGENT = "killable_agent:build"
HERE = Path(__file__).parent


class KillAfter(TraceWriter):
    """A writer that SIGKILLs its own process once it has written ``n`` records (``torn``: in
    the middle of writing the next one)."""

    def __init__(self, path: Path, n: int, torn: bool = False) -> None:
        super().__init__(path)
        self.n = n
        self.torn = torn

    def _write_line(self, text: str) -> None:
        if self.seq == self.n:
            if self.torn:
                self._file.write(text[: len(text) // 2])
                self._file.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        super()._write_line(text)


def run_agent(writer: TraceWriter, snapshot_every: int | None = None) -> Any:
    recorder = TraceRecorder(writer, snapshot_every=snapshot_every)
    observers: list[LoopObserver] = [recorder]
    loop = killable_agent.build(observers=observers)
    try:
        return asyncio.run(loop.run("add them up")), loop.machine
    finally:
        recorder.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int]:
    """The uninterrupted run's final digest and record count."""
    path = tmp_path_factory.mktemp("ref") / "whole.jsonl"
    os.environ.pop("LOOPCTL_TEST_TOOL_LOG", None)
    _, machine = run_agent(TraceWriter(path))
    return machine.digest(), len(read_trace(path))


def killed_at(path: Path, n: int, log: Path, torn: bool = False, every: int | None = None) -> None:
    """Record the agent in a forked child killed by SIGKILL after ``n`` records."""
    pid = os.fork()
    if pid == 0:  # the child: record until killed
        try:
            os.environ["LOOPCTL_TEST_TOOL_LOG"] = str(log)
            run_agent(KillAfter(path, n, torn), every)
        finally:
            os._exit(0)  # the run ended before the n-th record: no kill
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def tool_runs(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def agent_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    log = tmp_path / "tool_runs.log"
    monkeypatch.setenv("LOOPCTL_TEST_TOOL_LOG", str(log))
    monkeypatch.syspath_prepend(str(HERE))
    yield log


def _reference_kinds() -> list[str]:
    """The kind of each record of the uninterrupted run (recorded in memory, at collection)."""
    buffer = io.StringIO()
    saved = os.environ.pop("LOOPCTL_TEST_TOOL_LOG", None)
    try:
        run_agent(TraceWriter(buffer))
    finally:
        if saved is not None:
            os.environ["LOOPCTL_TEST_TOOL_LOG"] = saved
    records = [json.loads(line) for line in buffer.getvalue().splitlines()]
    return [r.get("kind") or r.get("name") or r["type"] for r in records]


KINDS = _reference_kinds()
#: Where a kill loses the record being written and nothing else: every record boundary after
#: the input but those where a tool's result is being written (the tool has run; see below).
KILL_POINTS = [n for n in range(2, len(KINDS) - 1) if KINDS[n] != "tool_result"][:20]
#: Kills while a tool's result is written: that tool ran, its result is lost with the record.
IN_A_TOOL = [n for n in range(2, len(KINDS) - 1) if KINDS[n] == "tool_result"]


@pytest.mark.parametrize("n", KILL_POINTS)
def test_a_run_killed_after_record_n_replays_and_resumes_exactly(
    tmp_path: Path, agent_env: Path, reference: tuple[str, int], n: int
) -> None:
    digest, total = reference
    assert n < total - 1  # the kill lands inside the run
    path = tmp_path / "killed.jsonl"
    killed_at(path, n, agent_env)
    # at most the record being written is lost: the n written are all there
    assert len(read_trace(path)) == n
    for replayed in (replay_trace(path), replay_driver(path)):
        assert replayed.ok, replayed.divergence and replayed.divergence.report()
        assert replayed.records == n and not replayed.complete
    resumed = resume_trace(path, AGENT, cwd=HERE)
    assert resumed.result is not None
    assert resumed.result.final_text == "the sums are 2, 4, 6, 8 and 10"
    assert resumed.point.machine.digest() == digest
    runs = tool_runs(agent_env)
    assert sorted(runs) == sorted(set(runs)) and len(runs) == 5, runs  # each call once
    assert len(resumed.dispatched) + len(resumed.reused) <= 2
    # the resumed trace is whole: it replays at both levels to the same brain
    for replayed in (replay_trace(path), replay_driver(path)):
        assert replayed.ok and replayed.complete, (
            replayed.divergence and replayed.divergence.report()
        )
        assert replayed.final_digest == digest and replayed.resumes == 1


def test_there_are_twenty_kill_points() -> None:
    assert len(KILL_POINTS) == 20 and IN_A_TOOL


@pytest.mark.parametrize("n", IN_A_TOOL)
def test_a_kill_while_a_tools_result_is_written_runs_only_that_tool_again(
    tmp_path: Path, agent_env: Path, reference: tuple[str, int], n: int
) -> None:
    """The record being written held a finished tool's result: it is lost, and the resume runs
    the calls whose results are not in the trace (the contract asks tools to be idempotent);
    the calls whose results are recorded never run again."""
    path = tmp_path / "in_a_tool.jsonl"
    killed_at(path, n, agent_env)
    resumed = resume_trace(path, AGENT, cwd=HERE)
    assert resumed.point.machine.digest() == reference[0]
    runs = tool_runs(agent_env)
    twice = {r for r in runs if runs.count(r) > 1}
    rerun = {f"add:{c[1:]}:{c[1:]}" for c in resumed.dispatched}
    assert resumed.dispatched and twice == rerun, (runs, resumed.dispatched, resumed.reused)


def test_a_run_killed_after_its_header_has_nothing_to_resume(
    tmp_path: Path, agent_env: Path
) -> None:
    path = tmp_path / "header.jsonl"
    killed_at(path, 1, agent_env)
    assert replay_driver(path).ok and replay_trace(path).ok
    with pytest.raises(ResumeError, match="the run never started"):
        resume_trace(path, AGENT, cwd=HERE)
    assert tool_runs(agent_env) == []


@pytest.mark.parametrize("n", [3, 9, 16])
def test_a_torn_last_line_is_the_only_loss(
    tmp_path: Path, agent_env: Path, reference: tuple[str, int], n: int
) -> None:
    path = tmp_path / "torn.jsonl"
    killed_at(path, n, agent_env, torn=True)
    assert not path.read_bytes().endswith(b"\n")
    result = replay_trace(path)
    assert result.ok and result.records == n
    assert any("truncated last line" in w for w in result.warnings)
    resumed = resume_trace(path, AGENT, cwd=HERE)
    assert resumed.point.machine.digest() == reference[0]
    assert len(tool_runs(agent_env)) == 5
    assert replay_driver(path).ok


@pytest.mark.parametrize(("n", "every"), [(14, 2), (25, 3), (30, 1)])
def test_a_killed_run_with_snapshots_resumes_from_the_last_one(
    tmp_path: Path, agent_env: Path, reference: tuple[str, int], n: int, every: int
) -> None:
    path = tmp_path / "snapshots.jsonl"
    killed_at(path, n, agent_env, every=every)
    kinds = [getattr(r, "kind", None) for r in read_trace(path)]
    assert "snapshot" in kinds
    resumed = resume_trace(path, AGENT, cwd=HERE)
    assert resumed.point.restored_from == "snapshot"
    assert resumed.point.machine.digest() == reference[0]
    assert len(tool_runs(agent_env)) == 5
    for replayed in (replay_trace(path), replay_driver(path)):
        assert replayed.ok and replayed.complete


def test_a_compressed_trace_killed_resumes_too(
    tmp_path: Path, agent_env: Path, reference: tuple[str, int]
) -> None:
    path = tmp_path / "killed.jsonl.gz"
    killed_at(path, 12, agent_env)
    result = replay_driver(path)
    assert result.ok and result.records == 12
    assert any("ends early" in w for w in result.warnings)
    resumed = resume_trace(path, AGENT, cwd=HERE)
    assert resumed.point.machine.digest() == reference[0]
    replayed = replay_trace(path)  # written whole again, compressed
    assert replayed.ok and replayed.complete and not replayed.warnings
    assert path.read_bytes()[:2] == b"\x1f\x8b"


_CHILD = """
import asyncio, sys, time
sys.path.insert(0, {here!r})
import killable_agent
from loopctl_sim import TraceRecorder
from loopctl.testing import FunctionClient
from loopctl import BareLoop

def slow(request):
    time.sleep(0.05)  # the parent kills this process while it waits
    return killable_agent.answer(request)

recorder = TraceRecorder({path!r})
loop = BareLoop(FunctionClient(slow), tools=[killable_agent.add], observers=[recorder])
asyncio.run(loop.run("add them up"))
"""


def test_a_real_subprocess_killed_mid_run_loses_at_most_one_record(
    tmp_path: Path, agent_env: Path, reference: tuple[str, int]
) -> None:
    """A python process killed by the test (SIGKILL) while it records, wherever it is."""
    path = tmp_path / "subprocess.jsonl"
    code = _CHILD.format(here=str(HERE), path=str(path))
    child = subprocess.Popen([sys.executable, "-c", code], env={**os.environ})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not path.exists() or path.read_bytes().count(b"\n") < 8):
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=60) == -signal.SIGKILL
    data = path.read_bytes()
    whole = data.count(b"\n")
    assert whole >= 8
    records = read_trace(path)
    assert len(records) == whole  # every complete line reads; only a torn one may not
    assert all(json.loads(line)["seq"] == i for i, line in enumerate(data.splitlines()[:whole]))
    assert replay_driver(path).ok
    resumed = resume_trace(path, AGENT, cwd=HERE)
    assert resumed.point.machine.digest() == reference[0]


@pytest.mark.parametrize("n", KILL_POINTS[::5])
def test_a_resume_header_that_is_not_the_brain_before_it_diverges(
    tmp_path: Path, agent_env: Path, n: int
) -> None:
    """The header a resume writes after a kill must hold the brain as of the trace's last record
    before it (killed inside a step: the checker keeps that brain's digest where a header
    follows a record), or the brain the replayed run stopped with (killed between steps)."""
    path = tmp_path / "killed.jsonl"
    killed_at(path, n, agent_env)
    resume_trace(path, AGENT, cwd=HERE)
    lines = path.read_bytes().splitlines(keepends=True)
    at = [i for i, raw in enumerate(lines) if b'"type":"header"' in raw[:40]][1]
    data = json.loads(lines[at])
    data["snapshot"]["context_tokens"] += 1
    lines[at] = json.dumps(data, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    result = replay_driver(path)
    assert result.divergence is not None, result.summary()
    assert result.divergence.what == "snapshot" and result.divergence.line == at + 1
    assert result.divergence.message in (
        "the header's snapshot is not the brain the records before it build",
        "the header's snapshot does not continue the replayed run",
    )
