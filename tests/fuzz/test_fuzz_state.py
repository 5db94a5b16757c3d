"""The campaign state file (``--state``, issue 20): what it records reads back the same, a torn
last line or another campaign's file is handled, and a campaign stopped mid-way (Ctrl-C in this
process, or the client killed with its worker processes) resumes without running a finished
chunk again and without losing a failure."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from loopctl_sim import fuzz as fz
from loopctl_sim.cli.fuzz_report import CampaignProgress
from loopctl_sim.fuzz import campaign
from loopctl_sim.fuzz.case import FuzzCase
from loopctl_sim.fuzz.checks import Failure
from loopctl_sim.fuzz.executors import Chunk
from loopctl_sim.fuzz.state import CampaignState, StateError

SEEDS = range(10)
CONFIG = fz.FuzzConfig(shrink=False)


def open_state(path: Path, **changes: Any) -> CampaignState:
    kwargs: dict[str, Any] = {"seeds": SEEDS, "config": CONFIG, "out": None, "chunk_size": 3}
    kwargs.update(changes)
    return CampaignState.open(path, **kwargs)


def a_summary(seed: int, *, failing: bool = False) -> fz.CampaignSummary:
    summary = fz.CampaignSummary()
    result = fz.CaseResult(
        seed,
        runs=4,
        steps=17,
        faults=Counter({"network": 2}),
        enabled=("network", "crash"),
        outcome="completed",
        scheduled=Counter({"network": 3}),
        notes=["a note"],
    )
    if failing:
        result.failure = Failure("invariant", "shape", "planted: three turns")
        result.files = [f"/out/seed-{seed}.jsonl", f"/out/seed-{seed}.min.yaml"]
        result.shrunk = "shrunk from 18 replies to 2"
    summary.add(result)
    return summary


def test_what_is_recorded_reads_back_the_same(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    with open_state(path) as state:
        assert not state.resumed and state.chunks == 4 and state.finished() == {}
        state.record(Chunk(2, (6, 7, 8)), a_summary(6, failing=True))
        state.record(Chunk(0, (0, 1, 2)), a_summary(0))
        state.record(Chunk(0, (0, 1, 2)), a_summary(1))  # a chunk twice is recorded once
    with open_state(path, chunk_size=99) as state:  # the file keeps its chunk size
        assert state.resumed and state.chunk_size == 3 and state.seeds_done == 2
        assert state.finished() == {0: a_summary(0), 2: a_summary(6, failing=True)}
    header = json.loads(path.read_text().splitlines()[0])
    assert header["campaign"]["seeds"] == {"start": 0, "stop": 10}
    assert len(path.read_text().splitlines()) == 3


def test_a_torn_last_line_is_dropped_and_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    with open_state(path) as state:
        state.record(Chunk(0, (0, 1, 2)), a_summary(0))
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"chunk":1,"seeds":[3,5],"summ')  # killed while writing
    with open_state(path) as state:
        assert set(state.finished()) == {0}
        state.record(Chunk(1, (3, 4, 5)), a_summary(3))
    with open_state(path) as state:
        assert set(state.finished()) == {0, 1}
    assert path.read_bytes().startswith(whole) and path.read_bytes().endswith(b"\n")


@pytest.mark.parametrize(
    ("changes", "differs"),
    [
        ({"seeds": range(11)}, "seeds"),
        ({"seeds": [1, 5, 9]}, "seeds"),
        ({"config": dataclasses.replace(CONFIG, faults=("network",))}, "--faults"),
        ({"config": dataclasses.replace(CONFIG, turns=5)}, "--turns"),
        ({"out": "elsewhere"}, "out"),
    ],
)
def test_the_state_of_another_campaign_is_refused_with_what_differs(
    tmp_path: Path, changes: dict[str, Any], differs: str
) -> None:
    open_state(tmp_path / "s.json").close()
    with pytest.raises(StateError, match=f"another campaign .*differs in: {differs}"):
        open_state(tmp_path / "s.json", **changes)


def test_a_state_in_use_by_another_client_is_refused(tmp_path: Path) -> None:
    with open_state(tmp_path / "s.json"), pytest.raises(StateError, match="locked"):
        open_state(tmp_path / "s.json")
    open_state(tmp_path / "s.json").close()  # closed: free again


def _header(**changes: Any) -> str:
    header = {
        "format": "loopctl-fuzz-state",
        "version": 1,
        "campaign": json.loads(json.dumps(_identity())),
        "chunk_size": 3,
        "chunks": 4,
    }
    header.update(changes)
    return json.dumps(header)


def _identity() -> dict[str, Any]:
    from loopctl_sim.fuzz.state import campaign_identity

    return campaign_identity(SEEDS, CONFIG, None)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"some": "json"}\n', r"s\.json:1: not a loopctl fuzz state file"),
        ("not json at all\n", r"s\.json:1: not a JSON object"),
        ("\xff\xfe\n", r"s\.json:1: not a JSON object"),
        (_header(version=9) + "\n", r"s\.json:1: state version 9"),
        (_header() + '\n{"chunk": 0}\n', r"s\.json:2: not a chunk record"),
        (_header() + "\n[1, 2]\n", r"s\.json:2: not a JSON object"),
        (_header() + '\n{"chunk": 7, "summary": {}}\n', r"s\.json:2: chunk 7 of a campaign of 4"),
    ],
)
def test_a_damaged_state_is_refused_with_its_file_and_line(
    tmp_path: Path, text: str, where: str
) -> None:
    (tmp_path / "s.json").write_text(text)
    with pytest.raises(StateError, match=where):
        open_state(tmp_path / "s.json")


def test_a_state_that_cannot_be_written_is_a_state_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(StateError, match="file"):
        open_state(tmp_path / "file" / "s.json")


def _planted_bug(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    real = campaign.check

    def buggy(case: FuzzCase, scenario: Any, config: fz.FuzzConfig) -> fz.CaseResult:
        result = real(case, scenario, config)
        if case.seed == seed and result.failure is None:
            result.failure = Failure("invariant", "planted", f"planted: seed {seed}")
        return result

    monkeypatch.setattr(campaign, "check", buggy)


def test_ctrl_c_then_resume_runs_each_chunk_once_and_keeps_the_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _planted_bug(monkeypatch, 1)
    fresh = fz.run_campaign(SEEDS, CONFIG, out=str(tmp_path / "fresh"), chunk_size=3)
    assert [r.seed for r in fresh.failures] == [1]
    ran: list[int] = []
    real = campaign.seed_files
    monkeypatch.setattr(
        campaign, "seed_files", lambda seed, *a, **k: ran.append(seed) or real(seed, *a, **k)
    )
    out = str(tmp_path / "out")

    def interrupt(result: fz.CaseResult) -> None:
        if result.seed == 5:  # the second chunk is recorded: Ctrl-C
            raise KeyboardInterrupt

    with (
        open_state(tmp_path / "s.json", out=out) as state,
        pytest.raises(KeyboardInterrupt),
    ):
        fz.run_campaign(SEEDS, CONFIG, out=out, state=state, on_result=interrupt)
    assert ran == [0, 1, 2, 3, 4, 5]
    ran.clear()
    with open_state(tmp_path / "s.json", out=out) as state:
        resumed = fz.run_campaign(SEEDS, CONFIG, out=out, state=state)
    assert ran == [6, 7, 8, 9]  # the finished chunks are not run again
    assert (resumed.seeds, resumed.runs, resumed.steps, resumed.faults) == (
        fresh.seeds,
        fresh.runs,
        fresh.steps,
        fresh.faults,
    )
    assert resumed.outcomes == fresh.outcomes and resumed.scheduled == fresh.scheduled
    assert [(r.seed, str(r.failure)) for r in resumed.failures] == [
        (r.seed, str(r.failure)) for r in fresh.failures
    ]
    assert resumed.failures[0].files == [
        str(Path(out) / "seed-1.jsonl"),
        str(Path(out) / "seed-1.yaml"),
    ]
    assert all(Path(f).exists() for f in resumed.failures[0].files)


PLANT = """
import os


def planted(result, trace):
    seed = trace[0].metadata.get("fuzz_seed")
    with open(os.environ["PLANT_LOG"], "a") as log:
        log.write(f"{seed}\\n")
    assert seed != 1, "planted bug: seed 1"
"""


def _fuzz(folder: Path, log: str) -> subprocess.Popen[str]:
    command = [str(Path(sys.executable).parent / "loopctl-sim"), "fuzz", "--seeds", "0:40"]
    command += ["--workers", "2", "--chunk-size", "2", "--check", "state_plant:planted"]
    command += ["--state", "s.json", "--out", "out", "--no-progress", "--no-shrink"]
    env = {**os.environ, "PLANT_LOG": str(folder / log)}
    return subprocess.Popen(
        command,
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the kill takes its workers too
    )


def _chunks_done(state: Path) -> dict[int, list[int]]:
    if not state.exists():
        return {}
    lines = state.read_text().split("\n")[1:-1]  # a line being written is not done yet
    return {(r := json.loads(line))["chunk"]: r["seeds"] for line in lines if line}


def test_a_killed_client_resumes_without_running_a_finished_chunk_or_losing_a_failure(
    tmp_path: Path,
) -> None:
    (tmp_path / "state_plant.py").write_text(PLANT)
    state = tmp_path / "s.json"
    first = _fuzz(tmp_path, "first.log")
    try:
        deadline = time.monotonic() + 120
        while not (0 in _chunks_done(state) and len(_chunks_done(state)) >= 3):
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline, "no chunk was recorded"
            time.sleep(0.02)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the client and its worker processes, at once
        first.communicate()
    done = _chunks_done(state)
    assert 0 in done and len(done) < 20, "the campaign ended before it was killed"
    finished = {s for first_seed, last in done.values() for s in range(first_seed, last + 1)}
    assert (tmp_path / "out" / "seed-1.jsonl").exists()  # chunk 0's failure, on disk before
    second = _fuzz(tmp_path, "second.log")
    output, _ = second.communicate(timeout=300)
    assert second.returncode == 1, output
    assert f"{len(done)} of 20 chunks done ({len(finished)} seeds)" in output
    again = {int(s) for s in (tmp_path / "second.log").read_text().split()}
    assert not again & finished  # no finished chunk ran again
    assert again | finished == set(range(40))
    assert "FAIL seed 1: check (state_plant:planted)" in output  # from the state, not re-run
    assert "40 seeds" in output and "1 failing seed(s)" in output
    assert len(_chunks_done(state)) == 20


def test_a_resumed_campaigns_bar_starts_at_its_seeds_done_and_rates_only_this_run() -> None:
    now = [0.0]
    quiet = Console(file=io.StringIO())
    bar = CampaignProgress(
        100, console=quiet, show=False, get_time=lambda: now[0], done=50, failing=2
    )
    task = bar.tasks[0]
    left = bar.columns[-1]
    assert task.completed == 50 and task.fields["failing"] == "2 failing"
    assert str(left.render(task)) == "-:--:--"  # no rate before a seed of this run is done
    now[0] = 5.0
    for seed in range(10):
        bar.seed_done(fz.CaseResult(seed=seed))
    assert str(left.render(bar.tasks[0])) == "0:00:20"  # 40 left at 10 seeds in 5 s
    rate = next(c for c in bar.columns if "Rate" in type(c).__name__)
    assert str(rate.render(bar.tasks[0])) == "2.0 seeds/s"
