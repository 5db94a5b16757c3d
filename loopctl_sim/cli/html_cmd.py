"""``loopctl-sim html TRACE -o OUT``: the trace as one self-contained HTML timeline.

Exit 0 when the page is written, 2 when the trace cannot be read (nothing written then).
"""

from __future__ import annotations

from pathlib import Path

import click

from loopctl_sim.cli.common import die
from loopctl_sim.trace import TraceFormatError
from loopctl_sim.view import write_html

__all__ = ["html"]


@click.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Where to write the page (default: TRACE with .html instead of its suffix).",
)
def html(trace: str, output: str | None) -> None:
    """Write TRACE as an HTML timeline: swimlanes of the brain's steps, model and tool calls,
    compactions, cancels, crashes and resumes; click a record for its data. One file, no
    network: it opens from an air-gapped CI artefact."""
    out = output or str(Path(trace).with_suffix(".html"))
    try:
        timeline = write_html(trace, out)
    except TraceFormatError as exc:
        die(str(exc))
    click.echo(f"wrote {out} ({len(timeline.seq)} records, {timeline.items} items)")
