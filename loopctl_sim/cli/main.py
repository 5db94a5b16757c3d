"""``loopctl-sim``: replay, show and diff traces; run scenarios; print the trace schema.

Exit codes: 0 success; 1 a divergence (replay, diff) or an unexpected outcome (run); 2 an
unreadable trace or scenario (the message names ``file:line`` or the field; never a traceback).
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from loopctl_sim.replay.diff import diff_traces
from loopctl_sim.replay.machine import ReplayResult, pretty, replay_trace
from loopctl_sim.sim.machine import SimError, simulate
from loopctl_sim.sim.scenario import ScenarioError, load_scenario
from loopctl_sim.trace.records import TraceFormatError, trace_json_schema
from loopctl_sim.view.show import timeline

__all__ = ["main"]


def _die(message: str, code: int = 2) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))


def _driver_module() -> Any:
    try:
        return importlib.import_module("loopctl_sim.sim.driver")
    except ImportError as exc:  # the driver (BareLoop) is not there yet
        _die(f"driver-level simulation is not available: {exc}")


@click.group()
def main() -> None:
    """Record, replay and simulate loopctl runs."""


@main.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path())
@click.option(
    "--until",
    "until",
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
def replay(
    traces: tuple[str, ...], until: int | None, as_json: bool, driver: bool, digest_every: int
) -> None:
    """Replay TRACES against the brain; exit 1 at the first divergence.

    Several traces (or directories of *.jsonl) are replayed one after the other, for CI: each
    gets its line, and the exit status is 1 when any diverged, 2 when any could not be read.
    """
    if driver and until is not None:
        _die("--until works at machine level only (drop --driver)")
    if driver and digest_every != 1:
        _die("--digest-every works at machine level only (drop --driver)")
    paths = _expand(traces)
    if len(paths) != 1:
        if until is not None:
            _die("--until needs exactly one trace")
        _replay_many(paths, as_json, driver, digest_every)
    trace = paths[0]
    try:
        result = _replay_one(trace, driver, until, digest_every)
    except TraceFormatError as exc:
        _die(str(exc))
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    if result.records == 0:
        _die(f"{trace}: no complete record to replay")
    if as_json:
        data = result.to_json()
        if until is not None and result.machine is not None:
            data["machine"] = result.machine.model_dump()
        _emit_json(data)
    else:
        if until is not None and result.ok and result.machine is not None:
            click.echo(pretty(result.machine.model_dump()))
            if result.stopped_at is None:
                click.echo(f"note: the trace ends before seq {until}", err=True)
        click.echo(result.summary())
    sys.exit(0 if result.ok else 1)


def _expand(args: tuple[str, ...]) -> list[str]:
    paths: list[str] = []
    for arg in args:
        p = Path(arg)
        if p.is_dir():
            found = sorted(str(f) for f in p.rglob("*.jsonl"))
            if not found:
                _die(f"{arg}: no *.jsonl trace in this directory")
            paths.extend(found)
        else:
            paths.append(arg)
    return paths


def _replay_one(trace: str, driver: bool, until: int | None, digest_every: int) -> ReplayResult:
    if driver:
        result: ReplayResult = _driver_module().replay_driver(trace)
        return result
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
                click.echo(f"error: {exc}")
            continue
        if result.records == 0:
            worst = 2
            rows.append({"path": trace, "ok": False, "error": "no complete record to replay"})
            if not as_json:
                click.echo(f"error: {trace}: no complete record to replay")
            continue
        worst = max(worst, 0 if result.ok else 1)
        rows.append(result.to_json())
        if not as_json:
            click.echo(result.summary())
    ok = sum(1 for r in rows if r["ok"])
    if as_json:
        _emit_json({"ok": worst == 0, "replayed": len(rows), "passed": ok, "results": rows})
    else:
        click.echo(f"{ok} of {len(rows)} traces replayed without divergence")
    sys.exit(worst)


@main.command()
@click.argument("trace", type=click.Path(dir_okay=False))
def show(trace: str) -> None:
    """Print a readable timeline of TRACE."""
    try:
        for line in timeline(trace):
            click.echo(line)
    except TraceFormatError as exc:
        _die(str(exc))


@main.command()
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
    """Show the first divergence between traces A and B (times and durations ignored)."""
    try:
        found = diff_traces(a, b, ignore_io=ignore_io, brain_only=brain_only)
    except TraceFormatError as exc:
        _die(str(exc))
    if as_json:
        _emit_json(
            {"same": found is None, "divergence": None if found is None else found.to_json()}
        )
    elif found is None:
        click.echo(f"same: {a} and {b} hold the same records")
    else:
        click.echo(found.report())
    sys.exit(0 if found is None else 1)


@main.command()
def schema() -> None:
    """Print the JSON Schema of a trace record (one line of a trace)."""
    _emit_json(trace_json_schema())


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the run's trace here.",
)
@click.option("--driver", is_flag=True, help="Run through BareLoop with a scripted client.")
@click.option("--created", default=None, help="Fix the header's creation time (reproducible).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def run(
    scenario: str, trace_path: str | None, driver: bool, created: str | None, as_json: bool
) -> None:
    """Run a SCENARIO (YAML world) and print its outcome; exit 1 if it differs from `expect`."""
    try:
        sc = load_scenario(scenario)
    except ScenarioError as exc:
        _die(str(exc))
    try:
        if driver:
            result = _driver_module().simulate_driver(sc.world(), trace_path, created=created)
        else:
            result = simulate(sc.world(), trace_path, created=created)
    except SimError as exc:
        _die(f"{scenario}: {exc}")
    outcome = result.outcome.kind
    ok = sc.expect is None or sc.expect == outcome
    if as_json:
        _emit_json(
            {
                "scenario": sc.name,
                "outcome": result.outcome.model_dump(mode="json"),
                "expected": sc.expect,
                "ok": ok,
                "steps": result.steps,
                "model_requests": result.model_requests,
                "retries": result.retries,
                "tool_calls": result.tool_calls,
                "compactions": result.compactions,
                "crashes": result.crashes,
                "digest": result.digest,
                "trace": trace_path,
            }
        )
    else:
        click.echo(result.summary())
        if trace_path:
            click.echo(f"trace written to {trace_path}")
        if not ok:
            click.echo(f"unexpected outcome: {outcome} (the scenario expects {sc.expect})")
    sys.exit(0 if ok else 1)


def _register_plugins() -> None:
    """Commands that live in other modules of ``loopctl_sim`` join the group when present:
    every click command named in ``loopctl_sim.cli.extra.__all__`` (``fuzz``, ``export-test``)."""
    for name in ("loopctl_sim.cli.extra",):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for attr in getattr(module, "__all__", ()):
            command = getattr(module, attr, None)
            if isinstance(command, click.Command) and command.name not in main.commands:
                main.add_command(command)


_register_plugins()
