"""The regression corpus: every trace in tests/traces replays exactly against today's engine.

A failure here means the engine now decides (or the driver feeds) differently from when the trace
was recorded. If the change is intended, re-record with
``python -m loopctl_sim.replay.corpus --write`` and review the diff of the traces.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from sim_helpers import SCENARIOS, TRACES

from loopctl_sim.replay import corpus, replay_agent, replay_driver, replay_trace
from loopctl_sim.trace import read_trace

MACHINE_TRACES = sorted(TRACES.glob("*.jsonl"))
DRIVER_TRACES = sorted((TRACES / "driver").glob("*.jsonl"))
#: The corpus as trace format version 1 wrote it (before requests and brain summaries were
#: recorded), kept so that the reader and both replays are shown to read version 1.
V1_TRACES = sorted((TRACES / "v1").rglob("*.jsonl"))
#: Some of the corpus and the support agent's traces as trace format version 3 wrote them (an
#: exchange's results, then the driver's count in a feed of its own), kept so that the reader
#: and every replay are shown to read them.
V3_TRACES = sorted((TRACES / "v3").glob("*.jsonl")) + sorted(
    (TRACES / "v3" / "driver").glob("*.jsonl")
)
V3_AGENT = sorted((TRACES / "v3" / "support_agent").glob("*.jsonl"))
STEMS = [p.stem for p in sorted(SCENARIOS.glob("*.yaml"))]


def test_there_are_two_traces_per_example_scenario() -> None:
    assert [p.stem for p in MACHINE_TRACES] == STEMS
    assert [p.stem for p in DRIVER_TRACES] == STEMS
    # version 1 recorded the scenarios that existed then, at both levels
    v1 = sorted(p.stem for p in V1_TRACES if p.parent.name == "v1")
    assert v1 == sorted(p.stem for p in V1_TRACES if p.parent.name == "driver")
    assert set(v1) <= set(STEMS) and len(V1_TRACES) == 2 * len(v1)


@pytest.mark.parametrize("path", V1_TRACES, ids=lambda p: p.parent.name + "/" + p.stem)
def test_a_version_1_trace_still_reads_and_replays_at_both_levels(path: Path) -> None:
    records = read_trace(path)
    assert records[0].version == 1  # type: ignore[union-attr]
    for level in (replay_trace, replay_driver):
        result = level(path)
        assert result.ok and result.complete, result.summary()
    # the same world recorded today ends in the same brain
    stem = path.stem
    today = TRACES / ("driver" if path.parent.name == "driver" else "") / f"{stem}.jsonl"
    assert replay_trace(path).final_digest == replay_trace(today).final_digest


@pytest.mark.parametrize("path", V3_TRACES, ids=lambda p: p.parent.name + "/" + p.stem)
def test_a_version_3_trace_still_reads_and_replays_at_both_levels(path: Path) -> None:
    records = read_trace(path)
    assert records[0].version == 2  # type: ignore[union-attr]
    names = [r.name for r in records if r.type == "feed"]
    assert "set_context_tokens" in names
    today = TRACES / ("driver" if path.parent.name == "driver" else "") / path.name
    digest = replay_trace(today).final_digest
    for level in (replay_trace, replay_driver):
        result = level(path)
        assert result.ok and result.complete, result.summary()
        assert result.final_digest == digest
    # today's feeds leave the brains the old ones did, each pair's second one for the pair
    old = [r.digest for r in records if r.type == "feed" and r.name != "tool_results"]
    assert [r.digest for r in read_trace(today) if r.type == "feed"] == old


@pytest.mark.parametrize("path", V3_AGENT, ids=lambda p: p.stem)
def test_a_version_3_agent_trace_replays_against_the_agent(path: Path) -> None:
    from examples.support_agent import agent as support

    support.REFUNDS.clear()
    today = TRACES.parent.parent / "examples" / "support_agent" / "traces" / path.name
    result = replay_agent(path, support.build)
    assert result.ok and result.complete, result.summary()
    assert result.final_digest == replay_trace(today).final_digest
    recorded = replay_agent(path, support.build, tools="recorded")
    assert recorded.ok and recorded.final_digest == result.final_digest


@pytest.mark.parametrize(
    "path", MACHINE_TRACES + DRIVER_TRACES, ids=lambda p: p.parent.name + "/" + p.stem
)
def test_every_stored_trace_replays_without_divergence(path: Path) -> None:
    result = replay_trace(path)
    assert result.ok, result.summary()
    assert result.complete and result.warnings == []


@pytest.mark.parametrize(
    "path", MACHINE_TRACES + DRIVER_TRACES, ids=lambda p: p.parent.name + "/" + p.stem
)
def test_every_stored_trace_replays_through_the_driver(path: Path) -> None:
    result = replay_driver(path)
    assert result.ok, result.summary()
    assert result.complete


def test_machine_recording_is_reproducible_byte_for_byte() -> None:
    for path in corpus.scenario_paths():
        assert corpus.record_scenario(path) == (TRACES / f"{path.stem}.jsonl").read_text(), path


def test_corpus_cli_write_and_check(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "traces"
    written = runner.invoke(corpus.main, ["--write", "--traces", str(out)])
    assert written.exit_code == 0
    assert (
        len(list(out.glob("*.jsonl"))) == len(list((out / "driver").glob("*.jsonl"))) == len(STEMS)
    )
    assert runner.invoke(corpus.main, ["--check", "--traces", str(out)]).exit_code == 0
    (out / "basic.jsonl").write_text("changed\n")
    (out / "driver" / "cancel.jsonl").unlink()
    stale = runner.invoke(corpus.main, ["--traces", str(out)])
    assert stale.exit_code == 1
    assert "differs:" in stale.output and "2 trace(s) differ" in stale.output
