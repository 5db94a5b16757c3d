"""Looping fuzz worlds (``loopctl_sim.fuzz.case.with_loops``): the campaign alone finds the loop
detector's planted bugs.

The plants are the brain's (``test_planted_brain_bugs``: the ping-pong detector switched off,
the loop window sized by a constant, ``warn`` never escalating); each test runs the
``loopctl-sim fuzz`` command over a small seed range with the plant in place and asserts that
it exits 1 naming the loop check (``invariant (loop)``) and that the plant fired. The same command
passes without a plant. Seeds and their draws are fixed, so the tests are deterministic.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from planting import NEVER_FIRED, Plant
from test_planted_brain_bugs import never_escalates, no_ping_pong, window_constant

from loopctl_sim import fuzz as fz
from loopctl_sim.cli.fuzz_cmd import fuzz as fuzz_command
from loopctl_sim.fuzz import case as case_mod
from loopctl_sim.fuzz.case import DEFAULT_LOOPS, FuzzLoops, with_loops
from loopctl_sim.props.brain_loops import LoopWeights

__all__ = ["never_escalates", "no_ping_pong", "window_constant"]  # the plants, as fixtures

#: A seed range each plant is found in (measured: the first failing seeds of 0:300 are below).
SEEDS = "0:30"


def _fuzz(tmp_path: Path, seeds: str = SEEDS) -> tuple[int, str]:
    res = CliRunner().invoke(
        fuzz_command, ["--seeds", seeds, "--no-shrink", "--out", str(tmp_path / "failures")]
    )
    return res.exit_code, res.output


def _found(tmp_path: Path, plant: Plant) -> None:
    code, out = _fuzz(tmp_path)
    assert plant.fired, NEVER_FIRED
    assert code == 1, out
    assert "invariant (loop)" in out, out  # the loop check named, as the user reads it


def test_the_campaign_passes_without_a_plant(tmp_path: Path) -> None:
    code, out = _fuzz(tmp_path)
    assert code == 0, out


def test_the_ping_pong_detector_switched_off_is_found(tmp_path: Path, no_ping_pong: Plant) -> None:
    _found(tmp_path, no_ping_pong)


def test_a_constant_loop_window_is_found(tmp_path: Path, window_constant: Plant) -> None:
    _found(tmp_path, window_constant)


def test_a_warning_that_never_escalates_is_found(tmp_path: Path, never_escalates: Plant) -> None:
    _found(tmp_path, never_escalates)


def test_looping_seeds_draw_every_action_window_and_limit() -> None:
    """Over 300 seeds the loop policies reach every action, window and limit of the weights."""
    policies: Counter[tuple[str, object]] = Counter()
    looping = 0
    for seed in range(300):
        p = fz.make_case(seed).scenario.policy
        policies[("action", p.loop_action)] += 1
        policies[("window", p.loop_window)] += 1
        policies[("limit", p.loop_repeat_limit)] += 1
        if p.loop_window != 12:  # the case's own policy always has the default window
            looping += 1
    w = DEFAULT_LOOPS.weights
    for name, pairs in (("action", w.actions), ("window", w.windows), ("limit", w.limits)):
        for value, _ in pairs:
            assert policies[(name, value)], (name, value)
    assert 80 <= looping <= 160  # about 40 of 100 seeds (a window of 12 is drawn too)


def test_the_loops_leave_every_other_draw_of_a_seed_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loop segment and loop policy come from a stream of their own: without them a seed is
    the world its own ``random.Random(seed)`` drew (faults, tools, texts, crash point), and with
    them only the calls and the three loop settings differ."""
    with_ = [fz.make_case(seed) for seed in range(60)]
    monkeypatch.setattr(
        case_mod, "with_loops", lambda seed, replies, policy, tools: (replies, policy)
    )
    without = [fz.make_case(seed) for seed in range(60)]
    loop_fields = {"loop_window", "loop_repeat_limit", "loop_action"}
    changed = 0
    for a, b in zip(with_, without, strict=True):
        assert (a.seed, a.crash_at, a.enabled) == (b.seed, b.crash_at, b.enabled)
        sa, sb = a.scenario, b.scenario
        assert (sa.faults, sa.tools, sa.max_retries, sa.tool_timeout) == (
            sb.faults,
            sb.tools,
            sb.max_retries,
            sb.tool_timeout,
        )
        assert [r.text for r in sa.model] == [r.text for r in sb.model]
        assert sa.policy.model_dump(exclude=loop_fields) == sb.policy.model_dump(
            exclude=loop_fields
        )
        changed += sa != sb
    assert 10 <= changed <= 40  # about 40 of 100 seeds loop


@pytest.mark.parametrize("pattern", ["repeat", "spaced", "shuffled", "parallel"])
def test_a_repeating_segment_passes_the_limit_and_goes_on(pattern: str) -> None:
    """One call (``shuffled``: ``add`` with its arguments in either order, one call) is made
    past the repeat limit and as often again: a warned run meets its next loop."""
    weights = LoopWeights(patterns=((pattern, 1),))
    base = fz.make_case(3).scenario
    replies, policy = with_loops(
        3, list(base.model), base.policy, ["add"], FuzzLoops(looping=100, weights=weights)
    )
    keys = [json.dumps([c.name, c.arguments], sort_keys=True) for r in replies for c in r.calls]
    assert max(Counter(keys).values()) >= 2 * policy.loop_repeat_limit
    if pattern == "shuffled":
        orders = {tuple(c.arguments) for r in replies for c in r.calls if c.arguments.get("a") == 7}
        assert len(orders) == 2, orders  # both orders drawn


def test_a_ping_pong_segment_alternates_two_calls_and_escalates() -> None:
    weights = LoopWeights(patterns=(("ping_pong", 1),), actions=(("warn", 1),))
    loops = FuzzLoops(looping=100, weights=weights)
    base = fz.make_case(3).scenario
    replies, policy = with_loops(3, list(base.model), base.policy, ["add", "echo"], loops)
    assert policy.loop_action == "warn"
    keys = [json.dumps([c.name, c.arguments], sort_keys=True) for r in replies for c in r.calls]
    run = longest = 0
    for i in range(2, len(keys)):
        run = run + 1 if keys[i] == keys[i - 2] != keys[i - 1] else 0
        longest = max(longest, run)
    # A, B, A, B is a ping-pong (a warning), one more exchange of it fails the warned run
    assert longest + 2 >= 5, keys
    assert replies[-1] == base.model[-1]  # the final answer stays last
    assert with_loops(3, list(base.model), base.policy, ["add", "echo"], loops) == (
        replies,
        policy,
    )  # the same seed, the same segment


def test_bad_loop_weights_are_refused() -> None:
    with pytest.raises(ValueError, match="out of 100"):
        FuzzLoops(looping=101)
