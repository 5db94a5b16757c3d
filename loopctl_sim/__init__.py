"""loopctl_sim: record, replay and simulate loopctl runs.

One subpackage per job (``trace``, ``sim``, ``replay``, ``view``, ``props``, ``fuzz``,
``plugin``, ``cli``), each importing only the layers below it and ``loopctl`` through its public
names only (docs/architecture.md draws the layers; import-linter contracts keep them). The names
here are what a user of the harness needs (``tests/test_exports.py`` pins the list); everything
else stays importable from its subpackage. ``BrainMachine`` and ``DriverMachine`` need hypothesis
(``pip install 'loopctl[sim]'``), so they are imported only when asked for.
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
