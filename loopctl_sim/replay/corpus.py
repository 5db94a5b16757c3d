"""The regression corpus: two traces per example scenario, in ``tests/traces/``.

    python -m loopctl_sim.replay.corpus --write   # (re)record every trace from examples/scenarios/
    python -m loopctl_sim.replay.corpus --check   # re-simulate and compare (exit 1 when stale)

``tests/traces/<scenario>.jsonl`` is the machine-level simulator's trace, reproducible byte for
byte; ``tests/traces/driver/<scenario>.jsonl`` the same world through ``BareLoop``, whose io
records carry real durations, so it is compared without them. When a change to the engine's
decisions is intended, re-record with ``--write`` and review the traces' diff like any other.
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

import click

from loopctl_sim.replay.diff import diff_traces
from loopctl_sim.sim import load_scenario, simulate, simulate_driver
from loopctl_sim.trace import TraceFormatError

CREATED = "2026-01-01T00:00:00+00:00"
ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "examples" / "scenarios"
TRACES = ROOT / "tests" / "traces"


def scenario_paths(directory: Path = SCENARIOS) -> list[Path]:
    return sorted(directory.glob("*.yaml"))


def record_scenario(path: Path, *, driver: bool = False) -> str:
    """The trace of the scenario at ``path`` as text (fixed creation time)."""
    buf = io.StringIO()
    if driver:
        simulate_driver(load_scenario(path).world(), buf, created=CREATED)
    else:
        simulate(load_scenario(path).world(), buf, created=CREATED)
    return buf.getvalue()


def _same_records(text: str, stored: Path) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "fresh.jsonl"
        fresh.write_text(text, encoding="utf-8")
        try:
            return diff_traces(fresh, stored) is None
        except TraceFormatError:
            return False


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
        for driver in (False, True):
            folder = traces / "driver" if driver else traces
            target = folder / f"{path.stem}.jsonl"
            text = record_scenario(path, driver=driver)
            if mode == "write":
                folder.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
                click.echo(f"wrote {target}")
                continue
            if not target.exists():
                same = False
            elif driver:
                same = _same_records(text, target)
            else:
                same = target.read_text(encoding="utf-8") == text
            if not same:
                stale.append(target)
                click.echo(f"differs: {target}")
    if stale:
        click.echo(f"{len(stale)} trace(s) differ; re-record with --write if intended")
        sys.exit(1)


if __name__ == "__main__":
    main()
