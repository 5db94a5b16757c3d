"""``ToolRegistry``: names, specs and lookup in registration order; duplicates rejected."""

from __future__ import annotations

import pytest

from loopctl.tools import Tool, ToolRegistry, tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool(name="mul")
def multiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


def negate(a: int) -> int:
    """Negate a number."""
    return -a


def test_names_specs_and_get_follow_registration_order() -> None:
    registry = ToolRegistry([multiply, add])
    assert registry.names() == ("mul", "add")
    assert [s.name for s in registry.specs()] == ["mul", "add"]
    assert registry.specs()[1] == add.spec
    assert registry.get("add") is add
    assert registry.get("multiply") is None
    assert "mul" in registry and "nope" not in registry
    assert len(registry) == 2
    assert list(registry) == [multiply, add]


def test_plain_functions_are_wrapped_with_tool_defaults() -> None:
    registry = ToolRegistry([negate])
    wrapped = registry.get("negate")
    assert isinstance(wrapped, Tool)
    assert wrapped.description == "Negate a number."
    assert wrapped.parallel_safe


def test_empty_registry() -> None:
    registry = ToolRegistry()
    assert (registry.names(), registry.specs(), len(registry)) == ((), (), 0)


def test_duplicate_names_are_rejected() -> None:
    other = tool(name="add")(negate)
    with pytest.raises(ValueError, match="duplicate tool name 'add'"):
        ToolRegistry([add, multiply, other])
