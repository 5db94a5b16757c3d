"""Fuzzing: seeded fault-injection campaigns over many worlds, their executors, and the shrinking
of a failing world to a minimal reproducer.

The top of the harness below the command line: it may import every lower layer (properties,
replay, simulation, traces) and ``loopctl``, never the command line or the pytest plugin.

==================  ==============================================================================
module              owns
==================  ==============================================================================
``case``            the case generator: a seed becomes a scenario with a swarm of random faults
``agent_case``      the same for the user's agent: a scenario naming it, the exploring model
``checker``         ``CheckingMachine``: a recording brain checked at every step and feed
``driver_checker``  ``DriverChecker``: the same checks from outside a real ``BareLoop``
``checks``          the checks of one case of the built-in world (invariants, determinism,
                    crash/restore, liveness with a heal run, nothing raises) and their ``Failure``
``agent_checks``    the checks of one case of an agent (the same, plus nothing escapes the
                    run and no tool call runs twice)
``user_checks``     the user's own checks (``module:function``)
``campaign``        seeds and fault ranges, a failing seed's files and shrinking, a chunk's
                    job, merging chunks into the summary in seed order
``summary``         ``CampaignSummary``: a campaign (or a chunk) in counts, and its failures
``state``           the state file of a resumable campaign (``--state``): the chunks done
``executors``       where chunks of seeds run: this process, or ``--workers N`` processes
``cluster``         chunks on a Dask cluster (``--cluster``; the optional ``loopctl[dask]``)
``shrink``          delta debugging of a failing scenario
==================  ==============================================================================

Code above imports from this package (``from loopctl_sim.fuzz import run_campaign``); modules in
it import from each other's modules, never from the package, so the package imports in one order.
"""

from loopctl_sim.fuzz.agent_checks import scripted
from loopctl_sim.fuzz.campaign import (
    check,
    check_scenario,
    parse_faults,
    parse_seeds,
    run_campaign,
)
from loopctl_sim.fuzz.case import FuzzConfig, make_case
from loopctl_sim.fuzz.checks import CaseResult, check_case
from loopctl_sim.fuzz.cluster import DaskCluster, parse_cluster
from loopctl_sim.fuzz.driver_checker import DriverChecker
from loopctl_sim.fuzz.shrink import ddmin, shrink_scenario
from loopctl_sim.fuzz.summary import CampaignSummary

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
