"""Instruction counts of the engine's units, under cachegrind: figures a shared machine cannot move.

Wall and CPU times on this VM swing by up to 2x within an hour with the load of its other
tenants (docs/performance.md, "The machine"); the number of instructions a unit executes does
not. So a change that should make a unit cheaper is checked here first, and timed with the
other benchmarks after. Each unit runs in two processes under ``valgrind --tool=cachegrind`` with
``PYTHONHASHSEED=0``: one that builds everything and runs the unit ``N`` times, one that builds
everything and runs it no time; the difference divided by ``N`` is the unit's count (imports,
construction and warm-up cancel out).

Units:

- ``turn``: ``bench_driver``'s workload (``FunctionClient``, one async ``add`` call a turn), ten
  runs of T = 100; the count is per turn, the run's own cost spread over its turns;
- ``run``: one-turn runs of the same workload (one model call that answers the final text):
  what every run pays, whatever its length;
- ``brain``: the brain's part of a tool-using turn alone (2 ``next_step``, 2 feeds), messages
  built beforehand;
- ``sim`` and ``traced``: ``bench_fuzz_driver``'s 20-turn simulated run, untraced and with its
  trace written to memory; the count is per run, and the two print their ratio (the traced
  run's budget is 2). ``--without`` turns pieces of the trace off, to count what each costs:
  ``io`` (the recorder writes no ``io`` record, so no model request is digested), ``scrub``
  (the secret pre-test finds nothing: no record is searched), ``digest`` (the brain's digest is
  a constant). Those runs write a trace no replay could use: they measure, nothing more.

    python -m benchmarks.instructions              # every unit (about two minutes)
    python -m benchmarks.instructions turn run     # some
    python -m benchmarks.instructions sim traced --without io scrub

valgrind's cachegrind hides the CPU's SHA extensions, so hashing weighs more here than it does
on the CPU; compare counts with counts, not with times.

A count is exact for one build of the code, not between builds: an edit elsewhere moves a unit
by up to about 1.4 % (the ``brain`` unit read 90,124 and 91,010 across a commit that touched no
line of the brain; the hash seed alone moves ``turn`` by about 0.3 %), probably through where
types and strings land in CPython's caches. A change smaller than that is measured by timing
the piece itself (docs/performance.md, "How to read the figures").
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from itertools import islice

from benchmarks.bench_driver import FINAL_TEXT, Counter, loopctl_prepare
from benchmarks.bench_fuzz_driver import make_world
from benchmarks.bench_turn import brain_inputs, brain_turns
from loopctl import LoopMachine
from loopctl_sim.sim import simulate_driver

__all__ = ["PIECES", "UNITS", "count", "instructions_of", "main", "run_unit"]

#: unit -> (how many it runs, what the count is divided by to give one)
UNITS: dict[str, tuple[int, int]] = {
    "turn": (10, 10 * 100),
    "run": (300, 300),
    "brain": (1_200, 1_200),
    "sim": (10, 10),
    "traced": (10, 10),
}
#: ``--without``'s pieces of a traced run (the module docstring).
PIECES = ("io", "scrub", "digest")

_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def _drive(turns: int, built: int, runs: int) -> None:
    """``built`` loops of ``turns`` turns built, then ``runs`` of them run (so a count with no
    run still holds the building)."""
    prepare = loopctl_prepare(kind="async")

    async def main() -> None:
        for _ in range(3):  # warm-up: first calls, caches, the event loop
            await prepare(turns, Counter())()
        counters = [Counter() for _ in range(built)]
        loops = [(prepare(turns, counter), counter) for counter in counters]
        for go, counter in loops[:runs]:
            text = await go()
            # the run did the work counted: every tool call, the final answer
            assert text == FINAL_TEXT and counter.n == turns - 1, (text, counter.n)

    asyncio.run(main())


def _brain(turns: int) -> None:
    """``turns`` brain turns (``bench_turn.brain_turns``), in machines of 200 turns each."""
    inputs = brain_inputs(200)
    for start in range(0, turns, len(inputs)):
        machine = LoopMachine()
        machine.accept_input("add some numbers")
        brain_turns(machine, islice(inputs, turns - start))


def _without(pieces: Iterable[str]) -> None:
    """Turn ``pieces`` of a traced run off in this process (a child's: it is not undone)."""
    from loopctl_sim.trace.recorder import TraceRecorder
    from loopctl_sim.trace.scrub import Scrubber

    for piece in pieces:
        if piece == "io":
            TraceRecorder.io = lambda self, event: None  # type: ignore[method-assign]
        elif piece == "scrub":
            Scrubber.might_hold = lambda self, json_text: False  # type: ignore[method-assign]
        elif piece == "digest":
            LoopMachine.digest = lambda self: "0" * 16  # type: ignore[method-assign]
        else:
            raise ValueError(f"unknown piece {piece!r}; the pieces are {', '.join(PIECES)}")


def _simulated(traced: bool, n: int) -> None:
    """``n`` simulated runs of ``bench_fuzz_driver``'s world, after three to warm up; traced, each
    writes its trace to memory."""
    for i in range(3 + n):
        trace = io.StringIO() if traced else None
        result = simulate_driver(make_world(), trace)
        # the run did the work counted: every turn's tool call, the final text
        assert result.final_text == "done" and result.tool_calls == 19, result.summary()
        if i == 0 and trace is not None:  # the trace is written to its end (checked once)
            assert '"type":"end"' in trace.getvalue().rsplit("\n", 2)[-2], "no end record"


_RUNNERS: dict[str, Callable[[int], None]] = {
    "turn": lambda n: _drive(100, UNITS["turn"][0], n),
    "run": lambda n: _drive(1, UNITS["run"][0], n),
    "brain": _brain,
    "sim": lambda n: _simulated(False, n),
    "traced": lambda n: _simulated(True, n),
}


def run_unit(unit: str, n: int, without: Sequence[str] = ()) -> None:
    """Run ``unit`` ``n`` times (0: build everything, run nothing), ``without`` those pieces of
    a traced run. The child's whole job."""
    _without(without)
    _RUNNERS[unit](n)


def instructions_of(stderr: str) -> int:
    """The total instruction count in cachegrind's summary (``I refs: 1,234,567``)."""
    found = _REFS.search(stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in cachegrind's output:\n{stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _counted(unit: str, n: int, without: Sequence[str]) -> int:
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "benchmarks.instructions",
        "--child",
        unit,
        str(n),
        *(["--without", *without] if without else []),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return instructions_of(done.stderr)


def count(unit: str, without: Sequence[str] = ()) -> int:
    """Instructions of one ``unit`` (see the module docstring)."""
    n, per = UNITS[unit]
    return (_counted(unit, n, without) - _counted(unit, 0, without)) // per


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("units", nargs="*", help=f"of {', '.join(UNITS)} (default: every unit)")
    parser.add_argument(
        "--without", nargs="+", default=[], choices=PIECES, help="pieces of a traced run left out"
    )
    parser.add_argument("--child", nargs=2, metavar=("UNIT", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_unit(args.child[0], int(args.child[1]), args.without)
        return
    unknown = [u for u in args.units if u not in UNITS]
    if unknown:
        parser.error(f"unknown unit(s) {', '.join(unknown)}; the units are {', '.join(UNITS)}")
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (Debian: apt-get install valgrind)")
    counted: dict[str, int] = {}
    for unit in args.units or UNITS:
        counted[unit] = count(unit, args.without)
        print(f"{unit:6s} {counted[unit]:>12,} instructions", flush=True)
    if "sim" in counted and "traced" in counted:
        without = f" without {', '.join(args.without)}" if args.without else ""
        print(f"traced / sim{without}: {counted['traced'] / counted['sim']:.2f}")


if __name__ == "__main__":
    main()
