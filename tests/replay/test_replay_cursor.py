"""Driver-level replay's cursor (``loopctl_sim.replay.cursor``) and what the replay client keeps
between replies (``loopctl_sim.replay.answers``): the records in order with a lookahead up to
the next brain record, which is looked for once however often it is asked for."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_agent_replay import build, record
from loopctl_sim import replay_agent
from loopctl_sim.replay import answers as answers_module
from loopctl_sim.replay.cursor import Cursor, TraceEnded
from loopctl_sim.trace import TraceReader


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cursor") / "t.jsonl"
    record(path, 120, "long")
    return path


def test_the_cursor_gives_every_record_in_order_with_the_next_brain_record_ahead(
    trace: Path,
) -> None:
    expected = list(TraceReader(trace).numbered())
    cursor = Cursor(TraceReader(trace))
    got = []
    while True:
        brain = cursor.next_brain()
        assert cursor.next_brain() is brain  # asked again: the same
        if brain is None:
            break
        (line, rec), skipped = cursor.take_brain()
        assert (line, rec) == brain and rec.type != "io"
        got += [*(("io", r.seq) for r in skipped), (rec.type, rec.seq)]
    assert got == [(r.type, r.seq) for _, r in expected]
    assert cursor.line == len(expected) and cursor.io == sum(r.type == "io" for _, r in expected)
    with pytest.raises(TraceEnded):
        cursor.take()
    for line, rec in Cursor(TraceReader(trace))._records:
        assert rec == expected[line - 1][1]


class _Scans(deque[Any]):
    """A deque that counts how often it is walked through."""

    scans = 0

    def __iter__(self) -> Any:
        _Scans.scans += 1
        return super().__iter__()


def test_the_next_brain_record_is_looked_for_once(trace: Path) -> None:
    cursor = Cursor(TraceReader(trace))
    cursor._ahead = _Scans()
    cursor.take_brain()  # the header
    _Scans.scans = 0
    first = cursor.next_brain()
    for _ in range(5):
        assert cursor.next_brain() is first
    assert _Scans.scans <= 1
    cursor.take_brain()
    assert cursor.next_brain() is not first


def test_a_usage_the_same_as_the_reply_befores_is_not_read_again(
    trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[object] = []
    validate = answers_module._validate_usage

    def counted(data: Any) -> Any:
        read.append(data)
        return validate(data)

    monkeypatch.setattr(answers_module, "_validate_usage", counted)
    result = replay_agent(trace, build)
    assert result.ok and result.complete
    replies = sum(r.type == "io" and r.kind == "model_reply" for r in TraceReader(trace))
    assert replies > 5 and len(read) == 1  # every recorded usage is the same
