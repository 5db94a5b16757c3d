"""The harness uses ``loopctl`` through its public names only.

A public module of ``loopctl`` is ``loopctl`` itself, one of its subpackages or top-level modules
whose name does not start with ``_`` (``loopctl.core``, ``loopctl.api``, ...), or one of the
documented modules that need an extra (``loopctl.tools.mcp``, ``loopctl.testing.strategies``);
a module inside a subpackage (``loopctl.driver.model``) is that package's implementation. A
public name is one in a public module's ``__all__``. The import-linter contract in
pyproject.toml forbids the modules; it cannot see names, so this test reads every
``from loopctl... import`` of ``loopctl_sim`` with ``ast`` and names ``file:line`` of each import
of a name the module does not export.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import loopctl_sim

HARNESS = Path(loopctl_sim.__file__).parent

#: Modules inside a subpackage that are public all the same: each needs an extra, so its
#: package does not import it.
EXTRA_MODULES = frozenset({"loopctl.tools.mcp", "loopctl.testing.strategies"})


def is_public_module(name: str) -> bool:
    parts = name.split(".")
    if parts[0] != "loopctl" or any(p.startswith("_") for p in parts):
        return False
    return len(parts) <= 2 or name in EXTRA_MODULES


def private_imports(source: str, where: str) -> list[str]:
    """Every import in ``source`` (the file ``where``) of a ``loopctl`` module or name that is
    not public."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names if a.name.split(".")[0] == "loopctl"]
            found += [
                f"{where}:{node.lineno}: import {m}" for m in modules if not is_public_module(m)
            ]
            continue
        if not isinstance(node, ast.ImportFrom) or node.level or node.module is None:
            continue
        module = node.module
        if module.split(".")[0] != "loopctl":
            continue
        if not is_public_module(module):
            found.append(f"{where}:{node.lineno}: from {module} (a private module)")
            continue
        exported = set(importlib.import_module(module).__all__)
        found += [
            f"{where}:{node.lineno}: {a.name} is not in {module}.__all__"
            for a in node.names
            if a.name not in exported
        ]
    return found


def test_the_harness_imports_only_public_loopctl_names() -> None:
    problems = [
        problem
        for path in sorted(HARNESS.rglob("*.py"))
        for problem in private_imports(
            path.read_text(encoding="utf-8"), str(path.relative_to(HARNESS.parent))
        )
    ]
    assert problems == []


def test_the_check_names_what_it_refuses() -> None:
    """The check itself: a private module, a name outside ``__all__`` and a bare import of an
    inner module are each reported with their line; public imports are not."""
    source = (
        "from loopctl import BareLoop\n"
        "from loopctl.core import LoopMachine\n"
        "from loopctl.tools.mcp import McpServer\n"
        "from loopctl.driver.model import check_reply\n"
        "from loopctl.core import judge_key\n"
        "import loopctl.core.machine\n"
        "from loopctl import _secrets\n"
        "import loopctl.api\n"
    )
    assert private_imports(source, "probe.py") == [
        "probe.py:4: from loopctl.driver.model (a private module)",
        "probe.py:5: judge_key is not in loopctl.core.__all__",
        "probe.py:6: import loopctl.core.machine",
        "probe.py:7: _secrets is not in loopctl.__all__",
    ]
