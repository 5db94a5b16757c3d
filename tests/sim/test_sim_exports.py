"""loopctl_sim's public surface, pinned (as httpx's ``test_exported_members``).

Everything a user imports from ``loopctl_sim`` is listed here; a name added to or dropped from
the package shows up as a failure of this test, so the surface changes only on purpose. Each
subpackage's own ``__all__`` must resolve too.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil

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


def test_the_invariant_codes_are_one_enum_not_constants() -> None:
    """The problem codes are ``InvariantCode`` members; no ``*_CODE`` constant is public in
    any module of the harness, and every code is the string that reports carry."""
    from loopctl_sim.props import invariants as inv
    from loopctl_sim.props.invariants import problems

    exported: dict[str, list[str]] = {}
    for info in pkgutil.walk_packages(loopctl_sim.__path__, "loopctl_sim."):
        module = importlib.import_module(info.name)
        names = [n for n in getattr(module, "__all__", ()) if n.endswith("_CODE") or n == "CODES"]
        if names:
            exported[info.name] = names
    assert exported == {}
    assert not [n for n in vars(problems) if n.endswith("_CODE")]
    read_back: str = "terminal-sticky"  # as a report or a saved failure holds it
    assert read_back == inv.InvariantCode.TERMINAL_STICKY
    assert inv.InvariantCode(read_back) is inv.InvariantCode.TERMINAL_STICKY
    assert f"{inv.InvariantCode.RUN_MESSAGES}: lost" == "run-messages: lost"
    assert json.dumps([inv.InvariantCode.LOOP]) == '["loop"]'
    for code in inv.InvariantCode:
        assert code.name == code.value.upper().replace("-", "_")  # named after the code
