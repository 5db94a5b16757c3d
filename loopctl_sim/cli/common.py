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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click
from click.decorators import FC

from loopctl.terminal import visible
from loopctl_sim.fuzz.user_checks import load_function
from loopctl_sim.sim import AgentError, agent_from_pyproject
from loopctl_sim.trace import TraceReader
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


def pyproject_agent(traces: Sequence[str], then: str) -> str | None:
    """``agent_or_configured(None)``, but None when ``loopctl run``'s built-in agent recorded
    every trace (a note on stderr says so, and ``then``): the project's agent is not the one
    that ran them, so they are replayed against the brain (an agent named on purpose is used)."""
    agent = agent_or_configured(None)
    if agent is not None and all(map(_builtin, traces)):
        echo(f"note: recorded by loopctl run's built-in agent, not {agent}: {then}", err=True)
        return None
    return agent


def _builtin(trace: str) -> bool:
    try:
        for record in TraceReader(trace):  # the first header says so
            return bool(getattr(record, "metadata", {}).get("builtin"))
    except Exception:  # unreadable: the command itself says why
        return False
    return False


def load_checks(specs: Sequence[str], cwd: str | None = None) -> None:
    """Import every ``--check`` now: one that cannot be loaded ends the command (exit 2)."""
    for spec in specs:
        try:
            load_function(spec, cwd)
        except ValueError as exc:
            die(str(exc))


# --- options several commands take, each with its own help --------------------------------------


def agent_option(help: str) -> Callable[[FC], FC]:
    """``--agent MODULE:FACTORY`` (default: none named)."""
    return click.option("--agent", default=None, metavar="MODULE:FACTORY", help=help)


def check_option(help: str) -> Callable[[FC], FC]:
    """``--check MODULE:FUNCTION``, repeatable, into ``checks``."""
    return click.option("--check", "checks", multiple=True, metavar="MODULE:FUNCTION", help=help)


def deterministic_option(help: str) -> Callable[[FC], FC]:
    return click.option("--deterministic/--nondeterministic", default=None, help=help)


def crash_at_option(help: str) -> Callable[[FC], FC]:
    crash_at = click.FloatRange(min=0.0, max=1.0, max_open=True)
    return click.option("--crash-at", type=crash_at, default=0.5, show_default=True, help=help)


def tool_exceptions_option(help: str) -> Callable[[FC], FC]:
    flags = "--tool-exceptions/--no-tool-exceptions"
    return click.option(flags, default=True, show_default=True, help=help)
