"""Fuzzing: seeded fault-injection campaigns over many worlds, their executors, and the shrinking
of a failing world to a minimal reproducer.

The top of the harness below the command line: it may import every lower layer (properties,
replay, simulation, traces) and ``loopctl``, never the command line or the pytest plugin.

==============  ==================================================================================
module          owns
==============  ==================================================================================
``case``        the case generator: a seed becomes a scenario with a swarm of random faults
``checker``     ``CheckingMachine``: a recording brain checked against the invariants at every
                step and feed
``checks``      the five checks run on one case (invariants, determinism, crash/restore,
                liveness with a heal run, nothing raises) and their ``Failure``
``campaign``    seeds and fault ranges, a failing seed's files and shrinking, the summary
``executors``   where chunks of seeds run: this process, or ``--workers N`` processes
``shrink``      delta debugging of a failing scenario
==============  ==================================================================================

Code above imports from this package (``from loopctl_sim.fuzz import run_campaign``); modules in
it import from each other's modules, never from the package, so the package imports in one order.
"""

from loopctl_sim.fuzz.campaign import (
    CampaignSummary,
    parse_faults,
    parse_seeds,
    run_campaign,
    run_seed,
)
from loopctl_sim.fuzz.case import ALL_FAULTS, FuzzCase, FuzzConfig, make_case, scenario_yaml
from loopctl_sim.fuzz.checks import CREATED, CaseResult, Failure, check_case
from loopctl_sim.fuzz.shrink import ShrinkResult, ddmin, shrink_scenario

__all__ = [
    "ALL_FAULTS",
    "CREATED",
    "CampaignSummary",
    "CaseResult",
    "Failure",
    "FuzzCase",
    "FuzzConfig",
    "ShrinkResult",
    "check_case",
    "ddmin",
    "make_case",
    "parse_faults",
    "parse_seeds",
    "run_campaign",
    "run_seed",
    "scenario_yaml",
    "shrink_scenario",
]
