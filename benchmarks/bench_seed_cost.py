"""A machine-level fuzz seed's cost, before and after a change, side by side in one run.

    git worktree add /tmp/before <rev>           # the code to compare with
    python -m benchmarks.bench_seed_cost --before /tmp/before [--seeds 0:60] [--rounds 5]

Each round times ``check_case(make_case(seed))`` (every check: invariants after every step and
feed, the determinism twin, the crash variant, the heal run) over the same seeds in a fresh
process per tree, the trees taking turns, so that load on a shared machine falls on both alike.
Reported per tree: CPU milliseconds a seed (the least of the rounds: the run least disturbed) and
the simulated runs a seed. Run by hand, not in CI: the figures are the machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = """
import json, sys, time
from loopctl_sim import fuzz as fz
lo, hi = int(sys.argv[1]), int(sys.argv[2])
fz.check_case(fz.make_case(lo))  # warm: imports and first-use caches are not a seed's cost
started = time.process_time()
runs = sum(fz.check_case(fz.make_case(seed)).runs for seed in range(lo, hi))
cpu = time.process_time() - started
print(json.dumps({"cpu_ms_per_seed": 1000 * cpu / (hi - lo), "runs_per_seed": runs / (hi - lo)}))
"""


def _measure(tree: Path, lo: int, hi: int) -> dict[str, float]:
    """One round in a fresh interpreter that imports ``tree``'s code first."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(lo), str(hi)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the old code")
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--seeds", default="0:60", help="LO:HI, the seeds of every round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    lo, hi = (int(x) for x in args.seeds.split(":"))
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            rounds[name].append(_measure(tree, lo, hi))
    report: dict[str, dict[str, float | str]] = {
        name: {
            "tree": str(trees[name]),
            "cpu_ms_per_seed": round(min(r["cpu_ms_per_seed"] for r in got), 2),
            "runs_per_seed": got[0]["runs_per_seed"],
        }
        for name, got in rounds.items()
    }
    cost = {name: min(r["cpu_ms_per_seed"] for r in got) for name, got in rounds.items()}
    ratio = cost["after"] / cost["before"]
    if args.json:
        print(json.dumps({**report, "after_over_before": round(ratio, 3)}, indent=2))
    else:
        for name, r in report.items():
            print(
                f"{name:7} {cost[name]:8.2f} CPU ms a seed, "
                f"{r['runs_per_seed']:.2f} simulated runs a seed   ({r['tree']})"
            )
        print(f"after / before: {ratio:.3f} (seeds {lo}:{hi}, least of {args.rounds} rounds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
