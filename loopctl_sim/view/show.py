"""The terminal timeline of a trace (``loopctl-sim show``): turns, tool calls and results, errors,
retries, compactions, crashes and resumes, the outcome.

Built from the brain's records; io records add what the brain never saw (model errors, retries,
crashes), and those that only repeat a brain record are left out unless a ``--kind`` filter asks
for them. Streams the trace: memory stays flat whatever its length. A feed belongs to the turn of
the step before it; ``error`` as a kind selects every line shown in red.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from rich.console import Console
from rich.text import Text

from loopctl.terminal import visible
from loopctl_sim.trace import TraceReader
from loopctl_sim.view.describe import CLIP, Described, describe
from loopctl_sim.view.term import wrap_width, wrapped

#: The seq column: five digits and two spaces.
SEQ_WIDTH = 7
#: The style of a line of each tone (``Described.tone``).
TONE_STYLE: dict[str, str] = {"ok": "green", "warn": "yellow", "error": "bold red", "": ""}


@dataclass(frozen=True)
class ShowFilter:
    """What ``show`` prints: a range of turns (inclusive), kinds, whole texts or cut ones."""

    turns: tuple[int, int] | None = None
    kinds: frozenset[str] = field(default_factory=frozenset)
    full: bool = False

    def wants(self, rec_type: str, described: Described, turn: int) -> bool:
        if self.turns is not None and not self.turns[0] <= turn <= self.turns[1]:
            return False
        if not self.kinds:
            return not described.echo
        names = {rec_type, described.lane, described.kind}
        if described.tone == "error":
            names.add("error")
        return not names.isdisjoint(self.kinds)


def parse_turns(text: str) -> tuple[int, int]:
    """``"3"`` -> (3, 3); ``"2-4"`` or ``"2:4"`` -> (2, 4); ``ValueError`` otherwise."""
    for sep in ("-", ":"):
        if sep in text:
            lo, hi = (int(p) for p in text.split(sep, 1))
            break
    else:
        lo = hi = int(text)
    if lo < 0 or hi < lo:
        raise ValueError(f"not a range of turns: {text!r}")
    return lo, hi


def timeline(
    path: str | os.PathLike[str], flt: ShowFilter | None = None, width: int | None = None
) -> Iterator[tuple[str, str]]:
    """The timeline's lines with their tone, wrapped to ``width`` (``None``: not wrapped).

    Raises ``TraceFormatError`` (naming ``file:line``) at the first unreadable record.
    """
    flt = flt or ShowFilter()
    reader = TraceReader(path)
    turn = 0
    for record in reader:
        rec = record.model_dump(mode="json")
        described = describe(rec, None if flt.full else CLIP)
        if record.type == "header" and described.kind == "header":
            turn = 0
        if described.turn is not None:
            turn = described.turn
        if not flt.wants(record.type, described, turn):
            continue
        marker = "  ~ " if record.type == "io" else ""
        for i, line in enumerate(described.lines):
            prefix = (f"{record.seq:>5}  " if i == 0 else " " * SEQ_WIDTH) + marker
            for out in wrapped(prefix, visible(line), width):
                yield out, described.tone
    for warning in reader.warnings:
        yield visible(f"warning: {warning}"), "warn"


def print_timeline(
    console: Console, path: str | os.PathLike[str], flt: ShowFilter | None = None
) -> None:
    """Print the timeline on ``console``, coloured by tone when the console has colour."""
    width = wrap_width(console)
    lines: Iterable[tuple[str, str]] = timeline(path, flt, width)
    if console.color_system is None:  # no colour: plain lines, no rich rendering per line
        file = console.file
        for line, _ in lines:
            file.write(line + "\n")
        file.flush()
        return
    for line, tone in lines:
        text = Text(line[:SEQ_WIDTH], style="dim")  # the seq column
        text.append(line[SEQ_WIDTH:], style=TONE_STYLE.get(tone, ""))
        console.print(text, soft_wrap=True)
