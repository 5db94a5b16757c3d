"""Fuzzing the user's own agent (issue 17): the sample support agent passes a campaign of a few
hundred seeds, and bugs planted one at a time in a copy of it (never in the shipped example)
are found, shrunk to a small reproducer, and reproduced: by ``loopctl-sim run --checks`` and
by replaying the reproducer's trace against the agent."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from shop_project import AGENT, CHECKS, add, edit, make_project, plant_splitting_compactor

from loopctl.testing import MOVES
from loopctl_sim import fuzz as fz
from loopctl_sim import replay_agent
from loopctl_sim.cli import main
from loopctl_sim.fuzz.agent_case import case_for
from loopctl_sim.fuzz.campaign import run_seed
from loopctl_sim.fuzz.case import ALL_FAULTS
from loopctl_sim.sim import load_scenario

CI_SEEDS = 200


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from make_project(tmp_path, monkeypatch)


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def config(**kwargs: object) -> fz.FuzzConfig:
    return fz.FuzzConfig(agent=AGENT, max_shrink_tests=300, **kwargs)  # type: ignore[arg-type]


def first_failure(cfg: fz.FuzzConfig, out: Path, seeds: range = range(60)) -> fz.CaseResult:
    for seed in seeds:
        result = run_seed(seed, cfg, out=str(out))
        if result.failure is not None:
            return result
    raise AssertionError(f"no seed of {seeds} found the planted bug")


# --- the sample agent as shipped ------------------------------------------------------------------


def test_the_sample_agent_passes_a_campaign(project: Path) -> None:
    summary = fz.run_campaign(range(CI_SEEDS), config(), out=str(project / "out"))
    assert summary.ok, [f"{r.seed}: {r.failure}" for r in summary.failures]
    assert summary.seeds == CI_SEEDS and summary.runs >= 3 * CI_SEEDS
    assert set(summary.moves) == set(MOVES)
    struck = {kind for kind, n in summary.faults.items() if n}
    assert struck == set(ALL_FAULTS), set(ALL_FAULTS) - struck
    assert {"completed", "cancelled", "max_turns_exceeded"} <= set(summary.outcomes)
    assert not summary.notes  # its tools are deterministic: every seed was checked twice


def test_workers_give_the_same_summary(project: Path) -> None:
    one = fz.run_campaign(range(6), config(shrink=False))
    two = fz.run_campaign(range(6), config(shrink=False), workers=2, chunk_size=2)
    assert (one.runs, one.steps, one.faults, one.outcomes, one.moves) == (
        two.runs,
        two.steps,
        two.faults,
        two.outcomes,
        two.moves,
    )


# --- planted bugs, one at a time ------------------------------------------------------------------


def test_a_compactor_that_splits_a_call_from_its_result_is_found_and_shrunk(
    project: Path,
) -> None:
    plant_splitting_compactor(project)
    out = project / "out"
    found = first_failure(config(), out)
    assert found.failure is not None
    assert (found.failure.kind, found.failure.code) == ("exception", "ProtocolError")
    assert "compacted history is not valid" in found.failure.message
    small = load_scenario(out / f"seed-{found.seed}.min.yaml")
    assert small.agent == AGENT and small.explore is None
    assert len(small.model) <= 3 and [f.kind for f in small.faults] == ["compact_now"]
    code, text = cli("run", str(out / f"seed-{found.seed}.min.yaml"), "--agent", AGENT, "--checks")
    assert code == 1 and "ProtocolError" in text
    # the reproducer's trace ends where the engine refused the feed, with the ProtocolError
    # that escaped the run: its replay raises it again there, which is the run's recorded end
    for compactor in ("live", "recorded"):
        trace = out / f"seed-{found.seed}.min.jsonl"
        replayed = replay_agent(trace, AGENT, compactor=compactor)
        assert replayed.ok and replayed.complete, replayed.summary()
        assert any("ProtocolError" in note for note in replayed.notes)


ESCAPING_MIDDLEWARE = '''
async def audit(request, call_next):
    """The planted bug: a model middleware that lets its exception escape the run."""
    if any(r.is_error for m in request.messages for r in m.tool_results):
        raise RuntimeError("audit: a tool failed")
    return await call_next(request)
'''


def test_a_model_middleware_whose_exception_escapes_is_found(project: Path) -> None:
    add(project, ESCAPING_MIDDLEWARE)
    edit(
        project,
        "        observers=observers,\n",
        "        observers=observers,\n        model_middleware=[audit],\n",
    )
    found = first_failure(config(), project / "out")
    assert found.failure is not None and found.failure.kind == "exception"
    assert found.failure.code == "RuntimeError" and "escaped the run" in found.failure.message
    small = load_scenario(project / "out" / f"seed-{found.seed}.min.yaml")
    assert len(small.model) <= 2 and len(small.faults) <= 1


RETRYING_MIDDLEWARE = '''
async def retry_once(call, next_tool):
    """The planted bug: a tool middleware that runs a failed call again (the model was told
    nothing, and a refund may go out twice)."""
    result = await next_tool(call)
    return await next_tool(call) if result.is_error else result
'''


def test_a_middleware_that_runs_a_call_twice_is_found(project: Path) -> None:
    add(project, RETRYING_MIDDLEWARE)
    edit(
        project,
        "        observers=observers,\n",
        "        observers=observers,\n        middleware=[retry_once],\n",
    )
    found = first_failure(config(), project / "out")
    assert found.failure is not None
    assert (found.failure.kind, found.failure.code) == ("tool-twice", "executions")
    small = load_scenario(project / "out" / f"seed-{found.seed}.min.yaml")
    assert len(small.model) <= 2
    # the run itself completes, so its reproducer replays against the agent, tools live
    replayed = replay_agent(project / "out" / f"seed-{found.seed}.min.jsonl", AGENT)
    assert replayed.ok, replayed.summary()


def test_a_failing_user_check_is_a_failing_seed_shrunk_and_replayed(project: Path) -> None:
    (project / "shop" / "checks.py").write_text(CHECKS)
    check = "shop.checks:only_delivered_orders_are_refunded"
    task = "Please refund order A-1002, I changed my mind."
    assert fz.run_campaign(range(25), config(checks=(check,), inputs=(task,), shrink=False)).ok
    # the planted bug: the refund tool no longer checks the order's status
    edit(project, 'if order is None or order["status"] != "delivered":', "if order is None:")
    out = project / "out"
    code, text = cli(
        "fuzz",
        "--agent",
        AGENT,
        "--seeds",
        "0:60",
        "--check",
        check,
        "--out",
        str(out),
        "--no-progress",
        "--faults",
        "none",
        "--input",
        task,
    )
    assert code == 1, text
    assert "FAIL seed" in text and f"check ({check})" in text
    replay = next(line for line in text.splitlines() if ".min.jsonl" in line and "replay:" in line)
    command = shlex.split(replay.split("replay:", 1)[1])
    assert command[:2] == ["loopctl-sim", "replay"] and "--agent" in command
    code, replayed = cli(*command[1:])
    assert code == 0, replayed
    run_line = next(line for line in text.splitlines() if line.strip().startswith("run:"))
    code, ran = cli(*shlex.split(run_line.split("run:", 1)[1])[1:], "--check", check)
    assert code == 1 and "not delivered: ['A-1002']" in ran


NONDETERMINISTIC = '''
import random as _random


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up by its id (like A-1001): the item, the amount paid, the status."""
    return f"order {order_id}: {_random.random()}"
'''


def test_nondeterministic_tools_are_said_not_to_be_checked(project: Path) -> None:
    add(project, NONDETERMINISTIC, before="# Arithmetic only")  # before shipping_quote
    summary = fz.run_campaign(range(20), config(faults=(), shrink=False))
    assert summary.ok, [str(r.failure) for r in summary.failures]
    assert any("not deterministic" in note for note in summary.notes)
    declared = fz.run_campaign(range(20), config(faults=(), shrink=False, deterministic=True))
    kinds = {(r.failure.kind, r.failure.code) for r in declared.failures if r.failure}
    assert kinds == {("nondeterminism", "tool")}


def test_the_command_refuses_what_it_cannot_load(project: Path) -> None:
    code, text = cli("fuzz", "--agent", "shop.nope:build", "--seeds", "0:1")
    assert code == 2 and "cannot import" in text
    code, text = cli("fuzz", "--agent", AGENT, "--seeds", "0:1", "--tools", "live:nope")
    assert code == 2 and "unknown tool" in text
    code, text = cli("fuzz", "--agent", AGENT, "--seeds", "0:1", "--exempt", "nope")
    assert code == 2 and "no tool nope" in text
    code, text = cli("fuzz", "--agent", AGENT, "--seeds", "0:1", "--check", "shop.agent:NOPE")
    assert code == 2 and "not a function" in text
    code, text = cli("fuzz", "--seeds", "0:1", "--tools", "simulated")
    assert code == 2 and "go with --agent" in text


def test_exempt_and_simulated_tools_are_kept_in_the_saved_scenario(project: Path) -> None:
    cfg = config(tools="simulated:refund", exempt=("lookup_order",), shrink=False)
    case = case_for(3, cfg)
    tools = case.scenario.tools
    assert tools["refund"].mode == "simulated" and not tools["lookup_order"].faults
    assert all(f.tool != "lookup_order" for f in case.scenario.faults)
    result = run_seed(3, cfg)
    assert result.failure is None
    import shop.agent as shop

    assert shop.REFUNDS == []  # a simulated refund never ran
