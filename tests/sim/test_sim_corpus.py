"""The regression corpus: every trace in tests/traces replays exactly against today's brain.

A failure here means the engine now decides differently from when the trace was recorded. If the
change is intended, re-record with ``python -m loopctl_sim.corpus --write`` and review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from sim_helpers import SCENARIOS, TRACES

from loopctl_sim import corpus
from loopctl_sim.replay import replay_trace

TRACE_FILES = sorted(TRACES.glob("*.jsonl"))


def test_there_is_one_trace_per_example_scenario() -> None:
    assert [p.stem for p in TRACE_FILES] == [p.stem for p in sorted(SCENARIOS.glob("*.yaml"))]


@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: p.stem)
def test_every_stored_trace_replays_without_divergence(path: Path) -> None:
    result = replay_trace(path)
    assert result.ok, result.summary()
    assert result.complete and result.warnings == []


def test_recording_is_reproducible_byte_for_byte() -> None:
    for path in corpus.scenario_paths():
        assert corpus.record_scenario(path) == (TRACES / f"{path.stem}.jsonl").read_text(), path


def test_corpus_cli_write_and_check(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "traces"
    written = runner.invoke(corpus.main, ["--write", "--traces", str(out)])
    assert written.exit_code == 0 and len(list(out.glob("*.jsonl"))) == len(TRACE_FILES)
    assert runner.invoke(corpus.main, ["--check", "--traces", str(out)]).exit_code == 0
    (out / "basic.jsonl").write_text("changed\n")
    stale = runner.invoke(corpus.main, ["--traces", str(out)])
    assert stale.exit_code == 1 and "differs:" in stale.output
