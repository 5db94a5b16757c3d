"""``loopctl-sim run``: run a scenario file (a scripted world) and check its expected outcome.

Exit 0 when the outcome is the one the scenario expects (or it expects none), 1 when it differs,
2 when the scenario cannot be loaded or the simulation itself fails.
"""

from __future__ import annotations

import sys

import click

from loopctl_sim.cli.common import die, emit_json
from loopctl_sim.sim import ScenarioError, SimError, load_scenario, simulate, simulate_driver

__all__ = ["run"]


@click.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the run's trace here.",
)
@click.option("--driver", is_flag=True, help="Run through BareLoop with a scripted client.")
@click.option("--created", default=None, help="Fix the header's creation time (reproducible).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def run(
    scenario: str, trace_path: str | None, driver: bool, created: str | None, as_json: bool
) -> None:
    """Run a SCENARIO (YAML world) and print its outcome; exit 1 if it differs from `expect`."""
    try:
        sc = load_scenario(scenario)
    except ScenarioError as exc:
        die(str(exc))
    try:
        if driver:
            result = simulate_driver(sc.world(), trace_path, created=created)
        else:
            result = simulate(sc.world(), trace_path, created=created)
    except SimError as exc:
        die(f"{scenario}: {exc}")
    outcome = result.outcome.kind
    ok = sc.expect is None or sc.expect == outcome
    if as_json:
        emit_json(
            {
                "scenario": sc.name,
                "outcome": result.outcome.model_dump(mode="json"),
                "expected": sc.expect,
                "ok": ok,
                "steps": result.steps,
                "model_requests": result.model_requests,
                "retries": result.retries,
                "tool_calls": result.tool_calls,
                "compactions": result.compactions,
                "crashes": result.crashes,
                "digest": result.digest,
                "trace": trace_path,
            }
        )
    else:
        click.echo(result.summary())
        if trace_path:
            click.echo(f"trace written to {trace_path}")
        if not ok:
            click.echo(f"unexpected outcome: {outcome} (the scenario expects {sc.expect})")
    sys.exit(0 if ok else 1)
