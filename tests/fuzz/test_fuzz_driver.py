"""The built-in world fuzzed at driver level (``loopctl-sim fuzz --level driver``): the real
``BareLoop``'s retries, dispatch, compaction and resume under the same faults and checks as the
machine-level fuzzer, the invariants checked from outside the driver (``DriverChecker``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import loopctl.core.machine as machine_mod
from loopctl.core import LoopMachine
from loopctl_sim import fuzz as fz
from loopctl_sim.cli.fuzz_cmd import fuzz as fuzz_command
from loopctl_sim.fuzz.campaign import run_seed
from loopctl_sim.fuzz.checks import first_difference
from loopctl_sim.props import invariants as inv
from loopctl_sim.replay import replay_driver
from loopctl_sim.sim.scenario import load_scenario

DRIVER = fz.FuzzConfig(level="driver")


def test_a_driver_level_campaign_passes_every_check() -> None:
    summary = fz.run_campaign(range(25), DRIVER)
    assert summary.ok, [str(r.failure) for r in summary.failures]
    assert summary.runs >= 25 * 4 and sum(summary.faults.values()) > 0
    assert sum(summary.scheduled.values()) >= sum(1 for _ in range(25)) // 2


def test_the_determinism_twin_streams_what_the_first_run_took_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At driver level the first run takes each reply whole and the determinism twin watches
    the stream (the driver folds the events): a whole reply that is not what its stream folds
    to shows as the two traces differing. Planted here: whole replies with a changed text."""
    import loopctl_sim.sim.layers as layers

    real = layers.delivered_reply

    def altered(*args: Any) -> Any:
        reply = real(*args)
        message = reply.message
        if not any(p.kind == "text" for p in message.parts):
            return reply
        parts = tuple(
            p.model_copy(update={"text": p.text + "!"}) if p.kind == "text" else p
            for p in message.parts
        )
        return reply.model_copy(update={"message": message.model_copy(update={"parts": parts})})

    monkeypatch.setattr(layers, "delivered_reply", altered)
    config = fz.FuzzConfig(level="driver", shrink=False, check_crash=False, check_heal=False)
    result = fz.check_case(fz.make_case(3, config), None, config)
    assert result.failure is not None and result.failure.kind == "nondeterminism"
    assert "the second streamed its replies" in result.failure.message


def test_both_levels_agree_on_every_outcome() -> None:
    """The same seeds end the same way at machine level and through the real driver."""
    machine = fz.FuzzConfig(shrink=False, check_determinism=False, check_crash=False)
    driver = fz.FuzzConfig(level="driver", shrink=False, check_determinism=False, check_crash=False)
    for seed in range(15):
        a = fz.check_case(fz.make_case(seed, machine), None, machine)
        b = fz.check_case(fz.make_case(seed, driver), None, driver)
        assert (a.outcome, a.failure) == (b.outcome, b.failure), seed


def test_a_brain_that_salvages_an_open_tail_is_caught_through_the_driver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(machine_mod, "coherent_prefix_length", lambda pending: len(pending))
    summary = fz.run_campaign(range(0, 30), fz.FuzzConfig(level="driver", shrink=False))
    kinds = {(r.failure.kind, r.failure.code) for r in summary.failures if r.failure}
    assert kinds == {("invariant", "salvage")}


def test_a_failure_at_driver_level_is_saved_shrunk_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = inv.check_machine

    def planted(machine: LoopMachine, policy: Any = None) -> list[str]:
        if machine.turns_taken >= 3:
            return ["shape: planted bug: three turns"]
        return real(machine, policy)

    monkeypatch.setattr(inv, "check_machine", planted)
    config = fz.FuzzConfig(level="driver", max_shrink_tests=200)
    result = run_seed(0, config, out=str(tmp_path))
    assert result.failure is not None and result.failure.signature == ("invariant", "shape")
    small = load_scenario(tmp_path / "seed-0.min.yaml")
    assert len(small.model) <= 3 and small.faults == []
    assert replay_driver(tmp_path / "seed-0.min.jsonl").ok


def test_traces_compare_without_their_durations() -> None:
    a = '{"seq":1,"type":"io","kind":"tool_result","duration_s":0.0012}\n{"seq":2}\n'
    b = '{"seq":1,"type":"io","kind":"tool_result","duration_s":0.0371}\n{"seq":2}\n'
    c = '{"seq":1,"type":"io","kind":"tool_result","duration_s":0.0371}\n{"seq":3}\n'
    assert first_difference(a, a) is None and first_difference(a, b) is None
    assert first_difference(a, c) == 2
    assert first_difference(a, a + '{"seq":3}\n') == 3


def test_the_command_runs_at_driver_level(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        fuzz_command,
        ["--seeds", "0:4", "--level", "driver", "--out", str(tmp_path), "--no-progress"],
    )
    assert res.exit_code == 0, res.output
    assert "driver level" in res.output and "4 seeds" in res.output
    assert "faults exercised, by kind" in res.output and "scheduled" in res.output


# --- the hands' properties in driver-level campaigns (DriverWatch beside DriverChecker) -------

# the plants of the property layer's own tests, as fixtures (looked up by name below)
from test_planted_bugs import (  # noqa: E402, F401
    estimate_not_updated,
    one_retry_too_few,
    one_retry_too_many,
    overflow_fails_the_run,
    resume_dispatches_twice,
    resume_skips_pending,
    retry_after_ignored,
)

PLANTS = {
    "resume_skips_pending": "dispatch-once",
    "resume_dispatches_twice": "dispatch-once",
    "one_retry_too_many": ("retry", "runaway"),
    "one_retry_too_few": "retry",
    "retry_after_ignored": "retry-after",
    "overflow_fails_the_run": "overflow",
    "estimate_not_updated": "estimate",
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_driver_level_campaign_finds_a_planted_driver_bug(
    plant: str, request: pytest.FixtureRequest
) -> None:
    """A driver bug that feeds the brain something valid but wrong passes every brain invariant;
    driver-level campaigns check the hands too, and find it within a small seed range."""
    planted = request.getfixturevalue(plant)
    config = fz.FuzzConfig(level="driver", shrink=False, check_determinism=False)
    summary = fz.run_campaign(range(40), config)
    codes = {r.failure.code for r in summary.failures if r.failure is not None}
    expected = PLANTS[plant]
    wanted = {expected} if isinstance(expected, str) else set(expected)
    assert planted.fired > 0, "the planted bug never fired"
    assert codes & wanted, (plant, codes)
