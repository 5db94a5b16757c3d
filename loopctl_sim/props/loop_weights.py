"""The weights of the looping programs, readable and changeable (``LoopWeights``).

Apart from the programs (``brain_loops``, which needs hypothesis) because the fuzz campaign's
looping worlds draw from the same table and ``loopctl-sim`` runs without hypothesis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from loopctl.core import LoopAction

#: The loop patterns a program is made of.
PATTERNS: Final = ("ping_pong", "spaced", "repeat", "shuffled", "parallel", "noise")


@dataclass(frozen=True)
class LoopWeights:
    """How often the looping programs draw each thing, as relative weights (0 turns it off; out
    of the sum of a group, each name's share). ``patterns``: the segment patterns (``PATTERNS``);
    ``actions``: the policy's ``loop_action`` (``warn`` most, since a warned run goes on, to be
    failed by its next loop); ``windows`` and ``limits``: ``loop_window`` and
    ``loop_repeat_limit``, drawn for the policy and again at every change; ``change``: out of 8
    exchanges, how many are followed by a policy change (in force at the very next step).
    """

    patterns: tuple[tuple[str, int], ...] = (
        ("ping_pong", 3),
        ("spaced", 2),
        ("repeat", 3),
        ("shuffled", 2),
        ("parallel", 1),
        ("noise", 1),
    )
    actions: tuple[tuple[LoopAction, int], ...] = (("warn", 4), ("fail", 2), ("off", 1))
    windows: tuple[tuple[int, int], ...] = (
        (2, 1),
        (3, 2),
        (4, 2),
        (5, 1),
        (6, 1),
        (8, 1),
        (12, 1),
    )
    limits: tuple[tuple[int, int], ...] = ((2, 1), (3, 3), (4, 1), (5, 1))
    change: int = 1

    def __post_init__(self) -> None:
        for name in ("patterns", "actions", "windows", "limits"):
            pairs = getattr(self, name)
            if any(w < 0 for _, w in pairs) or not any(w for _, w in pairs):
                raise ValueError(f"LoopWeights.{name} needs a positive weight: {pairs!r}")
        unknown = {p for p, _ in self.patterns} - set(PATTERNS)
        if unknown:
            raise ValueError(f"unknown loop patterns {sorted(unknown)}; one of {PATTERNS}")
        if not 0 <= self.change <= 8:
            raise ValueError(f"LoopWeights.change is out of 8, got {self.change}")


#: The weights ``loop_policies`` and ``loop_programs`` use unless given others.
LOOP_WEIGHTS: Final = LoopWeights()
