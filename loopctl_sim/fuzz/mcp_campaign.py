"""A fault campaign at the MCP transport of the user's agent: for each seed, one of its MCP servers
gets one fault (``loopctl_sim.sim.mcp_faults``: it dies, answers slowly or malformed, or changes
its tool list mid-run) while the agent runs against the seed's exploring model. The run must end
typed and its trace replay against the agent with the tools recorded and the server absent. A
failing seed's trace is kept under ``out``; the seed alone draws everything.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from loopctl.testing import ExploreConfig, ExploringClient
from loopctl.tools.mcp import McpServer, McpTool
from loopctl_sim.replay import replay_agent
from loopctl_sim.sim.agent import build_agent, load_agent
from loopctl_sim.sim.mcp_faults import FaultKind, McpFault, faulting
from loopctl_sim.trace import TraceRecorder

KINDS: Final[tuple[FaultKind, ...]] = ("die", "slow", "malformed", "tools_change")
#: What the agent is asked (the exploring model calls its tools whatever the question).
DEFAULT_INPUT: Final = "Please help me with my request; use your tools where they help."


@dataclass(frozen=True)
class McpSeed:
    """One seed of the campaign: the fault it drew, how the run ended, what went wrong."""

    seed: int
    server: str
    fault: McpFault
    outcome: str
    trace: Path
    problem: str | None = None


def _servers(factory: object) -> dict[str, McpServer]:
    """The agent's MCP servers, by name, from one loop its factory builds."""
    loop = build_agent(factory, client=ExploringClient())  # type: ignore[arg-type]
    servers: dict[str, McpServer] = {}
    for tool in loop.registry:
        if isinstance(tool, McpTool):
            servers.setdefault(tool.source.name, tool.source)
    return servers


def _draw(rng: random.Random, server: McpServer) -> McpFault:
    kind = rng.choice(KINDS)
    at_call = rng.randint(1, 3)
    names = [str(t.get("name")) for t in server.advertised()]
    # a slow answer beyond the server's timeout (it fires), else a late one within it
    delay = server.timeout + 1.0 if server.timeout is not None and server.timeout <= 5 else 0.2
    drop = rng.choice(names) if names else "-"
    return McpFault(kind, at_call=at_call, delay=delay, drop=drop)


def mcp_fault_campaign(
    agent: str,
    seeds: Iterable[int],
    *,
    out: str | os.PathLike[str],
    input: str = DEFAULT_INPUT,
    turns: int = 8,
) -> list[McpSeed]:
    """Run the campaign (see the module docstring); one ``McpSeed`` per seed, in order."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    factory = load_agent(agent)
    servers = _servers(factory)
    if not servers:
        raise ValueError(f"agent {agent!r} has no MCP server among its tools")
    done: list[McpSeed] = []
    for seed in seeds:
        rng = random.Random(seed)
        name = rng.choice(sorted(servers))
        fault = _draw(rng, servers[name])
        trace = folder / f"mcp-seed-{seed}.jsonl"
        for server in servers.values():
            server.close()  # opened again, under the fault, when the factory lists its tools
        outcome, problem = "raised", None
        with faulting({name: fault}), trace.open("w", encoding="utf-8") as f:
            recorder = TraceRecorder(f, metadata={"agent": agent, "mcp_fault": repr(fault)})
            client = ExploringClient(seed, ExploreConfig(turns=turns))
            try:
                loop = build_agent(factory, client=client, observers=[recorder])
                result = loop.run_sync(input)
                outcome = result.outcome.kind
            except Exception as exc:  # the finding: a fault at the transport escaped the run
                problem = f"the run raised {type(exc).__name__}: {exc}"
            finally:
                for server in servers.values():
                    server.close()
        if problem is None:
            replayed = replay_agent(trace, factory, tools="recorded")
            if not replayed.ok:
                problem = f"its trace does not replay: {replayed.summary()}"
        if problem is None:
            trace.unlink()  # only a finding's trace is kept
        done.append(McpSeed(seed, name, fault, outcome, trace, problem))
    return done
