"""Simulation: scripted worlds (model, tools, faults), scenario files, the simulators of a world
(``simulate``: the bare brain; ``simulate_driver``: the real ``BareLoop``), the fault layers
around a real ``BareLoop``, and the user's own agent under faults (``run_agent``). It imports
``loopctl_sim.trace`` and ``loopctl``, nothing above it; its modules import each other's
modules, never this package (a cycle).
"""

from loopctl_sim.sim.agent import AgentError, agent_from_pyproject, build_agent, load_agent
from loopctl_sim.sim.agent_run import AgentRun, AgentRunError, AgentWorld, live_tools, run_agent
from loopctl_sim.sim.body import Crash, configs_for, no_sleep, stub_tools
from loopctl_sim.sim.driver import simulate_driver, simulate_driver_async
from loopctl_sim.sim.faults import Fault, FaultKind, FaultPlan
from loopctl_sim.sim.layers import FaultyClient, RunFaults, ScriptSource, ToolFaults
from loopctl_sim.sim.machine import SimResult, SimulationError, simulate
from loopctl_sim.sim.scenario import Scenario, ScenarioError, load_scenario
from loopctl_sim.sim.world import ModelScript, World

__all__ = [
    "AgentError",
    "AgentRun",
    "AgentRunError",
    "AgentWorld",
    "Crash",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "FaultyClient",
    "ModelScript",
    "RunFaults",
    "Scenario",
    "ScenarioError",
    "ScriptSource",
    "SimResult",
    "SimulationError",
    "ToolFaults",
    "World",
    "agent_from_pyproject",
    "build_agent",
    "configs_for",
    "live_tools",
    "load_agent",
    "load_scenario",
    "no_sleep",
    "run_agent",
    "simulate",
    "simulate_driver",
    "simulate_driver_async",
    "stub_tools",
]
