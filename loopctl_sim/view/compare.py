"""Two traces side by side for ``loopctl-sim diff``: the first difference, how many records
differ in all, and each trace's outcomes.

``loopctl_sim.replay.diff_traces`` stops at the first differing record; a person comparing two
runs also wants to know whether that was the only one and whether the runs ended the same way.
One streaming pass over both traces (memory stays flat) counts, position by position, the
records that differ under the same rules as ``diff_traces`` (times ignored; ``ignore_io``,
``brain_only``) and collects every run's outcome; the first difference is reported as the
``TraceDiff`` that ``diff_traces`` gives (a test pins that they agree).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_jsonable_python

from loopctl_sim.replay import TraceDiff
from loopctl_sim.replay.diff import Branch, comparable, fork_branch
from loopctl_sim.trace import TraceReader


@dataclass
class TraceComparison:
    """The result of ``compare_traces``."""

    path_a: str
    path_b: str
    first: TraceDiff | None = None
    compared: int = 0  # positions looked at (the longer trace's count of compared records)
    differing: int = 0  # positions whose records differ (a record only one trace has counts)
    only_a: int = 0  # records past the end of b
    only_b: int = 0
    outcomes_a: list[Any] = field(default_factory=list)  # each run's outcome (JSON; None: none)
    outcomes_b: list[Any] = field(default_factory=list)
    #: when one trace forks the other: compared from the branch on (``replay.diff``)
    branch: Branch | None = None

    @property
    def same(self) -> bool:
        return self.first is None

    def to_json(self) -> dict[str, Any]:
        return {
            "same": self.same,
            "compared": self.compared,
            "differing": self.differing,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "outcomes": {"a": self.outcomes_a, "b": self.outcomes_b},
            "divergence": None if self.first is None else self.first.to_json(),
            "branch": None
            if self.branch is None
            else {"child": self.branch.child, "at": self.branch.at},
        }


def _stream(
    reader: TraceReader,
    skip: frozenset[str],
    outcomes: list[Any],
    branch: Branch | None = None,
    side: str = "",
) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(line, seq, comparable JSON) of the records compared; every run's outcome on the side."""
    open_run = False
    for line, record in reader.numbered():
        if record.type == "header":
            resume = bool(getattr(getattr(record, "snapshot", None), "started", False))
            if not resume:
                if open_run:
                    outcomes.append(None)  # a run that never reached its end record
                open_run = True
        elif record.type == "end":
            outcome = getattr(record, "outcome", None)
            outcomes.append(None if outcome is None else to_jsonable_python(outcome))
            open_run = False
        if record.type in skip or (branch is not None and branch.skips(side, record.seq)):
            continue
        yield line, record.seq, comparable(record.model_dump(mode="json"))
    if open_run:
        outcomes.append(None)


def compare_traces(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str],
    *,
    ignore_io: bool = False,
    brain_only: bool = False,
) -> TraceComparison:
    """Compare the traces at ``a`` and ``b`` whole (``TraceFormatError`` if one is unreadable)."""
    skip = frozenset({"io", "header"} if brain_only else {"io"} if ignore_io else ())
    ra, rb = TraceReader(a), TraceReader(b)
    result = TraceComparison(ra.path, rb.path, branch=fork_branch(a, b))
    ia = _stream(ra, skip, result.outcomes_a, result.branch, "a")
    ib = _stream(rb, skip, result.outcomes_b, result.branch, "b")
    while True:
        na, nb = next(ia, None), next(ib, None)
        if na is None and nb is None:
            return result
        result.compared += 1
        if na is None:
            result.only_b += 1
        elif nb is None:
            result.only_a += 1
        if (None if na is None else na[2]) == (None if nb is None else nb[2]):
            continue
        result.differing += 1
        if result.first is None:
            result.first = TraceDiff(
                seq_a=None if na is None else na[1],
                line_a=None if na is None else na[0],
                seq_b=None if nb is None else nb[1],
                line_b=None if nb is None else nb[0],
                expected=None if na is None else na[2],
                actual=None if nb is None else nb[2],
                path_a=ra.path,
                path_b=rb.path,
                branch=result.branch,
            )
