"""Benchmark of the brain: the cost of one tool-using turn, and of saving and restoring.

    python -m benchmarks.bench_brain            full run (about half a minute)
    python -m benchmarks.bench_brain --smoke    a few seconds, rougher figures

Prints figures and ratios, never a verdict: timings depend on the machine. ``run(smoke)`` returns
the figures for a ``python -m benchmarks`` entry point.

(a) One full tool-using turn through the brain (``next_step``, ``model_response``, ``next_step``,
    ``tool_results``), with every message built beforehand, at history sizes 10, 1,000 and 10,000.
    The goal is a median of at most 20 µs and a 10k/10 ratio of at most 1.3: the turn must not
    touch the history. Each sample is a batch of turns on a fresh copy of the machine (so the turn
    numbers stay within the default ``max_turns``, as in a real run); loop detection is on, and
    the calls vary so that it judges without ever firing.
(b) Saving and restoring a machine of 10,000 messages (``model_dump_json`` plus
    ``LoopMachine.model_validate_json``); the goal is at most 50 ms. Also shown: the consistency
    check restore runs over the conversation, and ``digest()`` (which traces take after every
    feed) of a freshly restored machine and again after one more feed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

from loopctl import LoopMachine, MachinePolicy, Message, ToolCall, ToolResult
from loopctl.core import MachineSnapshot
from loopctl.core.snapshot import snapshot_problem

SIZES = (10, 1_000, 10_000)
_T = TypeVar("_T")
TURN_GOAL_US = 20.0
RATIO_GOAL = 1.3
SAVE_RESTORE_GOAL_MS = 50.0
POLICY = MachinePolicy(tools=("read_file", "search"))


def history(n: int) -> list[Message]:
    """``n`` messages (even) of a plausible coding session: exchanges of four, then a Q&A pair."""
    if n % 2:
        raise ValueError("n must be even")
    out: list[Message] = []
    for i in range(n // 4):
        call = ToolCall(id=f"h{i}", name="read_file", arguments={"path": f"src/module_{i}.py"})
        out += [
            Message.user(f"What does module {i} do? Please check before answering."),
            Message.assistant("Let me read it.", tool_calls=[call]),
            Message.from_results(
                [
                    ToolResult(
                        call_id=call.id, name=call.name, content=f"def f{i}(x):\n    return x\n"
                    )
                ]
            ),
            Message.assistant(f"Module {i} defines f{i}, which returns its argument unchanged."),
        ]
    if n % 4:
        out += [Message.user("And the tests?"), Message.assistant("They pass.")]
    return out


def _turn_messages(count: int = 64) -> list[tuple[Message, Message]]:
    """Pre-built (reply, results) pairs; distinct arguments keep the loop detector quiet."""
    pairs = []
    for i in range(count):
        call = ToolCall(id=f"call_{i}", name="search", arguments={"query": f"term {i}", "limit": 5})
        reply = Message.assistant(tool_calls=[call])
        results = Message.from_results([ToolResult(call_id=call.id, name="search", content="ok")])
        pairs.append((reply, results))
    return pairs


def _fresh(base: MachineSnapshot) -> LoopMachine:
    return LoopMachine.from_snapshot(base)


def _batch(base: MachineSnapshot, batch: list[tuple[Message, Message]]) -> tuple[float, float]:
    """Wall and CPU seconds of ``len(batch)`` tool-using turns on a fresh copy of ``base``."""
    m = _fresh(base)
    next_step, model_response, tool_results = m.next_step, m.model_response, m.tool_results
    policy = POLICY
    start, start_cpu = time.perf_counter(), time.thread_time()
    for reply, results in batch:
        next_step(policy)
        model_response(reply, 1_000)
        next_step(policy)
        tool_results(results)
    end, end_cpu = time.perf_counter(), time.thread_time()
    if m.turns_taken != len(batch) or m.is_terminal:
        raise RuntimeError("the benchmark's turns did not run as planned")
    return end - start, end_cpu - start_cpu


def turn_times(
    sizes: tuple[int, ...], samples: int, turns_per_sample: int
) -> dict[int, dict[str, float]]:
    """Median µs of one tool-using turn at each history size: wall and CPU time.

    The sizes take turns batch by batch, so a change of load on a shared machine falls on all of
    them alike. CPU time (this thread's) is shown beside wall time because on a loaded machine
    the wall clock also counts the time the process waited for a core.
    """
    bases = {}
    for size in sizes:
        machine = LoopMachine(history(size))
        machine.accept_input("Find where the cache is invalidated.")
        bases[size] = machine.snapshot()
    pairs = _turn_messages()
    batch = [pairs[i % len(pairs)] for i in range(turns_per_sample)]
    wall: dict[int, list[float]] = {size: [] for size in sizes}
    cpu: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(samples):
        for size in sizes:
            w, c = _batch(bases[size], batch)
            wall[size].append(w / turns_per_sample * 1e6)
            cpu[size].append(c / turns_per_sample * 1e6)
    return {
        size: {"wall_us": statistics.median(wall[size]), "cpu_us": statistics.median(cpu[size])}
        for size in sizes
    }


class _Timings:
    """Wall and CPU milliseconds of named operations, as medians."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def time(self, name: str, fn: Callable[[], _T]) -> _T:
        start, start_cpu = time.perf_counter(), time.thread_time()
        result = fn()
        end, end_cpu = time.perf_counter(), time.thread_time()
        self.wall.setdefault(name, []).append((end - start) * 1e3)
        self.cpu.setdefault(name, []).append((end_cpu - start_cpu) * 1e3)
        return result

    def medians(self) -> dict[str, float]:
        out = {f"{k}_ms": statistics.median(v) for k, v in self.wall.items()}
        out |= {f"{k}_cpu_ms": statistics.median(v) for k, v in self.cpu.items()}
        return out


def save_restore(size: int, repeats: int) -> dict[str, float]:
    """Median ms (wall and CPU) to save and to restore a machine holding ``size`` messages.

    Each repeat restores a fresh machine; its first save and first digest reuse the JSON the
    restore encoded to check the checksum; "after a feed" is the same machine after one more
    message, which is what a driver that saves every turn, or a trace that digests every feed,
    pays.
    """
    machine = LoopMachine(history(size))
    machine.accept_input("One more question.")
    text = machine.model_dump_json()
    if LoopMachine.model_validate_json(text) != machine:
        raise RuntimeError("restore did not give an equal machine")
    snap = machine.snapshot()
    t = _Timings()
    for _ in range(repeats):
        m = t.time("restore", lambda: LoopMachine.model_validate_json(text))
        t.time("save", m.model_dump_json)
        m.inject(Message.user("a note"))
        t.time("save_after_feed", m.model_dump_json)
        m.inject(Message.user("another note"))
        t.time("digest_after_feed", m.digest)
        t.time("digest", LoopMachine.model_validate_json(text).digest)
        t.time("restore_check", lambda: snapshot_problem(snap))
    figures = t.medians()
    return {
        "messages": float(size),
        "snapshot_bytes": float(len(text)),
        **figures,
        "save_restore_ms": figures["save_ms"] + figures["restore_ms"],
        "save_restore_cpu_ms": figures["save_cpu_ms"] + figures["restore_cpu_ms"],
    }


def calibration_ms() -> float:
    """CPU ms of a plain Python loop building 100,000 small dicts: how fast is this machine?

    Printed beside the figures so that a reader can scale them: a recent desktop CPU takes about
    5 ms.
    """
    start = time.thread_time()
    for i in range(100_000):
        _ = {"i": i}
    return (time.thread_time() - start) * 1e3


def run(smoke: bool = False) -> dict[str, Any]:
    """Measure and print; return the figures (µs per turn by history size, ms for snapshots)."""
    samples, per_sample, repeats = (15, 40, 3) if smoke else (150, 100, 15)
    turns = turn_times(SIZES, samples, per_sample)
    wall = {size: t["wall_us"] for size, t in turns.items()}
    cpu = {size: t["cpu_us"] for size, t in turns.items()}
    first, last = SIZES[0], SIZES[-1]
    snap = save_restore(10_000, repeats)
    figures: dict[str, Any] = {
        "smoke": smoke,
        "calibration_ms": calibration_ms(),
        "turn_us": wall,
        "turn_cpu_us": cpu,
        "turn_ratio_10k_10": wall[last] / wall[first],
        "turn_cpu_ratio_10k_10": cpu[last] / cpu[first],
        **snap,
        "goals": {
            "turn_us": TURN_GOAL_US,
            "turn_ratio_10k_10": RATIO_GOAL,
            "save_restore_ms": SAVE_RESTORE_GOAL_MS,
        },
    }
    print(f"brain benchmark{' (smoke)' if smoke else ''}   (medians; wall clock / CPU time)")
    print(f"  machine: 100,000 small dicts in {figures['calibration_ms']:.1f} ms of CPU")
    print(f"  (a) one tool-using turn, {samples} batches of {per_sample} turns")
    for size in SIZES:
        print(f"      history {size:>6,} messages: {wall[size]:7.2f} / {cpu[size]:7.2f} µs")
    print(
        f"      ratio 10k/10: {figures['turn_ratio_10k_10']:.2f} / "
        f"{figures['turn_cpu_ratio_10k_10']:.2f}   "
        f"(goal: <= {TURN_GOAL_US:g} µs, ratio <= {RATIO_GOAL})"
    )
    print(
        f"  (b) 10,000 messages ({snap['snapshot_bytes'] / 1e6:.2f} MB of JSON), {repeats} repeats"
    )
    for label, key in [
        ("save (cold)", "save"),
        ("restore", "restore"),
        ("save + restore", "save_restore"),
        ("  restore's consistency check", "restore_check"),
        ("save again after one feed", "save_after_feed"),
        ("digest() (cold)", "digest"),
        ("digest() after one feed", "digest_after_feed"),
    ]:
        print(f"      {label:<30} {snap[key + '_ms']:7.1f} / {snap[key + '_cpu_ms']:7.1f} ms")
    print(f"      (goal: save + restore <= {SAVE_RESTORE_GOAL_MS:g} ms)")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the brain (LoopMachine).")
    parser.add_argument("--smoke", action="store_true", help="a quick run (a few seconds)")
    run(parser.parse_args(argv).smoke)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
