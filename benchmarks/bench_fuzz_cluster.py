"""A fuzz campaign on a Dask ``LocalCluster`` against ``--workers 2`` on this machine: throughput,
the cluster's overhead per chunk of seeds, and the figures behind the default chunk size.

    python -m benchmarks.bench_fuzz_cluster            # full (3 to 5 minutes on 2 cores)
    python -m benchmarks.bench_fuzz_cluster --smoke    # seconds (CI); figures meaningless
    python -m benchmarks.bench_fuzz_cluster --json out.json

What it measures, all with two workers (``--workers 2``: a process pool; ``LocalCluster``: two
worker processes of one thread, what ``--cluster local:2`` starts), built-in world, every check,
no shrinking (no seed fails); each figure the best of three runs (one in smoke mode):

- ``one_process``: the seeds in this process: the cost of a seed, the unit everything is
  compared with;
- ``campaign`` rows: the same seeds as a campaign on each executor at several chunk sizes:
  seeds/s (wall), the speed-up over one process, the cluster's rate over the pool's, and the
  cluster's extra wall time per chunk (``(cluster - pool) / chunks``);
- ``null`` rows: chunks whose job does nothing but send back one small result per seed: the
  round trip of a chunk alone (submit, schedule, run, pickle back, hand to the campaign), per
  chunk, on each executor;
- ``startup``: starting the LocalCluster and its workers' first tasks (which import loopctl
  there), not in the campaign rows: a cluster is started once for a campaign of hours;
- ``chunk_size``: the default (``default_chunk_size``: about eight chunks per worker, at most
  100 seeds) for a million seeds on two workers and on a swarm of 200, and what fraction of a
  chunk's time the per-chunk overhead is at that size.

Every campaign's summary is checked to be the one-process summary (the benchmark refuses
figures of a campaign that gave other results). Rates are wall rates: on a shared 2-core
machine they move with other load; the ratios of rows measured back to back move less.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from loopctl_sim import fuzz as fz
from loopctl_sim.fuzz.campaign import ChunkResult
from loopctl_sim.fuzz.cluster import ClusterSpec, DaskCluster
from loopctl_sim.fuzz.executors import Chunk, Executor, chunks, default_chunk_size, in_processes

WORKERS = 2
CONFIG = fz.FuzzConfig(shrink=False)


def _null_job(chunk: Chunk) -> ChunkResult:
    """A chunk's round trip without its seeds' work: one small result per seed, as a real chunk
    sends back for passing seeds."""
    return ChunkResult(chunk, [fz.CaseResult(seed, outcome="completed") for seed in chunk.seeds])


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = call()
    return time.perf_counter() - start, value


def _counts(s: fz.CampaignSummary) -> tuple[object, ...]:
    return (s.seeds, s.runs, s.steps, s.faults, s.outcomes, [r.seed for r in s.failures])


def _best(repeats: int, call: Callable[[], Any]) -> tuple[float, Any]:
    """The fastest of ``repeats`` runs (the one least slowed by other load) and its value."""
    return min((_timed(call) for _ in range(repeats)), key=lambda timed: timed[0])


def campaign_row(
    name: str,
    executor: Executor,
    seeds: Sequence[int],
    size: int,
    one: fz.CampaignSummary,
    repeats: int,
) -> dict[str, Any]:
    seconds, summary = _best(
        repeats, lambda: fz.run_campaign(seeds, CONFIG, executor=executor, chunk_size=size)
    )
    if _counts(summary) != _counts(one):
        raise SystemExit(f"{name}, chunks of {size}: the summary differs from one process's")
    return {
        "executor": name,
        "chunk_size": size,
        "chunks": -(-len(seeds) // size),
        "seconds": seconds,
        "seeds_per_s": len(seeds) / seconds,
    }


def null_row(
    name: str, executor: Executor, count: int, size: int, repeats: int = 1
) -> dict[str, Any]:
    """``count`` chunks of ``size`` results that cost nothing to compute: the wall time per
    chunk, and the worker time per chunk (wall x workers / chunks: what a chunk takes from the
    workers' time, the figure to set against a chunk's seeds)."""
    parts = list(chunks(range(count * size), size))

    def once() -> int:
        got: list[ChunkResult] = []
        executor(_null_job, parts, got.append)
        return len(got)

    seconds, taken = _best(repeats, once)
    assert taken == count
    return {
        "executor": name,
        "chunks": count,
        "chunk_size": size,
        "wall_us_per_chunk": seconds / count * 1e6,
        "worker_us_per_chunk": seconds * WORKERS / count * 1e6,
    }


def run(smoke: bool = False) -> dict[str, Any]:
    seeds = range(8 if smoke else 160)
    repeats = 1 if smoke else 3
    default = default_chunk_size(len(seeds), WORKERS)
    sizes = sorted({2, default} if smoke else {1, 5, default, 40})
    one_seconds, one = _best(repeats, lambda: fz.run_campaign(seeds, CONFIG))
    seed_ms = one_seconds / len(seeds) * 1e3
    pool = in_processes(WORKERS)
    nulls = 20 if smoke else 400
    rows: list[dict[str, Any]] = []
    null_rows = [null_row("workers", pool, nulls, 100, repeats)]
    cluster = DaskCluster(ClusterSpec(None, WORKERS))
    startup, _ = _timed(cluster.open)
    try:
        # the workers' first task imports loopctl_sim there: part of the start, not of a chunk
        warmup, _ = _timed(lambda: null_row("cluster", cluster, 2 * WORKERS, 1))
        startup += warmup
        null_rows.append(null_row("cluster", cluster, nulls, 100, repeats))
        for size in sizes:  # back to back, so that both see the same load
            rows.append(campaign_row("workers", pool, seeds, size, one, repeats))
            rows.append(campaign_row("cluster", cluster, seeds, size, one, repeats))
    finally:
        cluster.close()
    by = {(r["executor"], r["chunk_size"]): r for r in rows}
    for size in sizes:
        spread, local = by["cluster", size], by["workers", size]
        spread["cluster_over_workers"] = spread["seeds_per_s"] / local["seeds_per_s"]
        spread["extra_ms_per_chunk"] = (
            (spread["seconds"] - local["seconds"]) / spread["chunks"] * 1e3
        )
    for row in rows:
        row["speedup_over_one_process"] = row["seeds_per_s"] * one_seconds / len(seeds)
    null_us = {r["executor"]: r["worker_us_per_chunk"] for r in null_rows}
    choice = {}
    for label, seeds_n, workers in (
        ("1M seeds, 2 workers", 10**6, 2),
        ("1M seeds, 2000 workers", 10**6, 2000),
        ("1000 seeds, 2 workers", 1000, 2),
    ):
        size = default_chunk_size(seeds_n, workers)
        choice[label] = {
            "chunk_size": size,
            "chunks": -(-seeds_n // size),
            "cluster_overhead_fraction": null_us["cluster"] / 1e3 / (size * seed_ms),
        }
    return {
        "smoke": smoke,
        "load_average": os.getloadavg(),
        "seeds": len(seeds),
        "one_process": {
            "seconds": one_seconds,
            "ms_per_seed": seed_ms,
            "seeds_per_s": len(seeds) / one_seconds,
        },
        "startup_s": startup,
        "campaign": rows,
        "null": null_rows,
        "chunk_size": choice,
    }


def report(result: dict[str, Any]) -> list[str]:
    one = result["one_process"]
    lines = [
        f"{result['seeds']} seeds of the built-in world, every check, no shrinking; "
        f"{WORKERS} workers",
        "load average at the end (1, 5, 15 min): "
        + ", ".join(f"{x:.2f}" for x in result["load_average"]),
        f"one process: {one['ms_per_seed']:.1f} ms a seed, {one['seeds_per_s']:.1f} seeds/s",
        f"LocalCluster({WORKERS} processes) started in {result['startup_s']:.2f} s",
        "chunk  executor  seeds/s  x one process  cluster/workers  cluster extra ms/chunk",
    ]
    for row in result["campaign"]:
        ratio = f"{row['cluster_over_workers']:.3f}" if "cluster_over_workers" in row else ""
        extra = f"{row['extra_ms_per_chunk']:+.1f}" if "extra_ms_per_chunk" in row else ""
        lines.append(
            f"{row['chunk_size']:>5}  {row['executor']:<8}  {row['seeds_per_s']:>7.1f}  "
            f"{row['speedup_over_one_process']:>13.2f}  {ratio:>15}  {extra:>22}"
        )
    for row in result["null"]:
        lines.append(
            f"a chunk's round trip alone ({row['executor']}, {row['chunks']} chunks of "
            f"{row['chunk_size']} results): {row['wall_us_per_chunk']:,.0f} us wall, "
            f"{row['worker_us_per_chunk']:,.0f} us of worker time"
        )
    for label, c in result["chunk_size"].items():
        lines.append(
            f"default chunk size for {label}: {c['chunk_size']} ({c['chunks']:,} chunks); the "
            f"cluster's round trip is {c['cluster_overhead_fraction']:.2%} of a chunk's worker time"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    result = run(args.smoke)
    print("\n".join(report(result)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
