"""loopctl_sim's public surface, pinned (as httpx's ``test_exported_members``).

Everything a user imports from ``loopctl_sim`` is listed here; a name added to or dropped from
the package shows up as a failure of this test, so the surface changes only on purpose. Each
subpackage's own ``__all__`` must resolve too.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

import loopctl_sim

PUBLIC = [
    "AgentError",
    "BrainMachine",
    "Divergence",
    "DriverMachine",
    "Fault",
    "FaultPlan",
    "InvariantViolation",
    "ModelScript",
    "NeedsModel",
    "RecordingMachine",
    "ReplayResult",
    "ResumeError",
    "ResumePoint",
    "ResumeResult",
    "Scenario",
    "ScenarioError",
    "Scrubber",
    "SimError",
    "SimResult",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "TraceDiff",
    "TraceFormatError",
    "TraceReader",
    "TraceRecorder",
    "TraceWriter",
    "UpdateResult",
    "World",
    "apply_feed",
    "assert_machine",
    "build_agent",
    "check_machine",
    "check_resume",
    "check_trace",
    "decode_feed_args",
    "diff_traces",
    "encode_feed_args",
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
    "trace_json_schema",
    "update_trace",
    "write_test",
]

SUBPACKAGES = ["errors", "trace", "sim", "replay", "props", "view", "fuzz", "plugin", "cli"]


def test_the_public_names_are_exactly_these() -> None:
    assert sorted(loopctl_sim.__all__, key=str.casefold) == sorted(PUBLIC, key=str.casefold)


def test_every_public_member_is_exported() -> None:
    """No public name is importable from the package without being in ``__all__`` (the
    subpackages themselves aside)."""
    members = {
        name
        for name, value in vars(loopctl_sim).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert members - set(loopctl_sim.__all__) == set()


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(loopctl_sim, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        loopctl_sim.no_such_name  # noqa: B018


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_each_subpackage_says_what_it_owns_and_its_names_resolve(package: str) -> None:
    module = importlib.import_module(f"loopctl_sim.{package}")
    assert module.__doc__ and len(module.__doc__.split()) > 10
    for symbol in getattr(module, "__all__", ()):
        assert getattr(module, symbol, None) is not None, f"loopctl_sim.{package}.{symbol}"
