"""The case generator for the user's own agent: a seed becomes a scenario naming the agent, its
model the exploring one (seeded by the same seed), its faults a swarm drawn as for the built-in
world. What it needs of the agent (tool names, context window) is read once per process from a
loop the factory builds (``AgentProfile``), never guessed. ``FuzzConfig.exempt`` tools are never
faulted and the ``FuzzConfig.tools`` mode becomes each tool's ``mode``, so the saved scenario
runs the tools as the campaign did. The order of draws is part of the campaign's output.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from loopctl.testing import ExploringClient
from loopctl_sim.fuzz.case import DEFAULT_CONFIG, FuzzCase, FuzzConfig, draw_fault, make_case
from loopctl_sim.sim.agent import build_agent, load_agent
from loopctl_sim.sim.agent_run import tool_modes
from loopctl_sim.sim.scenario import ExploreScenario, Scenario, ToolScenario

#: What a run asks the agent when the campaign gives no ``inputs``.
DEFAULT_INPUTS: Final = (
    "Please help me with my request; use your tools where they help.",
    "I have a problem, can you look into it?",
    "Do what you can with the tools you have, then tell me what you found.",
)


@dataclass(frozen=True)
class AgentProfile:
    """What the case generator knows of an agent: its tools, in order, and its window."""

    tools: tuple[str, ...]
    context_window: int
    #: the exceptions each tool declares (``@tool(raises=...)``), by name
    raises: Mapping[str, tuple[type[BaseException], ...]]


@functools.cache
def agent_profile(spec: str, cwd: str | None = None) -> AgentProfile:
    """The agent's tools, window and raises, from one loop its factory builds (per process)."""
    loop = build_agent(load_agent(spec, cwd=cwd), client=ExploringClient())
    raises = {t.name: tuple(getattr(t, "raises", ())) for t in loop.registry}
    return AgentProfile(loop.registry.names(), loop.policy().context_window, raises)


def _tool_entries(profile: AgentProfile, config: FuzzConfig) -> dict[str, ToolScenario]:
    modes = tool_modes(config.tools, profile.tools)
    exempt = set(config.exempt)
    unknown = sorted(exempt - set(profile.tools))
    if unknown:
        raise ValueError(
            f"exempt: unknown tool(s) {', '.join(unknown)} (the agent has: "
            f"{', '.join(profile.tools) or 'none'})"
        )
    entries: dict[str, ToolScenario] = {}
    for name in profile.tools:
        mode = modes(name)
        if mode != "live" or name in exempt:
            entries[name] = ToolScenario(mode=mode, faults=name not in exempt)
    return entries


def make_agent_case(seed: int, config: FuzzConfig) -> FuzzCase:
    """The case ``seed`` determines for ``config.agent``."""
    assert config.agent is not None
    profile = agent_profile(config.agent, config.cwd)
    rng = random.Random(seed)
    turns = max(2, rng.randint(config.turns // 2, config.turns + config.turns // 2))
    inputs = config.inputs or DEFAULT_INPUTS
    text = inputs[rng.randrange(len(inputs))]
    faultable = [t for t in profile.tools if t not in config.exempt]
    enabled = tuple(k for k in config.faults if rng.random() < 0.5)  # swarm testing
    faults = []
    # the exploring model answers about halfway to its turn limit, on average: faults are
    # placed where a run of that length reaches
    reach = max(2, turns // 2)
    if enabled:
        for i in range(rng.randint(1, 5)):
            kind = rng.choice(enabled)
            faults.append(draw_fault(rng, kind, reach, faultable, i, profile.context_window))
    scenario = Scenario(
        name=f"fuzz-{seed}",
        description=f"fuzz seed {seed} of {config.agent}; enabled fault kinds: "
        f"{', '.join(enabled) or 'none'}",
        agent=config.agent,
        input=text,
        tools=_tool_entries(profile, config),
        explore=ExploreScenario(seed=seed, turns=turns),
        recorded=list(config.recorded),
        faults=faults,
    )
    return FuzzCase(seed=seed, scenario=scenario, crash_at=rng.random(), enabled=enabled)


def case_for(seed: int, config: FuzzConfig = DEFAULT_CONFIG) -> FuzzCase:
    """The case of ``seed``: of the campaign's agent if it names one, else the built-in world."""
    return make_agent_case(seed, config) if config.agent else make_case(seed, config)
