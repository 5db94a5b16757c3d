"""``loopctl-sim show``, ``diff``, ``schema``, ``html`` and ``otel``: reading traces without
replaying them.

``show`` exits 0 or 2; ``diff`` 0 when the traces hold the same records, 1 when they differ, 2
when one cannot be read; ``schema`` 0. Output goes through ``loopctl_sim.view.term``'s console.

``html`` writes the trace as one self-contained HTML timeline; ``otel`` as OpenTelemetry GenAI
spans (OTLP/JSON to a file, stdout or a collector's OTLP/HTTP endpoint). Both exit 0 when written
(or accepted), 2 with one line saying why not. A page or ``-o`` file is written beside its target
and renamed over it, so a failed write leaves an old one whole. Nothing ``otel`` prints holds the
endpoint's secrets (its ``user:pass@``, the ``--header`` values, a collector's echo of them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from loopctl_sim.cli.common import die, echo, emit_json
from loopctl_sim.trace import TraceFormatError, trace_json_schema
from loopctl_sim.trace.files import write_atomically
from loopctl_sim.view import (
    ShowFilter,
    Timeline,
    compare_traces,
    make_console,
    parse_turns,
    print_comparison,
    print_timeline,
    write_html,
)


@click.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("--full", is_flag=True, help="Whole texts (messages, arguments, results), uncut.")
@click.option(
    "--turn",
    "turns",
    default=None,
    metavar="N|A-B",
    help="Only turn N, or turns A to B (a feed belongs to the turn of the step before it).",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    metavar="KIND[,KIND]",
    help="Only records of these kinds: a type (step, feed, io, header, end), a lane (run, brain, "
    "model, tools, compaction, events), a record's own kind (call_tools, tool_results, retry, "
    "tool_result, ...) or 'error'. Naming an io kind also shows the io records that repeat a "
    "brain record (model_request, model_reply, tool_call, tool_result).",
)
def show(trace: str, full: bool, turns: str | None, kinds: tuple[str, ...]) -> None:
    """Print a readable timeline of TRACE."""
    try:
        span = None if turns is None else parse_turns(turns)
    except ValueError:
        die(f"--turn: expected N or A-B, got {turns!r}")
    try:
        wanted = frozenset(k.strip() for v in kinds for k in v.split(",") if k.strip())
        print_timeline(make_console(), trace, ShowFilter(span, wanted, full))
    except TraceFormatError as exc:
        die(str(exc))


@click.command()
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.option("--ignore-io", is_flag=True, help="Compare only headers, steps, feeds and ends.")
@click.option(
    "--brain-only",
    is_flag=True,
    help="Compare only steps, feeds and ends (e.g. a machine-level with a driver-level trace).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def diff(a: str, b: str, ignore_io: bool, brain_only: bool, as_json: bool) -> None:
    """Show where traces A and B first differ, how many records differ, and both outcomes
    (times and durations ignored)."""
    try:
        found = compare_traces(a, b, ignore_io=ignore_io, brain_only=brain_only)
    except TraceFormatError as exc:
        die(str(exc))
    if as_json:
        emit_json(found.to_json())
    else:
        print_comparison(make_console(), found)
    sys.exit(0 if found.same else 1)


@click.command()
def schema() -> None:
    """Print the JSON Schema of a trace record (one line of a trace)."""
    emit_json(trace_json_schema())


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


def _headers(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip():
            # the value itself is not shown: it is likely a key given without its name
            die("--header: expected NAME=VALUE, got a value without a name")
        out[key.strip()] = rest
    return out


@click.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="Write OTLP/JSON here ('-': stdout, the default without --endpoint).",
)
@click.option(
    "--endpoint",
    default=None,
    metavar="URL",
    help="Send to this OTLP/HTTP endpoint (e.g. http://localhost:4318; /v1/traces is added).",
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="NAME=VALUE",
    help="An HTTP header for --endpoint (e.g. an API key); repeatable.",
)
@click.option(
    "--service-name", default="loopctl", show_default=True, help="The resource's service.name."
)
@click.option(
    "--agent-name",
    default=None,
    help="gen_ai.agent.name (default: the header's metadata agent or world).",
)
@click.option(
    "--model",
    default=None,
    help="gen_ai.request.model when the trace does not say (default: metadata model).",
)
@click.option(
    "--content",
    is_flag=True,
    help="Include message content, tool arguments and results (scrubbed). Off by "
    "default, as the GenAI conventions ask.",
)
def otel(
    trace: str,
    output: str | None,
    endpoint: str | None,
    headers: tuple[str, ...],
    service_name: str,
    agent_name: str | None,
    model: str | None,
    content: bool,
) -> None:
    """Export TRACE as OpenTelemetry GenAI spans (invoke_agent, chat, execute_tool)."""
    try:
        from loopctl_sim.view.otel_spans import (
            OtlpError,
            Redactor,
            export_spans,
            otlp_json,
            send_otlp,
            shown_url,
        )
    except ImportError as exc:
        die(f"{exc} (loopctl-sim otel needs: pip install 'loopctl[otel]')")
    sent_headers = _headers(headers)
    redact = Redactor(endpoint or "", sent_headers)
    try:
        spans = export_spans(
            trace,
            service_name=service_name,
            agent_name=agent_name,
            model=model,
            capture_content=content,
        )
    except TraceFormatError as exc:
        die(str(exc))
    except OSError as exc:  # no such file, a directory, no permission
        die(f"cannot read {trace}: {exc.strerror or exc}")
    body = json.dumps(otlp_json(spans), ensure_ascii=False, separators=(",", ":"))
    if output is not None and output != "-":  # first: a refusing endpoint loses no file
        try:
            write_atomically(output, body + "\n")
        except OSError as exc:
            die(f"cannot write {output}: {exc.strerror or exc}")
        click.echo(f"wrote {len(spans)} spans to {output}", err=True)
    elif endpoint is None or output == "-":
        click.echo(body)
    if endpoint is not None:
        try:
            status = send_otlp(body.encode("utf-8"), endpoint, headers=sent_headers)
        except OtlpError as exc:
            die(redact(str(exc)))
        shown = redact(shown_url(endpoint))
        click.echo(f"sent {len(spans)} spans to {shown} (HTTP {status})", err=True)
