"""What the view tests share: the shipped traces, reading and writing a trace's lines, and
the CLI run the way a person's terminal would be (a width, colour off)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from loopctl_sim.cli import main

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests" / "traces"
DRIVER = TRACES / "driver"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_lines(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def invoke(args: list[str], columns: int | None = None, colour: bool = False) -> Result:
    """``loopctl-sim ARGS`` with ``COLUMNS`` set (None: unset, as when piped) and colour off
    (``NO_COLOR``) or forced on (``FORCE_COLOR``)."""
    env = {
        "COLUMNS": None if columns is None else str(columns),
        "NO_COLOR": None,
        "FORCE_COLOR": None,
    }
    env["FORCE_COLOR" if colour else "NO_COLOR"] = "1"
    return CliRunner().invoke(main, args, env=env)
