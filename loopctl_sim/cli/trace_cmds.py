"""``loopctl-sim show``, ``diff`` and ``schema``: reading traces without replaying them.

``show`` exits 0 or 2; ``diff`` 0 when the traces hold the same records, 1 when they differ, 2
when one cannot be read; ``schema`` 0.
"""

from __future__ import annotations

import sys

import click

from loopctl_sim.cli.common import die, emit_json
from loopctl_sim.replay import diff_traces
from loopctl_sim.trace import TraceFormatError, trace_json_schema
from loopctl_sim.view.show import timeline

__all__ = ["diff", "schema", "show"]


@click.command()
@click.argument("trace", type=click.Path(dir_okay=False))
def show(trace: str) -> None:
    """Print a readable timeline of TRACE."""
    try:
        for line in timeline(trace):
            click.echo(line)
    except TraceFormatError as exc:
        die(str(exc))


@click.command()
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.option("--ignore-io", is_flag=True, help="Compare only headers, steps, feeds and ends.")
@click.option(
    "--brain-only",
    is_flag=True,
    help="Compare only steps, feeds and ends (e.g. a machine-level with a driver-level trace).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def diff(a: str, b: str, ignore_io: bool, brain_only: bool, as_json: bool) -> None:
    """Show the first divergence between traces A and B (times and durations ignored)."""
    try:
        found = diff_traces(a, b, ignore_io=ignore_io, brain_only=brain_only)
    except TraceFormatError as exc:
        die(str(exc))
    if as_json:
        emit_json(
            {"same": found is None, "divergence": None if found is None else found.to_json()}
        )
    elif found is None:
        click.echo(f"same: {a} and {b} hold the same records")
    else:
        click.echo(found.report())
    sys.exit(0 if found is None else 1)


@click.command()
def schema() -> None:
    """Print the JSON Schema of a trace record (one line of a trace)."""
    emit_json(trace_json_schema())
