"""What ``loopctl-sim fuzz`` shows: a progress bar while the seeds run (rich's, on stderr, on a
terminal only), the summary as tables, each failure with the commands that reproduce it.

The time left is the seeds still to run over the rate since the campaign started: results come
in bursts (a worker hands back a chunk at once), so a rate between updates (click's, or rich's
over its last samples) swings with them, while seeds of one campaign cost about the same.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from loopctl_sim.fuzz import CampaignSummary, CaseResult


def rate(task: Task) -> float | None:
    """Seeds a second since the start, the seeds a resumed campaign found done left out (None
    before the first seed of this run is done)."""
    ran = task.completed - task.fields.get("before", 0)
    return float(ran / task.elapsed) if ran > 0 and task.elapsed else None


class _Rate(ProgressColumn):
    def render(self, task: Task) -> Text:
        per_second = rate(task)
        return Text("- seeds/s" if per_second is None else f"{per_second:,.1f} seeds/s")


class _TimeLeft(ProgressColumn):
    """Seconds left at the rate since the start."""

    def render(self, task: Task) -> Text:
        per_second = rate(task)
        if per_second is None or task.total is None:
            return Text("-:--:--")
        left = max(task.total - task.completed, 0) / per_second
        minutes, seconds = divmod(int(left + 0.5), 60)
        hours, minutes = divmod(minutes, 60)
        return Text(f"{hours}:{minutes:02d}:{seconds:02d}")


class CampaignProgress(Progress):
    """A progress bar over ``total`` seeds, ``done`` of them already (``failing`` of those
    failing: a resumed campaign's); ``get_time`` is rich's clock (a test gives its own)."""

    def __init__(
        self,
        total: int,
        *,
        console: Console,
        show: bool,
        get_time: Callable[[], float] | None = None,
        done: int = 0,
        failing: int = 0,
    ) -> None:
        super().__init__(
            TextColumn("seeds"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failing]}"),
            _Rate(),
            TimeElapsedColumn(),
            TextColumn("left"),
            _TimeLeft(),
            console=console,
            disable=not show,
            get_time=get_time,
        )
        self.failing = failing
        self.seeds = self.add_task(
            "seeds", total=total, completed=done, failing=self._failing(), before=done
        )

    def seed_done(self, result: CaseResult) -> None:
        if result.failure is not None:
            self.failing += 1
        self.update(self.seeds, advance=1, failing=self._failing())

    def _failing(self) -> str:
        return f"{self.failing} failing" if self.failing else ""


def summary_tables(summary: CampaignSummary, target: str) -> list[Table]:
    """The summary: totals, outcomes, faults exercised by kind, the exploring model's moves."""
    totals = [
        ("seeds", summary.seeds),
        ("simulated runs", summary.runs),
        ("steps checked", summary.steps),
        ("failing seeds", len(summary.failures)),
    ]
    faults = ("fault", "scheduled", "struck", "enabled in seeds")
    tables = [
        _table(target, ("what", "count"), totals, show_header=False),
        _table("outcomes of the faulted runs", ("outcome", "seeds"), _most(summary.outcomes)),
        _table("faults exercised, by kind", faults, summary.fault_rows()),
    ]
    if summary.moves:
        tables.append(_table("the model's moves", ("move", "replies"), _most(summary.moves)))
    return tables


def _table(
    title: str, columns: Sequence[str], rows: Iterable[Sequence[object]], show_header: bool = True
) -> Table:
    """A table whose first column is a name and the others counts (right-justified)."""
    table = Table(title=title, show_header=show_header, title_justify="left")
    for i, column in enumerate(columns):
        table.add_column(column, justify="right" if i else "left")
    for row in rows:
        table.add_row(*map(str, row))
    return table


def _most(counts: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def failure_lines(
    r: CaseResult,
    rerun: str,
    agent: str | None,
    *,
    level: str = "machine",
    flags: Sequence[str] = (),
) -> list[str]:
    """One failing seed: what failed, how it shrank, and the commands that reproduce it
    (``rerun`` is the ``loopctl-sim fuzz`` command line for this one seed).

    Every command carries what reproducing the failure needs: the agent (a scenario file runs
    none on its own), the built-in world's level, and ``flags``, the campaign's checks as
    ``run`` and ``export-test`` take them (``--check``, ``--deterministic``...); a crash check's
    failure also where the crash struck (``--crash-at``)."""
    assert r.failure is not None
    out = [f"FAIL seed {r.seed}: {r.failure}"]
    if r.shrunk:
        out.append(f"  {r.shrunk}")
    out += [f"  note: {note}" for note in r.notes]
    out.append(f"  rerun:  {rerun}")
    traces = [f for f in r.files if f.endswith(".jsonl")]
    yamls = [f for f in r.files if f.endswith(".yaml")]
    checked = list(flags)
    driver = ["--driver"] if level == "driver" else []
    named = ["--agent", agent] if agent is not None else driver
    if r.failure.kind == "crash-restore":
        checked += ["--crash-at", repr(r.crash_at)]
    for f in traces:
        if agent is None:
            out.append(f"  replay: {_command('replay', f)}")
        else:
            # each trace replays with its own tools: those a fault struck in it are answered
            # from it (the shrunk run may have lost the faults the first one had)
            first = not f.endswith(".min.jsonl") and r.first_replay_tools is not None
            tools = r.first_replay_tools if first else r.replay_tools
            out.append(
                f"  replay: {_command('replay', f, '--agent', agent, '--tools', str(tools))}"
            )
    if yamls:
        out.append(f"  run:    {_command('run', yamls[-1], *named, '--checks', *checked)}")
    if traces:
        out.append(f"  test:   {_command('export-test', traces[-1], *named, *checked)}")
    return out


def _command(*words: str) -> str:
    """``loopctl-sim`` and ``words``, each quoted for a POSIX shell where it needs to be."""
    return " ".join(["loopctl-sim", *(shlex.quote(w) for w in words)])
