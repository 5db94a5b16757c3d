"""``loopctl-sim mcp-faults``: a fault campaign at the MCP transport of the user's agent
(``loopctl_sim.fuzz.mcp_campaign``)."""

from __future__ import annotations

import click

from loopctl.tools.mcp import McpError
from loopctl_sim.cli.common import die
from loopctl_sim.fuzz.campaign import parse_seeds
from loopctl_sim.fuzz.mcp_campaign import DEFAULT_INPUT, mcp_fault_campaign
from loopctl_sim.sim.agent import AgentError


@click.command("mcp-faults")
@click.option("--agent", required=True, metavar="MODULE:FACTORY", help="The agent to fuzz.")
@click.option("--seeds", default="0:20", show_default=True, help="START:STOP, N or N,M,...")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="mcp-fault-failures",
    show_default=True,
    help="Where a failing seed's trace is kept.",
)
@click.option("--input", "question", default=DEFAULT_INPUT, help="What the agent is asked.")
@click.option("--turns", type=click.IntRange(min=1), default=8, show_default=True)
def mcp_faults(agent: str, seeds: str, out: str, question: str, turns: int) -> None:
    """Fault the agent's MCP servers, one fault a seed (the server dies, answers slowly,
    answers something malformed, changes its tool list mid-run); each run must end typed and
    its trace replay with the server absent. Exit 1 if a seed fails."""
    try:
        chosen = parse_seeds(seeds)
        found = mcp_fault_campaign(agent, chosen, out=out, input=question, turns=turns)
    except (AgentError, ValueError, McpError) as exc:
        die(str(exc))
    for each in found:
        verdict = "ok" if each.problem is None else "FAIL"
        fault = f"{each.fault.kind} at call {each.fault.at_call}"
        if each.fault.kind == "tools_change":
            fault += f" (drops {each.fault.drop})"
        click.echo(f"seed {each.seed}: {verdict}: server '{each.server}' {fault}; {each.outcome}")
        if each.problem is not None:
            click.echo(f"  {each.problem}\n  trace: {each.trace}")
    failing = sum(1 for each in found if each.problem is not None)
    click.echo(f"{len(found)} seeds, {failing} failing seed(s)")
    if failing:
        raise SystemExit(1)
