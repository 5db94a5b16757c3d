"""Machine-level replay throughput and memory on generated traces.

    python -m benchmarks.bench_replay            # full: 10k, 100k and 200k records (minutes)
    python -m benchmarks.bench_replay --smoke    # small sizes, seconds (CI)
    python -m benchmarks.bench_replay --json
    python -m benchmarks.bench_replay --big 1    # peak RSS on a 1 GB trace (minutes, disk)

The trace is a long run of the simulator: every turn one tool call, so 8 records a turn
(2 steps, 2 feeds, 4 io). Two shapes:

- ``compacting``: a small context window, so threshold compaction keeps the history bounded
  (a long-lived agent); the brain's size, and so the cost of a digest, stay flat;
- ``growing``: no compaction, the history grows with the trace (one long run: pending holds it
  all). The brain's digest keeps a running hash of the conversation, so a digest after a feed
  costs O(the feed) and this shape replays about as fast as the other (a digest that hashed
  the whole brain would make it quadratic).

Figures, per size: the end-to-end replay rate (read, parse, re-ask steps, apply feeds, compare
the digest after every feed: ``replay_trace``'s default) in records per second of wall time,
and per second of this process's CPU time (the machine may be shared); the CPU rate of
``replay_trace(digest_every=32)`` (digests compared at checkpoints, an exact second pass only
when something differs); the rate without digests and step comparisons; the parse-only rate
(``TraceReader``: every line validated into its pydantic record, as every command reads it); the
peak traced memory of a replay (tracemalloc, in a separate pass); the recording rate.

Goal: 100,000 records/s and flat memory (the traced peak stops growing once bounded caches are
full; ``--big 1`` replays a 100 MB and a 1 GB trace in fresh processes and compares their peak
RSS). Figures and the machine: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loopctl import Message, ToolCall
from loopctl.core import MachinePolicy
from loopctl_sim.replay import replay_trace
from loopctl_sim.sim.machine import simulate
from loopctl_sim.sim.world import ModelScript, World
from loopctl_sim.trace import TraceReader

RECORDS_PER_TURN = 8
GOAL = 100_000
CHECKPOINT_EVERY = 32


def make_world(records: int, shape: str) -> World:
    turns = max(records // RECORDS_PER_TURN, 1)

    def model(conversation: Sequence[Message], index: int) -> Message:
        if index >= turns:
            return Message.assistant("done")
        call = ToolCall(id=f"c{index}", name="add", arguments={"a": index, "b": 1})
        return Message.assistant(f"step {index}", [call])

    policy = MachinePolicy(
        max_turns=turns + 10,
        context_window=2_000 if shape == "compacting" else 10_000_000,
        loop_action="off",
    )
    return World(
        input="count",
        model=ModelScript(model),
        tools={"add": lambda a: str(a["a"] + a["b"])},
        policy=policy,
        keep_head=2,
        keep_tail=6,
        max_steps=10 * turns + 100,
        name=f"bench-{shape}",
    )


def _replay_without_digests(path: Path) -> int:
    """Read, parse, re-ask steps and apply feeds, but skip the digest and the step comparison:
    what is left of a replay without them (to time them)."""
    machine: Any = None
    n = 0
    for rec in TraceReader(path):
        n += 1
        if rec.type == "feed":
            machine.feed(rec.args)
        elif rec.type == "step":
            machine.next_step(rec.policy)
        elif rec.type == "header":
            machine = rec.machine()
    return n


def _parse_records(path: Path) -> int:
    """Read and parse into records (``TraceReader``: what replay and every command read)."""
    return sum(1 for _ in TraceReader(path))


_CPU = {"cpu": 0.0}


def _rate(fn: Any, path: Path) -> tuple[float, int]:
    started, cpu = time.perf_counter(), time.process_time()
    n = fn(path)
    elapsed = time.perf_counter() - started
    _CPU["cpu"] = n / max(time.process_time() - cpu, 1e-9)
    return n / elapsed, n


def measure(records: int, shape: str, directory: Path) -> dict[str, Any]:
    path = directory / f"{shape}-{records}.jsonl"
    started = time.perf_counter()
    sim = simulate(make_world(records, shape), path, created="bench")
    record_s = time.perf_counter() - started
    size = path.stat().st_size

    def full(p: Path) -> int:
        result = replay_trace(p)
        if not result.ok:  # pragma: no cover
            raise AssertionError(result.summary())
        return result.records

    replay_rate, n = _rate(full, path)
    replay_cpu_rate = _CPU["cpu"]

    def checkpointed(p: Path) -> int:
        result = replay_trace(p, digest_every=CHECKPOINT_EVERY)
        if not result.ok:  # pragma: no cover
            raise AssertionError(result.summary())
        return result.records

    _rate(checkpointed, path)
    checkpoint_cpu_rate = _CPU["cpu"]
    no_digest_rate, _ = _rate(_replay_without_digests, path)
    parse_records_rate, _ = _rate(_parse_records, path)

    tracemalloc.start()
    full(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    path.unlink()
    # Only the bounded-history shape carries "records_per_s" (what ``python -m benchmarks``
    # checks against the goal); the growing shape shows the O(history) digest cost.
    rate_key = "records_per_s" if shape == "compacting" else "replay_rate"
    return {
        "shape": shape,
        "records": n,
        "turns": sim.machine.turns_taken,
        "compactions": sim.compactions,
        "file_bytes": size,
        "record_rate": round(n / record_s),
        rate_key: round(replay_rate),
        # records per second of this process's CPU time: what the rate would be on an idle core
        "replay_rate_cpu": round(replay_cpu_rate),
        # replay_trace(digest_every=CHECKPOINT_EVERY), per CPU second
        "checkpointed_rate_cpu": round(checkpoint_cpu_rate),
        "replay_rate_without_digest": round(no_digest_rate),
        "parse_records_rate": round(parse_records_rate),
        "digest_share": round(1 - replay_rate / no_digest_rate, 3),
        "peak_replay_memory_kib": round(peak / 1024),
    }


def run(smoke: bool) -> dict[str, Any]:
    """Measure every size and shape; ``smoke`` keeps it to seconds."""
    sizes = [1_000, 3_000] if smoke else [10_000, 100_000, 200_000]
    growing_sizes = [1_000, 3_000] if smoke else [1_000, 3_000, 10_000]
    rows = []
    compacting: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for n in sizes:
            compacting.append(measure(n, "compacting", directory))
        rows.extend(compacting)
        for n in growing_sizes:
            rows.append(measure(n, "growing", directory))
    memory = [r["peak_replay_memory_kib"] for r in compacting]
    return {
        "goal_rate": GOAL,
        "python": sys.version.split()[0],
        "smoke": smoke,
        "rows": rows,
        "best_rate": max(r["records_per_s"] for r in compacting),
        # Bounded caches fill during the first ~50k records (the brain's per-turn state caches,
        # 4096 entries; pydantic-core's string cache); flat memory means the largest trace
        # peaks no higher than the one before it.
        "compacting_memory_ratio_largest_to_previous": round(memory[-1] / memory[-2], 2),
    }


def _table(report: dict[str, Any]) -> str:
    cols = [
        ("shape", 10),
        ("records", 8),
        ("rate", 12),
        ("replay_rate_cpu", 12),
        ("checkpointed_rate_cpu", 12),
        ("replay_rate_without_digest", 12),
        ("parse_records_rate", 11),
        ("digest_share", 7),
        ("peak_replay_memory_kib", 10),
        ("record_rate", 10),
    ]
    heads = [
        "shape",
        "records",
        "replay r/s",
        "replay r/cpu-s",
        "ckpt r/cpu-s",
        "no-digest r/s",
        "records r/s",
        "digest",
        "peak KiB",
        "record r/s",
    ]
    out = ["  ".join(h.rjust(w) for h, (_, w) in zip(heads, cols, strict=True))]
    for row in report["rows"]:
        row = {**row, "rate": row.get("records_per_s", row.get("replay_rate"))}
        out.append("  ".join(str(row[k]).rjust(w) for k, w in cols))
    out.append(
        f"goal {report['goal_rate']} records/s; best {report['best_rate']}; "
        f"memory ratio (compacting, largest/previous trace) "
        f"{report['compacting_memory_ratio_largest_to_previous']}"
    )
    return "\n".join(out)


# --- memory on a big trace ----------------------------------------------------------------------


def _replay_child(path: str) -> None:
    """Replay ``path`` in this (fresh) process and print what it cost, as JSON."""
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started, cpu = time.perf_counter(), time.process_time()
    result = replay_trace(path)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    report = {
        "ok": result.ok,
        "summary": result.summary()[:300],
        "records": result.records,
        "bytes": Path(path).stat().st_size,
        "seconds": round(elapsed, 2),
        "records_per_s": round(result.records / elapsed),
        "records_per_cpu_s": round(result.records / cpu),
        # Linux: KiB. Before: the interpreter and imports, so the growth is the replay's own.
        "rss_after_imports_kib": rss_before,
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    print(json.dumps(report))


def _simulate_bytes(target_bytes: int, path: Path) -> None:
    """Record a compacting trace of about ``target_bytes`` (the simulator, one long run)."""
    sample = path.with_name("sample.jsonl")
    simulate(make_world(10_000, "compacting"), sample, created="bench")
    per_record = sample.stat().st_size / sum(1 for _ in sample.open("rb"))
    sample.unlink()
    simulate(make_world(int(target_bytes / per_record), "compacting"), path, created="bench")


def big(gigabytes: float) -> dict[str, Any]:
    """Peak RSS of machine replay on a trace of ``gigabytes`` and on one a tenth of its size,
    each replayed by a fresh process: flat memory means the two peaks are about the same.

    The traces are recorded by the simulator (about 20,000 records/s: minutes for a gigabyte)
    into a temporary directory, deleted afterwards. Not part of ``run()``, CI or the smoke."""
    size = int(gigabytes * 1e9)
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-big-") as tmp:
        directory = Path(tmp)
        free = shutil.disk_usage(directory).free
        if free < 1.2 * size + 1e9:
            raise SystemExit(f"{tmp}: {free / 1e9:.1f} GB free, {1.2 * size / 1e9:.1f} GB needed")
        rows = []
        for label, target in (("tenth", size // 10), ("full", size)):
            path = directory / f"{label}.jsonl"
            started = time.perf_counter()
            _simulate_bytes(target, path)
            recorded_s = time.perf_counter() - started
            child = subprocess.run(
                [sys.executable, "-m", "benchmarks.bench_replay", "--replay-child", str(path)],
                capture_output=True,
                text=True,
                check=True,
            )
            row = json.loads(child.stdout)
            row["recorded_in_s"] = round(recorded_s, 1)
            rows.append(row)
            path.unlink()
    small, large = rows
    return {
        "rows": rows,
        "bytes_ratio": round(large["bytes"] / small["bytes"], 2),
        "peak_rss_ratio": round(large["peak_rss_kib"] / small["peak_rss_kib"], 3),
    }


def _big_table(report: dict[str, Any]) -> str:
    heads = ["bytes", "records", "replay r/s", "r/cpu-s", "rss after imports KiB", "peak RSS KiB"]
    keys = ["bytes", "records", "records_per_s", "records_per_cpu_s"]
    keys += ["rss_after_imports_kib", "peak_rss_kib"]
    out = ["  ".join(h.rjust(14) for h in heads)]
    for row in report["rows"]:
        out.append("  ".join(str(row[k]).rjust(14) for k in keys))
        if not row["ok"]:
            out.append(f"  NOT OK: {row['summary']}")
    out.append(
        f"bytes ratio {report['bytes_ratio']}; peak RSS ratio {report['peak_rss_ratio']} "
        "(flat memory: about 1)"
    )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes (seconds)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--big",
        type=float,
        metavar="GB",
        help="instead: peak RSS of replaying a trace of GB gigabytes and of one a tenth of it "
        "(each in a fresh process; needs 1.2 x GB of free space in the temp dir; minutes)",
    )
    parser.add_argument("--replay-child", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.replay_child:
        _replay_child(args.replay_child)
        return
    if args.big:
        report = big(args.big)
        print(json.dumps(report, indent=2) if args.json else _big_table(report))
        return
    report = run(args.smoke)
    print(json.dumps(report, indent=2) if args.json else _table(report))


if __name__ == "__main__":
    main()
