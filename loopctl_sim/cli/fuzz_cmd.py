"""``loopctl-sim fuzz``: a seeded fault-injection campaign, its failures and their reproducers.

Exit 0 when every seed passes, 1 when any fails, 2 on bad arguments.
"""

from __future__ import annotations

import sys

import click

from loopctl_sim.fuzz.campaign import (
    CaseResult,
    FuzzConfig,
    parse_faults,
    parse_seeds,
    run_campaign,
)

__all__ = ["fuzz"]


def _failure_lines(r: CaseResult, seeds_arg: str, faults_arg: str) -> list[str]:
    assert r.failure is not None
    out = [f"FAIL seed {r.seed}: {r.failure}"]
    if r.shrunk:
        out.append(f"  {r.shrunk}")
    again = f"loopctl-sim fuzz --seeds {r.seed}:{r.seed + 1}"
    if faults_arg != "all":
        again += f" --faults {faults_arg}"
    out.append(f"  rerun:  {again}")
    traces = [f for f in r.files if f.endswith(".jsonl")]
    yamls = [f for f in r.files if f.endswith(".yaml")]
    for f in traces:
        out.append(f"  replay: loopctl-sim replay {f}")
    if yamls:
        out.append(f"  run:    loopctl-sim run {yamls[-1]}")
        out.append(f"  test:   loopctl-sim export-test {traces[-1]}" if traces else "")
    return [line for line in out if line]


@click.command("fuzz")
@click.option(
    "--seeds",
    "seeds_arg",
    default="0:1000",
    show_default=True,
    help="Seeds to run: START:STOP (half-open), N, or N,M,...",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Processes to spread the seeds over.",
)
@click.option(
    "--faults",
    "faults_arg",
    default="all",
    show_default=True,
    help="Fault kinds to draw from: all, none, or a comma list (e.g. network,crash).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="fuzz-failures",
    show_default=True,
    help="Directory for failing traces and shrunk scenarios.",
)
@click.option(
    "--turns",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="About how many model replies each world scripts.",
)
@click.option("--no-shrink", is_flag=True, help="Save failures without shrinking them.")
@click.option("--progress/--no-progress", default=None, help="Show a progress bar (default: tty).")
def fuzz(
    seeds_arg: str,
    workers: int,
    faults_arg: str,
    out: str,
    turns: int,
    no_shrink: bool,
    progress: bool | None,
) -> None:
    """Run a fault-injection campaign over --seeds; exit 1 if any seed fails.

    Each seed builds one world (replies, tools, a swarm of faults); each is run with the
    invariants checked after every step, twice for determinism, once with a crash/restore, and
    followed by a heal run that must complete.
    """
    try:
        seeds = parse_seeds(seeds_arg)
        kinds = parse_faults(faults_arg)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    config = FuzzConfig(faults=kinds, turns=turns, shrink=not no_shrink)
    show = sys.stderr.isatty() if progress is None else progress
    click.echo(
        f"fuzz: {len(seeds)} seeds, faults {faults_arg}, {workers} worker(s), failures to {out}",
        err=True,
    )
    with click.progressbar(
        length=len(seeds), label="seeds", file=sys.stderr, show_pos=True, hidden=not show
    ) as bar:

        def on_result(r: CaseResult) -> None:
            bar.update(1)
            if r.failure is not None and show:
                bar.label = f"seeds ({len(summary_failures) + 1} failing)"
                summary_failures.append(r.seed)

        summary_failures: list[int] = []
        summary = run_campaign(seeds, config, workers=workers, out=out, on_result=on_result)
    for r in summary.failures:
        for line in _failure_lines(r, seeds_arg, faults_arg):
            click.echo(line)
    for line in summary.lines():
        click.echo(line)
    sys.exit(0 if summary.ok else 1)
