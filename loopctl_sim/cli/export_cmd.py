"""``loopctl-sim export-test``: a trace as a pytest regression test.

A fuzz failure's trace with its scenario beside it (``seed-N.min.jsonl``, ``seed-N.min.yaml``)
becomes a test that runs the scenario with the campaign's checks (named again here as ``run
--checks`` takes them): red while the bug is there, green once it is fixed (``--replay`` writes
the replay test instead). The agent is named on the command line (or ``[tool.loopctl] agent``),
never taken from the scenario file.

Exit 0 when the test was written, 2 when the trace, the scenario, the agent or the checks cannot
be loaded, or the file cannot be written.
"""

from __future__ import annotations

import click

from loopctl_sim.cli.common import (
    agent_option,
    check_option,
    crash_at_option,
    deterministic_option,
    die,
    load_checks,
    pyproject_agent,
    tool_exceptions_option,
)
from loopctl_sim.replay.export import FuzzChecks, fuzz_scenario, write_test
from loopctl_sim.sim import (
    AgentError,
    ScenarioError,
    load_agent,
    load_scenario,
)
from loopctl_sim.trace import TraceFormatError


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
@agent_option(
    "Replay against your agent in the test (default: [tool.loopctl] agent in "
    "pyproject.toml; --no-agent for the brain alone)."
)
@click.option("--no-agent", is_flag=True, help="Replay against the brain alone.")
@click.option(
    "--tools",
    default="live",
    show_default=True,
    help="With an agent: live, recorded or live:A,B (as replay --tools).",
)
@click.option(
    "--replay",
    is_flag=True,
    help="For a fuzz failure too: a test that replays the trace, not one that runs its scenario.",
)
@click.option(
    "--scenario",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="A fuzz failure's scenario (default: the .yaml beside a fuzz trace).",
)
@check_option("A fuzz failure's test: a check of the campaign's (as fuzz --check). Repeatable.")
@deterministic_option(
    "A fuzz failure's test: the campaign's --deterministic or --nondeterministic."
)
@crash_at_option("A fuzz failure's test: where the crash check strikes (as run --crash-at).")
@tool_exceptions_option("A fuzz failure's test: the campaign's --no-tool-exceptions.")
@click.option(
    "--driver", is_flag=True, help="A fuzz failure's test of the built-in world at driver level."
)
def export_test(
    trace: str,
    output: str | None,
    embed: bool,
    invariants: bool,
    agent: str | None,
    no_agent: bool,
    tools: str,
    replay: bool,
    scenario: str | None,
    checks: tuple[str, ...],
    deterministic: bool | None,
    crash_at: float,
    tool_exceptions: bool,
    driver: bool,
) -> None:
    """Write a pytest file from TRACE: a test that replays it and asserts its recorded outcome,
    or, for a fuzz failure, one that fails until the failure is fixed."""
    try:
        named = agent
        if no_agent:
            agent = None
        elif agent is None:
            agent = pyproject_agent([trace], "the test replays it against the brain")
        found = None if replay else (scenario or fuzz_scenario(trace))
        if found is not None and named is None and load_scenario(found).agent is None:
            agent = None  # a built-in world's failure: pyproject's agent is not its
        if agent is not None:
            load_agent(agent)  # a test that cannot import its agent is no test: say so now
        load_checks(checks)  # nor one that cannot import its checks
        how = FuzzChecks(
            checks=checks,
            deterministic=deterministic,
            crash_at=crash_at,
            tool_exceptions=tool_exceptions,
            level="driver" if driver else "machine",
        )
        path = write_test(
            trace,
            output,
            embed=embed,
            invariants=invariants,
            agent=agent,
            tools=tools,
            scenario=found,
            checks=how,
        )
    except (AgentError, TraceFormatError, ScenarioError, ValueError) as exc:
        die(str(exc))
    except OSError as exc:
        die(f"{exc.filename or trace}: {exc.strerror or exc}")
    what = f"runs {found} with the campaign's checks" if found is not None else "replays the trace"
    click.echo(f"wrote {path} (it {what})")
