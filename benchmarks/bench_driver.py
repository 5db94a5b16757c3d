"""The driver's own overhead per tool-using turn, and how it grows with the history.

Workload (the same one ``bench_peers`` gives every peer): one run of ``T`` model calls ("turns");
calls 1..T-1 each ask for one call of the tool ``add(a, b)`` (arguments differ every turn, so the
loop detector never fires), call ``T`` answers the final text. The model is instant and in-process
(``FunctionClient``: the benchmark's function builds each reply, the client streams it as a
provider would), so what is measured is the engine: the brain's decisions, the driver's
bookkeeping, the stream fold, tool dispatch. The tool must have run exactly ``T - 1`` times and the
run must return the final text; both are asserted after every timed run.

Variants: the tool ``async def add``; ``def add`` with ``@tool(inline=True)`` (on the event loop,
no thread); ``def add`` in a worker thread (the default for a sync tool). ``history`` rows: the
async variant on a brain that already holds 10,000 messages (growth with the history, not with
``T``). Where a turn's time goes: ``benchmarks.bench_turn``.

Figures are microseconds per turn (wall time of ``await loop.run(...)`` divided by ``T``), median
of ``repeats`` runs, with the process's CPU time beside it. Construction of the loop is not timed.

    python -m benchmarks.bench_driver              # full: T = 10, 100, 1000; 5 repeats
    python -m benchmarks.bench_driver --repeats 40 # the median of 40 runs a row (about a minute)
    python -m benchmarks.bench_driver --smoke      # T = 10, 1 repeat
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from loopctl import BareLoop, LoopMachine, Message, RunConfig, ToolCall, ToolResult, tool
from loopctl.api import ModelRequest
from loopctl.observe import LoopObserver
from loopctl.testing import FunctionClient

__all__ = [
    "FINAL_TEXT",
    "REPEATS",
    "TURNS",
    "Counter",
    "Measurement",
    "machine_reference",
    "measure",
    "measure_interleaved",
    "paired_difference",
    "paired_ratio",
    "run",
    "sample",
    "table",
    "tool_arguments",
]

TURNS = (10, 100, 1000)
REPEATS = 5
FINAL_TEXT = "the sums are done"


def tool_arguments(turn: int) -> dict[str, int]:
    """The arguments of the call asked for on ``turn`` (1-based): different on every turn."""
    return {"a": turn, "b": 1}


class Counter:
    """How many times a tool body really ran (reset before every timed run)."""

    def __init__(self) -> None:
        self.n = 0


@dataclass
class Measurement:
    """Per-turn figures for one framework / variant at one ``T``; the runs in round order
    (``measure_interleaved``: run ``i`` of every subject is from round ``i``)."""

    turns: int
    runs_us_per_turn: list[float]
    tool_calls: int
    final_text: str
    cpu_runs_us_per_turn: list[float]

    @property
    def median_us(self) -> float:
        return statistics.median(self.runs_us_per_turn)

    def as_dict(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "median_us_per_turn": round(self.median_us, 2),
            "min_us_per_turn": round(min(self.runs_us_per_turn), 2),
            "runs_us_per_turn": [round(x, 2) for x in self.runs_us_per_turn],
            "cpu_median_us_per_turn": round(statistics.median(self.cpu_runs_us_per_turn), 2),
            "cpu_runs_us_per_turn": [round(x, 2) for x in self.cpu_runs_us_per_turn],
            "tool_calls": self.tool_calls,
            "expected_tool_calls": self.turns - 1,
            "final_text": self.final_text,
        }


# One timed run: given T and the counter, build the subject (untimed) and return a coroutine
# factory whose awaited value is the final text.
Prepare = Callable[[int, Counter], Callable[[], Awaitable[str]]]


def sample(prepare: Prepare, turns: int) -> tuple[float, float, int, str]:
    """One timed run in a fresh event loop: (wall us per turn, CPU us per turn, tool executions,
    final text). CPU time is the process's (all threads): on a shared machine it leaves out the
    time the process waited for a core, which wall time does not.

    Asserts that the tool ran exactly ``turns - 1`` times and that the final text came back.
    The loop's default executor is started before the clock starts (a worker thread is
    spawned once per loop, not per turn).
    """

    async def main() -> tuple[float, float, int, str]:
        await asyncio.get_running_loop().run_in_executor(None, int)
        counter = Counter()
        go = prepare(turns, counter)
        gc.collect()
        cpu_started = time.process_time()
        started = time.perf_counter()
        text = await go()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        after = getattr(go, "after", None)
        if after is not None:  # a subject's own checks, after the clock stopped
            after()
        assert counter.n == turns - 1, f"tool ran {counter.n} times, expected {turns - 1}"
        assert text == FINAL_TEXT, f"final text {text!r}, expected {FINAL_TEXT!r}"
        return elapsed / turns * 1e6, cpu / turns * 1e6, counter.n, text

    return asyncio.run(main())


def measure_interleaved(
    prepares: dict[str, Prepare], turns: int, repeats: int, *, warmup: bool = True
) -> dict[str, Measurement]:
    """``repeats`` runs of every subject, round-robin (rotating the order every round).

    Interleaving spreads the load of a shared machine over all subjects alike, so their ratio
    means something even when the absolute figures drift. A warm-up run at T = min(T, 10) per
    subject comes first, so imports and first-call caches are not billed to a turn.
    """
    names = list(prepares)
    if warmup:
        for name in names:
            sample(prepares[name], min(turns, 10))
    samples: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    last: dict[str, tuple[int, str]] = {}
    for round_ in range(repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            us, cpu_us, calls, text = sample(prepares[name], turns)
            samples[name].append(us)
            cpu[name].append(cpu_us)
            last[name] = (calls, text)
    return {
        name: Measurement(turns, samples[name], last[name][0], last[name][1], cpu[name])
        for name in names
    }


def paired_ratio(numerators: list[float], denominators: list[float]) -> float:
    """The median over rounds of ``numerators[i] / denominators[i]``: two subjects' runs from
    ``measure_interleaved``, paired by round.

    Each round runs every subject back to back, milliseconds apart, while this VM's slow phases
    (up to 2x, CPU time included) last seconds to minutes: the two runs of a round share their
    phase and it cancels out of their ratio. The ratio of the two medians does not cancel it
    (the medians can fall in different phases): for the history rows, whose turn does not grow,
    it crossed 1.1 in 2 of 23 runs where the paired ratio crossed it in 1 (1.34 against 1.50;
    docs/performance.md). Pairing narrows the scatter; it cannot remove a phase that changes
    within a round, or one that slows the two subjects unequally.
    """
    return statistics.median(a / b for a, b in _rounds(numerators, denominators))


def paired_difference(minuends: list[float], subtrahends: list[float]) -> float:
    """The median over rounds of ``minuends[i] - subtrahends[i]`` (see ``paired_ratio``)."""
    return statistics.median(a - b for a, b in _rounds(minuends, subtrahends))


def _rounds(first: list[float], second: list[float]) -> zip[tuple[float, float]]:
    """The two subjects' runs, round by round; a ``ValueError`` unless they pair up."""
    if len(first) != len(second) or not first:
        raise ValueError("paired runs: one of each subject per round, at least one round")
    return zip(first, second, strict=True)


def measure(prepare: Prepare, turns: int, repeats: int) -> Measurement:
    """``repeats`` timed runs of one subject (see ``measure_interleaved``)."""
    return measure_interleaved({"subject": prepare}, turns, repeats)["subject"]


# --- loopctl subjects --------------------------------------------------------------------------


def _reply(n: int, turns: int) -> Message:
    if n >= turns:
        return Message.assistant(FINAL_TEXT)
    return Message.assistant(
        tool_calls=[ToolCall(id=f"call_{n}", name="add", arguments=tool_arguments(n))]
    )


#: How the benchmark's ``add`` runs: ``async def``, ``def`` inline, ``def`` in a worker thread.
TOOL_KINDS = ("async", "inline", "thread")


def add_tool(counter: Counter, kind: str = "async") -> Any:
    """The benchmark's ``add`` tool, counting its executions, of one of ``TOOL_KINDS``."""
    if kind == "async":

        @tool(name="add")
        async def add_async(a: int, b: int) -> int:
            """Add two integers."""
            counter.n += 1
            return a + b

        return add_async

    def add(a: int, b: int) -> int:
        """Add two integers."""
        counter.n += 1
        return a + b

    return tool(name="add", inline=True)(add) if kind == "inline" else tool(name="add")(add)


def _check_messages(messages: tuple[Message, ...], turns: int) -> None:
    """The run's messages hold every call's right answer (outside the timed region)."""
    results = [p for m in messages for p in m.parts if isinstance(p, ToolResult)]
    assert len(results) == turns - 1
    for n, result in enumerate(results, start=1):
        assert not result.is_error and result.content == str(n + 1), result


def loopctl_prepare(
    *, is_async: bool = False, kind: str | None = None, history: int = 0, observers: int = 0
) -> Prepare:
    """loopctl's ``BareLoop`` with an instant ``FunctionClient``; the tool of ``kind``
    (default: ``async`` if ``is_async`` else ``thread``); a brain that already holds
    ``history`` messages; ``observers`` no-op observers."""
    tool_kind = kind or ("async" if is_async else "thread")

    def prepare(turns: int, counter: Counter) -> Callable[[], Awaitable[str]]:
        calls = [0]

        def fn(request: ModelRequest) -> Message:
            calls[0] += 1
            return _reply(calls[0], turns)

        loop = BareLoop(
            FunctionClient(fn),
            tools=[add_tool(counter, tool_kind)],
            config=RunConfig(max_turns=turns + 5),
            machine=LoopMachine(prefilled(history)) if history else None,
            observers=[LoopObserver() for _ in range(observers)],
        )
        results: list[Any] = []

        async def go() -> str:
            result = await loop.run("add some numbers")
            results.append(result)
            return result.final_text or ""

        def after() -> None:
            [result] = results
            assert result.turns == turns, result.turns
            _check_messages(result.messages, turns)

        go.after = after  # type: ignore[attr-defined]  # checked by sample(), untimed
        return go

    return prepare


def prefilled(n_messages: int) -> list[Message]:
    """A coherent history of ``n_messages`` messages: a user prompt, exchanges, a final text."""
    messages = [Message.user("add some numbers")]
    turn = 0
    while len(messages) < n_messages - 1:
        turn += 1
        call = ToolCall(id=f"h{turn}", name="add", arguments=tool_arguments(turn))
        messages.append(Message.assistant(tool_calls=[call]))
        messages.append(
            Message.from_results([ToolResult(call_id=call.id, name="add", content=str(turn + 1))])
        )
    if len(messages) < n_messages:
        messages.append(Message.assistant(FINAL_TEXT))
    return messages


VARIANTS: dict[str, Prepare] = {
    "async tool": loopctl_prepare(kind="async"),
    "sync tool, inline": loopctl_prepare(kind="inline"),
    "sync tool, worker thread": loopctl_prepare(kind="thread"),
}
MAIN_VARIANT = "async tool"
#: Messages already in the brain for the ``history`` rows (T = 100, async tool).
HISTORY_SIZES = (0, 10_000)


def history_growth(
    turns: int = 100, sizes: tuple[int, ...] = HISTORY_SIZES, repeats: int = REPEATS
) -> list[dict[str, Any]]:
    """Per-turn cost of a ``turns``-turn run (async tool) on a brain already holding ``size``
    messages, interleaved; ``growth``: against the first size, paired by round
    (``paired_ratio``); ``growth_of_medians``: the ratio of the two medians, for comparison."""
    subjects = {str(size): loopctl_prepare(kind="async", history=size) for size in sizes}
    measured = measure_interleaved(subjects, turns, repeats)
    base = measured[str(sizes[0])]
    return [
        {
            "history_messages": int(size),
            "turns": turns,
            "median_us_per_turn": round(m.median_us, 1),
            "min_us_per_turn": round(min(m.runs_us_per_turn), 1),
            "cpu_median_us_per_turn": round(statistics.median(m.cpu_runs_us_per_turn), 1),
            "growth": round(paired_ratio(m.runs_us_per_turn, base.runs_us_per_turn), 2),
            "growth_of_medians": round(m.median_us / base.median_us, 2),
        }
        for size, m in measured.items()
    ]


# --- entry points ------------------------------------------------------------------------------


def table(
    prepares: dict[str, Prepare], turns: tuple[int, ...], repeats: int
) -> dict[str, dict[str, Any]]:
    """Rows per subject and T (subjects interleaved at every T), plus growth T_first -> T_last.

    ``growth`` is the ratio of the median per-turn cost at the largest T to that at the
    smallest: 1.0 means the per-turn cost does not depend on how long the history is.
    """
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in prepares}
    for t in turns:
        started = time.perf_counter()
        for name, m in measure_interleaved(prepares, t, repeats).items():
            rows[name].append(m.as_dict())
        took = time.perf_counter() - started
        print(
            f"  [measured T={t} for {', '.join(prepares)} in {took:.0f} s]",
            file=sys.stderr,
            flush=True,
        )
    out: dict[str, dict[str, Any]] = {}
    for name, r in rows.items():
        first, last = r[0]["median_us_per_turn"], r[-1]["median_us_per_turn"]
        cpu_first, cpu_last = r[0]["cpu_median_us_per_turn"], r[-1]["cpu_median_us_per_turn"]
        many = len(r) > 1
        out[name] = {
            "rows": r,
            "growth": round(last / first, 2) if many else None,
            "cpu_growth": round(cpu_last / cpu_first, 2) if many and cpu_first > 0 else None,
        }
    return out


def run(smoke: bool, repeats: int = REPEATS) -> dict[str, Any]:
    """Driver overhead per turn for every variant, the history rows, and where a turn's time
    goes (``bench_turn``); ``repeats`` timed runs a row. ``smoke``: T = 10 and one repeat
    (structure only, figures meaningless)."""
    from benchmarks import bench_turn

    turns = (10,) if smoke else TURNS
    repeats = 1 if smoke else repeats
    before = machine_reference(smoke)
    variants = table(VARIANTS, turns, repeats)
    after = machine_reference(smoke)
    return {
        "turns": list(turns),
        "repeats": repeats,
        "main_variant": MAIN_VARIANT,
        "machine_reference_ms": {"before": before, "after": after},
        "variants": variants,
        "history": history_growth(
            10 if smoke else 100, (0, 1_000) if smoke else HISTORY_SIZES, repeats
        ),
        "breakdown": bench_turn.run(smoke),
    }


#: The loop ``machine_reference`` times: fixed pure-Python work, none of it loopctl's.
REFERENCE_LOOPS = 200_000


def machine_reference(smoke: bool = False, times: int = 3) -> list[float]:
    """How long a fixed pure-Python loop takes now, ms, ``times`` times: the machine's speed
    around the variant rows, in a figure the engine cannot move.

    This VM has slow phases of seconds to minutes that make everything slower, CPU time
    included. Sampled beside ``bench_driver`` runs for two and a half minutes, this loop's time
    went from 8.8 to 17.9 ms and a turn's from 37 to 83 us, correlated at 0.81
    (docs/performance.md, "The machine"). Compared from run to run on one machine, it tells a slow
    row of the engine from a slow moment of the machine; the rows are still judged as measured.
    """
    loops = REFERENCE_LOOPS // 100 if smoke else REFERENCE_LOOPS
    out = []
    for _ in range(times):
        started = time.perf_counter()
        total = 0
        for i in range(loops):
            total += i * i
        out.append(round((time.perf_counter() - started) * 1e3, 2))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_driver")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument(
        "--repeats",
        type=int,
        default=REPEATS,
        help=f"timed runs a row, their median reported (default {REPEATS}); more narrow the "
        "median's scatter, but no number of runs outlasts a shared machine's slow phase, which "
        'lasts seconds to minutes (docs/performance.md, "The machine")',
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    from benchmarks.report import print_driver

    result = run(args.smoke, args.repeats)
    print_driver(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
