"""The public surface, pinned (as httpx's ``test_exported_members``).

The top-level lists of ``loopctl`` and ``loopctl_sim`` are written out here, so the surface changes
only on purpose. Every name in every public package's ``__all__`` resolves, is listed once, and is
named somewhere in the docs (docs/*.md or the README): a public name nobody can read about is not
public. No ``*_CODE`` constant is public anywhere in the harness: problem codes are the members of
``InvariantCode``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pytest

import loopctl
import loopctl_sim

ROOT = Path(__file__).resolve().parents[1]

LOOPCTL = [
    "ApiClient",
    "ApiError",
    "BareLoop",
    "CallLLM",
    "CallTools",
    "Cancelled",
    "Compact",
    "CompactReason",
    "Completed",
    "Done",
    "Failed",
    "Feed",
    "Hooks",
    "LoopError",
    "LoopMachine",
    "LoopObserver",
    "LoopctlError",
    "MachinePolicy",
    "MachineStep",
    "MaxTurnsExceeded",
    "Message",
    "ProtocolError",
    "ProviderPart",
    "RunConfig",
    "RunResult",
    "SessionConfig",
    "TextPart",
    "ThinkingPart",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "tool",
]

LOOPCTL_SIM = [
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

#: The packages whose ``__all__`` is public, and so documented.
PACKAGES = [
    "loopctl",
    "loopctl.core",
    "loopctl.errors",
    "loopctl.driver",
    "loopctl.tools",
    "loopctl.providers",
    "loopctl.testing",
    "loopctl.otel",
    "loopctl_sim",
    "loopctl_sim.errors",
    "loopctl_sim.sim",
    "loopctl_sim.fuzz",
    "loopctl_sim.view",
    "loopctl_sim.plugin",
    "loopctl_sim.cli",
]

#: What users reach in a subpackage; a contract, not the whole list.
CONTRACT = {
    "loopctl.providers": [
        "OpenAIClient",
        "OpenAIResponsesClient",
        "AnthropicClient",
        "OllamaClient",
    ],
    "loopctl.testing": ["ScriptedClient", "FunctionClient", "ExploringClient", "block_network"],
    "loopctl.errors": ["LoopctlError", "ProtocolError", "ApiError", "ToolError", "McpError"],
    "loopctl.driver": ["MiddleOutCompactor", "SummarizingCompactor", "Reflector", "CancelSignal"],
    "loopctl_sim.errors": ["SimError"],
}


def _docs() -> str:
    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


@pytest.mark.parametrize(
    ("package", "names"), [(loopctl, LOOPCTL), (loopctl_sim, LOOPCTL_SIM)], ids=lambda p: str(p)
)
def test_the_top_level_names_are_exactly_these(package: object, names: list[str]) -> None:
    assert sorted(package.__all__, key=str.casefold) == sorted(names, key=str.casefold)  # type: ignore[attr-defined]


@pytest.mark.parametrize("package", [loopctl, loopctl_sim], ids=lambda p: p.__name__)
def test_no_public_member_is_left_out_of_all(package: object) -> None:
    """Nothing is importable from the top level without being in ``__all__`` (subpackages and
    ``__version__`` aside)."""
    members = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert members - set(package.__all__) == set()  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_name_resolves_once_and_is_documented(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(exported) == len(set(exported))
    for symbol in exported:
        assert getattr(module, symbol, None) is not None, f"{name}.{symbol}"
    docs = _docs()
    undocumented = [s for s in exported if not re.search(rf"\b{re.escape(s)}\b", docs)]
    assert undocumented == [], f"{name}: named in no page of docs/ nor the README"


_DOC_IMPORT = re.compile(
    r"^\s*from ((?:loopctl|loopctl_sim)[\w.]*) import (\([^)]*\)|[^\n]*)", re.MULTILINE
)


@pytest.mark.parametrize(
    "page", [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"], ids=lambda p: p.name
)
def test_every_import_in_the_docs_code_resolves(page: Path) -> None:
    """A ``from loopctl... import`` in a page's python blocks works as written, so the docs
    follow the surface when a name moves."""
    missing = []
    for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL):
        for match in _DOC_IMPORT.finditer(block):
            module = importlib.import_module(match[1])
            listed = match[2].split("#")[0].strip("() \n")
            for name in (n.split(" as ")[0].strip() for n in listed.split(",")):
                if name and not hasattr(module, name):
                    missing.append(f"from {match[1]} import {name}")
    assert missing == []


@pytest.mark.parametrize(("name", "symbols"), sorted(CONTRACT.items()))
def test_contract_names_are_public(name: str, symbols: list[str]) -> None:
    module = importlib.import_module(name)
    assert [s for s in symbols if s not in module.__all__] == []


def test_a_name_that_left_the_top_level_is_an_import_error_there_not_elsewhere() -> None:
    """``from loopctl import Start`` fails as Python says it; ``loopctl.core`` has it."""
    with pytest.raises(ImportError, match="Start"):
        exec("from loopctl import Start", {})
    from loopctl.core import Start

    assert Start is not None
    with pytest.raises(AttributeError, match="no_such_name"):
        loopctl_sim.no_such_name  # noqa: B018


@pytest.mark.parametrize(
    "package", ["errors", "trace", "sim", "replay", "props", "view", "fuzz", "plugin", "cli"]
)
def test_each_harness_subpackage_says_what_it_owns_and_its_names_resolve(package: str) -> None:
    module = importlib.import_module(f"loopctl_sim.{package}")
    assert module.__doc__ and len(module.__doc__.split()) > 10
    for symbol in getattr(module, "__all__", ()):
        assert getattr(module, symbol, None) is not None, f"loopctl_sim.{package}.{symbol}"


def test_the_invariant_codes_are_one_enum_not_constants() -> None:
    """The problem codes are ``InvariantCode`` members; no ``*_CODE`` constant is public in any
    module of the harness, and every code is the string that reports carry."""
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
