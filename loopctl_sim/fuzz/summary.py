"""A campaign's summary: what ran, what struck, how runs ended, and the failing seeds.

Every count is a sum and the failing seeds are kept sorted, so the summary does not depend on
how the seeds were chunked, where the chunks ran or in what order they finished; the state file
writes a chunk's summary and reads it back on resume.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from loopctl_sim.fuzz.case import ALL_FAULTS
from loopctl_sim.fuzz.checks import CaseResult


@dataclass
class CampaignSummary:
    """A whole campaign in counts (what ran, what struck, how runs ended) and its failing seeds.

    Only counts and failures are kept, never a passing seed's trace, and the counts do not
    depend on the order cases arrive in: one process and many give the same summary.
    """

    seeds: int = 0
    runs: int = 0
    steps: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    enabled: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[CaseResult] = field(default_factory=list)
    #: the exploring model's moves (an agent's campaign)
    moves: Counter[str] = field(default_factory=Counter)
    #: what some seeds could not check (each note, with the number of seeds it applies to)
    notes: Counter[str] = field(default_factory=Counter)
    #: the faults the seeds scheduled, by kind (``faults``: those that struck)
    scheduled: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.failures

    def add(self, r: CaseResult) -> None:
        self.seeds += 1
        self.runs += r.runs
        self.steps += r.steps
        self.faults.update(r.faults)
        self.enabled.update(r.enabled)
        self.outcomes[r.outcome] += 1
        self.moves.update(r.moves)
        self.notes.update(r.notes)
        self.scheduled.update(r.scheduled)
        if r.failure is not None:
            self.failures.append(r)

    def merge(self, other: CampaignSummary) -> None:
        """Add another summary's counts and failures (a chunk's, into its campaign's)."""
        self.seeds += other.seeds
        self.runs += other.runs
        self.steps += other.steps
        for mine, theirs in (
            (self.faults, other.faults),
            (self.enabled, other.enabled),
            (self.outcomes, other.outcomes),
            (self.moves, other.moves),
            (self.notes, other.notes),
            (self.scheduled, other.scheduled),
        ):
            mine.update(theirs)
        self.failures.extend(other.failures)
        self.failures.sort(key=lambda r: r.seed)

    def fault_rows(self) -> list[tuple[str, int, int, int]]:
        """``(kind, faults scheduled, times they struck, seeds that enabled the kind)`` for
        every kind that any seed enabled (a fault with ``times: 3`` strikes up to 3 times; one
        placed past the end of its run never does)."""
        return [
            (kind, self.scheduled[kind], self.faults[kind], self.enabled[kind])
            for kind in ALL_FAULTS
            if self.enabled[kind] or self.faults[kind]
        ]

    def lines(self) -> list[str]:
        out = [
            f"{self.seeds} seeds, {self.runs} simulated runs, {self.steps} steps checked; "
            f"{len(self.failures)} failing seed(s)",
            "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())),
            "faults that struck, by kind:",
        ]
        for kind, scheduled, struck, enabled in self.fault_rows():
            out.append(
                f"  {kind:<20} {struck:>7}  ({scheduled} scheduled; enabled in {enabled} seeds)"
            )
        if self.moves:
            out.append(
                "the model's moves: " + ", ".join(f"{k} {v}" for k, v in sorted(self.moves.items()))
            )
        for note, seeds in sorted(self.notes.items()):
            out.append(f"note ({seeds} seeds): {note}")
        return out
