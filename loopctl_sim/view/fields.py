"""Field-level differences between two JSON values: every leaf path that differs, both values.

A divergence report shows these instead of two digests or a long unified diff
(``state.kind: awaiting_tools -> start``), generic over dicts and lists so it works for any
record kind, including ones added after it was written. A leaf may be a 10 KB tool result
changed in one character: ``FieldDiff.where`` names the character the strings first differ at
and ``FieldDiff.excerpts`` gives both sides bounded around it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopctl_sim.replay.explain import ABSENT, LONG, excerpt_pair, where


@dataclass(frozen=True, slots=True)
class FieldDiff:
    """One leaf that differs: its path (``a.b[2].c``; ``""`` for the value itself) and both
    values (``ABSENT`` where the other side has it and this one does not)."""

    path: str
    expected: Any
    actual: Any

    @property
    def where(self) -> str:
        """The path, and for two strings the character they first differ at (``x[812:]``)."""
        return where(self.path, self.expected, self.actual) or "(the value)"

    def excerpts(self, limit: int = LONG) -> tuple[str, str]:
        """Both values, one line each and bounded: whole when short, else around their first
        difference (``(absent)`` for a side that lacks it)."""
        return excerpt_pair(self.expected, self.actual, limit)

    def to_json(self) -> dict[str, Any]:
        expected, actual = self.excerpts()
        return {
            "path": self.path,
            "where": self.where,
            "expected": None if self.expected is ABSENT else self.expected,
            "actual": None if self.actual is ABSENT else self.actual,
            "expected_absent": self.expected is ABSENT,
            "actual_absent": self.actual is ABSENT,
            "expected_excerpt": expected,
            "actual_excerpt": actual,
        }


def _walk(a: Any, b: Any, path: str, out: list[FieldDiff], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            inner = f"{path}.{key}" if path else str(key)
            _walk(a.get(key, ABSENT), b.get(key, ABSENT), inner, out, limit)
        return
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        for i in range(max(len(a), len(b))):
            left = a[i] if i < len(a) else ABSENT
            right = b[i] if i < len(b) else ABSENT
            _walk(left, right, f"{path}[{i}]", out, limit)
        return
    if a != b or (type(a) is not type(b) and not (_number(a) and _number(b))):
        out.append(FieldDiff(path, a, b))


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def leaf_diff(expected: Any, actual: Any, limit: int = 200) -> list[FieldDiff]:
    """The leaves of ``expected`` and ``actual`` that differ, in ``expected``'s key order, at
    most ``limit`` of them. A dict against a list, or a value against ``None``, is one leaf."""
    out: list[FieldDiff] = []
    _walk(expected, actual, "", out, limit)
    return out
