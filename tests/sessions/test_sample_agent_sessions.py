"""The sample support agent's conversations: its shipped three-turn session (trace and scenario)
and a campaign over its customers' sessions under every fault kind, through the public API."""

from __future__ import annotations

from pathlib import Path

from examples.support_agent.record import CONVERSATIONS, SESSION
from loopctl_sim.fuzz.case import ALL_FAULTS
from loopctl_sim.fuzz.sessions import (
    SESSION_CHECKS,
    SessionFuzzConfig,
    load_session_scenario,
    run_session_seed,
)
from loopctl_sim.replay import replay_agent
from loopctl_sim.sim.session import recorded_turns, run_session

AGENT = "examples.support_agent.agent:build"
HERE = Path(__file__).resolve().parents[2] / "examples" / "support_agent"
CHECK = "examples.support_agent.sessions:refunds_within_limit"


def test_the_shipped_session_trace_and_scenario_hold_the_three_customers(tmp_path: Path) -> None:
    customers = [CONVERSATIONS[name][0] for name in SESSION]
    shipped = HERE / "traces" / "session.jsonl"
    assert [t.text for t in recorded_turns(shipped)] == customers
    assert replay_agent(shipped, AGENT).divergence is None
    world = load_session_scenario(HERE / "session.yaml")
    trace = tmp_path / "from-scenario.jsonl"
    session = run_session(world, trace)
    assert [t.text for t in session.turns] == customers
    assert [getattr(r.outcome, "kind", None) for r in session.runs] == ["completed"] * 3
    # the same answers as the shipped trace, the same refund handed over to a human
    shipped_end = replay_agent(shipped, AGENT).machine
    assert shipped_end is not None and session.machine is not None
    assert [m.text for m in session.machine.history] == [m.text for m in shipped_end.history]
    assert replay_agent(trace, AGENT).divergence is None


def test_fuzzing_the_customers_conversations_under_every_fault_kind() -> None:
    """Forty seeded customers of four turns each, every fault kind drawn into their runs: the
    engine's checks hold in every session; the shop's whole-session refund check is the only
    one that fails, and it fails the same way when the seed runs again."""
    config = SessionFuzzConfig(
        agent=AGENT,
        user="examples.support_agent.sessions:make_user",
        user_turns=4,
        faults=ALL_FAULTS,
        checks=(CHECK,),
    )
    failed: dict[int, set[str]] = {}
    fired: set[str] = set()
    for seed in range(40):
        result = run_session_seed(seed, config)
        assert result.session is not None
        for run in result.session.runs:
            fired |= set(run.fired)
        checks = {f.check for f in result.repeats[0]}
        assert not checks & set(SESSION_CHECKS), (seed, result.repeats)
        if checks:
            failed[seed] = checks
    assert failed and all(checks == {CHECK} for checks in failed.values())
    assert len(fired) >= 8  # many fault kinds struck across the campaign
    seed = min(failed)
    assert {f.check for f in run_session_seed(seed, config).repeats[0]} == {CHECK}
