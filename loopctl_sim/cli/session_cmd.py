"""Sessions on the command line: the campaign of ``loopctl-sim fuzz --user-turns N`` (``--user``,
``--repeat``), and ``loopctl-sim session``.

A session campaign (``loopctl_sim.fuzz.sessions``) runs its seeds in this process, one after the
other. For each failing seed it writes the failing session's trace (``session-SEED.jsonl``),
shrinks it, writes the shrunk session's trace and scenario
and prints the command that runs the scenario again; with ``--repeat K``, each check's pass^k.

``loopctl-sim session SCENARIO --agent M:F`` runs a scenario file's session (with the agent the
command line names, never the file's alone) and checks it as the campaign checks a seed;
``--resume TRACE`` finishes a session whose process died (``loopctl_sim.replay.session_resume``),
the user's later turns from the scenario file or ``--user MODULE:MAKE_USER --seed``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from loopctl_sim.cli.common import check_option, die, emit_json, load_checks
from loopctl_sim.fuzz.sessions import (
    SESSION_CHECKS,
    SessionFuzzConfig,
    SessionScenarioError,
    SessionSeedResult,
    check_session,
    load_session_scenario,
    load_user,
    pass_k,
    run_session_seed,
    save_session_scenario,
    shrink_session,
)
from loopctl_sim.replay import ResumeError
from loopctl_sim.replay.session_resume import resume_session
from loopctl_sim.sim import AgentError
from loopctl_sim.sim.users import ExploringUser, SimUser
from loopctl_sim.trace import TraceFormatError, scrub_text


def session_campaign(seeds: Sequence[int], config: SessionFuzzConfig, out: str) -> int:
    """Run a session campaign, print what it found; the exit code (0 all held, 1 not)."""
    if config.user is not None:
        try:
            load_user(config.user, config.cwd)
        except ValueError as exc:
            die(str(exc))
    load_checks(config.checks, config.cwd)
    user = config.user or "the exploring user"
    click.echo(
        f"fuzz sessions: agent {config.agent}, {user}, {config.user_turns} user turns, "
        f"{len(seeds)} seeds x {config.repeat}, faults {','.join(config.faults) or 'none'}",
        err=True,
    )
    results: list[SessionSeedResult] = []
    for seed in seeds:
        try:
            result = run_session_seed(seed, config)
        except (ValueError, AgentError) as exc:
            die(str(exc))
        results.append(result)
        if not result.ok:
            _report_failure(result, config, out)
    failing = sum(not r.ok for r in results)
    checks = [*SESSION_CHECKS, *config.checks]
    if not config.check_determinism:
        checks.remove("deterministic")
    if config.repeat > 1:
        table = pass_k(results, checks)
        click.echo(f"{'check':<28} {'held':>12} {'pass^' + str(config.repeat):>8}")
        for check, row in table.items():
            held = f"{row['held']}/{row['runs']}"
            click.echo(f"{check:<28} {held:>12} {row['pass_k']:>8.2f}")
    turns = sum(len(r.session.turns) for r in results if r.session is not None)
    click.echo(
        f"{len(results)} sessions ({turns} user turns in the last repeat of each), "
        f"{failing} failing seed(s)"
    )
    return 0 if failing == 0 else 1


def _report_failure(result: SessionSeedResult, config: SessionFuzzConfig, out: str) -> None:
    seed = result.seed
    failures = next(f for f in result.repeats if f)
    held = sum(1 for f in result.repeats if not f)
    of = f" (held in {held} of {len(result.repeats)} repeats)" if len(result.repeats) > 1 else ""
    click.echo(scrub_text(f"seed {seed} FAILED{of}: {failures[0]}"))
    for extra in failures[1:]:
        click.echo(scrub_text(f"  also {extra}"))
    os.makedirs(out, exist_ok=True)
    trace = os.path.join(out, f"session-{seed}.jsonl")
    world = result.world
    assert world is not None
    session, _ = check_session(world, config, trace)  # the failing session's trace, kept
    click.echo(f"  trace: {trace}")
    if not config.shrink:
        return
    shrunk_trace = os.path.join(out, f"session-{seed}.shrunk.jsonl")
    shrunk = shrink_session(world, session, failures[0].check, config, shrunk_trace)
    again, still = check_session(shrunk, config, shrunk_trace)
    scenario = os.path.join(out, f"session-{seed}.scenario.yaml")
    save_session_scenario(shrunk, again.turns, scenario)
    fails = any(f.check == failures[0].check for f in still)
    click.echo(
        f"  shrunk: {len(session.turns)} -> {len(again.turns)} user turns, "
        f"{sum(len(s) for s in session.scripts)} -> {sum(len(s) for s in again.scripts)} "
        f"model replies{'' if fails else ' (the shrunk session no longer fails)'}"
    )
    click.echo(f"  scenario: {scenario}; trace: {shrunk_trace}")
    checks = "".join(f" --check {c}" for c in config.checks)
    click.echo(f"  run it: loopctl-sim session {scenario} --agent {config.agent}{checks}")


@click.command()
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("--agent", required=True, metavar="MODULE:FACTORY", help="The agent to run.")
@click.option(
    "--trace",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the session's trace here (default: SCENARIO with .jsonl).",
)
@check_option("A check of your own, check(session, records), on the whole session. Repeatable.")
@click.option(
    "--resume",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    metavar="TRACE",
    help="Finish the session in TRACE (killed in its middle) with the agent's own model.",
)
@click.option("--user", default=None, metavar="MODULE:MAKE_USER", help="With --resume: the user.")
@click.option("--seed", type=int, default=0, show_default=True, help="With --user: its seed.")
@click.option("--user-turns", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def session(
    scenario: str | None,
    agent: str,
    trace: str | None,
    checks: tuple[str, ...],
    resume: str | None,
    user: str | None,
    seed: int,
    user_turns: int,
    as_json: bool,
) -> None:
    """Run a session SCENARIO with your agent, or --resume a session's TRACE."""
    cwd = os.getcwd()
    if resume is not None:
        sim_user: SimUser
        if scenario is not None and user is not None:
            raise click.UsageError("the user's turns come from SCENARIO or --user, not both")
        try:
            if scenario is not None:
                sim_user = load_session_scenario(scenario, cwd=cwd).user
            elif user is not None:
                sim_user = load_user(user, cwd)(seed, user_turns)
            else:
                sim_user = ExploringUser(seed, turns=user_turns)
            done = resume_session(resume, agent, sim_user, cwd=cwd)
        except (SessionScenarioError, ValueError, AgentError, ResumeError, TraceFormatError) as exc:
            die(str(exc))
        if as_json:
            outcomes = [r.outcome.kind for r in done.rest.results]
            finished = done.finished.result if done.finished is not None else None
            emit_json(
                {
                    "trace": done.trace,
                    "finished": finished.outcome.kind if finished is not None else None,
                    "turns_before": done.turns_before,
                    "outcomes": outcomes,
                }
            )
        else:
            click.echo(done.summary())
        last = done.rest.results[-1] if done.rest.results else None
        if last is None and done.finished is not None:
            last = done.finished.result
        sys.exit(0 if last is None or last.outcome.kind == "completed" else 1)
    if scenario is None:
        raise click.UsageError("give a session SCENARIO to run, or --resume TRACE")
    try:
        world = load_session_scenario(scenario, cwd=cwd)
    except SessionScenarioError as exc:
        die(str(exc))
    world.agent = agent  # the command line's agent, never the file's on its own
    config = SessionFuzzConfig(agent=agent, checks=checks, cwd=cwd)
    load_checks(checks, cwd)
    out = trace or os.path.splitext(scenario)[0] + ".jsonl"
    try:
        ran, failures = check_session(world, config, out)
    except AgentError as exc:
        die(str(exc))
    outcomes = [getattr(r.outcome, "kind", r.outcome) for r in ran.runs]
    if as_json:
        emit_json(
            {
                "trace": out,
                "turns": [t.to_json() for t in ran.turns],
                "outcomes": outcomes,
                "failures": [str(f) for f in failures],
            }
        )
    else:
        click.echo(f"{ran.summary()}; trace {out}")
        for failure in failures:
            click.echo(scrub_text(f"FAILED {failure}"))
    sys.exit(1 if failures else 0)
