"""A fuzzed session against a fuzzed single run of the same agent, side by side.

    python -m benchmarks.bench_sessions            # 40 seeds of each
    python -m benchmarks.bench_sessions --smoke    # 4 seeds (seconds); figures meaningless
    python -m benchmarks.bench_sessions --json

The agent is the sample support agent (``examples/support_agent``: in-memory tools, so the
figures are the harness's, not the tools'). For each seed:

- ``single_run_seed``: one seed of ``loopctl-sim fuzz --agent`` (``run_seed``: the run, its
  determinism twin, its crash variant and its heal run, every check), no shrinking;
- ``session_seed``: one seed of ``loopctl-sim fuzz --agent --user-turns 5`` (``run_session_seed``:
  five user turns, each a run, every cross-run check, the determinism twin), no shrinking.

Both draw every fault kind and let the model answer within about 6 replies a run. The figure is
CPU seconds of this process per seed (the median over the seeds, and the total), which other load
on a shared machine does not depress; ``ratio`` is session over single run. The budget is 6: a
session is runs in a row, not a heavier machinery (five runs and their twin against a run and its
three variants: about 2.5 by the run count alone).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:  # ``examples`` importable, run from anywhere
    sys.path.insert(0, ROOT)

from loopctl_sim.fuzz.campaign import run_seed  # noqa: E402
from loopctl_sim.fuzz.case import ALL_FAULTS, FuzzConfig  # noqa: E402
from loopctl_sim.fuzz.sessions import SessionFuzzConfig, run_session_seed  # noqa: E402

AGENT = "examples.support_agent.agent:build"
BUDGET = 6.0
TURNS = 6
USER_TURNS = 5


def _cpu_per_seed(fn: Callable[[int], Any], seeds: Sequence[int]) -> list[float]:
    times = []
    for seed in seeds:
        start = time.process_time()
        fn(seed)
        times.append(time.process_time() - start)
    return times


def run(smoke: bool) -> dict[str, Any]:
    seeds = range(4 if smoke else 40)
    single = FuzzConfig(agent=AGENT, level="driver", turns=TURNS, shrink=False, faults=ALL_FAULTS)
    session = SessionFuzzConfig(
        agent=AGENT, user_turns=USER_TURNS, turns=TURNS, faults=ALL_FAULTS, shrink=False
    )
    # warm both paths once (imports, the agent's profile), outside the measurement
    run_seed(10_000, single)
    run_session_seed(10_000, session)
    # interleaved, so a change of load on the machine touches both alike
    single_times: list[float] = []
    session_times: list[float] = []
    failing = {"single_run_seed": 0, "session_seed": 0}
    for seed in seeds:
        single_times += _cpu_per_seed(
            lambda s: _count(run_seed(s, single).failure is None, failing, "single_run_seed"),
            [seed],
        )
        session_times += _cpu_per_seed(
            lambda s: _count(run_session_seed(s, session).ok, failing, "session_seed"), [seed]
        )
    median_single = statistics.median(single_times)
    median_session = statistics.median(session_times)
    ratio = sum(session_times) / sum(single_times)
    return {
        "smoke": smoke,
        "agent": AGENT,
        "seeds": len(seeds),
        "user_turns": USER_TURNS,
        "single_run_seed": {"median_cpu_s": median_single, "total_cpu_s": sum(single_times)},
        "session_seed": {"median_cpu_s": median_session, "total_cpu_s": sum(session_times)},
        "failing_seeds": failing,
        "ratio": ratio,
        "median_ratio": median_session / median_single,
        "budget": BUDGET,
        "within_budget": ratio <= BUDGET,
    }


def _count(ok: bool, failing: dict[str, int], key: str) -> None:
    if not ok:
        failing[key] += 1


def _table(report: dict[str, Any]) -> str:
    single, session = report["single_run_seed"], report["session_seed"]
    lines = [
        f"agent {report['agent']}, {report['seeds']} seeds each, every fault kind"
        + (" (smoke: figures meaningless)" if report["smoke"] else ""),
        f"{'row':<18} {'median ms/seed':>15} {'total CPU s':>12}",
        f"{'single_run_seed':<18} {1000 * single['median_cpu_s']:>15.2f} "
        f"{single['total_cpu_s']:>12.3f}",
        f"{'session_seed':<18} {1000 * session['median_cpu_s']:>15.2f} "
        f"{session['total_cpu_s']:>12.3f}",
        f"ratio (session / single run, total CPU): {report['ratio']:.2f} "
        f"(median {report['median_ratio']:.2f}); budget {report['budget']:.0f}: "
        f"{'within' if report['within_budget'] else 'OVER'}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="4 seeds: seconds, meaningless")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = run(args.smoke)
    print(json.dumps(report, indent=2) if args.json else _table(report))


if __name__ == "__main__":
    main()
