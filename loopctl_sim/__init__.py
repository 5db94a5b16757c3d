"""loopctl_sim: record, replay and simulate loopctl runs.

One subpackage per job; each layer imports only the layers below it (an import-linter contract in
CI keeps it so), and all of them use ``loopctl`` through its public names only (another contract
and ``tests/test_public_imports.py`` keep that so):

=============  ===================================================================================
package        owns
=============  ===================================================================================
``cli``        the ``loopctl-sim`` command line, one module per command group
``plugin``     the pytest plugin (fixtures, the trace marker, recording)
``fuzz``       seeded fault-injection campaigns, their executors, shrinking a failure
``props``      the invariants (pure checkers), the hypothesis state machines over brain and driver
``view``       readable views of a trace (the timeline)
``replay``     machine- and driver-level replay, divergence reports, diff, export-test, the corpus
``sim``        scripted worlds with faults, scenario files, the machine- and driver-level simulators
``trace``      the trace format: records, schema, writer, reader, feeds, scrubbing, recorders
=============  ===================================================================================

The names below are what a user of the harness needs: record a trace (``TraceRecorder``), read,
replay, resume, diff and export it, the simulators, the invariant checkers, and the errors they
raise (``tests/test_exports.py`` pins the list). Everything else stays importable from its
subpackage (``loopctl_sim.trace``, ``loopctl_sim.replay``, ``loopctl_sim.sim``,
``loopctl_sim.props.invariants``, ...). The hypothesis state machines (``BrainMachine``,
``DriverMachine``) need ``pip install 'loopctl[sim]'``; they are imported only when asked for
(``from loopctl_sim import BrainMachine``).
"""

from loopctl_sim.errors import SimError
from loopctl_sim.props.invariants import (
    InvariantViolation,
    assert_machine,
    check_machine,
    check_trace,
)
from loopctl_sim.replay import (
    Divergence,
    ReplayResult,
    ResumeError,
    diff_traces,
    export_test,
    replay_agent,
    replay_driver,
    replay_trace,
    resume_point,
    resume_trace,
    update_trace,
)
from loopctl_sim.sim import (
    AgentError,
    Scenario,
    ScenarioError,
    SimResult,
    World,
    build_agent,
    load_agent,
    load_scenario,
    simulate,
    simulate_driver,
)
from loopctl_sim.trace import (
    Scrubber,
    TraceFormatError,
    TraceReader,
    TraceRecorder,
    read_trace,
    scrub_text,
)

__all__ = [
    "AgentError",
    "BrainMachine",
    "Divergence",
    "DriverMachine",
    "InvariantViolation",
    "ReplayResult",
    "ResumeError",
    "Scenario",
    "ScenarioError",
    "Scrubber",
    "SimError",
    "SimResult",
    "TraceFormatError",
    "TraceReader",
    "TraceRecorder",
    "World",
    "assert_machine",
    "build_agent",
    "check_machine",
    "check_trace",
    "diff_traces",
    "export_test",
    "load_agent",
    "load_scenario",
    "read_trace",
    "replay_agent",
    "replay_driver",
    "replay_trace",
    "resume_point",
    "resume_trace",
    "scrub_text",
    "simulate",
    "simulate_driver",
    "update_trace",
]

#: Public names imported only when asked for: they need hypothesis (``loopctl[sim]``).
_LAZY = {
    "BrainMachine": "loopctl_sim.props.brain_machine",
    "DriverMachine": "loopctl_sim.props.driver_machine",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'loopctl_sim' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
