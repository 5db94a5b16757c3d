"""Agent replay throughput and memory: a recorded trace replayed against the user's own agent.

    python -m benchmarks.bench_agent_replay            # 10k- and 100k-record traces, both shapes
    python -m benchmarks.bench_agent_replay --smoke    # a small one, for the structure only

The agent is a real ``BareLoop`` with two cheap tools (``add``, an async ``lookup``), a system
prompt and a pre-tool hook, built by a factory as a user's would be; its traces are recorded with
a scripted model, so every turn holds a model request (with its digest), a reply, a tool call, a
tool result and the brain's feeds. ``replay_agent`` answers the model from the trace and runs the
tools live; the figure is records per second of wall-clock time (every step, feed, request digest
and end compared). Two shapes:

- ``runs``: many runs of 20 turns in one conversation (the history grows across runs, as a chat
  session's does);
- ``long``: one long run (pending holds everything).

One more row replays the ``long`` trace with ``add`` declared ``@tool(inline=True)`` (run on the
event loop, as the tools docs advise for a cheap pure function): the default runs a sync tool in
a worker thread, and on this loaded 2-core machine the hop there and back is a large part of a
replay's wall time (``SimpleQueue.put`` and ``epoll`` waits under cProfile). It is reported
beside the others, not counted for the goal.

Each row says how big its trace is: a ``runs`` trace holds its conversation once (a header that
continues the previous run names the brain's digest, trace format v3), so its size grows with
the records, as a ``long`` one's does.

Memory is the peak RSS of a replay in a fresh process (``resource.getrusage``), for traces ten
times apart in length: flat means the trace is streamed, not held.

The goal: 20,000 records/s or more for a 10,000-record trace on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loopctl import BareLoop, Hooks, Message, RunConfig, SessionConfig, ToolCall, tool
from loopctl.testing import ScriptedClient
from loopctl_sim import TraceRecorder, replay_agent

GOAL = 20_000  # records per second


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool(name="add", inline=True)
def add_inline(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _allow(call: ToolCall) -> None:
    return None


def build(client: Any = None, observers: Sequence[Any] = ()) -> BareLoop:
    """The benchmark's agent factory (the convention users follow)."""
    return _agent(client, observers, add)


def build_inline(client: Any = None, observers: Sequence[Any] = ()) -> BareLoop:
    """The same agent with ``add`` run inline (the extra row)."""
    return _agent(client, observers, add_inline)


def _agent(client: Any, observers: Sequence[Any], adder: Any) -> BareLoop:
    return BareLoop(
        client,
        [adder, lookup],
        RunConfig(max_turns=100_000),
        SessionConfig(system_prompt="You add numbers and look keys up.", context_window=10**9),
        hooks=Hooks(pre_tool=[_allow]),
        observers=list(observers),
    )


def _turns(n: int, offset: int = 0) -> list[Message]:
    replies = []
    for i in range(n):
        k = offset + i
        call = (
            ToolCall(id=f"c{k}", name="add", arguments={"a": k, "b": 1})
            if k % 2 == 0
            else ToolCall(id=f"c{k}", name="lookup", arguments={"key": f"k{k}"})
        )
        replies.append(Message.assistant("", [call]))
    replies.append(Message.assistant(f"done after {n} calls"))
    return replies


def record(path: Path, records: int, shape: str) -> int:
    """Record a trace of about ``records`` records; return how many it holds."""
    per_turn = 9  # step, request, reply, feed, step, call, result, feed, feed
    recorder = TraceRecorder(path, created="2026-12-01T00:00:00+00:00")

    async def go() -> None:
        if shape == "long":
            turns = max(1, records // per_turn)
            loop = build(ScriptedClient(_turns(turns)), [recorder])
            await loop.run("go")
            return
        runs = max(1, records // (20 * per_turn + 8))
        replies: list[Message] = []
        for r in range(runs):
            replies += _turns(20, r * 20)
        loop = build(ScriptedClient(replies), [recorder])
        for r in range(runs):
            await loop.run(f"run {r}")

    asyncio.run(go())
    recorder.close()
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def rate(path: Path, repeats: int, agent: Any = build) -> dict[str, Any]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = replay_agent(path, agent)
        times.append(time.perf_counter() - started)
        if not result.ok or not result.complete:
            raise SystemExit(result.summary())
    best, median = min(times), statistics.median(times)
    return {
        "records": result.records,
        "seconds_best": round(best, 4),
        "records_per_s_best": round(result.records / best),
        "records_per_s_median": round(result.records / median),
    }


def peak_rss_kib(path: Path) -> int:
    """Peak RSS of one replay of ``path`` in a fresh process: its ``VmHWM`` (Linux keeps
    ``ru_maxrss`` across ``exec``, so a child started by this big process reported this
    process's peak), or ``ru_maxrss`` where there is no ``/proc``."""
    code = (
        "import resource, sys; from benchmarks.bench_agent_replay import build; "
        "from loopctl_sim import replay_agent; "
        "r = replay_agent(sys.argv[1], build); assert r.ok, r.summary(); "
        "from pathlib import Path; p = Path('/proc/self/status'); "
        "hwm = [l.split()[1] for l in p.read_text().splitlines() if l.startswith('VmHWM')] "
        "if p.exists() else []; "
        "print(hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    return int(out.stdout.strip())


def run(smoke: bool = False) -> dict[str, Any]:
    sizes = (300,) if smoke else (10_000, 100_000)
    repeats = 1 if smoke else 3
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in ("runs", "long"):
            for size in sizes:
                path = Path(tmp) / f"{shape}-{size}.jsonl"
                held = record(path, size, shape)
                row = {
                    "shape": shape,
                    "size": held,
                    "trace_kib": path.stat().st_size // 1024,
                    **rate(path, repeats),
                }
                if not smoke:
                    row["peak_rss_kib"] = peak_rss_kib(path)
                rows.append(row)
                if shape == "long" and size == sizes[0]:
                    rows.append(
                        {
                            "shape": "long",
                            "tools": "inline",
                            "size": held,
                            **rate(path, repeats, build_inline),
                        }
                    )
    ten_k = [r for r in rows if r["size"] < 50_000 and "tools" not in r]
    return {
        "rows": rows,
        "goal_records_per_s": GOAL,
        "goal_met": all(r["records_per_s_best"] >= GOAL for r in ten_k) and not smoke,
        "rss_after_imports_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        # the machine is shared: the figures are only as good as the load they were taken at
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    result = run(args.smoke)
    for row in result["rows"]:
        rss = f", peak RSS {row['peak_rss_kib']:,} KiB" if "peak_rss_kib" in row else ""
        shape = row["shape"] + ("+inline" if "tools" in row else "")
        kib = f" ({row['trace_kib']:,} KiB)" if "trace_kib" in row else ""
        print(
            f"{shape:>11} {row['size']:>7,} records{kib}: "
            f"{row['records_per_s_best']:>7,} records/s best, "
            f"{row['records_per_s_median']:>7,} median{rss}"
        )
    longs = [r for r in result["rows"] if "peak_rss_kib" in r]
    for shape in ("runs", "long"):
        pair = [r for r in longs if r["shape"] == shape]
        if len(pair) == 2:
            ratio = pair[1]["peak_rss_kib"] / pair[0]["peak_rss_kib"]
            print(f"{shape}: peak RSS ratio for 10x the records: {ratio:.3f}")
    print(f"goal {GOAL:,} records/s at 10k records: {'met' if result['goal_met'] else 'NOT met'}")
    print("load average (1, 5, 15 min): " + ", ".join(map(str, result["load_average"])))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
