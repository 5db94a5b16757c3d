"""The driver's own overhead per tool-using turn, and snapshot size / save / restore time.

Workload (the same one ``bench_peers`` gives every peer): one run of ``T`` model calls ("turns");
calls 1..T-1 each ask for one call of the tool ``add(a, b)`` (arguments differ every turn, so the
loop detector never fires), call ``T`` answers the final text. The model is instant and in-process
(``FunctionClient``), so what is measured is the engine: the brain's decisions, the driver's
bookkeeping, the stream fold, tool dispatch. The tool must have run exactly ``T - 1`` times and the
run must return the final text; both are asserted after every timed run.

Figures are microseconds per turn (wall time of ``await loop.run(...)`` divided by ``T``), median
of ``repeats`` runs. Construction of the loop is not timed (it is not per turn).

    python -m benchmarks.bench_driver            # full: T = 10, 100, 1000; 5 repeats
    python -m benchmarks.bench_driver --smoke    # T = 10, 1 repeat
    python -m benchmarks.bench_driver --profile  # cProfile of one T = 1000 run, top functions
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import pstats
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from loopctl import BareLoop, LoopMachine, Message, RunConfig, ToolCall, ToolResult, tool
from loopctl.api import ModelRequest
from loopctl.testing import FunctionClient, ScriptedClient

__all__ = [
    "FINAL_TEXT",
    "REPEATS",
    "TURNS",
    "Counter",
    "Measurement",
    "measure",
    "measure_interleaved",
    "run",
    "sample",
    "table",
    "tool_arguments",
]

TURNS = (10, 100, 1000)
REPEATS = 5
FINAL_TEXT = "the sums are done"
SNAPSHOT_SIZES = (10, 1_000, 10_000)


def tool_arguments(turn: int) -> dict[str, int]:
    """The arguments of the call asked for on ``turn`` (1-based): different on every turn."""
    return {"a": turn, "b": 1}


class Counter:
    """How many times a tool body really ran (reset before every timed run)."""

    def __init__(self) -> None:
        self.n = 0


@dataclass
class Measurement:
    """Per-turn figures for one framework / variant at one ``T``."""

    turns: int
    runs_us_per_turn: list[float]
    tool_calls: int
    final_text: str

    @property
    def median_us(self) -> float:
        return statistics.median(self.runs_us_per_turn)

    def as_dict(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "median_us_per_turn": round(self.median_us, 2),
            "min_us_per_turn": round(min(self.runs_us_per_turn), 2),
            "runs_us_per_turn": [round(x, 2) for x in self.runs_us_per_turn],
            "tool_calls": self.tool_calls,
            "expected_tool_calls": self.turns - 1,
            "final_text": self.final_text,
        }


# One timed run: given T and the counter, build the subject (untimed) and return a coroutine
# factory whose awaited value is the final text.
Prepare = Callable[[int, Counter], Callable[[], Awaitable[str]]]


def sample(prepare: Prepare, turns: int) -> tuple[float, int, str]:
    """One timed run in a fresh event loop: (us per turn, tool executions, final text).

    Asserts that the tool ran exactly ``turns - 1`` times and that the final text came back.
    The loop's default executor is started before the clock starts (a worker thread is
    spawned once per loop, not per turn).
    """

    async def main() -> tuple[float, int, str]:
        await asyncio.get_running_loop().run_in_executor(None, int)
        counter = Counter()
        go = prepare(turns, counter)
        gc.collect()
        started = time.perf_counter()
        text = await go()
        elapsed = time.perf_counter() - started
        assert counter.n == turns - 1, f"tool ran {counter.n} times, expected {turns - 1}"
        assert text == FINAL_TEXT, f"final text {text!r}, expected {FINAL_TEXT!r}"
        return elapsed / turns * 1e6, counter.n, text

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
    last: dict[str, tuple[int, str]] = {}
    for round_ in range(repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            us, calls, text = sample(prepares[name], turns)
            samples[name].append(us)
            last[name] = (calls, text)
    return {name: Measurement(turns, samples[name], last[name][0], last[name][1]) for name in names}


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


def _add_tools(counter: Counter, *, is_async: bool) -> list[Any]:
    if is_async:

        @tool(name="add")
        async def add_async(a: int, b: int) -> int:
            """Add two integers."""
            counter.n += 1
            return a + b

        return [add_async]

    @tool(name="add")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        counter.n += 1
        return a + b

    return [add]


def _check_messages(messages: tuple[Message, ...], turns: int) -> None:
    """The run's messages hold every call's right answer (outside the timed region)."""
    results = [p for m in messages for p in m.parts if isinstance(p, ToolResult)]
    assert len(results) == turns - 1
    for n, result in enumerate(results, start=1):
        assert not result.is_error and result.content == str(n + 1), result


def loopctl_prepare(*, is_async: bool = False, scripted: bool = False) -> Prepare:
    """loopctl's ``BareLoop`` with an instant model (``FunctionClient`` or ``ScriptedClient``)."""

    def prepare(turns: int, counter: Counter) -> Callable[[], Awaitable[str]]:
        if scripted:
            client: Any = ScriptedClient([_reply(n, turns) for n in range(1, turns + 1)])
        else:
            calls = [0]

            def fn(request: ModelRequest) -> Message:
                calls[0] += 1
                return _reply(calls[0], turns)

            client = FunctionClient(fn)
        loop = BareLoop(
            client,
            tools=_add_tools(counter, is_async=is_async),
            config=RunConfig(max_turns=turns + 5),
        )

        async def go() -> str:
            result = await loop.run("add some numbers")
            assert result.turns == turns, result.turns
            if counter.n == turns - 1 and turns <= 1000:
                _check_messages(result.messages, turns)
            return result.final_text or ""

        return go

    return prepare


VARIANTS: dict[str, Prepare] = {
    "loopctl (FunctionClient, sync tool)": loopctl_prepare(),
    "loopctl (FunctionClient, async tool)": loopctl_prepare(is_async=True),
    "loopctl (ScriptedClient, sync tool)": loopctl_prepare(scripted=True),
}
MAIN_VARIANT = "loopctl (FunctionClient, sync tool)"


# --- snapshots ---------------------------------------------------------------------------------


def _history(n_messages: int) -> list[Message]:
    """A coherent history of ``n_messages`` messages: a user prompt, then exchanges, then text."""
    messages = [Message.user("add some numbers")]
    turn = 0
    while len(messages) < n_messages - 1:
        turn += 1
        call = ToolCall(id=f"call_{turn}", name="add", arguments=tool_arguments(turn))
        messages.append(Message.assistant(tool_calls=[call]))
        messages.append(
            Message.from_results([ToolResult(call_id=call.id, name="add", content=str(turn + 1))])
        )
    if len(messages) < n_messages:
        messages.append(Message.assistant(FINAL_TEXT))
    return messages


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        gc.collect()
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def snapshot_sizes(sizes: tuple[int, ...], repeats: int) -> list[dict[str, Any]]:
    """Snapshot size and save / restore / digest time of a brain holding ``n`` messages."""
    rows = []
    for n in sizes:
        machine = LoopMachine(_history(n))
        text = machine.model_dump_json()
        restored = LoopMachine.model_validate_json(text)
        assert restored == machine and restored.history_len() == n
        save = _median_time(machine.model_dump_json, repeats)
        restore = _median_time(lambda text=text: LoopMachine.model_validate_json(text), repeats)
        digest = _median_time(machine.digest, repeats)
        rows.append(
            {
                "messages": n,
                "bytes": len(text.encode()),
                "save_ms": round(save * 1e3, 3),
                "restore_ms": round(restore * 1e3, 3),
                "digest_ms": round(digest * 1e3, 3),
                "save_us_per_message": round(save * 1e6 / n, 3),
                "restore_us_per_message": round(restore * 1e6 / n, 3),
            }
        )
    return rows


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
        for name, m in measure_interleaved(prepares, t, repeats).items():
            rows[name].append(m.as_dict())
    out: dict[str, dict[str, Any]] = {}
    for name, r in rows.items():
        first, last = r[0]["median_us_per_turn"], r[-1]["median_us_per_turn"]
        out[name] = {"rows": r, "growth": round(last / first, 2) if len(r) > 1 else None}
    return out


def run(smoke: bool) -> dict[str, Any]:
    """Driver overhead per turn for every loopctl variant, plus snapshot figures.

    ``smoke``: T = 10 and one repeat (structure only, figures meaningless).
    """
    turns = (10,) if smoke else TURNS
    repeats = 1 if smoke else REPEATS
    variants = table(VARIANTS, turns, repeats)
    sizes = (10, 1_000) if smoke else SNAPSHOT_SIZES
    return {
        "turns": list(turns),
        "repeats": repeats,
        "main_variant": MAIN_VARIANT,
        "variants": variants,
        "snapshot": snapshot_sizes(sizes, 1 if smoke else REPEATS),
    }


def profile(turns: int = 1000, *, is_async: bool = False, top: int = 25) -> str:
    """cProfile of one run of ``turns`` turns (tottime and cumulative views)."""
    prepare = loopctl_prepare(is_async=is_async)
    counter = Counter()
    go = prepare(turns, counter)
    profiler = cProfile.Profile()

    async def main() -> str:
        profiler.enable()
        try:
            return await go()
        finally:
            profiler.disable()

    asyncio.run(main())
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def _print(result: dict[str, Any]) -> None:
    print(f"driver overhead, us per tool-using turn (median of {result['repeats']})")
    header = "".join(f"{'T=' + str(t):>12}" for t in result["turns"])
    print(f"{'variant':<40}{header}{'growth':>10}")
    for name, v in result["variants"].items():
        cells = "".join(f"{r['median_us_per_turn']:>12.1f}" for r in v["rows"])
        growth = "" if v["growth"] is None else f"{v['growth']:>9.2f}x"
        print(f"{name:<40}{cells}{growth}")
    print()
    print("snapshot size and save / restore time against history size")
    print(f"{'messages':>10}{'bytes':>12}{'save ms':>10}{'restore ms':>12}{'digest ms':>11}")
    for r in result["snapshot"]:
        print(
            f"{r['messages']:>10}{r['bytes']:>12}{r['save_ms']:>10.3f}"
            f"{r['restore_ms']:>12.3f}{r['digest_ms']:>11.3f}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_driver")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument("--profile", action="store_true", help="cProfile one T=1000 run")
    parser.add_argument("--async-tool", action="store_true", help="profile the async tool")
    parser.add_argument("--turns", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.profile:
        print(profile(args.turns, is_async=args.async_tool))
        return
    result = run(args.smoke)
    _print(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
