"""``loopctl-sim html TRACE -o OUT``: the trace as one self-contained HTML timeline.

Exit 0 when the page is written; 2, with a one-line error, when the trace cannot be read or the
page cannot be written (no such folder, no permission, a full disk). The page is written beside
its target and renamed over it, so on any failure an old page at that path is left whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from loopctl_sim.cli.common import die, echo
from loopctl_sim.trace import TraceFormatError
from loopctl_sim.view import Timeline, write_html


def write_page(trace: str, out: str, **kwargs: Any) -> Timeline:
    """``write_html`` for a command: an unreadable trace or an unwritable ``out`` ends the
    command with one line on stderr and exit 2 (``out`` untouched); ``out`` may not be
    ``trace`` itself."""
    if Path(trace).exists() and Path(out).exists() and Path(trace).samefile(out):
        die(f"{out}: is the trace itself; name another file for the page")
    try:
        return write_html(trace, out, **kwargs)
    except TraceFormatError as exc:
        die(str(exc))
    except OSError as exc:
        die(f"cannot write {out}: {exc.strerror or exc} (nothing written)")


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
    timeline = write_page(trace, out)
    echo(f"wrote {out} ({len(timeline.seq)} records, {timeline.items} items)")
