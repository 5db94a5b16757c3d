"""A user's project for the agent tests: the sample support agent copied into ``tmp_path`` as
package ``shop`` (the shipped example is never edited), changed the way a user changes an
agent, or given a planted bug."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "support_agent"
AGENT = "shop.agent:build"


def make_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The project (cwd set to it); yields its folder, then forgets the imported ``shop``."""
    shutil.copytree(EXAMPLE, tmp_path / "shop", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "shop" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    forget()
    yield tmp_path
    forget()


def forget() -> None:
    """Drop every imported ``shop`` module (each test imports its own, edited, copy)."""
    for name in [m for m in sys.modules if m == "shop" or m.startswith("shop.")]:
        del sys.modules[name]
    from loopctl_sim.fuzz.agent_case import agent_profile

    agent_profile.cache_clear()


def edit(project: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in the copy's ``agent.py`` (it must be there)."""
    path = project / "shop" / "agent.py"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))
    forget()


def add(project: Path, code: str, *, before: str = "def build(") -> None:
    """Insert ``code`` into the copy's ``agent.py`` before ``before``."""
    edit(project, before, code.strip("\n") + "\n\n\n" + before)


SPLITTING_COMPACTOR = '''
class LastMessages:
    """The planted bug: keeps the last three messages, even a result without its call."""

    async def compact(self, messages, reason):
        return list(messages[-3:]) if len(messages) > 3 else None
'''


def plant_splitting_compactor(project: Path) -> None:
    """Give the copy's agent a compactor that can split a tool call from its result: the
    brain's protocol check (``ProtocolError``) is what finds it."""
    add(project, SPLITTING_COMPACTOR)
    edit(
        project,
        "        observers=observers,\n",
        "        observers=observers,\n        compactor=LastMessages(),\n",
    )


#: A user's fuzz check (``shop.checks:only_delivered_orders_are_refunded`` once written into the
#: copy as ``shop/checks.py``).
CHECKS = '''
from shop.agent import ORDERS


def only_delivered_orders_are_refunded(result, trace):
    """A user's check: every refund that went out was of a delivered order."""
    calls = {
        r.data["id"]: r.data["arguments"] for r in trace
        if r.type == "io" and r.kind == "tool_call" and r.data["name"] == "refund"
    }
    refunded = [
        calls[r.data["id"]].get("order_id") for r in trace
        if r.type == "io" and r.kind == "tool_result" and r.data["name"] == "refund"
        and not r.data["is_error"]
    ]
    wrong = [o for o in refunded if ORDERS.get(o, {}).get("status") != "delivered"]
    assert not wrong, f"refunded orders that were not delivered: {wrong}"
'''
