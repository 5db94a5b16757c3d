"""Shared helpers for the loopctl_sim tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loopctl import Message, ToolCall
from loopctl_sim.sim.faults import Fault
from loopctl_sim.sim.world import ModelScript, World

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "examples" / "scenarios"
TRACES = ROOT / "tests" / "traces"
CREATED = "2026-01-01T00:00:00+00:00"


def add(args: dict[str, Any]) -> str:
    return str(args["a"] + args["b"])


def adding_world(*faults: Fault, **kwargs: Any) -> World:
    """Two add calls, then a final answer."""
    replies = [
        Message.assistant(
            "Let me add.", [ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})]
        ),
        Message.assistant("", [ToolCall(id="c2", name="add", arguments={"a": 5, "b": 10})]),
        Message.assistant("15"),
    ]
    return World(
        input="What is 2 + 3 + 10?",
        model=ModelScript(replies),
        tools={"add": add},
        faults=faults,
        name="adding",
        **kwargs,
    )


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
