"""The brain benchmark measures what it says: histories of the stated size, a planned turn.

Structure only, never timings (the figures depend on the machine).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from loopctl import LoopMachine
from loopctl.core import coherence_problem

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

bench = importlib.import_module("benchmarks.bench_brain")


@pytest.mark.parametrize("size", [0, 2, 10, 1_000])
def test_history_has_the_stated_size_and_is_provider_valid(size: int) -> None:
    messages = bench.history(size)
    assert len(messages) == size
    assert coherence_problem(messages) is None
    assert LoopMachine(messages).history_len() == size


def test_odd_history_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="even"):
        bench.history(3)


def test_a_turn_sample_runs_the_planned_turns() -> None:
    times = bench.turn_times((10, 100), samples=2, turns_per_sample=5)
    assert set(times) == {10, 100}
    assert all(t["wall_us"] > 0 and t["cpu_us"] >= 0 for t in times.values())


def test_save_restore_reports_every_figure() -> None:
    figures = bench.save_restore(10, repeats=1)
    assert figures["messages"] == 10
    assert figures["save_restore_ms"] == figures["save_ms"] + figures["restore_ms"]
    for key in ("snapshot_bytes", "save_after_feed_ms", "digest_ms", "digest_after_feed_ms"):
        assert figures[key] > 0
    for key in ("save", "restore", "save_restore", "restore_check", "digest"):
        assert figures[f"{key}_cpu_ms"] >= 0
