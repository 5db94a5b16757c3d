"""loopctl_sim: record, replay and simulate loopctl runs.

- ``trace``: the trace format (JSON Lines, v1), its writer and streaming reader.
- ``feeds``: the feed codec (a feed's arguments as data, and back onto a machine).
- ``record``: ``TraceRecorder`` (a driver observer) and ``RecordingMachine`` (a bare brain).
- ``replay``: machine-level replay with divergence reports.
- ``world``, ``scenario``, ``sim``: scripted worlds with faults, YAML scenarios, the simulator.
- ``invariants``: the engine's invariants as pure checkers (also along a recorded trace).
- ``stateful``, ``driver_stateful``: hypothesis state machines over the brain and the driver
  (they import hypothesis: ``pip install 'loopctl[sim]'``; not imported here).
- ``fuzz``, ``shrink``: seeded fault-injection campaigns and delta debugging of a failure.
- ``pytest_plugin``: fixtures and a marker for users' own agents (a ``pytest11`` entry point).
- ``cli``: the ``loopctl-sim`` command.
"""

from loopctl_sim.props.invariants import (
    InvariantViolation,
    assert_machine,
    check_machine,
    check_resume,
    check_trace,
)
from loopctl_sim.replay.machine import Divergence, ReplayResult, replay_trace
from loopctl_sim.sim.machine import SimError, SimResult, simulate
from loopctl_sim.sim.scenario import Scenario, ScenarioError, load_scenario
from loopctl_sim.sim.world import Fault, FaultPlan, ModelScript, World
from loopctl_sim.trace.feeds import apply_feed, decode_feed_args, encode_feed_args
from loopctl_sim.trace.recorder import RecordingMachine, TraceRecorder
from loopctl_sim.trace.records import (
    TRACE_FORMAT,
    TRACE_VERSION,
    TraceFormatError,
    TraceReader,
    TraceWriter,
    read_trace,
    trace_json_schema,
)

__all__ = [
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "Divergence",
    "Fault",
    "FaultPlan",
    "InvariantViolation",
    "ModelScript",
    "RecordingMachine",
    "ReplayResult",
    "Scenario",
    "ScenarioError",
    "SimError",
    "SimResult",
    "TraceFormatError",
    "TraceReader",
    "TraceRecorder",
    "TraceWriter",
    "World",
    "apply_feed",
    "assert_machine",
    "check_machine",
    "check_resume",
    "check_trace",
    "decode_feed_args",
    "encode_feed_args",
    "load_scenario",
    "read_trace",
    "replay_trace",
    "simulate",
    "trace_json_schema",
]
