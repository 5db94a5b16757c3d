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

from loopctl_sim.replay.explain import ABSENT, LONG, excerpt_pair, field_changes, where


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
        return where(self.path, self.expected, self.actual)

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


def leaf_diff(expected: Any, actual: Any, limit: int = 200) -> list[FieldDiff]:
    """The leaves of ``expected`` and ``actual`` that differ (``field_changes``), at most
    ``limit`` of them."""
    return [FieldDiff(*change) for change in field_changes(expected, actual, limit)]
