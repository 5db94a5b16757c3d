"""``loopctl-sim replay``: replay traces against the brain, through the whole driver, or against
the user's own agent (``--agent module:factory``, or ``[tool.loopctl] agent`` in pyproject.toml).

Exit 0 when every trace replays without divergence (an incomplete one up to its last record), 1
when any diverged (or ``--update`` needs a real model), 2 when any could not be read or the agent
cannot be imported. A divergence prints through ``loopctl_sim.view.print_divergence``.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from loopctl_sim.cli.common import die, echo, emit_json, expand_traces, pyproject_agent
from loopctl_sim.cli.trace_cmds import write_page
from loopctl_sim.replay import ReplayResult, replay_agent, replay_driver, replay_trace, update_trace
from loopctl_sim.sim import AgentError
from loopctl_sim.trace import TraceFormatError
from loopctl_sim.view import make_console, print_divergence


@click.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path())
@click.option(
    "--until",
    type=int,
    default=None,
    help="Stop after the record with this seq and print the brain's state there.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--driver",
    is_flag=True,
    help="Replay through BareLoop: client and tools answer from the trace's io records.",
)
@click.option(
    "--digest-every",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Compare the brain's digest every N feeds (and at every header, end and --until), "
    "not after each one: faster; any mismatch is replayed again feed by feed, so the report "
    "still names the first divergent record. Misses only a difference that heals between "
    "two checkpoints. Steps and outcomes are always compared. Machine level only.",
)
@click.option(
    "--agent",
    default=None,
    metavar="MODULE:FACTORY",
    help="Replay against your agent, built by this factory (imported from the current "
    "directory and PYTHONPATH): the model answers from the trace, your tools, hooks, "
    "middleware and compactor run live. Default: [tool.loopctl] agent in pyproject.toml.",
)
@click.option(
    "--tools",
    default="live",
    show_default=True,
    metavar="live|recorded|live:A,B",
    help="With an agent: run its tools live, answer them from the trace, or run only those named.",
)
@click.option(
    "--compactor",
    type=click.Choice(["live", "recorded"]),
    default="live",
    show_default=True,
    help="With an agent: run its compactor, or answer compactions from the trace.",
)
@click.option(
    "--update",
    is_flag=True,
    help="With an agent: re-record the trace with its live results (the model's answers kept "
    "where the requests still match; where one does not, stop and say which).",
)
@click.option(
    "--force",
    is_flag=True,
    help="With --update: keep the recorded answer even where the request differs.",
)
@click.option(
    "--machine",
    is_flag=True,
    help="Replay against the brain alone, even when pyproject.toml names an agent.",
)
@click.option(
    "--html",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Also write the trace as an HTML timeline to this file, the divergence (if any) "
    "highlighted with expected against actual. One trace only.",
)
def replay(
    traces: tuple[str, ...],
    until: int | None,
    as_json: bool,
    driver: bool,
    digest_every: int,
    agent: str | None,
    tools: str,
    compactor: str,
    update: bool,
    force: bool,
    machine: bool,
    html: str | None,
) -> None:
    """Replay TRACES against the brain (or --driver, or --agent); exit 1 at the first divergence.

    Several traces (or directories of *.jsonl) are replayed one after the other, for CI: each
    gets its line, and the exit status is 1 when any diverged, 2 when any could not be read.
    """
    paths = expand_traces(traces)
    if not (driver or machine) and agent is None:
        then = "replayed against the brain (--agent replays it against yours)"
        agent = pyproject_agent(paths, then)
    if agent is not None and (driver or machine):
        die("--agent replays through the driver: drop --driver/--machine")
    if (update or force) and agent is None:
        die("--update re-records against an agent: name it with --agent")
    if force and not update:
        die("--force goes with --update")
    if html is not None and update:
        die("--html goes with a replay, not --update (run html on the updated trace)")
    if html is not None and len(paths) != 1:
        die("--html needs exactly one trace")
    if agent is not None:
        if until is not None or digest_every != 1:
            die("--until and --digest-every work at machine level only")
        _with_agent(paths, agent, tools, compactor, update, force, as_json, html)
    if driver and until is not None:
        die("--until works at machine level only (drop --driver)")
    if driver and digest_every != 1:
        die("--digest-every works at machine level only (drop --driver)")
    if len(paths) != 1:
        if until is not None:
            die("--until needs exactly one trace")
        _replay_many(paths, as_json, driver, digest_every)
    trace = paths[0]
    try:
        result = _replay_one(trace, driver, until, digest_every)
    except TraceFormatError as exc:
        die(str(exc))
    for warning in result.warnings:
        echo(f"warning: {warning}", err=True)
    if result.records == 0:
        die(f"{trace}: no complete record to replay")
    if html is not None:  # (a bad line past the replay's --until or divergence: exit 2)
        write_page(trace, html, divergence=result.divergence)
        echo(f"wrote {html}", err=True)
    if as_json:
        data = result.to_json()
        if until is not None and result.machine is not None:
            data["machine"] = result.machine.model_dump()
        emit_json(data)
    else:
        if until is not None and result.ok and result.machine is not None:
            emit_json(result.machine.model_dump())
            if result.stopped_at is None:
                echo(f"note: the trace ends before seq {until}", err=True)
        _print_result(result)
    sys.exit(0 if result.ok else 1)


def _with_agent(
    paths: list[str],
    agent: str,
    tools_mode: str,
    compactor_mode: str,
    update: bool,
    force: bool,
    as_json: bool,
    html_out: str | None,
) -> NoReturn:
    """Replay (or update) every trace against the agent; with ``html_out`` (one trace), also
    write its timeline there, the divergence (if any) highlighted."""
    worst = 0
    rows: list[dict[str, Any]] = []
    for trace in paths:
        try:
            if update:
                updated = update_trace(
                    trace, agent, tools=tools_mode, compactor=compactor_mode, force=force
                )
                worst = max(worst, 0 if updated.ok else 1)
                row: dict[str, Any] = {"path": trace, "ok": updated.ok, "message": updated.message}
                rows.append({**row, "details": updated.details})
                if not as_json:
                    echo(updated.summary())
                continue
            result = replay_agent(trace, agent, tools=tools_mode, compactor=compactor_mode)
        except (AgentError, ValueError) as exc:  # ValueError: a bad --tools list
            die(str(exc))
        except TraceFormatError as exc:
            worst = 2
            rows.append({"path": trace, "ok": False, "error": str(exc)})
            if not as_json:
                echo(f"error: {exc}", err=True)
            continue
        worst = max(worst, 0 if result.ok else 1)
        rows.append(result.to_json())
        if html_out is not None:
            write_page(trace, html_out, divergence=result.divergence)
            echo(f"wrote {html_out}", err=True)
        if not as_json:
            _print_result(result)
    if as_json:
        emit_json(rows[0] if len(rows) == 1 else {"ok": worst == 0, "results": rows})
    sys.exit(worst)


def _print_result(result: ReplayResult) -> None:
    if result.divergence is None:
        echo(result.summary())
    else:
        print_divergence(make_console(), result.divergence, result.path)
        for note in result.notes:
            echo(f"note: {note}")


def _replay_one(trace: str, driver: bool, until: int | None, digest_every: int) -> ReplayResult:
    if driver:
        return replay_driver(trace)
    return replay_trace(trace, until=until, digest_every=digest_every)


def _replay_many(paths: list[str], as_json: bool, driver: bool, digest_every: int) -> NoReturn:
    worst = 0
    rows: list[dict[str, Any]] = []
    for trace in paths:
        try:
            result = _replay_one(trace, driver, None, digest_every)
        except TraceFormatError as exc:
            worst = 2
            rows.append({"path": trace, "ok": False, "error": str(exc)})
            if not as_json:
                echo(f"error: {exc}")
            continue
        if result.records == 0:
            worst = 2
            rows.append({"path": trace, "ok": False, "error": "no complete record to replay"})
            if not as_json:
                echo(f"error: {trace}: no complete record to replay")
            continue
        worst = max(worst, 0 if result.ok else 1)
        rows.append(result.to_json())
        if not as_json:
            _print_result(result)
    ok = sum(1 for r in rows if r["ok"])
    if as_json:
        emit_json({"ok": worst == 0, "replayed": len(rows), "passed": ok, "results": rows})
    else:
        echo(f"{ok} of {len(rows)} traces replayed without divergence")
    sys.exit(worst)
