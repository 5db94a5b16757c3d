"""``loopctl-sim run``: run a scenario file (a scripted world, or the user's own agent under
faults) and check its expected outcome; with ``--checks``, check it as the fuzzer checks a seed.

A scenario is data from anywhere (a bug report, a fuzz failure someone sent) and must not run
code on its own: one that names an agent runs only the agent ``--agent`` names (replacing the
file's), the file's with ``--trust-agent``, or the file's when ``[tool.loopctl] agent`` names the
same. Checks are named on the command line only.

Exit 0 when the outcome is the one the scenario expects (or it expects none) and every check
passes; 1 when it differs, a check fails or something escaped the agent's run; 2 when the
scenario or the agent cannot be loaded (or is not trusted) or the simulation itself fails.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from loopctl.core import to_jsonable
from loopctl_sim.cli.common import (
    agent_option,
    check_option,
    crash_at_option,
    deterministic_option,
    die,
    emit_json,
    tool_exceptions_option,
)
from loopctl_sim.fuzz import FuzzConfig, check_scenario
from loopctl_sim.sim import (
    AgentError,
    AgentRun,
    AgentRunError,
    Scenario,
    ScenarioError,
    SimulationError,
    agent_from_pyproject,
    load_scenario,
    run_agent,
    simulate,
    simulate_driver,
)


@click.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option(
    "--trace",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the run's trace here.",
)
@click.option("--driver", is_flag=True, help="Run through BareLoop with a scripted client.")
@click.option("--created", default=None, help="Fix the header's creation time (reproducible).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--checks",
    "fuzz_checks",
    is_flag=True,
    help="Check the run as the fuzzer checks a seed: invariants after every step, a heal run, "
    "determinism, a crash/restore (and, for an agent, nothing escapes, no tool call twice).",
)
@check_option("A check of your own on the run's result and trace (implies --checks; repeatable).")
@agent_option("Run this agent (for a scenario that names one: it replaces the file's).")
@click.option(
    "--trust-agent",
    is_flag=True,
    help="Run the agent the scenario file names (a file does not run code on its own).",
)
@deterministic_option(
    "With --checks and an agent: its tools give the same results for the same calls, or "
    "do not (as fuzz; default: find out by running twice)."
)
@crash_at_option("With --checks: where the crash check strikes, a fraction of the run's steps.")
@tool_exceptions_option(
    "With --checks and an agent: an exception a tool does not declare "
    "(@tool(raises=...)), or a tool hook's or middleware's, fails the check."
)
def run(
    scenario: str,
    trace: str | None,
    driver: bool,
    created: str | None,
    as_json: bool,
    fuzz_checks: bool,
    checks: tuple[str, ...],
    agent: str | None,
    trust_agent: bool,
    deterministic: bool | None,
    crash_at: float,
    tool_exceptions: bool,
) -> None:
    """Run a SCENARIO (YAML world) and print its outcome; exit 1 if it differs from `expect`.

    A scenario that names an agent (`agent: mypkg.agent:build`) runs the loop that factory
    builds, its tools live unless the scenario says otherwise, under the scenario's faults; the
    agent must be named on the command line (--agent) or trusted (--trust-agent)."""
    try:
        sc = load_scenario(scenario)
    except ScenarioError as exc:
        die(str(exc))
    sc = _trusted(sc, scenario, agent, trust_agent)
    if fuzz_checks or checks:
        config = FuzzConfig(
            level="driver" if driver else "machine",
            checks=checks,
            deterministic=deterministic,
            check_tool_exceptions=tool_exceptions,
        )
        _checked(sc, scenario, config, crash_at, as_json)
    if sc.agent is not None:
        if driver:
            die("a scenario that names an agent always runs through the agent's own loop")
        _agent(sc, scenario, trace, created, as_json)
    try:
        if driver:
            result = simulate_driver(sc.world(), trace, created=created)
        else:
            result = simulate(sc.world(), trace, created=created)
    except SimulationError as exc:
        die(f"{scenario}: {exc}")
    _report(sc, result, trace, as_json)


def _trusted(sc: Scenario, path: str, agent: str | None, trust: bool) -> Scenario:
    """The scenario with the agent the user named, or the file's when the user said so (see
    the module docstring); exit 2 otherwise."""
    if agent is not None:
        if sc.agent is None:
            die(f"{path}: names no agent (a built-in world): drop --agent")
        return sc.model_copy(update={"agent": agent})
    if sc.agent is None or trust:
        return sc
    try:
        configured = agent_from_pyproject()
    except AgentError:
        configured = None
    if configured == sc.agent:
        return sc
    die(
        f"{path} names the agent {sc.agent}: a scenario file does not run code on its own. "
        f"Name the agent to run with --agent {sc.agent} (or --trust-agent to run the one the "
        "file names)"
    )


#: What ``--json`` reports of a run, besides its outcome.
_COUNTS = ("steps", "model_requests", "retries", "tool_calls", "compactions", "crashes", "digest")


def _report(sc: Scenario, result: Any, trace_path: str | None, as_json: bool) -> None:
    outcome = result.outcome
    ok = sc.expect is None or sc.expect == outcome.kind
    if as_json:
        emit_json(
            {
                "scenario": sc.name,
                "outcome": to_jsonable(outcome),
                "expected": sc.expect,
                "ok": ok,
                **{name: getattr(result, name) for name in _COUNTS},
                "trace": trace_path,
            }
        )
    else:
        click.echo(result.summary())
        if trace_path:
            click.echo(f"trace written to {trace_path}")
        if not ok:
            click.echo(f"unexpected outcome: {outcome.kind} (the scenario expects {sc.expect})")
    sys.exit(0 if ok else 1)


def _agent(
    sc: Scenario, path: str, trace_path: str | None, created: str | None, as_json: bool
) -> None:
    try:
        result: AgentRun = run_agent(sc.agent_world(), trace_path, created=created)
    except (AgentError, ValueError) as exc:  # ValueError: a tools list naming no tool of it
        die(f"{path}: {exc}")
    except AgentRunError as exc:
        message = f"{type(exc.error).__name__}: {exc.error}"
        if as_json:
            emit_json({"scenario": sc.name, "ok": False, "escaped": message, "trace": trace_path})
        else:
            click.echo(f"{sc.name}: the run raised {message}")
            if trace_path:
                click.echo(f"trace written to {trace_path} (up to where it raised)")
        sys.exit(1)
    _report(sc, result, trace_path, as_json)


def _checked(sc: Scenario, path: str, config: FuzzConfig, crash_at: float, as_json: bool) -> None:
    """Every check of a fuzz seed, on this scenario; exit 0 when all pass, else 1."""
    try:
        result = check_scenario(sc, config, crash_at=crash_at)
    except (AgentError, ValueError) as exc:
        die(f"{path}: {exc}")
    ok = result.failure is None
    if as_json:
        emit_json(
            {
                "scenario": sc.name,
                "ok": ok,
                "outcome": result.outcome,
                "failure": str(result.failure) if result.failure else None,
                "runs": result.runs,
                "steps": result.steps,
                "notes": result.notes,
            }
        )
    else:
        level = "agent" if sc.agent else config.level
        if ok:
            click.echo(
                f"{sc.name}: every check passed ({level} level; {result.runs} runs, "
                f"{result.steps} steps checked; outcome {result.outcome})"
            )
        else:
            click.echo(f"{sc.name}: FAIL {result.failure}")
        for note in result.notes:
            click.echo(f"note: {note}")
    sys.exit(0 if ok else 1)
