"""The regression corpus: one trace per example scenario, in ``tests/traces/``.

    python -m loopctl_sim.corpus --write     # (re)record every trace from examples/scenarios/
    python -m loopctl_sim.corpus --check     # re-simulate and compare byte for byte (exit 1)

The traces are recorded with a fixed creation time, so recording is reproducible byte for byte.
``tests/sim/test_corpus.py`` replays every trace there: a change to the engine's decisions shows
up as a divergence report naming the record. When a change is intended, re-record with
``--write`` and review the diff of the traces like any other change.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import click

from loopctl_sim.scenario import load_scenario
from loopctl_sim.sim import simulate

__all__ = ["CREATED", "record_scenario", "scenario_paths"]

CREATED = "2026-01-01T00:00:00+00:00"
ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "examples" / "scenarios"
TRACES = ROOT / "tests" / "traces"


def scenario_paths(directory: Path = SCENARIOS) -> list[Path]:
    return sorted(directory.glob("*.yaml"))


def record_scenario(path: Path) -> str:
    """The trace of the scenario at ``path`` as text (fixed creation time)."""
    buf = io.StringIO()
    simulate(load_scenario(path).world(), buf, created=CREATED)
    return buf.getvalue()


@click.command()
@click.option("--write", "mode", flag_value="write", help="Record every trace.")
@click.option(
    "--check",
    "mode",
    flag_value="check",
    default=True,
    help="Compare fresh recordings with the stored traces (the default).",
)
@click.option("--scenarios", type=click.Path(file_okay=False, path_type=Path), default=SCENARIOS)
@click.option("--traces", type=click.Path(file_okay=False, path_type=Path), default=TRACES)
def main(mode: str, scenarios: Path, traces: Path) -> None:
    """Record or check the regression corpus of traces."""
    stale = []
    for path in scenario_paths(scenarios):
        target = traces / f"{path.stem}.jsonl"
        text = record_scenario(path)
        if mode == "write":
            traces.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            click.echo(f"wrote {target}")
        elif not target.exists() or target.read_text(encoding="utf-8") != text:
            stale.append(target)
            click.echo(f"differs: {target}")
    if stale:
        click.echo(f"{len(stale)} trace(s) differ; re-record with --write if intended")
        sys.exit(1)


if __name__ == "__main__":
    main()
