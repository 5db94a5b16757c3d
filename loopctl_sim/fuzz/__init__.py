"""Fuzzing: seeded fault-injection campaigns over many worlds (the built-in one or the user's
agent), the checks of one case, their executors (this process, worker processes, a Dask
cluster), resumable state, and the shrinking of a failing world to a minimal reproducer.

The top of the harness below the command line: it may import every lower layer (properties,
replay, simulation, traces) and ``loopctl``, never the command line or the pytest plugin.
Code above imports from this package (``from loopctl_sim.fuzz import run_campaign``); modules in
it import from each other's modules, never from the package, so the package imports in one order.
"""

from loopctl_sim.fuzz.agent_checks import scripted
from loopctl_sim.fuzz.campaign import check, check_scenario, parse_faults, parse_seeds, run_campaign
from loopctl_sim.fuzz.case import FuzzConfig, make_case
from loopctl_sim.fuzz.checker import DriverChecker
from loopctl_sim.fuzz.checks import CaseResult, check_case
from loopctl_sim.fuzz.cluster import DaskCluster, parse_cluster
from loopctl_sim.fuzz.shrink import ddmin, shrink_scenario
from loopctl_sim.fuzz.state import CampaignSummary

__all__ = [
    "CampaignSummary",
    "CaseResult",
    "DaskCluster",
    "DriverChecker",
    "FuzzConfig",
    "check",
    "check_case",
    "check_scenario",
    "ddmin",
    "make_case",
    "parse_cluster",
    "parse_faults",
    "parse_seeds",
    "run_campaign",
    "scripted",
    "shrink_scenario",
]
