"""One exception tree per package: ``LoopctlError`` for loopctl, ``SimError`` (itself a
``LoopctlError``) for loopctl_sim, each drawn in its ``errors`` module's docstring.

The classes are found by walking every module of both packages and reading what it defines, so a
public exception added anywhere is checked without editing this file: it must sit under its
package's root, and the drawing must name it under its real parent, with any second base it
keeps. ``BaseException``s (control flow) and warnings are outside the trees; the docstring names
them too.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

import loopctl
import loopctl.errors
import loopctl_sim
import loopctl_sim.errors
from loopctl import LoopctlError, ToolError, tool
from loopctl.errors import MissingApiKeyError, ToolArgumentsError
from loopctl.providers import OpenAIClient
from loopctl.testing import NetworkBlockedError, block_network
from loopctl_sim import ScenarioError, SimError, TraceFormatError, load_scenario, read_trace
from loopctl_sim.sim import SimulationError


def _modules(package: ModuleType) -> list[ModuleType]:
    names = [m.name for m in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")]
    return [package, *(importlib.import_module(name) for name in sorted(names))]


def _public_exceptions(package: ModuleType) -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of ``package`` under a name without a leading
    ``_``, by ``module.Name`` of its definition (a module's ``__all__`` is not needed: modules
    inside a package keep none)."""
    found: dict[str, type[BaseException]] = {}
    for module in _modules(package):
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


@dataclass(frozen=True)
class Node:
    name: str
    parent: str | None
    extra_base: str | None  # the second base drawn in parentheses, e.g. ``(ValueError)``


_NODE = re.compile(r"^(?P<indent>.*?)\+-- (?P<name>\w+)(?:\s+\((?P<extra>[^)]*)\))?")


def _drawn_tree(doc: str) -> dict[str, Node]:
    """The nodes of the ``+--`` drawing in ``doc``, each with its drawn parent."""
    block = doc.split("::\n", 1)[1]
    lines = [line for line in block.split("\n\n", 1)[0].splitlines() if line.strip()]
    root = lines[0].split()[0]
    nodes = {root: Node(root, None, None)}
    stack: list[tuple[int, str]] = [(-1, root)]
    for line in lines[1:]:
        match = _NODE.match(line)
        if match is None:  # a description's continuation line
            continue
        depth = len(match["indent"])
        while stack[-1][0] >= depth:
            stack.pop()
        extra = match["extra"].split()[-1] if match["extra"] else None
        nodes[match["name"]] = Node(match["name"], stack[-1][1], extra)
        stack.append((depth, match["name"]))
    return nodes


@dataclass(frozen=True)
class Tree:
    package: ModuleType
    errors: ModuleType
    root: type[Exception]


TREES = [
    Tree(loopctl, loopctl.errors, LoopctlError),
    Tree(loopctl_sim, loopctl_sim.errors, SimError),
]

CASES = [
    pytest.param(tree, cls, id=qualified)
    for tree in TREES
    for qualified, cls in sorted(_public_exceptions(tree.package).items())
]


def _raised(cls: type[BaseException]) -> bool:
    """A class of the tree: an ``Exception`` that is not a warning."""
    return issubclass(cls, Exception) and not issubclass(cls, Warning)


def test_the_walk_finds_both_trees() -> None:
    classes = {case.values[1] for case in CASES}
    expected = {LoopctlError, SimError, SimulationError, MissingApiKeyError, TraceFormatError}
    assert expected <= classes
    assert len(classes) > 40


def test_one_root_for_the_project() -> None:
    assert issubclass(SimError, LoopctlError)
    assert loopctl.LoopctlError is loopctl.errors.LoopctlError is LoopctlError
    assert loopctl_sim.SimError is loopctl_sim.errors.SimError is SimError


@pytest.mark.parametrize(("tree", "cls"), CASES)
def test_every_public_exception_is_in_its_tree(tree: Tree, cls: type[BaseException]) -> None:
    doc = tree.errors.__doc__
    assert doc is not None
    if not _raised(cls):
        # control flow (a BaseException) or a warning: outside the tree, named in the docstring
        assert not issubclass(cls, LoopctlError)
        assert re.search(rf"``{cls.__name__}``", doc), f"{cls.__name__} is not in the docstring"
        return
    assert issubclass(cls, tree.root)
    drawn = _drawn_tree(doc)
    assert cls.__name__ in drawn, f"{cls.__name__} is not drawn in {tree.errors.__name__}"
    node = drawn[cls.__name__]
    # its drawn parent is the nearest drawn class it really derives from
    nearest = next((c.__name__ for c in cls.__mro__[1:] if c.__name__ in drawn), None)
    assert node.parent == nearest
    # a second base outside the tree is drawn, and only a real one is
    others = {
        b.__name__ for b in cls.__bases__ if not issubclass(b, LoopctlError) and b is not Exception
    }
    assert others == ({node.extra_base} if node.extra_base else set())


@pytest.mark.parametrize("tree", TREES, ids=lambda t: t.errors.__name__)
def test_the_drawing_names_no_class_that_is_not_there(tree: Tree) -> None:
    assert tree.errors.__doc__ is not None
    drawn = _drawn_tree(tree.errors.__doc__)
    real = {cls.__name__ for cls in _public_exceptions(tree.package).values()} | {"LoopctlError"}
    assert set(drawn) - real == set()


def test_loopctl_errors_imports_the_whole_loopctl_tree() -> None:
    exported = {getattr(loopctl.errors, name) for name in loopctl.errors.__all__}
    tree = {cls for cls in _public_exceptions(loopctl).values() if _raised(cls)}
    assert tree <= exported


# --- as a user meets them -------------------------------------------------------------------


def test_a_missing_key_is_a_loopctl_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LoopctlError) as caught:
        OpenAIClient("gpt-4o-mini")
    assert isinstance(caught.value, MissingApiKeyError)
    assert "OPENAI_API_KEY" in str(caught.value)


def test_bad_tool_arguments_are_still_a_value_error() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    with pytest.raises(ValueError, match="add") as caught:
        add.parse_arguments({"a": "not a number"})
    assert isinstance(caught.value, ToolArgumentsError)
    assert isinstance(caught.value, LoopctlError)
    assert not isinstance(caught.value, ToolError)


def test_the_network_guard_is_still_a_runtime_error() -> None:
    with block_network(), pytest.raises(RuntimeError) as caught:
        socket.create_connection(("192.0.2.1", 80), timeout=1)
    assert isinstance(caught.value, NetworkBlockedError)
    assert isinstance(caught.value, LoopctlError)
    assert caught.value.where == "192.0.2.1:80"


def test_an_unreadable_trace_is_a_sim_error_and_a_loopctl_error(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    trace.write_text("this is not a trace\n", encoding="utf-8")
    with pytest.raises(SimError) as caught:
        read_trace(trace)
    assert isinstance(caught.value, TraceFormatError)
    assert isinstance(caught.value, LoopctlError)
    assert str(caught.value).startswith(f"{trace}:1:")


def test_a_bad_scenario_is_a_value_error_and_a_sim_error(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("model: [\n", encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        load_scenario(scenario)
    assert isinstance(caught.value, ScenarioError)
    assert isinstance(caught.value, SimError)
    assert "bad.yaml" in str(caught.value)
