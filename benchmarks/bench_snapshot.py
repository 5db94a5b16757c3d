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
The goal is a median of at most 40 ms in both shapes, the first restores included.
Wall time, with this process's CPU time beside it.

The restore is lazy (``loopctl/core/lazy.py``): a sealed text whose checksum verifies keeps its
messages as their JSON, and pydantic builds the 25,000 models of 10,000 messages only when they
are first read. That cost is moved, not saved: ``first_read_ms`` (beside the first restores in
fresh processes, and in ``restore_pieces``) is reading the restored conversation in full
(``conversation()`` iterated, what a provider does to write its first model request: the
OpenAI wire form's time is ``wire_first_ms``, against ``wire_again_ms`` once built), about what
the eager restore paid (``eager_restore_ms``: the unsealed content, validated whole). It is never
paid by what does not read the messages: saving the brain again, its digest or checksum,
``next_step``, the feeds of a replay and its digest checks, the exit door, ``next_run()`` (a
fork of the session). It is paid by whatever reads the messages once: a real provider's first
request, ``BareLoop``'s ``RunResult.messages`` at the end of a resumed run (the run's pending),
a trace recorder's header (``machine.snapshot()``), ``==`` against a brain restored otherwise.
``restore_pieces`` also times the lazy restore's own parts: cutting the
text at its messages (``cut_ms``: msgspec's spans, the layout check), the sha256 alone (the
restore checks the checksum by hashing the text once, as the running hash its next save goes on
from), and the check at the door that a forgery sealed again cannot pass (``check_ms``: msgspec
decoding the messages into typed mirrors, ``loopctl/core/message_shapes.py``, and the coherence
rules walked over them): the largest part of the lazy restore, about 80M of its 158M
instructions at 10,000 messages (cachegrind).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
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
from loopctl.core.adopted import sealed_parts
from loopctl.core.message_shapes import checked_conversation, collector_off
from loopctl.core.salvage import coherence_problem
from loopctl.providers._openai_wire import messages_to_wire

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


def _save_restore_once(text: str, read: bool = False) -> dict[str, float]:
    """Restore ``text`` and save the brain again; ``read``: then read its conversation in full
    (``first_read_ms``: the messages a lazy restore left as JSON built)."""
    machine, restore_ms, restore_cpu = _timed(partial(LoopMachine.model_validate_json, text))
    saved, save_ms, save_cpu = _timed(machine.model_dump_json)
    assert saved == text, "the restored brain did not write the text it was restored from"
    out = {
        "restore_ms": restore_ms,
        "save_ms": save_ms,
        "total_ms": restore_ms + save_ms,
        "total_cpu_ms": restore_cpu + save_cpu,
    }
    if read:
        out["first_read_ms"] = _timed(lambda: machine.conversation().as_tuple())[1]
    return out


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
        samples = []
        for _ in range(repeats):
            gc.collect()
            samples.append(_save_restore_once(text))
        warm = _medians(samples)
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
                "first_read_ms": first["first_read_ms"],
                "restore_ms": warm["restore_ms"],
                "save_ms": warm["save_ms"],
                "total_ms": warm["total_ms"],
                "total_cpu_ms": warm["total_cpu_ms"],
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

    The brain caches each message's JSON once encoded, so a save is timed twice:
    ``save_cold_ms`` on a freshly built brain (nothing cached) and ``save_warm_ms`` on one saved
    before (what a trace pays after every feed); likewise ``digest``. ``restore_ms`` restores
    the sealed text (its messages' JSON adopted from it)."""
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
    """Where a restore's time goes, each piece timed alone (median, ms) beside the whole lazy
    restore: cutting the sealed text at its messages (msgspec's spans, the layout check:
    ``adopted.sealed_parts``) and the sha256 alone; then what the laziness moved: the eager
    restore (the unsealed content validated whole, every model built), the first full read of a
    lazily restored conversation, and a provider's first request (the OpenAI wire form of the
    conversation) on a freshly restored brain against the same once its messages are built."""
    rows = []
    for shape, machine in shapes(n_messages).items():
        text = machine.model_dump_json()
        raw = text.encode()
        content = machine.snapshot().model_dump_json()  # unsealed: validated whole
        restore = partial(LoopMachine.model_validate_json, text)
        read = restore()
        read.conversation().as_tuple()

        def timed(fn: Callable[[], Any]) -> float:
            return round(_median_time(fn, repeats) * 1e3, 2)

        def cold(
            fn: Callable[[LoopMachine], Any], restore: Callable[[], LoopMachine] = restore
        ) -> float:
            return round(_median_cold(restore, fn, repeats) * 1e3, 2)

        rows.append(
            {
                "shape": shape,
                "restore_ms": timed(restore),
                "cut_ms": timed(partial(sealed_parts, raw)),
                "check_ms": timed(partial(_door_check, raw)),
                "sha256_ms": timed(lambda raw=raw: hashlib.sha256(raw).hexdigest()),
                "eager_restore_ms": timed(partial(LoopMachine.model_validate_json, content)),
                "first_read_ms": cold(lambda m: m.conversation().as_tuple()),
                "wire_first_ms": cold(lambda m: messages_to_wire(m.conversation())),
                "wire_again_ms": timed(lambda m=read: messages_to_wire(m.conversation())),
            }
        )
    return rows


def _door_check(raw: bytes) -> bool:
    """The lazy restore's check of the conversation alone: the mirrors decoded and walked."""
    parts = sealed_parts(raw)
    assert parts is not None
    with collector_off():  # as the restore does
        shapes = checked_conversation(*parts.arrays, (parts.history, parts.pending))
        assert shapes is not None
        return coherence_problem(shapes[0]) is None and (
            coherence_problem(shapes[1], open_tail=True) is None
        )


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
    print(json.dumps(_save_restore_once(text, read=True)))


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
