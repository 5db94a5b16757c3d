"""Divergences and trace comparisons on the terminal (``replay``, ``diff``).

A replay divergence shows the record, what differs in words, the policy in force there, every
field that differs with both values (``fields.leaf_diff``: never only two digests), the feeds
just before it, and the unified diff when it is short enough to read (``--json`` has it whole).
A comparison walks both traces whole (``compare_traces``; ``diff_traces`` stops at the first
difference): a person comparing two runs also wants to know whether that difference was the
only one and whether the runs ended the same way. Every string from a trace is printed through
``visible`` (control characters as their escapes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from loopctl.terminal import visible
from loopctl_sim.replay import Divergence, TraceDiff
from loopctl_sim.replay.diff import Branch, fork_branch, positions
from loopctl_sim.replay.explain import show_value
from loopctl_sim.replay.report import MAX_FIELDS, too_long
from loopctl_sim.sim.session import run_at
from loopctl_sim.trace import StepRecord, TraceFormatError, TraceReader
from loopctl_sim.view.describe import outcome_text
from loopctl_sim.view.fields import FieldDiff, leaf_diff
from loopctl_sim.view.term import wrap_width, wrapped


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


def compare_traces(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str],
    *,
    ignore_io: bool = False,
    brain_only: bool = False,
) -> TraceComparison:
    """Compare the traces at ``a`` and ``b`` whole (``TraceFormatError`` if one is unreadable)."""
    result = TraceComparison(TraceReader(a).path, TraceReader(b).path, branch=fork_branch(a, b))
    outcomes = (result.outcomes_a, result.outcomes_b)
    for found in positions(
        a, b, result.branch, ignore_io=ignore_io, brain_only=brain_only, outcomes=outcomes
    ):
        result.compared += 1
        if found is not None:
            result.differing += 1
            result.only_a += found.line_b is None
            result.only_b += found.line_a is None
            result.first = result.first or found
    return result


def policy_in_force(path: str | os.PathLike[str], seq: int) -> dict[str, Any] | None:
    """The policy of the last step record at or before ``seq`` (None: no step before it)."""
    found: dict[str, Any] | None = None
    try:
        for record in TraceReader(path):
            if record.seq > seq:
                break
            if isinstance(record, StepRecord):
                found = record.policy.model_dump(mode="json")
    except TraceFormatError:
        pass  # the replay already read up to the divergence; a later bad line changes nothing
    return found


def divergence_policy(divergence: Divergence, path: str | None) -> dict[str, Any] | None:
    """The policy in force at the divergence: the report's own, else read from the trace."""
    if divergence.policy is not None or not path:
        return divergence.policy
    return policy_in_force(path, divergence.seq)


def fields_table(diffs: list[FieldDiff], a: str = "expected", b: str = "actual") -> Table:
    """The differing fields as a table: the path (with the character two strings first differ
    at: ``content[8123:]``), then both values, bounded: whole when short, else an excerpt of
    each around that first difference (``FieldDiff.excerpts``). At most ``MAX_FIELDS`` rows."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    table.add_column("field", overflow="fold", style="bold")
    table.add_column(a, overflow="fold", style="red")
    table.add_column(b, overflow="fold", style="green")
    for d in diffs[:MAX_FIELDS]:
        expected, actual = d.excerpts()
        table.add_row(visible(d.where), visible(expected), visible(actual))
    if len(diffs) > MAX_FIELDS:
        table.add_row(f"... {len(diffs) - MAX_FIELDS} more (--json has them)", "", "")
    return table


def _say(console: Console, prefix: str, body: str, style: str = "", indent: int = 2) -> None:
    """One paragraph, wrapped with a hanging indent past ``prefix`` (not wrapped when piped)."""
    for line in wrapped(visible(prefix), visible(body), wrap_width(console), indent):
        console.print(Text(line, style=style), soft_wrap=True)


def _print_diff(console: Console, text: str) -> None:
    """The unified diff when it is short and narrow enough to read; the field table above
    already says what differs, bounded."""
    lines = text.splitlines()
    said = too_long(lines)
    if said is not None:
        _say(console, "", said + ")")
        return
    for line in lines:
        style = "red" if line.startswith("-") else "green" if line.startswith("+") else ""
        console.print(Text(visible(line), style=style), soft_wrap=True)


def print_divergence(console: Console, divergence: Divergence, path: str = "") -> None:
    """The replay divergence, as described in this module's docstring."""
    where = f"{path}:{divergence.line}" if path else f"line {divergence.line}"
    _say(
        console,
        "",
        f"divergence at seq {divergence.seq} ({where}): {divergence.message}",
        "bold red",
    )
    place = run_at(path, divergence.line) if path and os.path.isfile(path) else None
    if place is not None:  # a session's trace: which run (and user turn) it is
        console.print(Text(visible(f"  {place}")), soft_wrap=True)
    for line in divergence.details:  # the divergence in the user's terms: a prompt diff, ...
        console.print(Text(visible(f"  {line}")), soft_wrap=True)
    console.print(Text(visible(f"what differs: {divergence.what}")))
    if divergence.note:
        _say(console, "note: ", divergence.note, "yellow")
    policy = divergence_policy(divergence, path or None)
    shown = ", ".join(f"{k}={show_value(v, 40)}" for k, v in (policy or {}).items())
    _say(console, "policy in force: ", shown or "(no step before it)")
    diffs = leaf_diff(divergence.expected, divergence.actual)
    if diffs:
        console.print(f"differing fields ({len(diffs)}):")
        console.print(fields_table(diffs))
    if divergence.recent_feeds:
        console.print("feeds before it:")
        for f in divergence.recent_feeds:
            _say(console, f"  seq {f.seq} (line {f.line}): ", f"{f.name} {show_value(f.args, 100)}")
    _print_diff(console, divergence.diff)


def _outcomes_table(comparison: TraceComparison) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("run")
    table.add_column(visible(comparison.path_a), overflow="fold")
    table.add_column(visible(comparison.path_b), overflow="fold")
    a, b = comparison.outcomes_a, comparison.outcomes_b
    for i in range(max(len(a), len(b))):
        left = outcome_text(a[i]) if i < len(a) else "(no such run)"
        right = outcome_text(b[i]) if i < len(b) else "(no such run)"
        style = "" if i < len(a) and i < len(b) and a[i] == b[i] else "bold"
        table.add_row(str(i + 1), visible(left), visible(right), style=style)
    return table


def print_comparison(console: Console, comparison: TraceComparison) -> None:
    """``diff``'s report, as described in this module's docstring."""
    first = comparison.first
    if comparison.branch is not None:  # one forks the other: compared from the branch on
        _say(console, "", comparison.branch.note(comparison.path_a, comparison.path_b))
    if first is None:
        same = f"same: {comparison.path_a} and {comparison.path_b} hold the same records"
        _say(console, "", same)
    else:
        lines = first.report().splitlines()[0 if first.branch is None else 1 :]
        for line in lines[:3]:
            _say(console, "", line, indent=4)
        diffs = leaf_diff(first.expected, first.actual)
        if diffs:
            console.print(f"differing fields ({len(diffs)}):")
            console.print(fields_table(diffs, "a", "b"))
        _print_diff(console, first.diff)
        extra = []
        if comparison.only_a:
            extra.append(f"{comparison.only_a} only in {comparison.path_a}")
        if comparison.only_b:
            extra.append(f"{comparison.only_b} only in {comparison.path_b}")
        count = f"{comparison.differing} of {comparison.compared} compared records differ"
        _say(console, "", count + (f" ({'; '.join(extra)})" if extra else ""), "bold")
    console.print("outcomes:")
    console.print(_outcomes_table(comparison))
