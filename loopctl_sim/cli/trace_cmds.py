"""``loopctl-sim show``, ``diff`` and ``schema``: reading traces without replaying them.

``show`` exits 0 or 2; ``diff`` 0 when the traces hold the same records, 1 when they differ, 2
when one cannot be read; ``schema`` 0. Output goes through ``loopctl_sim.view.term``'s console:
colour on a terminal only (never with ``NO_COLOR``), wrapped to the terminal's width.
"""

from __future__ import annotations

import sys

import click

from loopctl_sim.cli.common import die, emit_json
from loopctl_sim.trace import TraceFormatError, trace_json_schema
from loopctl_sim.view import (
    ShowFilter,
    compare_traces,
    make_console,
    parse_turns,
    print_comparison,
    print_timeline,
)


def _kinds(values: tuple[str, ...]) -> frozenset[str]:
    return frozenset(k.strip() for v in values for k in v.split(",") if k.strip())


@click.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("--full", is_flag=True, help="Whole texts (messages, arguments, results), uncut.")
@click.option(
    "--turn",
    "turns",
    default=None,
    metavar="N|A-B",
    help="Only turn N, or turns A to B (a feed belongs to the turn of the step before it).",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    metavar="KIND[,KIND]",
    help="Only records of these kinds: a type (step, feed, io, header, end), a lane (run, brain, "
    "model, tools, compaction, events), a record's own kind (call_tools, tool_results, retry, "
    "tool_result, ...) or 'error'. Naming an io kind also shows the io records that repeat a "
    "brain record (model_request, model_reply, tool_call, tool_result).",
)
def show(trace: str, full: bool, turns: str | None, kinds: tuple[str, ...]) -> None:
    """Print a readable timeline of TRACE."""
    try:
        span = None if turns is None else parse_turns(turns)
    except ValueError:
        die(f"--turn: expected N or A-B, got {turns!r}")
    try:
        print_timeline(make_console(), trace, ShowFilter(span, _kinds(kinds), full))
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
    """Show where traces A and B first differ, how many records differ, and both outcomes
    (times and durations ignored)."""
    try:
        found = compare_traces(a, b, ignore_io=ignore_io, brain_only=brain_only)
    except TraceFormatError as exc:
        die(str(exc))
    if as_json:
        emit_json(found.to_json())
    else:
        print_comparison(make_console(), found)
    sys.exit(0 if found.same else 1)


@click.command()
def schema() -> None:
    """Print the JSON Schema of a trace record (one line of a trace)."""
    emit_json(trace_json_schema())
