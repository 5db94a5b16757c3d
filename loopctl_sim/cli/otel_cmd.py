"""``loopctl-sim otel TRACE``: a recorded trace as OpenTelemetry GenAI spans, as OTLP/JSON to a
file (or stdout) or to a collector's OTLP/HTTP endpoint, so a bug report's trace opens in the
team's tracing backend.

Exit 0 when written or accepted; 2 when the trace cannot be read, the ``otel`` extra is missing,
the endpoint refuses the spans or the output cannot be written (one line saying which).

Nothing printed holds the endpoint's secrets: its ``user:pass@`` and the ``--header`` values are
replaced by ``[REDACTED]`` in every line, a collector's echo of them included. ``-o`` replaces
its file whole or not at all (a temporary file beside it, renamed over it).
"""

from __future__ import annotations

import json

import click

from loopctl_sim.cli.common import die
from loopctl_sim.trace import TraceFormatError
from loopctl_sim.trace.files import write_atomically


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
        from loopctl_sim.view.otel_spans import export_spans
        from loopctl_sim.view.otlp import (
            OtlpError,
            Redactor,
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
