"""What every ``loopctl-sim`` command shares: how it fails, how it prints, how it finds traces, the
agent and the checks.

Exit codes of every command: 0 success; 1 a divergence or a failing case; 2 an unreadable input
(the message names ``file:line`` or the field; never a traceback). ``die``, ``echo`` and
``emit_json`` print control characters as their escapes, so a crafted trace or file name cannot
drive the terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from loopctl.terminal import visible
from loopctl_sim.fuzz.user_checks import load_function
from loopctl_sim.sim import AgentError, agent_from_pyproject
from loopctl_sim.view.term import visible_json

_TRACES = ("*.jsonl", "*.jsonl.gz")


def die(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr, control characters made visible; exit ``code``."""
    click.echo(f"error: {visible(message)}", err=True)
    sys.exit(code)


def echo(text: str, err: bool = False) -> None:
    """``click.echo`` of ``text`` with its control characters made visible."""
    click.echo(visible(text), err=err)


def emit_json(data: Any) -> None:
    """``data`` as JSON, with the control characters JSON leaves raw (C1, bidi) escaped."""
    click.echo(visible_json(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)))


def expand_traces(args: tuple[str, ...]) -> list[str]:
    """Trace paths from the arguments: a directory stands for every ``*.jsonl`` and
    ``*.jsonl.gz`` under it; ``-`` is stdin (``loopctl_sim.trace.files``)."""
    paths: list[str] = []
    for arg in args:
        p = Path(arg)
        if p.is_dir():
            found = sorted(str(f) for pattern in _TRACES for f in p.rglob(pattern))
            if not found:
                die(f"{arg}: no *.jsonl or *.jsonl.gz trace in this directory")
            paths.extend(found)
        else:
            paths.append(arg)
    return paths


def agent_or_configured(agent: str | None) -> str | None:
    """``--agent`` when given, else the ``[tool.loopctl] agent`` of the nearest pyproject.toml
    (None when neither names one); a pyproject.toml that cannot be read ends the command with
    its one line (exit 2), control characters made visible."""
    if agent is not None:
        return agent
    try:
        return agent_from_pyproject()
    except AgentError as exc:
        die(str(exc))


def load_checks(specs: Sequence[str], cwd: str | None = None) -> None:
    """Import every ``--check`` now: one that cannot be loaded ends the command (exit 2)."""
    for spec in specs:
        try:
            load_function(spec, cwd)
        except ValueError as exc:
            die(str(exc))
