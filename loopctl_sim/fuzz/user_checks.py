"""The user's own checks, like hypothesis invariants: ``--check mypkg.checks:no_budget_over_limit``.

A check is a function of one run's result (an ``AgentRun`` for an agent, a ``SimResult`` for the
built-in world) and its trace's records (the faulted run's and the heal run's), run after every
checked run; a failing check is a failing seed, shrunk like any other::

    def no_budget_over_limit(result, trace):
        refunds = [r for r in trace if r.type == "io" and r.kind == "tool_call"
                   and r.data["name"] == "refund"]
        assert sum(r.data["arguments"].get("amount", 0) for r in refunds) <= 1000

A check fails by raising or by returning ``False`` or a message; ``None`` and ``True`` pass.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from loopctl_sim.trace import read_record


def load_function(
    spec: str, cwd: str | None = None, *, what: str = "check", form: str = "module:function"
) -> Callable[..., Any]:
    """The function ``module:function`` names (``what`` says whose, for the error; ``form`` is
    the shape a bad spec is told to take), imported as the agent is (the current directory, or
    ``cwd``, first on ``sys.path``). Whatever is wrong is a ``ValueError`` that says so."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{what} {spec!r}: expected {form!r}")
    folder = os.fspath(Path(cwd if cwd is not None else os.getcwd()).resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ValueError(f"{what} {spec!r}: cannot import {module_name!r}: {exc}") from None
    for part in attribute.split("."):
        found = getattr(found, part, None)
    if not callable(found):
        raise ValueError(f"{what} {spec!r}: {attribute!r} is not a function of {module_name!r}")
    function: Callable[..., Any] = found
    return function


def run_user_checks(
    specs: Sequence[str], result: Any, trace: str, cwd: str | None
) -> tuple[str, str] | None:
    """The first of the user's checks that fails on ``result`` and ``trace``: its name and what
    it said (None when all pass). A check that cannot be loaded raises ``ValueError``."""
    if not specs:
        return None
    records = [read_record(line) for line in trace.splitlines() if line.strip()]
    for spec in specs:
        check = load_function(spec, cwd)
        try:
            verdict = check(result, records)
        except Exception as exc:
            return spec, f"{spec} raised {type(exc).__name__}: {exc}"
        if verdict is False or isinstance(verdict, str):
            detail = verdict if isinstance(verdict, str) else "returned False"
            return spec, f"{spec}: {detail}"
    return None
