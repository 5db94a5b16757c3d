"""Snapshots: size and save / restore / digest time against history size, and save + restore of
a 10,000-message brain in both shapes a driver meets, the first restore in a process included.

    python -m benchmarks.bench_snapshot            # full
    python -m benchmarks.bench_snapshot --smoke    # seconds (CI); figures meaningless

The two shapes (10,000 messages of tool exchanges, each with a line of text):

- ``between runs``: everything in history, pending empty (a brain saved between two runs);
- ``mid-run``: everything in pending, the brain awaiting the model (a run saved mid-way, the
  shape a crash-and-resume restores).

For each: ``save + restore`` is restoring the saved text and saving the restored brain again (a
resume that checkpoints at once), as a median of repeats in this process, and as the median of
the *first* restore (and its save) in fresh processes, each of which reads the text from a file
first (untimed): the first restore in a process pays for memory the process has not used yet.
The goal is a median of at most 40 ms in both shapes, the first restores included. Wall time,
with this process's CPU time beside it.

A restore validates the whole snapshot (pydantic builds the 25,000 models of 10,000 messages)
and checks a sealed text's checksum by encoding each message once, which the restored brain
keeps: its first save encodes nothing again (``loopctl/core/_saved.py``). The cyclic garbage
collector's passes over those models find nothing to free but cost about as much as the parse:
``total_ms`` is timed with the collector running, as an application runs, and
``total_no_gc_ms`` with it paused around the timed call (``gc.disable()``, by this benchmark:
loopctl leaves the collector alone). ``restore_pieces`` times the restore's parts alone.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from loopctl import LoopMachine, MachinePolicy, Message, ToolCall, ToolResult
from loopctl.core import MachineSnapshot

__all__ = [
    "GOAL_MS",
    "SIZES",
    "history",
    "restore_pieces",
    "run",
    "save_restore",
    "shapes",
    "snapshot_sizes",
]

GOAL_MS = 40.0
SIZES = (10, 1_000, 10_000)
MESSAGES = 10_000
FINAL_TEXT = "the sums are done"


def _exchange(turn: int) -> tuple[Message, Message]:
    call = ToolCall(id=f"call_{turn}", name="add", arguments={"a": turn, "b": 1})
    reply = Message.assistant(f"adding {turn} and 1", tool_calls=[call])
    result = ToolResult(call_id=call.id, name="add", content=str(turn + 1))
    return reply, Message.from_results([result])


def history(n_messages: int) -> list[Message]:
    """A coherent history of ``n_messages`` messages: a user prompt, exchanges, a final text."""
    messages = [Message.user("add some numbers")]
    turn = 0
    while len(messages) < n_messages - 1:
        turn += 1
        messages.extend(_exchange(turn))
    if len(messages) < n_messages:
        messages.append(Message.assistant(FINAL_TEXT))
    return messages


def _mid_run(n_messages: int) -> LoopMachine:
    """A run under way whose pending holds ``n_messages`` messages, awaiting the model."""
    machine = LoopMachine()
    machine.accept_input("add some numbers")
    policy = MachinePolicy(tools=("add",), max_turns=10**9, loop_action="off")
    turn = 0
    while machine.pending_len() + 2 <= n_messages:
        turn += 1
        reply, results = _exchange(turn)
        machine.next_step(policy)
        machine.model_response(reply, 100 + turn)
        machine.next_step(policy)
        machine.tool_results(results)
    machine.next_step(policy)
    return machine


def shapes(n_messages: int = MESSAGES) -> dict[str, LoopMachine]:
    return {"between runs": LoopMachine(history(n_messages)), "mid-run": _mid_run(n_messages)}


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    value = fn()
    return value, (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3


def _save_restore_once(text: str, collector: bool = True) -> dict[str, float]:
    """Restore ``text`` and save the brain again; ``collector``: with the cyclic collector
    running (else paused around the two calls)."""
    if not collector:
        gc.disable()
    try:
        machine, restore_ms, restore_cpu = _timed(partial(LoopMachine.model_validate_json, text))
        saved, save_ms, save_cpu = _timed(machine.model_dump_json)
    finally:
        gc.enable()
    assert saved == text, "the restored brain did not write the text it was restored from"
    return {
        "restore_ms": restore_ms,
        "save_ms": save_ms,
        "total_ms": restore_ms + save_ms,
        "total_cpu_ms": restore_cpu + save_cpu,
    }


def _medians(samples: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(s[k] for s in samples), 2) for k in samples[0]}


def _first_in_fresh_processes(text: str, processes: int) -> dict[str, Any]:
    """The first restore (and save) in each of ``processes`` fresh interpreters."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(text)
    try:
        samples = []
        for _ in range(processes):
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.bench_snapshot", "--child", f.name],
                check=True,
                capture_output=True,
                text=True,
                cwd=Path(__file__).resolve().parents[1],
                env={**os.environ, "PYTHONHASHSEED": "0"},
            )
            samples.append(json.loads(out.stdout))
    finally:
        os.unlink(f.name)
    return {"processes": processes, **_medians(samples), "runs": samples}


def save_restore(repeats: int, processes: int, n_messages: int = MESSAGES) -> list[dict[str, Any]]:
    """Save + restore of ``n_messages`` messages in both shapes: in this process (median of
    ``repeats``, after one warm-up) and first in ``processes`` fresh ones (median)."""
    rows = []
    for shape, machine in shapes(n_messages).items():
        text = machine.model_dump_json()
        assert LoopMachine.model_validate_json(text) == machine
        first = _first_in_fresh_processes(text, processes)
        samples, paused = [], []
        for _ in range(repeats):
            gc.collect()
            samples.append(_save_restore_once(text))
            gc.collect()
            paused.append(_save_restore_once(text, collector=False))
        warm, warm_paused = _medians(samples), _medians(paused)
        rows.append(
            {
                "shape": shape,
                "messages": n_messages,
                "history": machine.history_len(),
                "pending": machine.pending_len(),
                "bytes": len(text.encode()),
                "first_restore_ms": first["restore_ms"],
                "first_save_ms": first["save_ms"],
                "first_total_ms": first["total_ms"],
                "first_total_cpu_ms": first["total_cpu_ms"],
                "restore_ms": warm["restore_ms"],
                "save_ms": warm["save_ms"],
                "total_ms": warm["total_ms"],
                "total_cpu_ms": warm["total_cpu_ms"],
                "total_no_gc_ms": warm_paused["total_ms"],
                "goal_ms": GOAL_MS,
                "met": max(first["total_ms"], warm["total_ms"]) <= GOAL_MS,
                "first_runs_total_ms": [round(r["total_ms"], 1) for r in first["runs"]],
            }
        )
    return rows


def _median_cold(make: Callable[[], Any], fn: Callable[[Any], Any], repeats: int) -> float:
    """Median time of ``fn(make())`` with ``make()`` untimed (a fresh object every repeat)."""
    samples = []
    for _ in range(repeats):
        subject = make()
        gc.collect()
        started = time.perf_counter()
        fn(subject)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    return _median_cold(lambda: None, lambda _: fn(), repeats)


def snapshot_sizes(sizes: tuple[int, ...], repeats: int) -> list[dict[str, Any]]:
    """Snapshot size and save / restore / digest time of a brain holding ``n`` messages.

    The brain's saved form keeps each message's JSON once encoded, so a save is timed twice:
    ``save_cold_ms`` on a freshly built brain (nothing cached) and ``save_warm_ms`` on one saved
    before (what a trace pays after every feed); likewise ``digest``. ``restore_ms`` restores
    the sealed text."""
    rows = []
    for n in sizes:
        messages = history(n)
        machine = LoopMachine(messages)
        text = machine.model_dump_json()
        restored = LoopMachine.model_validate_json(text)
        assert restored == machine and restored.history_len() == n
        fresh = partial(LoopMachine, messages)
        restore = _median_time(partial(LoopMachine.model_validate_json, text), repeats)
        rows.append(
            {
                "messages": n,
                "bytes": len(text.encode()),
                "save_cold_ms": round(
                    _median_cold(fresh, LoopMachine.model_dump_json, repeats) * 1e3, 3
                ),
                "save_warm_ms": round(_median_time(machine.model_dump_json, repeats) * 1e3, 3),
                "restore_ms": round(restore * 1e3, 3),
                "digest_cold_ms": round(_median_cold(fresh, LoopMachine.digest, repeats) * 1e3, 3),
                "digest_warm_ms": round(_median_time(machine.digest, repeats) * 1e3, 3),
                "restore_us_per_message": round(restore * 1e6 / n, 3),
            }
        )
    return rows


def restore_pieces(repeats: int, n_messages: int = MESSAGES) -> list[dict[str, Any]]:
    """Where a restore's time goes, each piece timed alone (median, ms, collector running): the
    restore of the sealed text (every model built, the consistency check, each message encoded
    to check the checksum), validating the unsealed content (no checksum, nothing encoded), and
    serializing the snapshot whole."""
    rows = []
    for shape, machine in shapes(n_messages).items():
        text = machine.model_dump_json()
        content = machine.snapshot().model_dump_json()
        snap = MachineSnapshot.model_validate_json(content)

        def timed(fn: Callable[[], Any]) -> float:
            return round(_median_time(fn, repeats) * 1e3, 2)

        rows.append(
            {
                "shape": shape,
                "restore_ms": timed(partial(LoopMachine.model_validate_json, text)),
                "validate_content_ms": timed(partial(MachineSnapshot.model_validate_json, content)),
                "serialize_ms": timed(snap.model_dump_json),
            }
        )
    return rows


def run(smoke: bool) -> dict[str, Any]:
    """Both tables; ``smoke``: small sizes, one repeat, one fresh process."""
    sizes = (10, 1_000) if smoke else SIZES
    repeats = 1 if smoke else 9
    return {
        "rows": snapshot_sizes(sizes, 1 if smoke else 5),
        "save_restore": save_restore(repeats, 1 if smoke else 5, 1_000 if smoke else MESSAGES),
        "restore_pieces": restore_pieces(repeats, 1_000 if smoke else MESSAGES),
        "goal_ms": GOAL_MS,
    }


def _child(path: str) -> None:
    """In a fresh process: the first restore of the text at ``path``, and its save."""
    text = Path(path).read_text()
    print(json.dumps(_save_restore_once(text)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_snapshot")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child)
        return
    from benchmarks.report import render

    result = run(args.smoke)
    print("\n".join(render(result)))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
