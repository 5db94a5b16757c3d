"""``loopctl-sim export-test``: a trace as a pytest regression test.

Exit 0 when the test was written, 2 when the trace cannot be read or the file cannot be written.
"""

from __future__ import annotations

import sys

import click

from loopctl_sim.replay import write_test
from loopctl_sim.sim import AgentError, agent_from_pyproject, load_agent
from loopctl_sim.trace import TraceFormatError

__all__ = ["export_test"]


@click.command("export-test")
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="The test file to write (default: test_<trace>.py next to the trace).",
)
@click.option(
    "--embed/--reference",
    default=True,
    show_default=True,
    help="Embed the trace in the test, or reference its path (relative to the test file).",
)
@click.option(
    "--invariants/--no-invariants",
    default=True,
    show_default=True,
    help="Also check the brain's invariants along the trace (invariants.check_trace).",
)
@click.option(
    "--agent",
    default=None,
    metavar="MODULE:FACTORY",
    help="Replay against your agent in the test (default: [tool.loopctl] agent in "
    "pyproject.toml; --no-agent for the brain alone).",
)
@click.option("--no-agent", is_flag=True, help="Replay against the brain alone.")
@click.option(
    "--tools",
    "tools_mode",
    default="live",
    show_default=True,
    help="With an agent: live, recorded or live:A,B (as replay --tools).",
)
def export_test(
    trace: str,
    output: str | None,
    embed: bool,
    invariants: bool,
    agent: str | None,
    no_agent: bool,
    tools_mode: str,
) -> None:
    """Write a pytest file that replays TRACE and asserts its recorded outcome."""
    try:
        if agent is None and not no_agent:
            agent = agent_from_pyproject()
        if agent is not None:
            load_agent(agent)  # a test that cannot import its agent is no test: say so now
        path = write_test(
            trace,
            output,
            embed=embed,
            invariants=invariants,
            agent=None if no_agent else agent,
            tools=tools_mode,
        )
    except AgentError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except TraceFormatError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(f"wrote {path}")
