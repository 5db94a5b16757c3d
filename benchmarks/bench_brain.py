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
    feed), each cold (a freshly restored machine) and again after one more feed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from loopctl import LoopMachine, MachinePolicy, MachineSnapshot, Message, ToolCall, ToolResult
from loopctl.core.machine import snapshot_problem

SIZES = (10, 1_000, 10_000)
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


def turn_us(size: int, samples: int, turns_per_sample: int) -> float:
    """Median µs of one tool-using turn with ``size`` messages of history."""
    machine = LoopMachine(history(size))
    machine.accept_input("Find where the cache is invalidated.")
    base = machine.snapshot()
    pairs = _turn_messages()
    policy = POLICY
    per_turn: list[float] = []
    clock = time.perf_counter
    for _ in range(samples):
        m = _fresh(base)
        next_step, model_response, tool_results = m.next_step, m.model_response, m.tool_results
        batch = [pairs[i % len(pairs)] for i in range(turns_per_sample)]
        start = clock()
        for reply, results in batch:
            next_step(policy)
            model_response(reply, 1_000)
            next_step(policy)
            tool_results(results)
        per_turn.append((clock() - start) / turns_per_sample * 1e6)
        if m.turns_taken != turns_per_sample or m.is_terminal:
            raise RuntimeError("the benchmark's turns did not run as planned")
    return statistics.median(per_turn)


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _timed_ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def save_restore(size: int, repeats: int) -> dict[str, float]:
    """Median ms to save and to restore a machine holding ``size`` messages.

    Each repeat restores a fresh machine, so its first save and first digest are cold (every
    message serialized); "after a feed" is the same machine after one more message, which is
    what a driver that saves every turn, or a trace that digests every feed, pays.
    """
    machine = LoopMachine(history(size))
    machine.accept_input("One more question.")
    text = machine.model_dump_json()
    if LoopMachine.model_validate_json(text) != machine:
        raise RuntimeError("restore did not give an equal machine")
    snap = machine.snapshot()
    rows: dict[str, list[float]] = {
        k: [] for k in ("restore", "save", "save_after_feed", "digest", "digest_after_feed")
    }
    for _ in range(repeats):
        start = time.perf_counter()
        m = LoopMachine.model_validate_json(text)
        rows["restore"].append((time.perf_counter() - start) * 1e3)
        rows["save"].append(_timed_ms(m.model_dump_json))
        m.inject(Message.user("a note"))
        rows["save_after_feed"].append(_timed_ms(m.model_dump_json))
        m.inject(Message.user("another note"))
        rows["digest_after_feed"].append(_timed_ms(m.digest))
        cold = LoopMachine.model_validate_json(text)
        rows["digest"].append(_timed_ms(cold.digest))
    figures = {f"{k}_ms": statistics.median(v) for k, v in rows.items()}
    return {
        "messages": float(size),
        "snapshot_bytes": float(len(text)),
        **figures,
        "save_restore_ms": figures["save_ms"] + figures["restore_ms"],
        "restore_check_ms": _median_ms(lambda: snapshot_problem(snap), repeats),
    }


def run(smoke: bool = False) -> dict[str, Any]:
    """Measure and print; return the figures (µs per turn by history size, ms for snapshots)."""
    samples, per_sample, repeats = (15, 40, 3) if smoke else (150, 100, 15)
    turns = {size: turn_us(size, samples, per_sample) for size in SIZES}
    ratio = turns[SIZES[-1]] / turns[SIZES[0]]
    snap = save_restore(10_000, repeats)
    figures: dict[str, Any] = {
        "smoke": smoke,
        "turn_us": turns,
        "turn_ratio_10k_10": ratio,
        **snap,
        "goals": {
            "turn_us": TURN_GOAL_US,
            "turn_ratio_10k_10": RATIO_GOAL,
            "save_restore_ms": SAVE_RESTORE_GOAL_MS,
        },
    }
    print(f"brain benchmark{' (smoke)' if smoke else ''}")
    print(f"  (a) one tool-using turn, median of {samples} batches of {per_sample} turns")
    for size, us in turns.items():
        print(f"      history {size:>6,} messages: {us:7.2f} µs")
    print(
        f"      ratio 10k/10: {ratio:.2f}   (goal: <= {TURN_GOAL_US:g} µs, ratio <= {RATIO_GOAL})"
    )
    print(
        f"  (b) 10,000 messages ({snap['snapshot_bytes'] / 1e6:.2f} MB of JSON), "
        f"median of {repeats}"
    )
    print(f"      save {snap['save_ms']:.1f} ms + restore {snap['restore_ms']:.1f} ms")
    print(f"      = {snap['save_restore_ms']:.1f} ms   (goal: <= {SAVE_RESTORE_GOAL_MS:g} ms)")
    print(f"      of which restore's consistency check: {snap['restore_check_ms']:.1f} ms")
    print(f"      save again after one feed: {snap['save_after_feed_ms']:.1f} ms")
    print(
        f"      digest(): {snap['digest_ms']:.1f} ms cold, "
        f"{snap['digest_after_feed_ms']:.1f} ms after one feed"
    )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the brain (LoopMachine).")
    parser.add_argument("--smoke", action="store_true", help="a quick run (a few seconds)")
    run(parser.parse_args(argv).smoke)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
