"""Fault-injection campaigns (loopctl_sim.fuzz) and the `fuzz` command (loopctl_sim.cli)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopctl.core import LoopMachine
from loopctl_sim import fuzz as fz
from loopctl_sim.cli.fuzz_cmd import fuzz as fuzz_command
from loopctl_sim.fuzz import checks
from loopctl_sim.fuzz.campaign import run_seed
from loopctl_sim.fuzz.case import ALL_FAULTS, scenario_yaml
from loopctl_sim.fuzz.checks import CREATED
from loopctl_sim.props import invariants as inv
from loopctl_sim.replay import replay_trace
from loopctl_sim.sim import machine as sim_mod
from loopctl_sim.sim import scenario as scenario_mod
from loopctl_sim.sim.scenario import load_scenario
from loopctl_sim.trace import read_trace


def test_the_package_exports_what_the_command_line_imports() -> None:
    for name in fz.__all__:
        assert getattr(fz, name, None) is not None, name
    cli_names = ["CaseResult", "FuzzConfig", "parse_faults", "parse_seeds", "run_campaign"]
    for name in cli_names:
        assert name in fz.__all__


def test_a_seed_determines_its_case() -> None:
    a, b = fz.make_case(17), fz.make_case(17)
    assert a == b
    assert fz.make_case(18).scenario != a.scenario
    assert 15 <= len(a.scenario.model) <= 25  # about 20 turns


def test_swarm_draws_only_enabled_kinds() -> None:
    config = fz.FuzzConfig(faults=("network", "crash"))
    kinds = {f.kind for s in range(60) for f in fz.make_case(s, config).scenario.faults}
    assert kinds == {"network", "crash"}
    enabled = {fz.make_case(s, config).enabled for s in range(60)}
    assert {(), ("network",), ("crash",), ("network", "crash")} <= enabled  # subsets vary
    none = fz.FuzzConfig(faults=())
    assert all(not fz.make_case(s, none).scenario.faults for s in range(20))


def test_parse_seeds_and_faults() -> None:
    assert fz.parse_seeds("3:7") == range(3, 7)
    assert fz.parse_seeds("5") == [5]
    assert fz.parse_seeds("1,4") == [1, 4]
    with pytest.raises(ValueError, match="bad seed range"):
        fz.parse_seeds("9:2")
    assert fz.parse_faults("all") == ALL_FAULTS
    assert fz.parse_faults("crash,network") == ("network", "crash")  # canonical order
    assert fz.parse_faults("none") == ()
    with pytest.raises(ValueError, match="unknown fault kinds"):
        fz.parse_faults("network,gremlins")


def test_a_small_campaign_passes_every_check() -> None:
    summary = fz.run_campaign(range(0, 25))
    assert summary.ok, [str(r.failure) for r in summary.failures]
    assert summary.seeds == 25
    assert summary.runs >= 25 * 4  # checked + heal, determinism twin (+ heal), crash variant
    assert summary.steps > 25 * 5
    assert sum(summary.faults.values()) > 0
    assert sum(summary.outcomes.values()) == 25
    assert any(struck for _, _, struck, _ in summary.fault_rows())


def test_the_trace_of_a_case_replays_and_holds_the_heal_run() -> None:
    case = fz.make_case(3)
    result = fz.check_case(case)
    assert result.failure is None
    assert result.trace == fz.check_case(case).trace  # byte for byte
    headers = [line for line in result.trace.splitlines() if '"type":"header"' in line]
    assert len(headers) == 2  # the faulted run, then the heal run
    assert CREATED in headers[0]


def test_workers_give_the_same_summary_as_one_process() -> None:
    one = fz.run_campaign(range(0, 8))
    two = fz.run_campaign(range(0, 8), workers=2, chunk_size=3)
    assert (one.seeds, one.runs, one.steps, one.faults, one.outcomes) == (
        two.seeds,
        two.runs,
        two.steps,
        two.faults,
        two.outcomes,
    )


# --- planted bugs: every check must catch its kind of failure --------------------------------


def _planted_turn_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    real = inv.check_machine

    def buggy(machine: LoopMachine, policy: Any = None) -> list[str]:
        if machine.turns_taken >= 3:
            return ["shape: planted bug: three turns"]
        return real(machine, policy)

    monkeypatch.setattr(inv, "check_machine", buggy)


def test_an_invariant_failure_is_saved_and_shrunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _planted_turn_bug(monkeypatch)
    seed = next(s for s in range(50) if fz.check_case(fz.make_case(s)).failure is not None)
    result = run_seed(seed, fz.FuzzConfig(max_shrink_tests=200), out=str(tmp_path))
    assert result.failure is not None
    assert result.failure.kind == "invariant" and result.failure.code == "shape"
    names = sorted(Path(f).name for f in result.files)
    stem = f"seed-{seed}"
    expected = [f"{stem}.jsonl", f"{stem}.yaml", f"{stem}.min.jsonl", f"{stem}.min.yaml"]
    assert names == sorted(expected)
    small = load_scenario(tmp_path / f"seed-{seed}.min.yaml")
    assert len(small.model) <= 3 and small.faults == []
    assert result.shrunk is not None and "shrunk from" in result.shrunk
    # the saved traces are valid traces the replayer accepts (the bug is in a checker here)
    for name in (f"seed-{seed}.jsonl", f"seed-{seed}.min.jsonl"):
        assert read_trace(tmp_path / name)
        assert replay_trace(tmp_path / name).ok


def test_nondeterminism_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = itertools.count()
    monkeypatch.setitem(scenario_mod.BUILTINS, "echo", lambda args: str(next(counter)))
    seed = next(s for s in range(40) if "echo" in fz.make_case(s).scenario.tools)
    config = fz.FuzzConfig(faults=())
    failure = fz.check_case(fz.make_case(seed, config), None, config).failure
    assert failure is not None and failure.kind == "nondeterminism", failure


def test_a_livelock_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "_bound", lambda world: 3)
    failure = fz.check_case(fz.make_case(1)).failure
    assert failure is not None and failure.kind == "livelock"


def test_a_restore_that_differs_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = LoopMachine.model_validate_json

    def lossy(text: str | bytes) -> LoopMachine:
        snap = real(text).snapshot()
        return LoopMachine.from_snapshot(
            snap.model_copy(update={"context_tokens": snap.context_tokens + 1})
        )

    monkeypatch.setattr(sim_mod.LoopMachine, "model_validate_json", staticmethod(lossy))
    config = fz.FuzzConfig(faults=())
    failure = fz.check_case(fz.make_case(2, config), None, config).failure
    assert failure is not None and failure.kind == "crash-restore", failure


def test_a_heal_run_that_cannot_finish_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = checks._heal_world

    def one_turn(world: Any) -> Any:
        healing = real(world)
        policy = healing.policy.model_copy(update={"max_turns": 1})  # it needs two
        return dataclasses.replace(healing, policy=policy)

    monkeypatch.setattr(checks, "_heal_world", one_turn)
    config = fz.FuzzConfig(faults=())
    failure = fz.check_case(fz.make_case(4, config), None, config).failure
    assert failure is not None and failure.kind == "heal"


# --- the command ---------------------------------------------------------------------------


def test_fuzz_command_passes(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        fuzz_command, ["--seeds", "0:6", "--out", str(tmp_path / "out"), "--no-progress"]
    )
    assert res.exit_code == 0, res.output
    assert "6 seeds" in res.output and "0 failing seed(s)" in res.output
    assert not (tmp_path / "out").exists()


def test_fuzz_command_reports_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _planted_turn_bug(monkeypatch)
    out = tmp_path / "out"
    res = CliRunner().invoke(
        fuzz_command,
        ["--seeds", "0:3", "--faults", "network", "--out", str(out), "--no-progress"],
    )
    assert res.exit_code == 1, res.output
    assert "FAIL seed" in res.output
    assert "loopctl-sim replay " in res.output and ".min.jsonl" in res.output
    assert "--faults network" in res.output
    assert list(out.glob("seed-*.min.yaml"))


def test_fuzz_command_rejects_bad_arguments() -> None:
    res = CliRunner().invoke(fuzz_command, ["--seeds", "x"])
    assert res.exit_code == 2
    res = CliRunner().invoke(fuzz_command, ["--faults", "gremlins"])
    assert res.exit_code == 2 and "unknown fault kinds" in res.output


def test_a_case_round_trips_through_its_scenario_yaml(tmp_path: Path) -> None:
    for seed in (0, 7, 11):
        case = fz.make_case(seed)
        path = tmp_path / f"{seed}.yaml"
        path.write_text(scenario_yaml(case.scenario))
        assert load_scenario(path) == case.scenario


def test_a_passing_seed_keeps_no_trace_in_memory() -> None:
    result = run_seed(0)
    assert result.failure is None and result.trace == "" and result.files == []


def test_a_campaign_catches_a_brain_that_salvages_an_open_tail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mutant of the engine itself (not of a checker): discard_pending keeps all of pending."""
    import loopctl.core.machine as machine_mod

    monkeypatch.setattr(machine_mod, "coherent_prefix_length", lambda pending: len(pending))
    summary = fz.run_campaign(range(0, 30), fz.FuzzConfig(shrink=False))
    assert summary.failures
    assert {(r.failure.kind, r.failure.code) for r in summary.failures if r.failure} == {
        ("invariant", "salvage")
    }
