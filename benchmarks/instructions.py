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
  built beforehand.

    python -m benchmarks.instructions              # every unit (about a minute)
    python -m benchmarks.instructions turn run     # some

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
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from itertools import islice

from benchmarks.bench_driver import FINAL_TEXT, Counter, loopctl_prepare
from benchmarks.bench_turn import brain_inputs, brain_turns
from loopctl import LoopMachine

__all__ = ["UNITS", "count", "instructions_of", "main", "run_unit"]

#: unit -> (how many it runs, what the count is divided by to give one)
UNITS: dict[str, tuple[int, int]] = {
    "turn": (10, 10 * 100),
    "run": (300, 300),
    "brain": (1_200, 1_200),
}

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


_RUNNERS: dict[str, Callable[[int], None]] = {
    "turn": lambda n: _drive(100, UNITS["turn"][0], n),
    "run": lambda n: _drive(1, UNITS["run"][0], n),
    "brain": _brain,
}


def run_unit(unit: str, n: int) -> None:
    """Run ``unit`` ``n`` times (0: build everything, run nothing). The child's whole job."""
    _RUNNERS[unit](n)


def instructions_of(stderr: str) -> int:
    """The total instruction count in cachegrind's summary (``I refs: 1,234,567``)."""
    found = _REFS.search(stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in cachegrind's output:\n{stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _counted(unit: str, n: int) -> int:
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
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return instructions_of(done.stderr)


def count(unit: str) -> int:
    """Instructions of one ``unit`` (see the module docstring)."""
    n, per = UNITS[unit]
    return (_counted(unit, n) - _counted(unit, 0)) // per


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("units", nargs="*", help=f"of {', '.join(UNITS)} (default: every unit)")
    parser.add_argument("--child", nargs=2, metavar=("UNIT", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_unit(args.child[0], int(args.child[1]))
        return
    unknown = [u for u in args.units if u not in UNITS]
    if unknown:
        parser.error(f"unknown unit(s) {', '.join(unknown)}; the units are {', '.join(UNITS)}")
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (Debian: apt-get install valgrind)")
    for unit in args.units or UNITS:
        print(f"{unit:6s} {count(unit):>12,} instructions", flush=True)


if __name__ == "__main__":
    main()
